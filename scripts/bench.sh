#!/usr/bin/env bash
# `make bench`: prints Tender's benchmark figures. Nothing here passes or fails on a stopwatch.
# Load comes from wrk on loopback (64 connections); wrk and the server share the machine's cores.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${BENCH_SECONDS:-10}"
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
out="$PWD/.build/bench"
mkdir -p "$out"

started_pg=0
if [ -z "${TENDER_DATABASE_URL:-}" ]; then
  scripts/pg.sh status | grep -q running || started_pg=1
  scripts/pg.sh start
  scripts/pg.sh createdb tender_bench --fresh
  export TENDER_DATABASE_URL="$(scripts/pg.sh url tender_bench)"
fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ "$started_pg" = 1 ] && scripts/pg.sh stop || true
}
trap cleanup EXIT

bin=.build/release/tender
$bin migrate >/dev/null
$bin merchants add --merchant-id merchant.bench --display-name Bench --domain bench.test --country US --currencies USD >/dev/null
key=$($bin api-keys create --merchant-id merchant.bench | sed -n 's/.*"apiKey" *: *"\([^"]*\)".*/\1/p')

port=18080
TENDER_LISTEN="127.0.0.1:$port" TENDER_LOG_FORMAT=json $bin serve 2>"$out/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
gcc -O2 -o "$out/bare_mhd" bench/bare_mhd.c $(pkg-config --cflags --libs libmicrohttpd) -lpthread
"$out/bare_mhd" 18081 &
pids+=("$!")
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

# wrk_run NAME URL [header] -> "rps p50 p99"
wrk_run() {
  local url="$1" header="${2:-}"
  local args=(-t2 -c64 -d"${duration}s" --latency)
  [ -n "$header" ] && args+=(-H "$header")
  wrk "${args[@]}" "$url" > "$out/wrk.txt"
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$out/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$out/wrk.txt")
  local errors
  errors=$(awk '/Non-2xx/ {print $NF}' "$out/wrk.txt")
  echo "$rps $p50 $p99 ${errors:-0}"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

printf '\n%-40s %12s %10s %10s %8s\n' "benchmark (wrk, 64 connections, ${duration}s)" "requests/s" "p50" "p99" "non-2xx"
read -r r50 a b e <<<"$(wrk_run "http://127.0.0.1:18081/healthz")"
printf '%-40s %12s %10s %10s %8s\n' "bare libmicrohttpd GET /healthz" "$r50" "$a" "$b" "$e"
t0=$(cpu_ticks "$serve_pid")
read -r h50 a b e <<<"$(wrk_run "http://127.0.0.1:$port/healthz")"
t1=$(cpu_ticks "$serve_pid")
printf '%-40s %12s %10s %10s %8s\n' "tender GET /healthz" "$h50" "$a" "$b" "$e"
read -r d50 a b e <<<"$(wrk_run "http://127.0.0.1:$port/v1/merchant" "Authorization: Bearer $key")"
t2=$(cpu_ticks "$serve_pid")
printf '%-40s %12s %10s %10s %8s\n' "tender GET /v1/merchant (auth + DB read)" "$d50" "$a" "$b" "$e"

# PostgreSQL's own select-only limit on this machine, as the ceiling for DB-backed endpoints.
pgbench_url="${TENDER_DATABASE_URL%/*}/tender_pgbench"
scripts/pg.sh createdb tender_pgbench --fresh 2>/dev/null || true
pgbench -q -i -s 10 "$pgbench_url" >/dev/null 2>&1
pg_tps=$(pgbench -S -c 64 -j 2 -T "$duration" "$pgbench_url" 2>/dev/null | awk '/^tps/ {print $3; exit}')
printf '%-40s %12s\n' "pgbench -S (select-only, 64 clients)" "$pg_tps"

hz=$(getconf CLK_TCK)
python3 - "$r50" "$h50" "$d50" "$pg_tps" "$t0" "$t1" "$t2" "$hz" "$duration" <<'PY'
import sys
bare, health, db, pg, t0, t1, t2, hz, dur = sys.argv[1:]
bare, health, db, pg = float(bare), float(health), float(db), float(pg or 0)
t0, t1, t2, hz, dur = int(t0), int(t1), int(t2), int(hz), int(dur)
print()
print(f"/healthz vs bare libmicrohttpd: {100*health/bare:.0f}% (goal >= 75%)")
if pg:
    print(f"/v1/merchant vs pgbench -S:      {100*db/pg:.0f}% (goal >= 50%)")
print(f"server CPU per /healthz request:  {1e6*(t1-t0)/hz/(health*dur):.1f} us")
print(f"server CPU per /v1/merchant:      {1e6*(t2-t1)/hz/(db*dur):.1f} us")
PY
scripts/bench-checkout.sh "$port" "$key" "$serve_pid" "$out" "$duration"
scripts/bench-tokens.sh
scripts/bench-finance.sh
scripts/bench-payments.sh
scripts/bench-reconcile.sh
scripts/bench-webhooks.sh
