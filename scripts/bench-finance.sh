#!/usr/bin/env bash
# Finance feed figures (issue 6): SSE catch-up speed over 100,000 payments recorded through
# FinanceRecorder, and commit-to-SSE latency p50/p99 while payments arrive at a steady rate.
# Prints figures only (goals: catch-up >= 50,000 changes/s, live p99 <= 100 ms); never fails on a stopwatch.
# Needs TENDER_DATABASE_URL on a migrated database (scripts/bench.sh sets it) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${TENDER_BIN:-.build/release/tender}"
"$bin" migrate >/dev/null
"$bin" finance-bench --transactions "${FINANCE_BENCH_TRANSACTIONS:-100000}" \
  --rate "${FINANCE_BENCH_RATE:-200}" --seconds "${FINANCE_BENCH_SECONDS:-10}"
