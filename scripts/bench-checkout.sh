#!/usr/bin/env bash
# Checkout recalculation under load (issue 3): wrk with 32 connections (as many as the TPC-B limit uses) on
# POST /v1/checkout-sessions/{id}/shipping-method, rotating over a pool of open sessions and alternating
# the shipping identifier so every request is a real update (a new session version), never a repeat.
# Called by scripts/bench.sh with the running server; prints figures and the ratio line
# checkout_update_vs_pgbench_tpcb (updates/s over pgbench TPC-B tps, BENCH_PGBENCH_TPCB from bench.sh or
# measured here with 32 clients); passes or fails nothing.
#   usage: bench-checkout.sh PORT API_KEY SERVER_PID [OUT_DIR] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
port="$1" key="$2" server_pid="$3"
out="${4:-$PWD/.build/bench}" duration="${5:-${BENCH_SECONDS:-10}}"
sessions="${BENCH_CHECKOUT_SESSIONS:-256}"
mkdir -p "$out"

# Create the pool and write the wrk script with its ids and client secrets.
python3 - "$port" "$key" "$sessions" "$out/checkout.lua" <<'PY'
import json, sys, urllib.request
port, key, count, lua_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cart = {
    "currencyCode": "USD", "countryCode": "US",
    "lineItems": [{"label": "Widget", "amount": "9.99"}, {"label": "Gadget", "amount": "5.00"}],
    "shippingMethods": [
        {"identifier": "standard", "label": "Standard", "detail": "5-7 days", "amount": "4.99"},
        {"identifier": "express", "label": "Express", "detail": "1-2 days", "amount": "14.99"},
    ],
}
rows = []
for _ in range(count):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/checkout-sessions", data=json.dumps(cart).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        body = json.load(resp)
    rows.append('{id="%s",secret="%s"}' % (body["id"], body["clientSecret"]))
with open(lua_path, "w") as f:
    f.write("sessions = {" + ",".join(rows) + "}\n")
    f.write("""
local threads_started = 0
function setup(thread)
  thread:set("thread_index", threads_started)
  threads_started = threads_started + 1
end
local counter, first, span = 0, 0, #sessions
function init(args)
  -- wrk -t2: each thread owns half of the pool, so two threads never race for one session's row lock.
  span = math.floor(#sessions / 2)
  first = (tonumber(thread_index) or 0) * span
end
function request()
  local i = counter % span
  local pass = math.floor(counter / span)
  counter = counter + 1
  local s = sessions[first + i + 1]
  local identifier = (pass % 2 == 0) and "express" or "standard"
  return wrk.format("POST", "/v1/checkout-sessions/" .. s.id .. "/shipping-method",
    {["Authorization"] = "Bearer " .. s.secret, ["Content-Type"] = "application/json"},
    '{"shippingMethod":{"identifier":"' .. identifier .. '"}}')
end
""")
PY

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
t0=$(cpu_ticks "$server_pid")
bench_checkpoint
wrk -t2 -c"${BENCH_CHECKOUT_CONNECTIONS:-32}" -d"${duration}s" --latency -s "$out/checkout.lua" "http://127.0.0.1:$port" > "$out/wrk-checkout.txt"
t1=$(cpu_ticks "$server_pid")
rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk-checkout.txt")
p50=$(awk '$1=="50%" {print $2}' "$out/wrk-checkout.txt")
p99=$(awk '$1=="99%" {print $2}' "$out/wrk-checkout.txt")
errors=$(awk '/Non-2xx/ {print $NF}' "$out/wrk-checkout.txt")
printf '%-40s %12s %10s %10s %8s\n' "tender POST …/shipping-method ($sessions s.)" "$rps" "$p50" "$p99" "${errors:-0}"
python3 - "$rps" "$t0" "$t1" "$(getconf CLK_TCK)" "$duration" <<'PY'
import sys
rps, t0, t1, hz, dur = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"shipping-method updates: goal >= TPC-B tps with p99 < 25 ms")
if rps > 0:
    print(f"server CPU per shipping-method update: {1e6 * (t1 - t0) / hz / (rps * dur):.1f} us")
PY
tpcb="${BENCH_PGBENCH_TPCB:-$(bench_pgbench_tpcb 32 "$duration")}"
bench_ratio checkout_update_vs_pgbench_tpcb "$(bench_divide "$rps" "$tpcb")" 1.00
