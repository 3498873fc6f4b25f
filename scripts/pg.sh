#!/usr/bin/env bash
# Tender's local PostgreSQL 15 cluster under $TENDER_DATA_DIR/pg, used when TENDER_DATABASE_URL is unset.
#   scripts/pg.sh start     initialise on first use, start if not running (idempotent)
#   scripts/pg.sh stop      fast, clean shutdown
#   scripts/pg.sh restart   stop + start (tests use it to prove reconnection)
#   scripts/pg.sh url [db]  print the connection URI
#   scripts/pg.sh createdb NAME [--fresh]
#   scripts/pg.sh prune          drop the databases earlier test runs left
# initdb and postgres refuse to run as root, so as root the cluster runs as the unprivileged
# system user "tender-pg". If that user cannot reach the data directory (e.g. a checkout under
# /root), the cluster lives under /var/tmp and .tender/pg is a symlink to it.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
data_root="${TENDER_DATA_DIR:-$here/.tender}"
mkdir -p "$data_root"
data_root="$(cd "$data_root" && pwd)"
pgdir="$data_root/pg"
port="${TENDER_PG_PORT:-54329}"
bindir="$(ls -d /usr/lib/postgresql/15/bin 2>/dev/null || true)"
[ -n "$bindir" ] || { echo "tender: PostgreSQL 15 binaries not found (run scripts/deps.sh)" >&2; exit 1; }

run_as=()
if [ "$(id -u)" -eq 0 ]; then
  id -u tender-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin tender-pg
  run_as=(runuser -u tender-pg --)
fi

as_pg() { "${run_as[@]}" "$@"; }

ensure_dir() {
  if [ -L "$pgdir" ] || [ -d "$pgdir/data" ]; then return; fi
  if [ ${#run_as[@]} -gt 0 ] && ! runuser -u tender-pg -- test -x "$data_root"; then
    local alt
    alt="/var/tmp/tender-pg-$(printf '%s' "$data_root" | sha256sum | cut -c1-12)"
    mkdir -p "$alt"
    ln -sfn "$alt" "$pgdir"
  else
    mkdir -p "$pgdir"
  fi
  [ ${#run_as[@]} -gt 0 ] && chown tender-pg "$pgdir/" || true
}

ensure_init() {
  ensure_dir
  if [ ! -f "$pgdir/data/PG_VERSION" ]; then
    as_pg mkdir -p "$pgdir/data" "$pgdir/run"
    as_pg "$bindir/initdb" -D "$pgdir/data" -U tender --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat <<CONF | as_pg tee -a "$pgdir/data/postgresql.conf" >/dev/null
# Tender local cluster
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$pgdir/run'
max_connections = 200
shared_buffers = 256MB
fsync = on
synchronous_commit = on
log_min_messages = warning
CONF
  fi
  ensure_logical_conf
}

# The finance feed reads the change log through logical decoding (docs/finance-feed.md): every
# database that runs Tender's feed holds one replication slot, and tests make many databases. The
# slots are bounded (max_replication_slots, one walsender each), and a forgotten slot can never fill
# the disk: beyond max_slot_wal_keep_size PostgreSQL invalidates it and Tender reports it lost.
logical_conf() {
  cat <<CONF
# Tender finance feed (logical decoding)
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_slot_wal_keep_size = 2GB
CONF
}

# A cluster initialised before the feed existed gets the settings too; they take effect at the next
# start, so `start` restarts a running cluster whose wal_level is not yet logical.
ensure_logical_conf() {
  if ! grep -q '^wal_level = logical' "$pgdir/data/postgresql.conf"; then
    logical_conf | as_pg tee -a "$pgdir/data/postgresql.conf" >/dev/null
  fi
}

running() { as_pg "$bindir/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1; }

cmd_start() {
  ensure_init
  if running && [ "${TENDER_PG_KEEP_RUNNING:-0}" != 1 ] \
     && [ "$("$bindir/psql" -qtAX "$(url postgres)" -c 'SHOW wal_level' 2>/dev/null)" != logical ]; then
    echo "tender: restarting PostgreSQL for wal_level = logical (finance feed)" >&2
    as_pg "$bindir/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 stop >/dev/null
  fi
  if ! running; then
    as_pg "$bindir/pg_ctl" -D "$pgdir/data" -l "$pgdir/postgres.log" -w -t 60 start >/dev/null
  fi
  for _ in $(seq 1 100); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" && return 0
    sleep 0.1
  done
  echo "tender: PostgreSQL did not become ready (see $pgdir/postgres.log)" >&2
  exit 1
}

cmd_stop() {
  [ -f "$pgdir/data/PG_VERSION" ] || return 0
  if running; then as_pg "$bindir/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 stop >/dev/null; fi
}

url() { echo "postgresql://tender@127.0.0.1:$port/${1:-tender}"; }

cmd_createdb() {
  local name="$1" fresh="${2:-}"
  [[ "$name" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "tender: bad database name $name" >&2; exit 2; }
  if [ "$fresh" = "--fresh" ]; then
    "$bindir/psql" -q -X -v ON_ERROR_STOP=1 "$(url postgres)" -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null
  fi
  if ! "$bindir/psql" -qtAX "$(url postgres)" -c "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
    "$bindir/psql" -q -X -v ON_ERROR_STOP=1 "$(url postgres)" -c "CREATE DATABASE $name" >/dev/null
  fi
}

# Drops the databases tests created (`<prefix>_<8 hex>`, TestEnvironment.migratedPool): a cluster that
# keeps thousands of them spends its autovacuum time visiting them.
cmd_prune() {
  local names
  # A database whose replication slot is in use cannot be dropped: end the slot's walsender, then
  # drop every slot of a test database first.
  "$bindir/psql" -qtAX "$(url postgres)" -c "
    SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
     WHERE active_pid IS NOT NULL AND database ~ '^[a-z][a-z0-9_]*_[0-9a-f]{8}$'" >/dev/null || true
  sleep 0.2
  "$bindir/psql" -qtAX "$(url postgres)" -c "
    SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
     WHERE NOT active AND database ~ '^[a-z][a-z0-9_]*_[0-9a-f]{8}$'" >/dev/null || true
  names=$("$bindir/psql" -qtAX "$(url postgres)" -c "SELECT datname FROM pg_database WHERE datname ~ '^[a-z][a-z0-9_]*_[0-9a-f]{8}$'")
  for name in $names; do
    "$bindir/psql" -q -X "$(url postgres)" -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null || true
  done
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  status) running && echo running || echo stopped ;;
  url) url "${2:-tender}" ;;
  createdb) cmd_createdb "${2:?database name}" "${3:-}" ;;
  prune) cmd_prune ;;
  *) echo "usage: scripts/pg.sh start|stop|restart|status|url [db]|createdb NAME [--fresh]|prune" >&2; exit 2 ;;
esac
