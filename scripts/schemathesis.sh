#!/usr/bin/env bash
# Checks the running server against openapi.yaml with Schemathesis (property-based API testing).
#   scripts/schemathesis.sh [seconds]        (default 60; `make test` runs it)
# Installs the pinned Schemathesis into a venv under $TENDER_DATA_DIR (once), creates a fresh database
# `openapi_<8 hex>` next to TENDER_DATABASE_URL's (left for `scripts/pg.sh prune`, like the tests'
# databases: DROP DATABASE waits for a checkpoint, which can take a minute on a busy cluster), migrates
# it, bootstraps the sandbox merchant, serves the debug build (TENDER_BIN to override) on a free loopback
# port, seeds a checkout session, a (refused) payment and a settlement report whose ids the operations on
# `{id}` use, and runs Schemathesis with the sandbox API key. Exits non-zero on any failed check; the
# full output is kept in .build/schemathesis/.
# SCHEMATHESIS_SEED=random explores new inputs (the default seed keeps `make test` reproducible);
# SCHEMATHESIS_MAX_EXAMPLES bounds the cases per operation and phase.
#   scripts/schemathesis.sh venv             installs only, and prints the venv's path
# SCHEMATHESIS_URL and SCHEMATHESIS_API_KEY: checks a server that already runs there (make chaos: the
# cluster through HAProxy) instead; no database or server is made, the output goes to SCHEMATHESIS_OUT,
# and the answers are counted by status from a HAR report (`schemathesis: answers …, 5xx N`).
set -euo pipefail
seconds="${1:-60}"
started=$SECONDS
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data_root="${TENDER_DATA_DIR:-$root/.tender}"
mkdir -p "$data_root"

# The venv is keyed by the lock file, so a changed pin installs afresh.
lock="$root/scripts/schemathesis-requirements.txt"
venv="$data_root/schemathesis-$(sha256sum "$lock" | cut -c1-12)"
if [ ! -x "$venv/bin/schemathesis" ]; then
  echo "schemathesis: installing $(grep -i '^schemathesis==' "$lock") into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$lock"
fi
if [ "$seconds" = venv ]; then echo "$venv"; exit 0; fi

external="${SCHEMATHESIS_URL:-}"
out="${SCHEMATHESIS_OUT:-$root/.build/schemathesis}"
mkdir -p "$out"
work="$(mktemp -d)"
server_pid=""
# SIGTERM drains and exits; a server still there after 15 s is killed.
stop_server() {
  [ -n "$server_pid" ] || return 0
  local pid="$server_pid" status=0
  server_pid=""
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || status=$?
  if [ $status -ne 0 ]; then
    echo "schemathesis: warning: the server exited with status $status after SIGTERM (see $out/server.log)" >&2
  fi
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

if [ -n "$external" ]; then
  key="${SCHEMATHESIS_API_KEY:?set SCHEMATHESIS_API_KEY with SCHEMATHESIS_URL}"
  base_url="$external"
else
  : "${TENDER_DATABASE_URL:?set TENDER_DATABASE_URL (make test does)}"
  bin="${TENDER_BIN:-$root/.build/debug/tender}"
  [ -x "$bin" ] || { echo "schemathesis: $bin not built" >&2; exit 1; }

  # A fresh database beside the given one (same server and credentials).
  base="${TENDER_DATABASE_URL%%\?*}"
  query="${TENDER_DATABASE_URL#"$base"}"
  dbname="openapi_$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
  admin="${base%/*}/postgres$query"
  psql=(psql -q -X -v ON_ERROR_STOP=1)
  command -v psql >/dev/null || psql=(/usr/lib/postgresql/15/bin/psql -q -X -v ON_ERROR_STOP=1)
  "${psql[@]}" "$admin" -c "CREATE DATABASE $dbname" >/dev/null

  export TENDER_DATABASE_URL="${base%/*}/$dbname$query"
  export TENDER_DATA_DIR="$work"
  export TENDER_MIGRATIONS_DIR="$root/migrations"
  "$bin" migrate >/dev/null
  key="$("$bin" sandbox bootstrap | sed -n 's/^tender: sandbox API key (shown once): //p')"
  [ -n "$key" ] || { echo "schemathesis: sandbox bootstrap printed no API key" >&2; exit 1; }

  port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  # No request may leave the machine: merchant validation may only call a host that cannot resolve, and
  # payments go to the built-in simulator.
  TENDER_APPLE_PAY_GATEWAY_HOSTS=gateway.invalid TENDER_PROCESSOR=simulator SWIFT_BACKTRACE=enable=no \
    "$bin" serve --listen "127.0.0.1:$port" >"$out/server.log" 2>&1 &
  server_pid=$!
  ready=0
  for _ in $(seq 1 300); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then ready=1; break; fi
    kill -0 "$server_pid" 2>/dev/null || { echo "schemathesis: server exited (see $out/server.log)" >&2; exit 1; }
    sleep 0.1
  done
  [ $ready = 1 ] || { echo "schemathesis: server not ready after 30 s (see $out/server.log)" >&2; exit 1; }
  base_url="http://127.0.0.1:$port"
fi

# Real resources, so the operations on `{id}` reach their logic instead of answering 404 throughout.
# Prints member $1 of the JSON on stdin, or the whole answer and fails when it has none.
field() {
  "$venv/bin/python" -c '
import json, sys
text = sys.stdin.read()
try:
    print(json.loads(text)[sys.argv[1]])
except (ValueError, KeyError, TypeError):
    sys.exit("schemathesis: seeding got no %s: %s" % (sys.argv[1], text[:500]))' "$1"
}
session_id="$(curl -sS -X POST "$base_url/v1/checkout-sessions" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' --data-binary @- <<'JSON' | field id
{"currencyCode": "USD", "apiVersion": 14, "supportsCouponCode": true, "requiredShippingContactFields": ["postalAddress"],
 "lineItems": [{"label": "Widget", "amount": "9.99"}],
 "shippingMethods": [{"identifier": "standard", "label": "Standard", "detail": "3-5 days", "amount": "4.99"}]}
JSON
)"
payment_id="$(curl -sS -X POST "$base_url/v1/checkout-sessions/$session_id/payments" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' -H "Idempotency-Key: schemathesis-seed-$session_id" \
  --data-binary '{"token": {"paymentData": {}, "paymentMethod": {}, "transactionIdentifier": "00"}}' | field paymentId)"
report_id="$(printf 'settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n' \
  | curl -sS -X POST "$base_url/v1/settlement-reports?format=generic" -H "Authorization: Bearer $key" \
      -H 'Content-Type: text/csv' --data-binary @- | field id)"
cat >"$work/schemathesis.toml" <<TOML
[[operations]]
include-path-regex = '^/v1/checkout-sessions/[{]id[}]'
parameters = { "path.id" = "$session_id" }
[[operations]]
include-path-regex = '^/v1/payments/[{]id[}]'
parameters = { "path.id" = "$payment_id" }
[[operations]]
include-path-regex = '^/v1/settlement-reports/[{]id[}]'
parameters = { "path.id" = "$report_id" }
TOML

seed="${SCHEMATHESIS_SEED:-20261201}"
seed_option=(--seed "$seed")
[ "$seed" = random ] && seed_option=()
echo "schemathesis: server ready and seeded after $((SECONDS - started))s" >&2
echo "schemathesis: checking openapi.yaml against $base_url for at most ${seconds}s (seed $seed)" >&2
reports=(--report junit --report-junit-path "$out/junit.xml")
[ -n "$external" ] && reports=(--report junit,har --report-junit-path "$out/junit.xml" --report-har-path "$out/answers.har")
set +e
# From the scratch directory: Schemathesis keeps its cache (.schemathesis/) in the working directory.
(cd "$work" && "$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$root/openapi.yaml" --url "$base_url" "${seed_option[@]}" \
  --header "Authorization: Bearer $key" \
  --checks "${SCHEMATHESIS_CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,negative_data_rejection,unsupported_method}" \
  --phases examples,coverage,fuzzing --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-50}" --max-time "$seconds" \
  --workers 1 --request-timeout 10 --generation-database none --no-color --generation-allow-x00 false \
  --suppress-health-check too_slow,filter_too_much \
  "${reports[@]}") >"$out/last-run.log" 2>&1
status=$?
set -e
stop_server
if [ -n "$external" ]; then
  # Every answer the server gave, by status class (the HAR report holds one entry per request).
  "$venv/bin/python" - "$out/answers.har" <<'PY' >&2 || status=1
import json, sys
try:
    entries = json.load(open(sys.argv[1]))["log"]["entries"]
except (OSError, ValueError, KeyError) as error:
    sys.exit(f"schemathesis: no HAR report: {error}")
classes = {}
for entry in entries:
    code = entry.get("response", {}).get("status", 0)
    name = f"{code // 100}xx" if code else "no answer"
    classes[name] = classes.get(name, 0) + 1
others = ", ".join(f"{k} {v}" for k, v in sorted(classes.items()) if k != "5xx")
print(f"schemathesis: answers {len(entries)} ({others}), 5xx {classes.get('5xx', 0)}")
sys.exit(1 if classes.get("5xx", 0) or classes.get("no answer", 0) else 0)
PY
fi
if [ $status -ne 0 ]; then
  # Indented so no CI reader takes Schemathesis's summary for a test runner's closing line.
  sed 's/^/  | /' "$out/last-run.log" >&2
  echo "schemathesis: FAILED (exit $status); full output in $out/last-run.log" >&2
  exit 1
fi
cases="$(sed -n '/^Test cases:/{n;s/^ *//;s/,.*//;p}' "$out/last-run.log")"
echo "schemathesis: every check passed on ${cases:-?} (seed $seed, $((SECONDS - started))s in all)" >&2
