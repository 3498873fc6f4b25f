#!/usr/bin/env bash
# Checks scripts/pg.sh's safety rules with two throw-away clusters under a temporary directory, on free
# ports below the kernel's ephemeral port range; it stops and removes them on exit and talks to no server it did not start.
#   1. the port is saved in $TENDER_DATA_DIR/env and reused without TENDER_PG_PORT;
#   2. start on a port another server holds fails, naming the address and a fix;
#   3. prune and createdb --fresh refuse when the server on the port is not this checkout's cluster;
#   4. a changed TENDER_PG_PORT moves a stopped cluster.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
pg="$here/scripts/pg.sh"
work="$(mktemp -d /tmp/tender-pg-selftest.XXXXXX)"
chmod 755 "$work"
unset TENDER_DATABASE_URL TENDER_PG_PORT
a="$work/a" b="$work/b"
cleanup() {
  TENDER_DATA_DIR="$a" "$pg" stop >/dev/null 2>&1 || true
  TENDER_DATA_DIR="$b" "$pg" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# A port is taken when anything listens on it, or when any socket (an outgoing connection's local end
# included) uses it: such a socket makes PostgreSQL's bind fail even with SO_REUSEADDR.
taken() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
  grep -qi ":$(printf '%04X' "$1") " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
free_port() {
  local p="$1"
  while taken "$p" || [ "$p" = "${2:-}" ] || [ "$p" = "${3:-}" ]; do p=$((p + 1)); done
  echo "$p"
}
fail() { echo "pg-selftest: FAIL: $*" >&2; exit 1; }
# Below the kernel's ephemeral range, so no outgoing connection can take a port between check and bind.
ephemeral_low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
base=$((ephemeral_low > 21000 ? ephemeral_low - 11000 : 10000))
p1="$(free_port $((base + RANDOM % 10000)))"; p2="$(free_port $((p1 + 1)) "$p1")"; p3="$(free_port $((p2 + 1)) "$p1" "$p2")"

TENDER_DATA_DIR="$a" TENDER_PG_PORT="$p1" "$pg" start
grep -qx "export TENDER_PG_PORT=$p1" "$a/env" || fail "env file does not record port $p1"
[ "$(TENDER_DATA_DIR="$a" "$pg" url)" = "postgresql://tender@127.0.0.1:$p1/tender" ] || fail "saved port not reused"
TENDER_DATA_DIR="$a" "$pg" createdb selftest_0123abcd
TENDER_DATA_DIR="$a" "$pg" prune   # its own cluster: allowed
out="$(psql -qtAX "postgresql://tender@127.0.0.1:$p1/postgres" -c "SELECT count(*) FROM pg_database WHERE datname = 'selftest_0123abcd'")"
[ "$out" = 0 ] || fail "prune left the test database on its own cluster"

# Checkout b pointed at a's port: start names the address, prune and createdb --fresh refuse.
if err="$(TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p1" "$pg" start 2>&1)"; then fail "start succeeded on a taken port"; fi
[[ "$err" == *"127.0.0.1:$p1 is already in use"* && "$err" == *"TENDER_PG_PORT="* ]] || fail "taken-port message: $err"
TENDER_DATA_DIR="$a" "$pg" createdb keepme
if TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p1" "$pg" createdb keepme --fresh 2>/dev/null; then fail "createdb --fresh on a foreign server"; fi
# b's cluster running on its own port, a's still answering on p1: the data directory tells them apart.
TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p2" "$pg" start
if err="$(TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p1" "$pg" prune 2>&1)"; then fail "prune on a foreign server"; fi
[[ "$err" == *"not this checkout's cluster"* ]] || fail "prune refusal message: $err"
if TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p1" "$pg" createdb keepme --fresh 2>/dev/null; then fail "createdb --fresh on a foreign server"; fi
out="$(psql -qtAX "postgresql://tender@127.0.0.1:$p1/postgres" -c "SELECT count(*) FROM pg_database WHERE datname = 'keepme'")"
[ "$out" = 1 ] || fail "a foreign server's database was dropped"

# A new port for a stopped cluster applies; a running one is not moved silently.
if TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p3" "$pg" start 2>/dev/null; then fail "running cluster moved silently"; fi
TENDER_DATA_DIR="$b" "$pg" stop
TENDER_DATA_DIR="$b" TENDER_PG_PORT="$p3" "$pg" start
[ "$(psql -qtAX "postgresql://tender@127.0.0.1:$p3/postgres" -c "SHOW port")" = "$p3" ] || fail "cluster not moved to $p3"
echo "pg-selftest: ok (ports $p1 $p2 $p3)"
