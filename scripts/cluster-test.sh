#!/usr/bin/env bash
# make cluster-test (CONTRACT §10): the topology of deploy/cluster/ on loopback, from its own templates:
# etcd, three PostgreSQL 15 members under Patroni (synchronous mode), HAProxy in front of them and of
# three `tender serve` nodes. scripts/cluster-driver.py then drives payments through HAProxy, kills the
# PostgreSQL primary and one Tender node with SIGKILL in the middle, retries every unanswered request
# with its Idempotency-Key, waits for the resolver and checks the database. Prints
#   cluster: acknowledged N payments, lost 0, charged twice 0, failover S s
# and exits non-zero on any loss. Everything it starts is stopped on exit (trap).
#
# `scripts/cluster-test.sh chaos` (make chaos) runs the fault measures instead of the payment run. As
# root it runs node3 in a network namespace of its own (a veth pair to the host, a /30 of 192.0.2.0/24,
# TEST-NET-1), where the driver cuts it from the database with nftables; and it runs Schemathesis
# (scripts/schemathesis.sh's installation) through HAProxy while that node is cut off.
# Ports: CLUSTER_PORT_BASE (default 55000) … +39. Payments: CLUSTER_PAYMENTS (default 1000).
# make chaos: CHAOS_ONLY (a subset of kill,pgstop,slow,partition,schemathesis), CHAOS_PARTITION_SECONDS
# (default 15), CHAOS_SCHEMATHESIS_SECONDS (default 60; 0 leaves Schemathesis out).
# CLUSTER_PGBOUNCER=1 puts deploy/cluster/pgbouncer.ini.in between the nodes and HAProxy.
# As root, every daemon runs as the unprivileged system user tender-pg (PostgreSQL refuses root).
set -euo pipefail
cd "$(dirname "$0")/.."
here="$PWD"
started_at=$(date +%s)
data_root="${TENDER_DATA_DIR:-$here/.tender}"
mkdir -p "$data_root"
data_root="$(cd "$data_root" && pwd)"
bin="${TENDER_BIN:-$here/.build/release/tender}"
templates="$here/deploy/cluster"
base="${CLUSTER_PORT_BASE:-55000}"
payments="${CLUSTER_PAYMENTS:-1000}"
concurrency="${CLUSTER_CONCURRENCY:-16}"
members=(pg1 pg2 pg3)
nodes=(node1 node2 node3)
mode="${1:-run}"

etcd_client=$base; etcd_peer=$((base + 1))
pg_front=$((base + 2)); pg_replicas=$((base + 3)); http_front=$((base + 4)); pgbouncer_port=$((base + 5))
pg_port() { echo $((base + 10 + $1)); }
rest_port() { echo $((base + 20 + $1)); }
node_port() { echo $((base + 30 + $1)); }

[ -x "$bin" ] || { echo "cluster-test: $bin not found (make release)" >&2; exit 1; }
# make chaos runs Schemathesis against the cluster: its venv (scripts/schemathesis.sh) is made first.
if [ "$mode" = chaos ] && [ "${CHAOS_SCHEMATHESIS_SECONDS:-60}" != 0 ]; then
  TENDER_DATA_DIR="$data_root" scripts/schemathesis.sh venv >/dev/null
fi
for tool in patroni etcd haproxy psql; do
  command -v "$tool" >/dev/null || { echo "cluster-test: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done

run_as=()
exec_as=()
user="$(id -un)"
if [ "$(id -u)" -eq 0 ]; then
  user=tender-pg
  id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
  run_as=(runuser -u "$user" --)
  # setpriv execs (runuser forks and waits), so a daemon's pid is the pid the driver kills.
  exec_as=(setpriv --reuid="$user" --regid="$user" --init-groups)
fi
as_user() { "${run_as[@]}" "$@"; }

# make chaos, as root: node3 in its own network namespace (the app<->database partition). Its /30 and
# names follow the port base, so two runs on different bases do not meet.
netns=""
netns_name="tender-part-$base"
veth_host="tp${base}h"; veth_node="tp${base}n"
net_octet=$(( (base / 40) % 64 * 4 ))
netns_host_addr="192.0.2.$((net_octet + 1))"; netns_node_addr="192.0.2.$((net_octet + 2))"
node_hosts=(127.0.0.1 127.0.0.1 127.0.0.1)
db_hosts=(127.0.0.1 127.0.0.1 127.0.0.1)
netns_down() {  # also what an interrupted earlier run left
  [ "$(id -u)" -eq 0 ] || return 0
  # Deleting the namespace takes its veth end, the host's end and its nftables rules along.
  ip netns del "$netns_name" 2>/dev/null || true
  ip link del "$veth_host" 2>/dev/null || true
}
netns_up() {  # the namespace, its veth pair, and proof that nftables works in it
  netns_down
  ip netns add "$netns_name" &&
    ip link add "$veth_host" type veth peer name "$veth_node" netns "$netns_name" &&
    ip addr add "$netns_host_addr/30" dev "$veth_host" &&
    ip link set "$veth_host" up &&
    ip -n "$netns_name" addr add "$netns_node_addr/30" dev "$veth_node" &&
    ip -n "$netns_name" link set "$veth_node" up &&
    ip -n "$netns_name" link set lo up &&
    ip netns exec "$netns_name" nft add table inet tender_probe &&
    ip netns exec "$netns_name" nft delete table inet tender_probe
}

# The state directory must be reachable by the service user; like scripts/pg.sh, fall back to /var/tmp.
state="$data_root/cluster"
if [ ${#run_as[@]} -gt 0 ] && ! runuser -u "$user" -- test -x "$data_root"; then
  state="/var/tmp/tender-cluster-$(printf '%s' "$data_root" | sha256sum | cut -c1-12)"
fi

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The ports lie inside the kernel's ephemeral range (32768-60999), where any outgoing connection may be
# given one as its local port, and then a daemon's bind fails. As root, the test's ports are reserved
# (net.ipv4.ip_local_reserved_ports) while it runs, and the previous reservation is put back on exit.
reserved_file=/proc/sys/net/ipv4/ip_local_reserved_ports
reserved_before=""
reserved_changed=0
if [ -w "$reserved_file" ]; then
  reserved_before="$(cat "$reserved_file")"
  if echo "${reserved_before:+$reserved_before,}$base-$((base + 39))" >"$reserved_file" 2>/dev/null; then
    reserved_changed=1
  fi
fi

# --- stop everything this script started (also what a killed earlier run left behind) -------------
pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
stop_pidfile() {
  local file="$1" pid
  [ -f "$file" ] || return 0
  pid="$(head -n 1 "$file" 2>/dev/null || true)"
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do pid_alive "$pid" || break; sleep 0.1; done
    pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}
stop_postgres() {
  local data="$1" pid
  [ -f "$data/postmaster.pid" ] || return 0
  pid="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
  if pid_alive "$pid"; then
    as_user /usr/lib/postgresql/15/bin/pg_ctl -D "$data" -m immediate -w -t 20 stop >/dev/null 2>&1 \
      || kill -KILL "$pid" 2>/dev/null || true
  fi
}
cleanup() {
  local status=$?
  set +e
  for n in "${nodes[@]}"; do stop_pidfile "$state/$n/tender.pid"; done
  stop_pidfile "$state/pgbouncer/pgbouncer.pid.run"
  stop_pidfile "$state/haproxy/haproxy.pid"
  for m in "${members[@]}"; do stop_pidfile "$state/$m/patroni.pid"; done
  for m in "${members[@]}"; do stop_postgres "$state/$m/data"; done
  stop_pidfile "$state/etcd/etcd.pid"
  netns_down
  if [ $reserved_changed = 1 ]; then echo "$reserved_before" >"$reserved_file" 2>/dev/null; fi
  if [ $status -ne 0 ] && [ -d "$state" ]; then
    echo "cluster-test: failed; logs are in $state (*/*.log)" >&2
    for f in "$state"/node*/tender.log; do
      [ -f "$f" ] && { echo "--- $f (last lines)" >&2; tail -n 5 "$f" >&2; }
    done
  fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Leftovers of an interrupted earlier run.
if [ -d "$state" ]; then
  ( trap - EXIT; for n in "${nodes[@]}"; do stop_pidfile "$state/$n/tender.pid"; done
    stop_pidfile "$state/pgbouncer/pgbouncer.pid.run"
    stop_pidfile "$state/haproxy/haproxy.pid"
    for m in "${members[@]}"; do stop_pidfile "$state/$m/patroni.pid"; stop_postgres "$state/$m/data"; done
    stop_pidfile "$state/etcd/etcd.pid" ) || true
  netns_down
  rm -rf "$state"
fi
for p in $(seq "$base" $((base + 39))); do
  if port_taken "$p"; then echo "cluster-test: 127.0.0.1:$p is in use; set CLUSTER_PORT_BASE" >&2; exit 1; fi
done
mkdir -p "$state"
[ "$data_root/cluster" != "$state" ] && ln -sfn "$state" "$data_root/cluster"
# A checkout the service user cannot read (e.g. under /root): it runs copies of the binary and migrations.
migrations="$here/migrations"
if [ ${#run_as[@]} -gt 0 ] && ! runuser -u "$user" -- test -x "$bin" -a -r "$migrations/$(ls "$migrations" | head -n 1)"; then
  mkdir -p "$state/bin"
  cp "$bin" "$state/bin/tender"
  cp -r "$migrations" "$state/bin/migrations"
  bin="$state/bin/tender"
  migrations="$state/bin/migrations"
fi
cd "$state"

# fill TEMPLATE OUT NAME=VALUE...: replaces @NAME@; refuses a placeholder left unfilled.
fill() {
  local template="$1" out="$2"; shift 2
  local args=() kv
  for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  sed "${args[@]}" "$template" >"$out"
  if grep -q '@[A-Z0-9_]*@' "$out"; then
    echo "cluster-test: unfilled placeholder in $out: $(grep -o '@[A-Z0-9_]*@' "$out" | sort -u | tr '\n' ' ')" >&2
    exit 1
  fi
}

# start PIDFILE LOG COMMAND...: in the background as the service user, in its own session; the pid
# written is the daemon's own (setsid, `ip netns exec` and setpriv exec). start_in: a prefix such as
# (ip netns exec NAME) for a daemon that runs in a network namespace.
start_in=()
# Ports 55000-55199 lie inside the kernel's ephemeral range, so an outgoing connection's local port can
# hold one for a moment and a bind fails: a daemon that exits within a second is started again.
start() {
  local pidfile="$1" logfile="$2" attempt pid; shift 2
  for attempt in 1 2 3 4; do
    setsid "${start_in[@]}" "${exec_as[@]}" env HOME="$state" "$@" >>"$logfile" 2>&1 < /dev/null &
    pid=$!
    disown $pid  # the driver kills some with SIGKILL: no job notice for that
    echo $pid >"$pidfile"
    sleep 1
    pid_alive "$pid" && return 0
    echo "cluster-test: $1 exited at once (attempt $attempt; see $logfile), starting it again" >&2
    sleep $((attempt * 2))
  done
  echo "cluster-test: $1 does not start (see $logfile)" >&2
  exit 1
}

wait_for() {
  local what="$1" seconds="$2"; shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt $deadline ] || { echo "cluster-test: $what not ready after ${seconds}s" >&2; return 1; }
    sleep 0.2
  done
}

echo "cluster-test: state in $state, ports $base-$((base + 39))" >&2

# --- etcd -----------------------------------------------------------------------------------------
mkdir -p "$state/etcd"
fill "$templates/etcd.yml.in" "$state/etcd/etcd.yml" NAME=etcd1 DATA_DIR="$state/etcd/data" \
  CLIENT_PORT=$etcd_client PEER_PORT=$etcd_peer
chown -R "$user" "$state"
start "$state/etcd/etcd.pid" "$state/etcd/etcd.log" etcd --config-file "$state/etcd/etcd.yml"
wait_for etcd 30 curl -fsS "http://127.0.0.1:$etcd_client/health"

# --- Patroni members ------------------------------------------------------------------------------
rest_ports=()
for i in 0 1 2; do
  m="${members[$i]}"
  mkdir -p "$state/$m/log"
  fill "$templates/patroni.yml.in" "$state/$m/patroni.yml" NAME="$m" REST_PORT="$(rest_port $i)" \
    PG_PORT="$(pg_port $i)" ETCD_HOSTS="127.0.0.1:$etcd_client" LOG_DIR="$state/$m/log" DATA_DIR="$state/$m/data" \
    STATE_DIR="$state/$m" TTL=10 LOOP_WAIT=1 RETRY_TIMEOUT=4 REPLICATION_USER=replicator HBA_METHOD=trust \
    SUPERUSER_PASSWORD=cluster-test REPLICATION_PASSWORD=cluster-test SHARED_BUFFERS=64MB
  rest_ports+=("$(rest_port $i)")
done
chown -R "$user" "$state"
chmod 700 "$state"/pg*
# The first member initialises the cluster; the others then clone it (pg_basebackup).
start "$state/pg1/patroni.pid" "$state/pg1/patroni.log" patroni "$state/pg1/patroni.yml"
wait_for "the first PostgreSQL member" 60 curl -fsS "http://127.0.0.1:$(rest_port 0)/primary"
for i in 1 2; do
  start "$state/${members[$i]}/patroni.pid" "$state/${members[$i]}/patroni.log" patroni "$state/${members[$i]}/patroni.yml"
done
driver=(python3 "$here/scripts/cluster-driver.py")
rest_csv="$(IFS=,; echo "${rest_ports[*]}")"
"${driver[@]}" wait-cluster --rest "$rest_csv" --members 3 --seconds 90

# --- the partition's network namespace (make chaos as root): before HAProxy binds its address ------
pg_front_bind="127.0.0.1:$pg_front"
if [ "$mode" = chaos ]; then
  if [ "$(id -u)" -eq 0 ] && command -v nft >/dev/null && netns_up 2>"$state/netns.err"; then
    netns=$netns_name
    node_hosts[2]=$netns_node_addr
    db_hosts[2]=$netns_host_addr
    pg_front_bind="$pg_front_bind,$netns_host_addr:$pg_front"
    echo "cluster-test: node3 runs in network namespace $netns ($netns_node_addr; the host is $netns_host_addr)" >&2
  else
    netns_down
    echo "cluster-test: the partition case needs root, nftables (scripts/deps.sh) and network namespaces;" \
      "it is skipped ($(head -c 200 "$state/netns.err" 2>/dev/null))" >&2
  fi
fi

# --- HAProxy --------------------------------------------------------------------------------------
mkdir -p "$state/haproxy"
fill "$templates/haproxy.cfg.in" "$state/haproxy/haproxy.cfg" STATE_DIR="$state/haproxy" \
  PG_FRONT_BIND="$pg_front_bind" PG_REPLICA_PORT=$pg_replicas HTTP_PORT=$http_front \
  PG1_NAME=pg1 PG1_PORT="$(pg_port 0)" PG1_REST_PORT="$(rest_port 0)" \
  PG2_NAME=pg2 PG2_PORT="$(pg_port 1)" PG2_REST_PORT="$(rest_port 1)" \
  PG3_NAME=pg3 PG3_PORT="$(pg_port 2)" PG3_REST_PORT="$(rest_port 2)" \
  NODE1_NAME=node1 NODE1_HOST="${node_hosts[0]}" NODE1_PORT="$(node_port 0)" \
  NODE2_NAME=node2 NODE2_HOST="${node_hosts[1]}" NODE2_PORT="$(node_port 1)" \
  NODE3_NAME=node3 NODE3_HOST="${node_hosts[2]}" NODE3_PORT="$(node_port 2)"
chown -R "$user" "$state/haproxy"
haproxy -c -q -f "$state/haproxy/haproxy.cfg"
# -db: stay in the foreground (the pid file is then the one written here).
start "$state/haproxy/haproxy.pid" "$state/haproxy/haproxy.log" haproxy -db -f "$state/haproxy/haproxy.cfg"
admin_url="postgresql://postgres@127.0.0.1:$pg_front/postgres?connect_timeout=3"
wait_for "PostgreSQL through HAProxy" 30 psql -qtAX "$admin_url" -c "SELECT 1"

# --- the Tender database and role (what an operator does once, README.md) ------------------------
psql -qX -v ON_ERROR_STOP=1 "$admin_url" >/dev/null <<'SQL'
CREATE ROLE tender LOGIN REPLICATION;
CREATE DATABASE tender OWNER tender;
ALTER ROLE tender SET statement_timeout = '5s';
SQL
db_url="postgresql://tender@127.0.0.1:$pg_front/tender?connect_timeout=3"

# --- pgbouncer (optional, CLUSTER_PGBOUNCER=1): the nodes' pools then go through it -------------------
node_db_port=$pg_front
prepared_statements=on
if [ "${CLUSTER_PGBOUNCER:-0}" = 1 ]; then
  command -v pgbouncer >/dev/null || { echo "cluster-test: pgbouncer not found (scripts/deps.sh)" >&2; exit 1; }
  mkdir -p "$state/pgbouncer"
  fill "$templates/pgbouncer.ini.in" "$state/pgbouncer/pgbouncer.ini" DATABASE=tender PG_FRONT_PORT=$pg_front \
    PGBOUNCER_PORT=$pgbouncer_port PGBOUNCER_AUTH_TYPE=trust STATE_DIR="$state/pgbouncer"
  echo '"tender" ""' >"$state/pgbouncer/pgbouncer-users.txt"
  chown -R "$user" "$state/pgbouncer"
  start "$state/pgbouncer/pgbouncer.pid.run" "$state/pgbouncer/pgbouncer.out" pgbouncer "$state/pgbouncer/pgbouncer.ini"
  wait_for pgbouncer 30 psql -qtAX "postgresql://tender@127.0.0.1:$pgbouncer_port/tender?connect_timeout=3" -c "SELECT 1"
  node_db_port=$pgbouncer_port
  prepared_statements=off
  echo "cluster-test: the nodes reach PostgreSQL through pgbouncer (transaction mode)" >&2
fi

# --- Tender nodes ---------------------------------------------------------------------------------
tender_data="$state/tender"
mkdir -p "$tender_data"
chown -R "$user" "$tender_data"
node_env() {  # node_env INDEX: the node's environment file from the template
  local n="${nodes[$1]}" db_port=$node_db_port
  # The namespaced node reaches HAProxy's PostgreSQL front end only (pgbouncer listens on loopback).
  [ "${db_hosts[$1]}" != 127.0.0.1 ] && db_port=$pg_front
  mkdir -p "$state/$n"
  fill "$templates/tender-node.env.in" "$state/$n/tender.env" DB_HOST="${db_hosts[$1]}" DB_PORT=$db_port \
    PG_FRONT_PORT=$pg_front DATABASE=tender NODE_HOST="${node_hosts[$1]}" NODE_PORT="$(node_port "$1")" \
    DATA_DIR="$tender_data" MASTER_KEY_FILE="$tender_data/master.key" POOL_SIZE=8 \
    PREPARED_STATEMENTS=$prepared_statements
  cat >>"$state/$n/tender.env" <<ENV
# cluster-test only: the sandbox merchant and its stand-in for Apple, fast failure handling.
TENDER_APPLE_ROOTS=$tender_data/sandbox/root.pem
TENDER_DEMO=on
TENDER_TOKEN_MAX_AGE_SECONDS=3600
TENDER_PROCESSOR=simulator
# Merchant validation may only call a host that cannot resolve: no request leaves the machine.
TENDER_APPLE_PAY_GATEWAY_HOSTS=gateway.invalid
TENDER_PROCESSOR_TIMEOUT_MS=2000
TENDER_PAYMENTS_KEY_LOCK_MS=8000
TENDER_PAYMENTS_RESOLVER_INTERVAL_MS=500
TENDER_MIGRATIONS_DIR=$migrations
ENV
  chown -R "$user" "$state/$n"
}
for i in 0 1 2; do node_env $i; done
tender_cmd() {  # tender_cmd INDEX ARGS...: a tender command with that node's environment
  local n="${nodes[$1]}"; shift
  # The sandbox's root exists only after `sandbox bootstrap`; commands run without it and the demo.
  as_user env -i PATH="$PATH" HOME=/tmp bash -c 'set -a; . "$1"; set +a; unset TENDER_APPLE_ROOTS TENDER_DEMO; shift; exec "$@"' \
    _ "$state/$n/tender.env" "$bin" "$@"
}
tender_cmd 0 migrate >/dev/null
boot="$(tender_cmd 0 sandbox bootstrap)"
api_key="$(sed -n 's/.*sandbox API key (shown once): \(\S*\).*/\1/p' <<<"$boot")"
[ -n "$api_key" ] || { echo "cluster-test: sandbox bootstrap printed no API key" >&2; exit 1; }
for i in 0 1 2; do
  n="${nodes[$i]}"
  start_in=()
  [ "${node_hosts[$i]}" != 127.0.0.1 ] && start_in=(ip netns exec "$netns")
  start "$state/$n/tender.pid" "$state/$n/tender.log" \
    env -i PATH="$PATH" bash -c 'set -a; . "$1"; set +a; exec "$2" serve' _ "$state/$n/tender.env" "$bin"
done
start_in=()
for i in 0 1 2; do
  wait_for "Tender ${nodes[$i]} /readyz" 60 curl -fsS "http://${node_hosts[$i]}:$(node_port $i)/readyz"
done
wait_for "Tender through HAProxy" 30 curl -fsS -H 'Host: tender' "http://127.0.0.1:$http_front/readyz"
echo "cluster-test: cluster up in $(( $(date +%s) - started_at )) s" >&2

# --- load, faults, checks ---------------------------------------------------------------------------
if [ "$mode" = chaos ]; then
  # make chaos: one measure per fault (scripts/cluster-driver.py chaos).
  partition_args=()
  if [ -n "$netns" ]; then
    partition_args=(--partition-netns "$netns" --partition-node node3 --partition-host "$netns_node_addr"
                    --partition-port "$(node_port 2)" --partition-db-host "$netns_host_addr" --partition-db-port "$pg_front")
  fi
  "${driver[@]}" chaos --base "http://127.0.0.1:$http_front" --api-key "$api_key" --psql-url "$db_url" \
    --rest "$rest_csv" --state "$state" --kill-node node2 --readyz-port "$(node_port 0)" --service-user "$user" \
    --schemathesis-seconds "${CHAOS_SCHEMATHESIS_SECONDS:-60}" --partition-seconds "${CHAOS_PARTITION_SECONDS:-15}" \
    --only "${CHAOS_ONLY:-}" "${partition_args[@]}"
  echo "cluster-test: chaos done in $(( $(date +%s) - started_at )) s" >&2
  exit 0
fi
"${driver[@]}" run --base "http://127.0.0.1:$http_front" --api-key "$api_key" --psql-url "$db_url" \
  --rest "$rest_csv" --state "$state" --kill-node node2 --readyz-port "$(node_port 0)" --payments "$payments" --concurrency "$concurrency"
echo "cluster-test: done in $(( $(date +%s) - started_at )) s" >&2
