#!/usr/bin/env bash
# Webhook delivery benchmark (issue 16): deliveries per second from `tender serve` to a local receiver that
# answers at once (bench/webhook_receiver.c). BENCH_WEBHOOK_EVENTS events are written into the outbox in one
# transaction (the fan-out trigger makes one delivery each); the clock runs from that commit until every
# delivery is recorded delivered. Prints the CONTRACT §9 summary line `ratio webhook_deliveries_per_s VALUE 2000`.
# Figures only; nothing fails on a stopwatch.
#   scripts/bench-webhooks.sh            (TENDER_BIN, default .build/release/tender)
set -euo pipefail
cd "$(dirname "$0")/.."
case ",${BENCH_ONLY:-webhook_deliveries_per_s}," in *,webhook_deliveries_per_s,*) ;; *) exit 0 ;; esac
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$PWD/.tender}"
events="${BENCH_WEBHOOK_EVENTS:-20000}"
out="$PWD/.build/bench"
mkdir -p "$out"
bin="${TENDER_BIN:-.build/release/tender}"
psql=(psql)
command -v psql >/dev/null || psql=(/usr/lib/postgresql/15/bin/psql)

if [ -z "${BENCH_WEBHOOK_DATABASE_URL:-}" ] && [ -n "${TENDER_DATABASE_URL:-}" ]; then
  # The database make bench was given (scripts/bench-lib.sh): its cluster is left alone.
  BENCH_WEBHOOK_DATABASE_URL="$TENDER_DATABASE_URL"
elif [ -z "${BENCH_WEBHOOK_DATABASE_URL:-}" ]; then
  scripts/pg.sh start >/dev/null
  scripts/pg.sh createdb tender_bench_webhooks --fresh >/dev/null 2>&1
  BENCH_WEBHOOK_DATABASE_URL="$(scripts/pg.sh url tender_bench_webhooks)"
fi
export TENDER_DATABASE_URL="$BENCH_WEBHOOK_DATABASE_URL"
$bin migrate >/dev/null
merchant=merchant.bench.webhooks
$bin merchants add --merchant-id $merchant --display-name Bench --domain bench.test --country US --currencies USD \
  >/dev/null 2>&1 || true  # a reused BENCH_WEBHOOK_DATABASE_URL has it already
key=$($bin api-keys create --merchant-id $merchant | sed -n 's/.*"apiKey" *: *"\([^"]*\)".*/\1/p')

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  # No finance feed slot left behind to hold WAL.
  "${psql[@]}" -q -X -t -A "$TENDER_DATABASE_URL" -c "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots
    WHERE database = current_database() AND NOT active" >/dev/null 2>&1 || true
}
trap cleanup EXIT
gcc -O2 -o "$out/webhook_receiver" bench/webhook_receiver.c $(pkg-config --cflags --libs libmicrohttpd) -lpthread
receiver_port=18090
"$out/webhook_receiver" $receiver_port &
pids+=("$!")
port=18091
TENDER_LISTEN="127.0.0.1:$port" TENDER_LOG_FORMAT=json TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS=true \
  TENDER_WEBHOOK_WORKERS="${BENCH_WEBHOOK_WORKERS:-8}" TENDER_WEBHOOK_CLAIM_BATCH="${BENCH_WEBHOOK_BATCH:-32}" \
  $bin serve 2>"$out/serve-webhooks.log" &
pids+=("$!")
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
q() { "${psql[@]}" -X -q -t -A -v ON_ERROR_STOP=1 "$TENDER_DATABASE_URL" "$@"; }
q -c "DELETE FROM webhook_endpoints WHERE merchant_id = '$merchant'"
curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port/v1/webhook-endpoints" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' \
  --data "{\"url\":\"http://127.0.0.1:$receiver_port/hook\",\"enabledEvents\":[\"payment.succeeded\"]}"

tag=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
start=$(date +%s.%N)
q -v n="$events" -v m="$merchant" -v t="$tag" <<'SQL'
BEGIN;
INSERT INTO events (event_id, merchant_id, event_type, object_id, created_at, body)
SELECT 'evt_' || :'t' || lpad(g::text, 18, '0'), :'m', 'payment.succeeded', 'pay_' || g, now(),
       '{"id":"evt_' || :'t' || lpad(g::text, 18, '0') || '","type":"payment.succeeded","createdAt":"2026-12-01T00:00:00Z",'
       || '"data":{"object":{"id":"pay_' || g || '","status":"succeeded","amountMinor":1498,"currencyCode":"USD"}}}'
  FROM generate_series(1, :n) AS g;
SELECT pg_notify('tender_events', :'m');
COMMIT;
SQL
committed=$(date +%s.%N)
deadline=$((SECONDS + 600))
while :; do
  done_count=$(q -c "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered' AND event_id LIKE 'evt_$tag%'")
  [ "$done_count" -ge "$events" ] && break
  [ $SECONDS -lt $deadline ] || { echo "bench-webhooks: only $done_count of $events delivered in 600 s" >&2; break; }
  sleep 0.05
done
finished=$(date +%s.%N)
attempts=$(q -c "SELECT count(*) FROM webhook_delivery_attempts WHERE event_id LIKE 'evt_$tag%'")
# Failed attempts by code: any at all means something besides this bench's server is delivering (a second
# `tender serve` on this database refuses http targets: protocol_not_allowed) or the receiver broke.
q -F ' ' -c "SELECT 'webhooks: failed attempts', error_code, count(*) FROM webhook_delivery_attempts
             WHERE event_id LIKE 'evt_$tag%' AND error_code IS NOT NULL GROUP BY error_code" >&2
# Commit-to-delivery latency at a steady rate: BENCH_WEBHOOK_STEADY_PER_S events a second (in commits of
# a tenth of that every 100 ms) for BENCH_WEBHOOK_STEADY_SECONDS, measured from each event's transaction
# start to its recorded delivery.
steady_rate="${BENCH_WEBHOOK_STEADY_PER_S:-200}"
steady_seconds="${BENCH_WEBHOOK_STEADY_SECONDS:-10}"
steady_tag=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
per_tick=$((steady_rate / 10))
for tick in $(seq 1 $((steady_seconds * 10))); do
  q -v n="$per_tick" -v m="$merchant" -v t="$steady_tag" -v k="$tick" <<'SQL' &
INSERT INTO events (event_id, merchant_id, event_type, object_id, created_at, body)
SELECT 'evt_' || :'t' || lpad((:k * 1000 + g)::text, 18, '0'), :'m', 'payment.succeeded', 'pay_' || g, now(),
       '{"id":"evt_' || :'t' || lpad((:k * 1000 + g)::text, 18, '0') || '","type":"payment.succeeded","data":{"object":{}}}'
  FROM generate_series(1, :n) AS g;
SELECT pg_notify('tender_events', :'m');
SQL
  sleep 0.1
done
wait_steady=$((SECONDS + 120))
while [ "$(q -c "SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered' AND event_id LIKE 'evt_$steady_tag%'")" != 0 ] \
      && [ $SECONDS -lt $wait_steady ]; do sleep 0.1; done
latency=$(q -c "SELECT round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - e.created_at)))
                  || ' ' || round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - e.created_at)))
                  FROM webhook_deliveries d JOIN events e USING (event_id) WHERE d.event_id LIKE 'evt_$steady_tag%'")
python3 - "$start" "$committed" "$finished" "$done_count" "$attempts" "$steady_rate" $latency <<'PY'
import sys
start, committed, finished, delivered, attempts, steady, p50, p99 = map(float, sys.argv[1:])
rate = delivered / (finished - committed)
print(f"\nwebhooks: {int(delivered)} deliveries ({int(attempts)} attempts) in {finished - committed:.2f} s after the commit "
      f"(writing the events took {committed - start:.2f} s)")
print(f"webhooks: commit-to-delivery at {steady:.0f} events/s: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
print(f"ratio webhook_deliveries_per_s {rate:.0f} 2000")
PY
