#!/usr/bin/env bash
# Payments benchmark (issue 5): end-to-end payments/s through the HTTP API with pre-minted sandbox tokens
# and the simulator at zero latency (32 clients), beside pgbench's default TPC-B-like rate on the same
# PostgreSQL with as many clients (BENCH_PGBENCH_TPCB from bench.sh, else measured here). Prints figures
# and the ratio line payments_vs_pgbench_tpcb; fails only if a payment fails. The benchmark's own
# databases are made by the test on the server of TENDER_DATABASE_URL (the local cluster when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
bench_database tender_bench_payments
trap '[ "${BENCH_STARTED_PG:-0}" = 1 ] && scripts/pg.sh stop >/dev/null || true' EXIT
export TENDER_TEST_DATABASE_URL="$TENDER_DATABASE_URL"
swift build -c release --build-tests -Xswiftc -enable-testing >/dev/null
result=$(TENDER_BENCH_PAYMENTS=1 swift test -c release --skip-build --filter PaymentsBenchmark 2>&1 | grep '^payments:' || true)
echo "$result"
rate=$(sed -n 's/.*= \([0-9.]*\) payments\/s.*/\1/p' <<<"$result")
tpcb="${BENCH_PGBENCH_TPCB:-$(bench_pgbench_tpcb 32 "${BENCH_SECONDS:-10}")}"
echo "pgbench TPC-B (32 clients): $tpcb tps"
bench_ratio payments_vs_pgbench_tpcb "$(bench_divide "$rate" "$tpcb")" 0.50
