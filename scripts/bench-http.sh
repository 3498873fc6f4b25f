#!/usr/bin/env bash
# HTTP figures (issue 15 item 2): GET /healthz against bare libmicrohttpd on the same machine (bench/bare_mhd.c,
# the same threading as Tender's server), and GET /v1/merchant (auth + one read) against pgbench -S on the
# same PostgreSQL, all in this run. Called by scripts/bench.sh with the running server; prints figures and
# the ratio lines healthz_vs_bare_mhd and merchant_read_vs_pgbench_select.
#   usage: bench-http.sh PORT API_KEY SERVER_PID [OUT_DIR] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
port="$1" key="$2" serve_pid="$3"
out="${4:-$PWD/.build/bench}" duration="${5:-${BENCH_SECONDS:-10}}"
mkdir -p "$out"
bare_port="${BENCH_BARE_PORT:-18081}"
bare_pid=""
trap '[ -n "$bare_pid" ] && { kill -TERM "$bare_pid" 2>/dev/null; wait "$bare_pid" 2>/dev/null; } || true' EXIT

# wrk_run URL [header] -> "rps p50 p99 non2xx"
wrk_run() {
  local url="$1" header="${2:-}"
  local args=(-t2 -c64 -d"${duration}s" --latency)
  [ -n "$header" ] && args+=(-H "$header")
  wrk "${args[@]}" "$url" > "$out/wrk.txt"
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$out/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$out/wrk.txt")
  errors=$(awk '/Non-2xx/ {print $NF}' "$out/wrk.txt")
  echo "$rps $p50 $p99 ${errors:-0}"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
per_request_us() { python3 -c 'import sys; t0, t1, hz, rps, d = map(float, sys.argv[1:]); print(f"{1e6*(t1-t0)/hz/max(rps*d, 1):.1f}")' "$@"; }

printf '\n%-40s %12s %10s %10s %8s %10s\n' "benchmark (wrk, 64 connections, ${duration}s)" "requests/s" "p50" "p99" "non-2xx" "CPU/req µs"
if bench_wants healthz_vs_bare_mhd; then
  gcc -O2 -o "$out/bare_mhd" bench/bare_mhd.c $(pkg-config --cflags --libs libmicrohttpd) -lpthread
  "$out/bare_mhd" "$bare_port" &
  bare_pid=$!
  for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$bare_port/healthz" >/dev/null && break; sleep 0.1; done
  b0=$(cpu_ticks "$bare_pid")
  read -r bare a b e <<<"$(wrk_run "http://127.0.0.1:$bare_port/healthz")"
  b1=$(cpu_ticks "$bare_pid")
  printf '%-40s %12s %10s %10s %8s %10s\n' "bare libmicrohttpd GET /healthz" "$bare" "$a" "$b" "$e" "$(per_request_us "$b0" "$b1" "$hz" "$bare" "$duration")"
  kill -TERM "$bare_pid"; wait "$bare_pid" 2>/dev/null || true; bare_pid=""
  t0=$(cpu_ticks "$serve_pid")
  read -r health a b e <<<"$(wrk_run "http://127.0.0.1:$port/healthz")"
  t1=$(cpu_ticks "$serve_pid")
  printf '%-40s %12s %10s %10s %8s %10s\n' "tender GET /healthz" "$health" "$a" "$b" "$e" "$(per_request_us "$t0" "$t1" "$hz" "$health" "$duration")"
  bench_ratio healthz_vs_bare_mhd "$(bench_divide "$health" "$bare")" 0.75
fi
if bench_wants merchant_read_vs_pgbench_select; then
  t0=$(cpu_ticks "$serve_pid")
  read -r read a b e <<<"$(wrk_run "http://127.0.0.1:$port/v1/merchant" "Authorization: Bearer $key")"
  t1=$(cpu_ticks "$serve_pid")
  printf '%-40s %12s %10s %10s %8s %10s\n' "tender GET /v1/merchant (auth + DB read)" "$read" "$a" "$b" "$e" "$(per_request_us "$t0" "$t1" "$hz" "$read" "$duration")"
  # PostgreSQL's own select-only limit on this machine, as the ceiling for DB-backed endpoints.
  select_tps="$(bench_pgbench_select 64 "$duration")"
  printf '%-40s %12s\n' "pgbench -S (select-only, 64 clients)" "$select_tps"
  bench_ratio merchant_read_vs_pgbench_select "$(bench_divide "$read" "$select_tps")" 0.50
fi
