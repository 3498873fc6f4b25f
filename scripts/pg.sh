#!/usr/bin/env bash
# Tender's local PostgreSQL 15 cluster under $TENDER_DATA_DIR/pg, used when TENDER_DATABASE_URL is unset.
#   scripts/pg.sh start     initialise on first use, start if not running (idempotent)
#   scripts/pg.sh check     succeed if start could use the port (free, or this cluster's); else say why
#   scripts/pg.sh stop      fast, clean shutdown
#   scripts/pg.sh restart   stop + start (tests use it to prove reconnection)
#   scripts/pg.sh url [db]  print the connection URI
#   scripts/pg.sh createdb NAME [--fresh]
#   scripts/pg.sh prune          drop the databases earlier test runs left
# The port is TENDER_PG_PORT, else the one saved in $TENDER_DATA_DIR/env by an earlier start, else 54329.
# start writes $TENDER_DATA_DIR/env (source it: the tender CLI then reaches this cluster, on the PATH).
# createdb --fresh and prune drop databases, so they first check that the server answering on the
# port is this checkout's cluster (its data_directory); they never act on someone else's server.
# initdb and postgres refuse to run as root, so as root the cluster runs as the unprivileged
# system user "tender-pg". If that user cannot reach the data directory (e.g. a checkout under
# /root), the cluster lives under /var/tmp and .tender/pg is a symlink to it.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
data_root="${TENDER_DATA_DIR:-$here/.tender}"
mkdir -p "$data_root"
data_root="$(cd "$data_root" && pwd)"
pgdir="$data_root/pg"
envfile="$data_root/env"
saved_port=""
if [ -f "$envfile" ]; then
  saved_port="$(sed -n 's/^export TENDER_PG_PORT=\([0-9]*\)$/\1/p' "$envfile" | tail -n 1)"
fi
port="${TENDER_PG_PORT:-${saved_port:-54329}}"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || {
  echo "tender: TENDER_PG_PORT must be a port number 1-65535, not '$port'" >&2; exit 2; }
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

# The port this checkout's cluster listens on while running (postmaster.pid line 4), else empty.
running_port() {
  running || return 0
  as_pg sed -n 4p "$pgdir/data/postmaster.pid" 2>/dev/null || true
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port_hint() {
  local p
  for p in $(seq $((port + 1)) $((port + 50))); do
    port_taken "$p" || { echo "$p"; return; }
  done
  echo $((port + 100))
}

# Fails, naming the address and the fix, unless start can use $port.
cmd_check() {
  local current
  current="$(running_port)"
  if [ -n "$current" ]; then
    if [ "$current" != "$port" ]; then
      echo "tender: this checkout's PostgreSQL ($pgdir/data) is running on port $current, not $port;" \
           "stop it first (scripts/pg.sh stop) to move it, or use TENDER_PG_PORT=$current" >&2
      exit 1
    fi
    return 0
  fi
  if port_taken "$port"; then
    echo "tender: 127.0.0.1:$port is already in use by another server (not this checkout's PostgreSQL in $pgdir/data)." >&2
    echo "tender: choose a free port, e.g. TENDER_PG_PORT=$(free_port_hint) make run (it is saved in $envfile for" \
         "later make run / make test / scripts/pg.sh), or stop what listens on $port" >&2
    exit 1
  fi
}

write_env() {
  local tmp="$envfile.tmp.$$"
  cat >"$tmp" <<ENV
# Written by scripts/pg.sh start: this checkout's local PostgreSQL. Source it (". $envfile") so that
# tender commands reach the same cluster as make run and make test, and .build/release is on the PATH.
export TENDER_DATA_DIR=$data_root
export TENDER_PG_PORT=$port
export PATH="$here/.build/release:\$PATH"
ENV
  mv "$tmp" "$envfile"
}

cmd_start() {
  cmd_check
  ensure_init
  if running && [ "${TENDER_PG_KEEP_RUNNING:-0}" != 1 ] \
     && [ "$("$bindir/psql" -qtAX "$(url postgres)" -c 'SHOW wal_level' 2>/dev/null)" != logical ]; then
    echo "tender: restarting PostgreSQL for wal_level = logical (finance feed)" >&2
    as_pg "$bindir/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 stop >/dev/null
  fi
  if ! running; then
    # The port is given on the command line, so a changed TENDER_PG_PORT applies to an existing cluster too.
    if ! as_pg "$bindir/pg_ctl" -D "$pgdir/data" -l "$pgdir/postgres.log" -o "-p $port" -w -t 60 start >/dev/null; then
      echo "tender: PostgreSQL did not start on 127.0.0.1:$port; the end of $pgdir/postgres.log:" >&2
      tail -n 5 "$pgdir/postgres.log" >&2 || true
      exit 1
    fi
  fi
  write_env
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

# Refuses (exit 1) unless the server answering on $port is this checkout's cluster: its
# data_directory must be $pgdir/data. Guards every command that drops databases.
require_own_cluster() {
  local action="$1" actual expected
  expected="$(realpath -m "$pgdir/data")"
  if ! running; then
    echo "tender: refusing to $action: this checkout's PostgreSQL ($expected) is not running" >&2
    exit 1
  fi
  actual="$("$bindir/psql" -qtAX "$(url postgres)" -c "SHOW data_directory" 2>/dev/null || true)"
  if [ -z "$actual" ] || [ "$(realpath -m "$actual")" != "$expected" ]; then
    echo "tender: refusing to $action: the server on 127.0.0.1:$port is not this checkout's cluster" \
         "(its data directory is '${actual:-unknown}', expected $expected)" >&2
    exit 1
  fi
}

url() { echo "postgresql://tender@127.0.0.1:$port/${1:-tender}"; }

cmd_createdb() {
  local name="$1" fresh="${2:-}"
  [[ "$name" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "tender: bad database name $name" >&2; exit 2; }
  if [ "$fresh" = "--fresh" ]; then
    require_own_cluster "drop database $name"
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
  require_own_cluster "prune test databases"
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
  check) cmd_check ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  status) running && echo running || echo stopped ;;
  url) url "${2:-tender}" ;;
  createdb) cmd_createdb "${2:?database name}" "${3:-}" ;;
  prune) cmd_prune ;;
  *) echo "usage: scripts/pg.sh start|check|stop|restart|status|url [db]|createdb NAME [--fresh]|prune" >&2; exit 2 ;;
esac
