#!/usr/bin/env bash
# Payments benchmark (issue 5): end-to-end payments/s through the HTTP API with pre-minted sandbox tokens
# and the simulator at zero latency (32 clients), measured by `tender bench payments` (release binary,
# TENDER_BIN like scripts/bench.sh) against an in-process server, beside pgbench's default TPC-B-like rate
# on the same PostgreSQL with as many clients (BENCH_PGBENCH_TPCB from bench.sh, else measured here).
# Prints figures and the ratio line payments_vs_pgbench_tpcb; fails only if a payment fails. The run
# writes its merchant, sessions and payments into TENDER_DATABASE_URL (the local cluster's
# tender_bench_payments when unset); `tender bench payments` refuses a database not named as a bench,
# test or sandbox database.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
bench_database tender_bench_payments
trap '[ "${BENCH_STARTED_PG:-0}" = 1 ] && scripts/pg.sh stop >/dev/null || true' EXIT
bin="${TENDER_BIN:-.build/release/tender}"
[ -x "$bin" ] || { echo "bench-payments: $bin not found (swift build -c release, or set TENDER_BIN)" >&2; exit 2; }
$bin migrate >/dev/null
status=0
bench_checkpoint
output=$($bin bench payments --database-url "$TENDER_DATABASE_URL" --seconds "${BENCH_SECONDS:-10}" 2>&1) || status=$?
echo "$output"
rate=$(sed -n 's/^payments: .*= \([0-9.]*\) payments\/s.*/\1/p' <<<"$output" | head -n 1)
tpcb="${BENCH_PGBENCH_TPCB:-$(bench_pgbench_tpcb 32 "${BENCH_SECONDS:-10}")}"
echo "pgbench TPC-B (32 clients): $tpcb tps"
bench_ratio payments_vs_pgbench_tpcb "$(bench_divide "$rate" "$tpcb")" 0.50
exit "$status"
