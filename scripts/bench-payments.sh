#!/usr/bin/env bash
# Payments benchmark (issue 5): end-to-end payments/s through the HTTP API with pre-minted sandbox tokens
# and the simulator at zero latency (32 clients), then pgbench's default TPC-B-like rate on the same
# PostgreSQL as the database's own limit. Prints figures; fails only if a payment fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
scripts/pg.sh start >/dev/null
scripts/pg.sh createdb tender_bench_payments --fresh >/dev/null
export TENDER_TEST_DATABASE_URL="$(scripts/pg.sh url tender_bench_payments)"
swift build -c release --build-tests -Xswiftc -enable-testing >/dev/null
TENDER_BENCH_PAYMENTS=1 swift test -c release --skip-build --filter PaymentsBenchmark 2>&1 | grep '^payments:' || true
scripts/pg.sh createdb tender_pgbench --fresh >/dev/null
url="$(scripts/pg.sh url tender_pgbench)"
pgbench -q -i -s 10 "$url" >/dev/null 2>&1
pgbench -c 32 -j 2 -T "${BENCH_SECONDS:-10}" "$url" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/pgbench TPC-B (32 clients): \1 tps/p'
