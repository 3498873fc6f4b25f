#!/usr/bin/env bash
# `make bench`: prints Tender's benchmark figures, each beside its physical limit measured in the same run
# (bare libmicrohttpd, pgbench -S and TPC-B on the same PostgreSQL, openssl speed), and ends with the
# summary of CONTRACT §9: one line `ratio NAME VALUE GOAL` per figure. BENCH_ONLY=NAME[,NAME] runs a
# subset; BENCH_SECONDS (default 10) sizes every timed run. Nothing here passes or fails on a stopwatch.
# Load comes from wrk on loopback (64 connections); wrk and the server share the machine's cores.
# With TENDER_DATABASE_URL set, that database is used and its cluster is left alone (scripts/bench-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
duration="${BENCH_SECONDS:-10}"
export BENCH_SECONDS="$duration"
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
out="$PWD/.build/bench"
mkdir -p "$out"
parts="$out/parts.txt"
: > "$parts"

names=(healthz_vs_bare_mhd merchant_read_vs_pgbench_select checkout_update_vs_pgbench_tpcb payments_vs_pgbench_tpcb
       tokens_vs_openssl_limit finance_record_vs_pgbench_tpcb reconcile_import_lines_per_s
       reconcile_effects_lines_per_s webhook_deliveries_per_s)
if [ -n "${BENCH_ONLY:-}" ]; then
  for wanted in ${BENCH_ONLY//,/ }; do
    [[ " ${names[*]} " == *" $wanted "* ]] || { echo "bench: unknown figure '$wanted' (one of: ${names[*]})" >&2; exit 2; }
  done
fi

bench_database tender_bench
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ "${BENCH_STARTED_PG:-0}" = 1 ] && scripts/pg.sh stop || true
}
trap cleanup EXIT

# part CMD...: runs one part, shows its output and keeps it for the summary.
part() { "$@" 2>&1 | tee -a "$parts"; }

bin="${TENDER_BIN:-.build/release/tender}"
$bin migrate >/dev/null

# The write limit, once for every figure that is a ratio to it (32 clients, as the payments bench).
if bench_wants checkout_update_vs_pgbench_tpcb payments_vs_pgbench_tpcb finance_record_vs_pgbench_tpcb; then
  BENCH_PGBENCH_TPCB="$(bench_pgbench_tpcb 32 "$duration")"
  export BENCH_PGBENCH_TPCB
  printf '\n%-40s %12s\n' "pgbench TPC-B (32 clients)" "$BENCH_PGBENCH_TPCB"
fi

if bench_wants healthz_vs_bare_mhd merchant_read_vs_pgbench_select checkout_update_vs_pgbench_tpcb; then
  merchant="merchant.bench.$$.$RANDOM"
  $bin merchants add --merchant-id "$merchant" --display-name Bench --domain bench.test --country US --currencies USD >/dev/null
  key=$($bin api-keys create --merchant-id "$merchant" | sed -n 's/.*"apiKey" *: *"\([^"]*\)".*/\1/p')
  port="${BENCH_PORT:-18080}"
  TENDER_LISTEN="127.0.0.1:$port" TENDER_LOG_FORMAT=json $bin serve 2>"$out/serve.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  part scripts/bench-http.sh "$port" "$key" "$serve_pid" "$out" "$duration"
  if bench_wants checkout_update_vs_pgbench_tpcb; then
    part scripts/bench-checkout.sh "$port" "$key" "$serve_pid" "$out" "$duration"
  fi
  # Stopped before the other parts: left running, its background services share the database with them
  # (its webhook sender, which refuses http targets, claimed deliveries meant for the webhook bench).
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
fi
bench_wants tokens_vs_openssl_limit && part scripts/bench-tokens.sh
bench_wants finance_record_vs_pgbench_tpcb && part scripts/bench-finance.sh
bench_wants payments_vs_pgbench_tpcb && part scripts/bench-payments.sh
bench_wants reconcile_import_lines_per_s reconcile_effects_lines_per_s && part scripts/bench-reconcile.sh
# Webhook delivery figures come from their own script once it exists; it prints its ratio line itself.
if [ -x scripts/bench-webhooks.sh ] && bench_wants webhook_deliveries_per_s; then part scripts/bench-webhooks.sh; fi

echo
echo "summary (CONTRACT §9: ratio NAME VALUE GOAL)"
for name in "${names[@]}"; do
  bench_wants "$name" || continue
  grep -E "^ratio $name " "$parts" | tail -n 1 || true
done
