#!/usr/bin/env bash
# Reconciliation benchmark (issue "Reconcile merchant payments against processor settlement reports"):
# `tender reconcile` on a generated generic report against recorded payments, timed with
# /usr/bin/time -v. Prints lines/s for import + match (the phase `tender reconcile` logs as import_ms),
# the effects phase after it, and the peak RSS, for a small and a large file against the same ledger,
# so that memory growth with the file shows (the small file only with BENCH_RECON_SMALL=1). Ends with the
# ratio lines reconcile_import_lines_per_s and reconcile_effects_lines_per_s (lines/s against the goals
# 100,000 and 20,000). Figures only; nothing fails.
# With TENDER_DATABASE_URL set, the ledger and each run's copy of it are databases of their own on that
# server, named after its database (NAME_recon_ledger, NAME_recon_run) and dropped at the end; the cluster
# itself is never started, stopped or pruned.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
lines="${BENCH_RECON_LINES:-100000}"
payments="${BENCH_RECON_PAYMENTS:-$lines}"
small=$((lines / 2))
out="$PWD/.build/bench"
mkdir -p "$out"
bin="${TENDER_BIN:-.build/release/tender}"

bench_database tender_bench
base="$(bench_database_name)"
admin_url="$(bench_sibling_url postgres)"
ledger_db="${base}_recon_ledger"
run_db="${base}_recon_run"
drop_databases() {
  [ "${BENCH_RECON_SMALL:-0}" = 1 ] && psql -q -X "$admin_url" -c "DROP DATABASE IF EXISTS $run_db WITH (FORCE)" >/dev/null 2>&1
  psql -q -X "$admin_url" -c "DROP DATABASE IF EXISTS $ledger_db WITH (FORCE)" >/dev/null 2>&1 || true
  [ "${BENCH_STARTED_PG:-0}" = 1 ] && scripts/pg.sh stop >/dev/null || true
}
trap drop_databases EXIT
psql -q -X -v ON_ERROR_STOP=1 "$admin_url" -c "DROP DATABASE IF EXISTS $ledger_db WITH (FORCE)" -c "CREATE DATABASE $ledger_db" >/dev/null
export TENDER_DATABASE_URL="$(bench_sibling_url "$ledger_db")"
# Long statements below (a million-row insert) exceed the serving default.
export TENDER_DB_STATEMENT_TIMEOUT_MS=600000
$bin migrate >/dev/null
$bin merchants add --merchant-id merchant.bench.recon --display-name Bench --domain bench.test --country US \
  --currencies USD >/dev/null

# Recorded payments straight into the payments table (migrations/0006). Checkout sessions are not
# part of what is measured, so the bench database drops the session foreign key rather than
# inventing a million sessions. ON_ERROR_STOP: a ledger that failed to load would make every line
# `missing_in_ledger` and the figures meaningless.
psql -q -v ON_ERROR_STOP=1 "$TENDER_DATABASE_URL" -v n="$payments" <<'SQL'
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_session_id_fkey;
INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                      processor_reference, processor_key, apple_transaction_id, created_at)
SELECT 'pay_' || lpad(g::text, 24, '0'), 'merchant.bench.recon', 'cs_' || lpad(g::text, 24, '0'),
       'succeeded', 'outcome_recorded', 1000 + g % 9000, 'USD', 'psp_' || g, 'simulator', 'atx_' || g,
       now() - interval '1 day'
FROM generate_series(1, :n) AS g;
-- A ledger that grew over a month has been vacuumed (hint bits set); a fresh bulk insert has not.
VACUUM (ANALYZE) payments;
SQL

# generate FILE COUNT PREFIX: one payment line per recorded payment, batches of 10,000 lines.
generate() {
  awk -v n="$2" -v p="$3" 'BEGIN {
    print "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount"
    for (g = 1; g <= n; g++) {
      a = 1000 + g % 9000
      printf "2024-03-02,%s%d,payment,pay_%024d,psp_%d,USD,%d.%02d,0.30,%d.%02d\n", p, int(g / 10000), g, g,
             int(a / 100), a % 100, int((a - 30) / 100), (a - 30) % 100
    }
  }' > "$1"
}
if [ "${BENCH_RECON_SMALL:-0}" = 1 ]; then generate "$out/recon-small.csv" "$small" S; fi
generate "$out/recon-large.csv" "$lines" L

# Each run gets its own copy of the ledger (a template copy), so that one run's bookings do not make
# the next run's lines duplicates of them.
# With one run only (the default) it runs on the ledger itself: copying a database costs checkpoints, which
# a busy shared cluster makes slow.
run() {
  local file="$1" count="$2" label="$3" db="$ledger_db"
  if [ "${BENCH_RECON_SMALL:-0}" = 1 ]; then
    db="$run_db"
    psql -q -X -v ON_ERROR_STOP=1 "$admin_url" \
      -c "DROP DATABASE IF EXISTS $run_db WITH (FORCE)" \
      -c "CREATE DATABASE $run_db TEMPLATE $ledger_db" >/dev/null
  fi
  TENDER_DATABASE_URL="$(bench_sibling_url "$db")" \
  TENDER_LOG_FORMAT=text /usr/bin/time -v "$bin" reconcile --merchant-id merchant.bench.recon --format generic "$file" \
    >"$out/recon-$label.json" 2>"$out/recon-$label.time"
  python3 - "$count" "$label" "$out/recon-$label.time" <<'PY'
import re, sys
count, label, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
text = open(path).read()
# The phase timings `tender reconcile` logs (text format: key=value).
logged = dict(re.findall(r"(\w+)=(\S+)", next(l for l in text.splitlines() if "settlement report imported" in l)))
wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", text).group(1)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
seconds = 0.0
for part in wall.split(":"):
    seconds = seconds * 60 + float(part)
imported = int(logged["import_ms"]) / 1000
ledger = int(logged["ledger_ms"]) / 1000
effects = int(logged["effects_ms"]) / 1000
applied = int(logged["effects_applied"])
print(f"tender reconcile {label:>5}: {count:>9} lines; import + match {imported:6.2f}s = {count/imported:>9,.0f} lines/s "
      f"(goal >= 100,000; ledger read {ledger:.2f}s of it)")
print(f"{'':23}effects {applied:>9} in {effects:7.2f}s = {applied/max(effects, 1e-9):>9,.0f} effects/s "
      f"({count/max(effects, 1e-9):,.0f} lines/s); whole command {seconds:.2f}s, peak RSS {rss/1024:7.1f} MiB")
if label == "large":
    print(f"ratio reconcile_import_lines_per_s {count/imported:.0f} 100000")
    print(f"ratio reconcile_effects_lines_per_s {count/max(effects, 1e-9):.0f} 20000")
PY
}
echo
echo "reconciliation: generic report vs $payments recorded payments"
echo "(import + match = read, match and store the report in one transaction; effects = the finance-store"
echo " bookings and fees applied afterwards, one transaction per 1,000 items)"
if [ "${BENCH_RECON_SMALL:-0}" = 1 ]; then run "$out/recon-small.csv" "$small" small; fi
run "$out/recon-large.csv" "$lines" large
# A report that matched nothing measured the wrong thing.
python3 - "$out/recon-large.json" <<'PY'
import json, sys
counts = json.load(open(sys.argv[1]))["counts"]
print("large report counts:", {k: v for k, v in sorted(counts.items()) if v})
if counts.get("matched", 0) == 0:
    sys.exit("bench-reconcile: no line matched a recorded payment; the ledger did not load")
PY
