#!/usr/bin/env bash
# Reconciliation benchmark (issue "Reconcile merchant payments against processor settlement reports"):
# `tender reconcile` on a generated generic report against recorded payments, timed with
# /usr/bin/time -v. Prints lines/s for import + match and the peak RSS, for a small and a large file
# against the same ledger, so that memory growth with the file shows. Figures only; nothing fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
lines="${BENCH_RECON_LINES:-1000000}"
payments="${BENCH_RECON_PAYMENTS:-1000000}"
small=$((lines / 10))
out="$PWD/.build/bench"
mkdir -p "$out"
bin=.build/release/tender

scripts/pg.sh start >/dev/null
scripts/pg.sh createdb tender_bench_recon --fresh >/dev/null 2>&1
export TENDER_DATABASE_URL="$(scripts/pg.sh url tender_bench_recon)"
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
ANALYZE payments;
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
generate "$out/recon-small.csv" "$small" S
generate "$out/recon-large.csv" "$lines" L

run() {
  local file="$1" count="$2" label="$3"
  /usr/bin/time -v "$bin" reconcile --merchant-id merchant.bench.recon --format generic "$file" \
    >"$out/recon-$label.json" 2>"$out/recon-$label.time"
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$out/recon-$label.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out/recon-$label.time")
  python3 - "$count" "$wall" "$rss" "$label" <<'PY'
import sys
count, wall, rss, label = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
seconds = 0.0
for part in wall.split(":"):
    seconds = seconds * 60 + float(part)
print(f"tender reconcile {label:>5}: {count:>9} lines in {seconds:7.2f}s = {count/seconds:>9,.0f} lines/s "
      f"(goal >= 100,000), peak RSS {rss/1024:7.1f} MiB")
PY
}
echo
echo "reconciliation: generic report vs $payments recorded payments (import + match + store)"
run "$out/recon-small.csv" "$small" small
run "$out/recon-large.csv" "$lines" large
# A report that matched nothing measured the wrong thing.
python3 - "$out/recon-large.json" <<'PY'
import json, sys
counts = json.load(open(sys.argv[1]))["counts"]
print("large report counts:", {k: v for k, v in sorted(counts.items()) if v})
if counts.get("matched", 0) == 0:
    sys.exit("bench-reconcile: no line matched a recorded payment; the ledger did not load")
PY
