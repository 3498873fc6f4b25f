#!/usr/bin/env bash
# End-to-end webhook tests (`make test` runs it): real `tender serve` processes deliver events to a local
# receiver that verifies every delivery with the Standard Webhooks reference library (`standardwebhooks`,
# pinned in scripts/webhooks-requirements.txt, installed once into a venv under $TENDER_DATA_DIR).
# Creates two fresh databases beside TENDER_DATABASE_URL's (`webhooks_<hex>` with the target rules lifted,
# `webhooks_<hex>_strict` with them on; left for `scripts/pg.sh prune`), migrates and bootstraps both, and
# runs scripts/webhooks_test.py: retries, Retry-After, 410, timeouts, a kill -9 mid-delivery, rotation,
# redirects, SSRF refusals and two nodes on one database. Logs go to .build/webhooks/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
: "${TENDER_DATABASE_URL:?set TENDER_DATABASE_URL (make test does)}"
data_root="${TENDER_DATA_DIR:-$root/.tender}"
bin="${TENDER_BIN:-$root/.build/debug/tender}"
out="$root/.build/webhooks"
mkdir -p "$out" "$data_root"
rm -f "$out"/serve-*.log
[ -x "$bin" ] || { echo "webhooks: $bin not built" >&2; exit 1; }

lock="$root/scripts/webhooks-requirements.txt"
venv="$data_root/webhooks-$(sha256sum "$lock" | cut -c1-12)"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  echo "webhooks: installing $(cat "$lock") into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$lock"
fi

psql=(psql)
command -v psql >/dev/null || psql=(/usr/lib/postgresql/15/bin/psql)
base="${TENDER_DATABASE_URL%%\?*}"
query="${TENDER_DATABASE_URL#"$base"}"
name="webhooks_$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
admin="${base%/*}/postgres$query"
work="$(mktemp -d)"
# The serve processes' finance feed slots are dropped once they have gone: a test database keeps no slot
# behind, which would hold WAL on the cluster.
drop_slots() {
  local left
  for db in "$name" "${name}_strict"; do
    for _ in $(seq 1 40); do
      left="$("${psql[@]}" -q -X -t -A "${base%/*}/$db$query" -c "SELECT count(pg_drop_replication_slot(slot_name)) FILTER (WHERE NOT active),
        count(*) FILTER (WHERE active) FROM pg_replication_slots WHERE database = current_database()" 2>/dev/null || echo "0|0")"
      [ "${left#*|}" = 0 ] && break
      sleep 0.25
    done
  done
}
trap 'drop_slots; rm -rf "$work"' EXIT
prepare() {  # database name -> prints the sandbox API key
  "${psql[@]}" -q -X -v ON_ERROR_STOP=1 "$admin" -c "CREATE DATABASE $1" >/dev/null
  TENDER_DATABASE_URL="${base%/*}/$1$query" TENDER_DATA_DIR="$work" TENDER_MIGRATIONS_DIR="$root/migrations" "$bin" migrate >/dev/null
  TENDER_DATABASE_URL="${base%/*}/$1$query" TENDER_DATA_DIR="$work" TENDER_MIGRATIONS_DIR="$root/migrations" \
    "$bin" sandbox bootstrap | sed -n 's/^tender: sandbox API key (shown once): //p'
}
key="$(prepare "$name")"
strict_key="$(prepare "${name}_strict")"
[ -n "$key" ] && [ -n "$strict_key" ] || { echo "webhooks: sandbox bootstrap printed no API key" >&2; exit 1; }

WEBHOOKS_DB="${base%/*}/$name$query" WEBHOOKS_KEY="$key" \
WEBHOOKS_STRICT_DB="${base%/*}/${name}_strict$query" WEBHOOKS_STRICT_KEY="$strict_key" \
WEBHOOKS_OUT="$out" PSQL="${psql[*]}" TENDER_BIN="$bin" TENDER_DATA_DIR="$work" TENDER_MIGRATIONS_DIR="$root/migrations" \
  PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" "$root/scripts/webhooks_test.py"
