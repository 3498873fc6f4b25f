#!/usr/bin/env bash
# Finance figures. Always (issue 15 item 4): one payment event per database transaction through
# FinanceRecorder from BENCH_FINANCE_CLIENTS clients (default 8) for BENCH_SECONDS, beside pgbench TPC-B
# with as many clients on the same PostgreSQL in the same run; prints the ratio line
# finance_record_vs_pgbench_tpcb.
# With BENCH_FINANCE_FEED=1 also the feed figures (issues 6 and 20; minutes, so not by default): how long
# the feed writer takes to number everything recorded, SSE catch-up speed over FINANCE_BENCH_TRANSACTIONS
# payments, and commit-to-SSE latency p50/p99 at a steady rate, quiet and during another merchant's import.
# Figures only; never fails on a stopwatch. Needs TENDER_DATABASE_URL on a cluster with wal_level = logical
# for the feed figures (scripts/bench.sh sets it up) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
bin="${TENDER_BIN:-.build/release/tender}"
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
bench_database tender_bench
trap '[ "${BENCH_STARTED_PG:-0}" = 1 ] && scripts/pg.sh stop >/dev/null || true' EXIT
seconds="${BENCH_SECONDS:-10}"
clients="${BENCH_FINANCE_CLIENTS:-8}"
"$bin" migrate >/dev/null
echo
# Rounds of (finance, TPC-B), each after a CHECKPOINT: the two sides alternate under the same conditions,
# and the ratio is of their means.
rounds="${BENCH_FINANCE_ROUNDS:-2}"
rates=() tpcbs=()
for round in $(seq 1 "$rounds"); do
  bench_checkpoint
  result=$("$bin" finance-bench --record-seconds "$seconds" --clients "$clients")
  echo "$result (round $round)"
  rates+=("$(awk '/^finance_record events_per_second/ {print $3}' <<<"$result")")
  tpcbs+=("$(bench_pgbench_tpcb "$clients" "$seconds")")
  echo "pgbench TPC-B ($clients clients): ${tpcbs[-1]} tps (round $round)"
done
mean() {  # "nan" when a round printed no figure (bench_divide then prints nan too)
  python3 -c 'import sys
try:
    v = [float(x) for x in sys.argv[1:]]
    print(f"{sum(v) / len(v):.1f}")
except (ValueError, ZeroDivisionError):
    print("nan")' "$@"
}
rate=$(mean "${rates[@]}")
tpcb=$(mean "${tpcbs[@]}")
echo "finance: $rate events/s against TPC-B $tpcb tps (means of $rounds rounds)"
bench_ratio finance_record_vs_pgbench_tpcb "$(bench_divide "$rate" "$tpcb")" 0.50
if [ "${BENCH_FINANCE_FEED:-0}" = 1 ]; then
  "$bin" finance-bench --transactions "${FINANCE_BENCH_TRANSACTIONS:-100000}" \
    --rate "${FINANCE_BENCH_RATE:-200}" --seconds "${FINANCE_BENCH_SECONDS:-10}"
fi
