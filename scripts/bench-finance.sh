#!/usr/bin/env bash
# Finance feed figures (issues 6 and 20): how long the feed writer takes to number everything recorded,
# SSE catch-up speed over 100,000 payments recorded through FinanceRecorder, and commit-to-SSE latency
# p50/p99 at a steady payment rate, once quiet and once while another merchant imports (400,000 lines in
# one open transaction, then settlement events in 1,000-event transactions), with the ratios to the goals
# (catch-up >= 50,000 changes/s, live p99 during the import <= 100 ms). Figures only; never fails on a
# stopwatch. Needs TENDER_DATABASE_URL on a migrated database of a cluster with wal_level = logical
# (scripts/bench.sh sets it up) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${TENDER_BIN:-.build/release/tender}"
"$bin" migrate >/dev/null
"$bin" finance-bench --transactions "${FINANCE_BENCH_TRANSACTIONS:-100000}" \
  --rate "${FINANCE_BENCH_RATE:-200}" --seconds "${FINANCE_BENCH_SECONDS:-10}"
