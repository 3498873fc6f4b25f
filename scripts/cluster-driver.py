#!/usr/bin/env python3
"""Load and fault driver of `make cluster-test` (scripts/cluster-test.sh, CONTRACT section 10). Stdlib only.

  cluster-driver.py wait-cluster --rest PORT[,PORT...] --members N --seconds S
      waits until Patroni reports one leader and N-1 streaming replicas, one of them synchronous.
  cluster-driver.py run --base URL --api-key KEY --psql-url URL --rest PORTS --state DIR ...
      opens the sessions and mints their sandbox tokens, then pays them through HAProxy with bounded
      concurrency; in the middle it kills the PostgreSQL primary (its Patroni agent and every
      PostgreSQL process of that member, SIGKILL) and one Tender node (SIGKILL). Every request without
      an answer is sent again with its Idempotency-Key. Then it waits for the resolver and the finance
      feed and checks the database; prints the CONTRACT line; exit 1 on any loss or double charge.
  cluster-driver.py chaos ...
      make chaos: one measure line per fault (kill -9 of a node, PostgreSQL immediate stop, slow clients,
      with --partition-netns an app-database partition of one node made with nftables in its network
      namespace, and Schemathesis through HAProxy during such a partition), then the same database checks.
"""
import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor


def log(message):
    print(f"cluster-driver: {message}", file=sys.stderr, flush=True)


def rest_cluster(port, timeout=1.0):
    """Patroni's GET /cluster on one member, or None."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", "/cluster")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        return json.loads(body) if response.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None


def cluster_view(ports):
    for port in ports:
        view = rest_cluster(port)
        if view is not None:
            return view
    return None


def healthy(view, members):
    if view is None:
        return False
    roles = [(m.get("role"), m.get("state")) for m in view.get("members", [])]
    leaders = [r for r in roles if r[0] == "leader" and r[1] == "running"]
    # Patroni 3.0 reports a replica as "running" (later releases say "streaming").
    sync = [r for r in roles if r[0] == "sync_standby" and r[1] in ("running", "streaming")]
    streaming = [r for r in roles if r[0] in ("replica", "sync_standby") and r[1] in ("running", "streaming")]
    return len(leaders) == 1 and len(sync) >= 1 and len(streaming) >= members - 1


def cmd_wait_cluster(args):
    ports = [int(p) for p in args.rest.split(",")]
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        view = cluster_view(ports)
        if healthy(view, args.members):
            leader = [m["name"] for m in view["members"] if m.get("role") == "leader"][0]
            log(f"Patroni cluster ready: leader {leader}, {args.members - 1} replicas streaming (one synchronous)")
            return 0
        time.sleep(0.3)
    log(f"Patroni cluster not ready after {args.seconds} s: {json.dumps(cluster_view(ports))}")
    return 1


class Client:
    """One keep-alive HTTP/1.1 connection per thread to HAProxy; reconnects after any error."""

    def __init__(self, base, api_key, timeout):
        parsed = urllib.parse.urlparse(base)
        self.host, self.port = parsed.hostname, parsed.port
        self.api_key = api_key
        self.timeout = timeout
        self.local = threading.local()

    def request(self, method, path, body=None, headers=None):
        """(status, json body, headers) or raises OSError / HTTPException when there is no answer."""
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.local.conn = conn
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        all_headers = {"Authorization": "Bearer " + self.api_key, "Host": "tender"}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            raw = response.read()
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                self.local.conn = None
        except (OSError, http.client.HTTPException):
            conn.close()
            self.local.conn = None
            raise
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return response.status, parsed, response


def with_retries(client, method, path, body, key, deadline):
    """Sends until a final answer: 5xx, 409 in progress and no answer at all are retried (same key)."""
    while True:
        try:
            status, parsed, response = client.request(method, path, body, {"Idempotency-Key": key})
            if status < 500 and not (status == 409 and isinstance(parsed, dict)
                                     and parsed.get("code") == "idempotency_key_in_progress"):
                return status, parsed
            pause = min(float(response.getheader("Retry-After", "0.3") or 0.3), 1.0)
        except (OSError, http.client.HTTPException):
            pause = 0.3
        if time.monotonic() > deadline:
            return None, None
        time.sleep(pause * (0.5 + random.random()))


def psql(url, sql):
    out = subprocess.run(["psql", "-qtAX", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [line.split("|") for line in out.stdout.splitlines() if line]


def read_pid(path):
    try:
        with open(path) as handle:
            return int(handle.readline().strip())
    except (OSError, ValueError):
        return None


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def kill_primary(args, ports):
    """SIGKILL of the leader's Patroni agent and of every PostgreSQL process of that member."""
    view = cluster_view(ports)
    leader = [m["name"] for m in (view or {}).get("members", []) if m.get("role") == "leader"]
    if not leader:
        raise RuntimeError("no Patroni leader to kill")
    name = leader[0]
    patroni = read_pid(os.path.join(args.state, name, "patroni.pid"))
    postmaster = read_pid(os.path.join(args.state, name, "data", "postmaster.pid"))
    victims = ([patroni] if patroni else []) + ([postmaster] + children(postmaster) if postmaster else [])
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    log(f"killed PostgreSQL primary {name} (SIGKILL: Patroni {patroni}, postmaster {postmaster} and its children)")
    return name


def kill_node(args):
    pid = read_pid(os.path.join(args.state, args.kill_node, "tender.pid"))
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    log(f"killed Tender node {args.kill_node} (SIGKILL, pid {pid})")


class Run:
    def __init__(self, count):
        self.lock = threading.Lock()
        self.acked = {}          # index -> (status, payment id, payment status)
        self.refused = {}        # index -> (status, code)
        self.unanswered = set()
        self.kill_primary_at = None
        self.first_write_after_kill = None
        self.readyz = []         # (time, status, code) of one node's /readyz while no primary
        self.acked_before_kill = 0
        self.attempts = {}       # HTTP status (None: no answer) -> attempts
        self.rate_before_kill = 0.0
        self.count = count

    def ack(self, index, status, body, sent_at):
        with self.lock:
            payment = body.get("payment") or {}
            self.acked[index] = (status, payment.get("id"), payment.get("status"))
            if (self.kill_primary_at is not None and self.first_write_after_kill is None
                    and sent_at >= self.kill_primary_at and status == 200):
                self.first_write_after_kill = time.monotonic()


def prepare(client, args, run_id):
    """Sessions and their sandbox tokens, before any fault."""
    deadline = time.monotonic() + args.prepare_seconds

    def one(index):
        # One in ten: the simulator charges, then loses its first answer (amount ending 08), so the
        # payment is retried inside the request or left pending for a resolver on any node.
        amount = "12.08" if index % 10 == 3 else "12.00"
        cart = {"currencyCode": "USD", "lineItems": [{"label": f"Cluster test {index}", "amount": amount}]}
        status, session = with_retries(client, "POST", "/v1/checkout-sessions", cart, f"cs-{run_id}-{index}", deadline)
        if status != 201:
            raise RuntimeError(f"session {index}: {status} {session}")
        status, token = with_retries(client, "POST", "/demo/api/sandbox-token", {"sessionId": session["id"]},
                                     f"tok-{run_id}-{index}", deadline)
        if status != 200:
            raise RuntimeError(f"token {index}: {status} {token}")
        return session["id"], token

    with ThreadPoolExecutor(args.concurrency) as pool:
        return list(pool.map(one, range(args.payments)))


def pay_all(client, args, run_id, prepared, run, ports):
    deadline = time.monotonic() + args.pay_seconds
    done = threading.Event()

    def one(index):
        session_id, token = prepared[index]
        key = f"pay-{run_id}-{index}"
        path = f"/v1/checkout-sessions/{session_id}/payments"
        while True:
            sent_at = time.monotonic()
            try:
                status, parsed, response = client.request("POST", path, {"token": token}, {"Idempotency-Key": key})
            except (OSError, http.client.HTTPException):
                status, parsed, response = None, None, None
            with run.lock:
                run.attempts[status] = run.attempts.get(status, 0) + 1
            if status in (200, 202):
                run.ack(index, status, parsed or {}, sent_at)
                return
            retry = status is None or status >= 500 or (
                status == 409 and isinstance(parsed, dict) and parsed.get("code") == "idempotency_key_in_progress")
            if not retry:
                with run.lock:
                    run.refused[index] = (status, (parsed or {}).get("code"))
                return
            if time.monotonic() > deadline:
                with run.lock:
                    run.unanswered.add(index)
                return
            time.sleep(0.2 + 0.3 * random.random())

    def chaos():
        primary_after = int(args.payments * 0.25)
        node_after = int(args.payments * 0.6)
        while not done.is_set():
            with run.lock:
                acked = len(run.acked)
            if run.kill_primary_at is None and acked >= primary_after:
                kill_primary(args, ports)
                run.kill_primary_at = time.monotonic()
                run.acked_before_kill = acked
            elif run.kill_primary_at is not None and acked >= node_after and args.kill_node:
                kill_node(args)
                return
            time.sleep(0.02)

    def readiness():
        """A node's own /readyz (not through HAProxy) from the primary's death until writes work again."""
        while not done.is_set() and run.first_write_after_kill is None:
            if run.kill_primary_at is not None:
                status, code = probe_readyz(args.readyz_port)
                with run.lock:
                    run.readyz.append((time.monotonic(), status, code))
            time.sleep(0.1)

    threads = [threading.Thread(target=chaos, daemon=True), threading.Thread(target=readiness, daemon=True)]
    for thread in threads:
        thread.start()
    with ThreadPoolExecutor(args.concurrency) as pool:
        list(pool.map(one, range(args.payments)))
    done.set()
    for thread in threads:
        thread.join(5)


def probe_readyz(port, host="127.0.0.1", timeout=2):
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request("GET", "/readyz", headers={"Host": "tender"})
        response = conn.getresponse()
        body = response.read()
        conn.close()
        try:
            code = json.loads(body).get("code") if response.status != 200 else None
        except ValueError:
            code = None
        return response.status, code
    except (OSError, http.client.HTTPException):
        return None, "no_answer"


def wait_settled(args, seconds):
    """Until no payment is pending and every finance change is in the feed (bounded)."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            pending, unfed = psql(args.psql_url, """
                SELECT (SELECT count(*) FROM payments WHERE status = 'pending'),
                       (SELECT count(*) FROM finance_change c
                         WHERE NOT EXISTS (SELECT 1 FROM finance_feed f WHERE f.change_seq = c.seq))""")[0]
            last = (int(pending), int(unfed))
            if last == (0, 0):
                return last
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            last = str(error)
        time.sleep(0.5)
    return last


def check(args, prefix, acked):
    """Payments whose Idempotency-Key is `prefix` + index; acked: index -> (HTTP status, payment id,
    payment status) of those that got a 2xx. lost: acknowledged but absent, pending, differently
    decided, or missing from the finance store or its feed. charged twice: more than one approved
    authorisation for one Idempotency-Key, one session or one Apple transactionId."""
    rows = psql(args.psql_url, f"""
        SELECT p.idempotency_key, p.payment_id, p.status,
               EXISTS (SELECT 1 FROM finance_transaction t
                        WHERE t.merchant_id = p.merchant_id AND t.posting_key = 'payment:' || p.payment_id),
               EXISTS (SELECT 1 FROM finance_transaction t JOIN finance_feed f ON f.entity_id = t.id
                        WHERE t.merchant_id = p.merchant_id AND t.posting_key = 'payment:' || p.payment_id)
          FROM payments p WHERE p.idempotency_key LIKE '{prefix}%'""")
    by_key = {}
    for key, payment_id, status, in_store, in_feed in rows:
        by_key.setdefault(key, []).append((payment_id, status, in_store == "t", in_feed == "t"))
    lost = []
    for index, (http_status, payment_id, answered_status) in sorted(acked.items()):
        found = by_key.get(f"{prefix}{index}", [])
        match = [f for f in found if f[0] == payment_id]
        if not match:
            lost.append((index, "absent"))
            continue
        _, status, in_store, in_feed = match[0]
        if status == "pending":
            lost.append((index, "pending"))
        elif http_status == 200 and answered_status != status:
            lost.append((index, f"answered {answered_status}, stored {status}"))
        elif status == "succeeded" and not (in_store and in_feed):
            lost.append((index, "not in the finance store" if not in_store else "not in the finance feed"))
    twice = psql(args.psql_url, f"""
        WITH charged AS (
            SELECT p.idempotency_key, p.session_id, p.apple_transaction_id
              FROM simulator_authorizations a JOIN payments p ON p.payment_id = a.payment_id
             WHERE a.kind = 'authorization' AND a.decision = 'approve' AND p.idempotency_key LIKE '{prefix}%')
        SELECT (SELECT count(*) FROM (SELECT 1 FROM charged GROUP BY idempotency_key HAVING count(*) > 1) k)
             + (SELECT count(*) FROM (SELECT 1 FROM charged GROUP BY session_id HAVING count(*) > 1) s)
             + (SELECT count(*) FROM (SELECT 1 FROM charged WHERE apple_transaction_id IS NOT NULL
                                       GROUP BY apple_transaction_id HAVING count(*) > 1) t),
               (SELECT count(*) FROM payments WHERE status = 'pending'),
               (SELECT coalesce(max(calls), 0) FROM simulator_authorizations a JOIN payments p USING (payment_id)
                 WHERE p.idempotency_key LIKE '{prefix}%')""")[0]
    return lost, int(twice[0]), int(twice[1]), int(twice[2])


def cmd_run(args):
    ports = [int(p) for p in args.rest.split(",")]
    run_id = f"{int(time.time())}{random.randrange(1000):03d}"
    client = Client(args.base, args.api_key, timeout=args.request_timeout)
    started = time.monotonic()
    prepared = prepare(client, args, run_id)
    log(f"{len(prepared)} sessions open with sandbox tokens ({time.monotonic() - started:.1f} s)")
    run = Run(args.payments)
    wal_before = psql(args.psql_url, "SELECT pg_current_wal_lsn()")[0][0]
    paying = time.monotonic()
    pay_all(client, args, run_id, prepared, run, ports)
    if run.kill_primary_at is not None:
        run.rate_before_kill = run.acked_before_kill / max(run.kill_primary_at - paying, 0.001)
    log(f"payments answered: {len(run.acked)} acknowledged, {len(run.refused)} refused, "
        f"{len(run.unanswered)} unanswered ({time.monotonic() - paying:.1f} s)")
    settled = wait_settled(args, args.settle_seconds)
    try:
        wal = int(psql(args.psql_url, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{wal_before}')")[0][0].split(".")[0])
        log(f"throughput before the fault: {run.rate_before_kill:.0f} payments/s through HAProxy "
            f"({args.concurrency} clients); WAL written while paying: {wal // max(args.payments, 1)} bytes a payment")
    except (RuntimeError, ValueError, IndexError) as error:
        log(f"no WAL figure: {error}")
    log(f"after the resolver and the finance feed: pending, unfed = {settled}")
    lost, twice, pending, max_calls = check(args, f"pay-{run_id}-", run.acked)
    failover = (run.first_write_after_kill - run.kill_primary_at) if run.first_write_after_kill and run.kill_primary_at else -1
    for index, why in lost[:10]:
        log(f"lost: payment {index}: {why}")
    for index, (status, code) in list(run.refused.items())[:10]:
        log(f"refused: payment {index}: {status} {code}")
    log(f"most processor calls for one key: {max_calls} (repeated calls return the first decision)")
    answers = ", ".join(f"{'no answer' if k is None else k}: {v}" for k, v in
                        sorted(run.attempts.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))
    log(f"payment attempts by answer: {answers}")
    resolved = psql(args.psql_url, f"""SELECT count(*) FROM payments
                                      WHERE idempotency_key LIKE 'pay-{run_id}-%' AND resolve_attempts > 0""")[0][0]
    log(f"payments finished by the resolver: {resolved}")
    not_ready = sorted({code for _, status, code in run.readyz if status == 503})
    log(f"/readyz of a node while no primary: {sum(1 for r in run.readyz if r[1] == 503)} of {len(run.readyz)} "
        f"probes 503 ({', '.join(not_ready) or 'none'})")
    print(f"cluster: acknowledged {len(run.acked)} payments, lost {len(lost)}, charged twice {twice}, "
          f"failover {failover:.1f} s", flush=True)
    ok = (not lost and twice == 0 and pending == 0 and not run.refused and not run.unanswered
          and run.kill_primary_at is not None and failover >= 0 and len(run.acked) == args.payments
          and bool(not_ready))
    if not ok:
        log(f"FAILED: lost {len(lost)}, charged twice {twice}, pending {pending}, refused {len(run.refused)}, "
            f"unanswered {len(run.unanswered)}, primary killed {run.kill_primary_at is not None}, "
            f"readyz not ready without a primary {bool(not_ready)}")
    return 0 if ok else 1


# --- make chaos ---------------------------------------------------------------------------------------

def load_until(client, prepared, start_index, stop, run_id, concurrency, results, per_phase=300, acked=None):
    """Pays prepared sessions from start_index with `concurrency` clients until `stop` is set; records
    (sent_at, answered_at, status, problem code) of every attempt and, in `acked`, index -> (status,
    payment id, payment status) of every 2xx; each payment retried with its key until final."""
    counter = {"next": start_index}
    lock = threading.Lock()

    def worker():
        while not stop.is_set():
            with lock:
                index = counter["next"]
                counter["next"] += 1
            if index >= min(len(prepared), start_index + per_phase):
                return
            session_id, token = prepared[index]
            path = f"/v1/checkout-sessions/{session_id}/payments"
            while True:
                sent_at = time.monotonic()
                try:
                    status, parsed, _ = client.request("POST", path, {"token": token},
                                                       {"Idempotency-Key": f"chaos-{run_id}-{index}"})
                except (OSError, http.client.HTTPException):
                    status, parsed = None, None
                with lock:
                    results.append((sent_at, time.monotonic(), status,
                                    parsed.get("code") if isinstance(parsed, dict) else None))
                    if status in (200, 202) and acked is not None:
                        payment = (parsed or {}).get("payment") or {}
                        acked[index] = (status, payment.get("id"), payment.get("status"))
                if status in (200, 202) or (status is not None and status < 500 and not (
                        status == 409 and (parsed or {}).get("code") == "idempotency_key_in_progress")):
                    break
                if stop.is_set() and time.monotonic() - sent_at > 60:
                    break
                time.sleep(0.1)
            time.sleep(0.25)  # paced: a phase's payments last through the fault

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    return threads, counter


def outage(results, fault_at):
    """Seconds from the fault to the first 2xx of a request sent after it, and the failed attempts."""
    after = [r for r in results if r[0] >= fault_at and r[2] in (200, 202)]
    failed = sum(1 for r in results if r[0] >= fault_at - 1 and (r[2] is None or r[2] >= 500))
    return (min(r[1] for r in after) - fault_at) if after else -1, failed


def chaos_fault(client, args, prepared, run_id, state, name, fault):
    stop = threading.Event()
    results = []
    threads, counter = load_until(client, prepared, state["next"], stop, run_id, 4, results, acked=state["acked"])
    time.sleep(3)
    fault_at = time.monotonic()
    fault()
    time.sleep(args.fault_seconds)
    stop.set()
    for thread in threads:
        thread.join(70)
    state["next"] = max(counter["next"], state["next"] + 300)
    seconds, failed = outage(results, fault_at)
    ok = sum(1 for r in results if r[2] in (200, 202))
    print(f"chaos: {name}: {ok} payments acknowledged under load, writes back after {seconds:.1f} s, "
          f"{failed} attempts answered 5xx or not at all (retried with their keys)", flush=True)
    return seconds >= 0


def slow_clients(port, count, body, seconds):
    """`count` connections that send a request head (or, with body, a body) one byte a second; returns
    the seconds until the server closed them (median) and how many it had closed after `seconds`."""
    import socket
    head = b"POST /v1/payments HTTP/1.1\r\nHost: tender\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" \
        if body else b"GET /healthz HTTP/1.1\r\nHost: tender\r\n"
    sockets, opened = [], time.monotonic()
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.setblocking(False)
            if body:
                sock.sendall(head)
            sockets.append([sock, None])
        except OSError:
            pass
    deadline = opened + seconds
    while time.monotonic() < deadline and any(closed is None for _, closed in sockets):
        for entry in sockets:
            sock, closed = entry
            if closed is not None:
                continue
            try:
                sock.send(b"x" if body else b"X")
                data = sock.recv(4096)
                if data == b"" or data:
                    entry[1] = time.monotonic()
            except BlockingIOError:
                pass
            except OSError:
                entry[1] = time.monotonic()
        time.sleep(1)
    closed = sorted(c - opened for _, c in sockets if c is not None)
    for sock, _ in sockets:
        sock.close()
    return (closed[len(closed) // 2] if closed else -1), len(closed), len(sockets)


def latency_during(port, seconds):
    """p50/p99 of GET /healthz on `port` (new connection each) for `seconds`."""
    samples, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        status, _ = probe_path(port, "/healthz")
        samples.append((time.monotonic() - started) if status == 200 else 99.0)
        time.sleep(0.05)
    samples.sort()
    return samples[len(samples) // 2] * 1000, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000


def probe_path(port, path):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", path, headers={"Host": "tender"})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status, None
    except (OSError, http.client.HTTPException):
        return None, "no_answer"


def chaos_slow(args, name, port, body):
    result = {}
    attack = threading.Thread(target=lambda: result.update(r=slow_clients(port, args.slow_clients, body, 25)), daemon=True)
    attack.start()
    time.sleep(1)
    p50, p99 = latency_during(port, 5)
    attack.join(40)
    median_close, closed, opened = result.get("r", (-1, 0, 0))
    print(f"chaos: {name}: {opened} slow clients, {closed} closed by the server (median {median_close:.0f} s); "
          f"meanwhile GET /healthz p50 {p50:.1f} ms, p99 {p99:.1f} ms", flush=True)
    return closed == opened and p99 < 1000


def cmd_chaos(args):
    ports = [int(p) for p in args.rest.split(",")]
    run_id = f"{int(time.time())}{random.randrange(1000):03d}"
    client = Client(args.base, args.api_key, timeout=args.request_timeout)
    prepared = prepare(client, args, run_id)
    state = {"next": 0, "acked": {}}
    http_port = urllib.parse.urlparse(args.base).port
    ok = True
    only = set(args.only.split(",")) if args.only else {"kill", "pgstop", "slow", "partition", "schemathesis"}
    if "kill" in only:
        ok &= chaos_fault(client, args, prepared, run_id, state, "kill -9 of a Tender node",
                          lambda: kill_node(args))
    if "pgstop" in only:
        ok &= chaos_fault(client, args, prepared, run_id, state, "PostgreSQL primary immediate stop (Patroni restarts it)",
                          lambda: stop_primary_immediately(args, ports))
    if "slow" in only:
        ok &= chaos_slow(args, "slowloris through HAProxy", http_port, body=False)
        ok &= chaos_slow(args, "slow body through HAProxy", http_port, body=True)
        ok &= chaos_slow(args, "slowloris against a node directly", args.readyz_port, body=False)
    if "partition" in only and args.partition_netns:
        ok &= chaos_partition(args, prepared, run_id, state)
    elif "partition" in only:
        log("no app-database partition (needs root, nftables and a network namespace: scripts/cluster-test.sh)")
    if "schemathesis" in only and args.schemathesis_seconds > 0:
        ok &= chaos_schemathesis(args)
    settled = wait_settled(args, 60)
    log(f"after the resolver and the finance feed: pending, unfed = {settled}")
    lost, twice, pending, _ = check(args, f"chaos-{run_id}-", state["acked"])
    finished, stored = psql(args.psql_url, f"""
        SELECT (SELECT count(*) FROM idempotency_keys WHERE idempotency_key LIKE 'chaos-{run_id}-%' AND finished_at IS NOT NULL),
               (SELECT count(*) FROM payments WHERE idempotency_key LIKE 'chaos-{run_id}-%')""")[0]
    for index, why in lost[:10]:
        log(f"lost: payment {index}: {why}")
    print(f"chaos: after the faults: acknowledged {len(state['acked'])} payments, lost {len(lost)}, charged twice {twice}, "
          f"{pending} pending ({stored} payments stored, {finished} keys finished)", flush=True)
    ok &= not lost and twice == 0 and pending == 0
    return 0 if ok else 1


# --- make chaos: the app<->database partition (network namespace + nftables) and Schemathesis -------

PARTITION_TABLE = "tender_partition"


def partition(args, on):
    """Cuts (on) or heals the partitioned node's traffic to and from HAProxy's PostgreSQL front end, in
    the node's network namespace: both directions dropped, so its connections go silent, as when a
    switch or a firewall between the application and the database fails. Other traffic (HAProxy's
    health checks and requests to the node) still flows."""
    if on:
        rules = (f"table inet {PARTITION_TABLE} {{\n"
                 f"  chain output {{ type filter hook output priority 0; policy accept;\n"
                 f"    ip daddr {args.partition_db_host} tcp dport {args.partition_db_port} drop; }}\n"
                 f"  chain input {{ type filter hook input priority 0; policy accept;\n"
                 f"    ip saddr {args.partition_db_host} tcp sport {args.partition_db_port} drop; }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", args.partition_netns, "nft", "-f", "-"], input=rules, text=True,
                       check=True, capture_output=True, timeout=10)
    else:
        subprocess.run(["ip", "netns", "exec", args.partition_netns, "nft", "delete", "table", "inet", PARTITION_TABLE],
                       capture_output=True, timeout=10)


def haproxy_server_status(args, backend, server):
    """The server's status in HAProxy's stats ("UP", "DOWN", "UP 1/2", ...), or None."""
    import socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(os.path.join(args.state, "haproxy", "haproxy.sock"))
            sock.sendall(b"show stat\n")
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    lines = data.decode(errors="replace").splitlines()
    if not lines or not lines[0].startswith("# "):
        return None
    header = lines[0][2:].split(",")
    for line in lines[1:]:
        fields = line.split(",")
        if len(fields) == len(header) and fields[0] == backend and fields[1] == server:
            return fields[header.index("status")]
    return None


class Probe:
    """Asks the partitioned node's own /readyz every 0.25 s, each probe on its own thread (an answer may
    take the pool's connect timeout, or a handler deadline), and samples HAProxy's view of the node."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.readyz = []   # (sent at, answered at, status, code)
        self.haproxy = []  # (at, HAProxy status)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            at = time.monotonic()
            threading.Thread(target=self.one, args=(at,), daemon=True).start()
            self.haproxy.append((at, haproxy_server_status(self.args, "tender_nodes", self.args.partition_node) or ""))
            self.stop.wait(max(0.0, 0.25 - (time.monotonic() - at)))

    def one(self, sent_at):
        status, code = probe_readyz(self.args.partition_port, self.args.partition_host, timeout=20)
        with self.lock:
            self.readyz.append((sent_at, time.monotonic(), status, code))

    def answered(self, after, status):
        """Seconds from `after` to the first answer `status` to a probe sent since, or None."""
        with self.lock:
            times = [r[1] for r in self.readyz if r[0] >= after and r[2] == status]
        return (min(times) - after) if times else None

    def in_haproxy(self, after, prefix):
        return next((at - after for at, status in self.haproxy if at >= after and status.startswith(prefix)), None)

    def codes(self, after, until):
        with self.lock:
            return sorted({r[3] for r in self.readyz if after <= r[0] <= until and r[2] == 503 and r[3]})

    def finish(self):
        self.stop.set()
        self.thread.join(5)


def answers_summary(results):
    """'503 ×12 (database_unavailable 10, …), 2xx ×3' for attempts recorded by load_until."""
    by_status = {}
    for _, _, status, code in results:
        name = "no answer" if status is None else ("2xx" if status in (200, 202) else str(status))
        by_status.setdefault(name, {}).setdefault(code, 0)
        by_status[name][code] += 1
    parts = []
    for name in sorted(by_status, key=lambda n: (n != "2xx", n)):
        codes = by_status[name]
        total = sum(codes.values())
        detail = ", ".join(f"{c} {n}" for c, n in sorted(codes.items(), key=lambda kv: -kv[1]) if c)
        parts.append(f"{name} ×{total}" + (f" ({detail})" if detail else ""))
    return "; ".join(parts) or "none"


def chaos_partition(args, prepared, run_id, state):
    """Payments through HAProxy and straight to the node while it is cut off from the database for
    --partition-seconds, then healed. Measures: /readyz 503 (and HAProxy taking the node out) after the
    cut, what the node's own clients were answered, /readyz and a payment on the node after healing."""
    name = args.partition_node
    direct = Client(f"http://{args.partition_host}:{args.partition_port}", args.api_key, timeout=args.request_timeout)
    proxied = Client(args.base, args.api_key, timeout=args.request_timeout)
    stop = threading.Event()
    via_node, via_proxy = [], []
    start = state["next"]
    threads_node, counter_node = load_until(direct, prepared, start, stop, run_id, 2, via_node, 100, state["acked"])
    threads_proxy, counter_proxy = load_until(proxied, prepared, start + 100, stop, run_id, 3, via_proxy, 200,
                                              state["acked"])
    state["next"] = start + 300
    probe = Probe(args)
    time.sleep(3)
    cut_at = time.monotonic()
    healed_at = None
    try:
        partition(args, True)
        log(f"partition: {name}'s traffic to and from {args.partition_db_host}:{args.partition_db_port} dropped "
            f"(nftables in network namespace {args.partition_netns}) for {args.partition_seconds:.0f} s")
        time.sleep(args.partition_seconds)
    finally:
        partition(args, False)
        healed_at = time.monotonic()
    log("partition: healed")
    deadline = healed_at + 90
    while time.monotonic() < deadline:
        paid = [r for r in via_node if r[0] >= healed_at and r[2] in (200, 202)]
        if probe.answered(healed_at, 200) is not None and paid and probe.in_haproxy(healed_at, "UP") is not None:
            break
        time.sleep(0.2)
    stop.set()
    for thread in threads_node + threads_proxy:
        thread.join(70)
    probe.finish()
    not_ready = probe.answered(cut_at, 503)
    taken_out = probe.in_haproxy(cut_at, "DOWN")
    ready = probe.answered(healed_at, 200)
    back_in = probe.in_haproxy(healed_at, "UP")
    paid = [r[1] for r in via_node if r[0] >= healed_at and r[2] in (200, 202)]
    # What the node's own clients were answered for attempts sent while it was cut off.
    during = [r for r in via_node if cut_at <= r[0] <= healed_at]
    codes = probe.codes(cut_at, healed_at)

    def since(seconds):
        return f"{seconds:.1f} s" if seconds is not None else "never"

    proxy_failed = sum(1 for r in via_proxy if r[0] >= cut_at - 1 and (r[2] is None or r[2] >= 500))
    proxy_ok = sum(1 for r in via_proxy if r[2] in (200, 202))
    print(f"chaos: app-database partition of {name} ({args.partition_seconds:.0f} s, nftables in its network namespace): "
          f"/readyz 503 after {since(not_ready)} ({', '.join(codes) or 'none'}), HAProxy took it out after "
          f"{since(taken_out)}; its own clients while cut off: {answers_summary(during)}; through HAProxy "
          f"{proxy_ok} payments acknowledged, {proxy_failed} attempts 5xx or unanswered; after healing /readyz 200 "
          f"in {since(ready)}, back in HAProxy in {since(back_in)}, "
          f"a payment on it in {since(min(paid) - healed_at if paid else None)}", flush=True)
    crashes = [r for r in via_node + via_proxy if r[2] is not None and r[2] >= 500 and r[2] != 503]
    for r in crashes[:5]:
        log(f"partition: FAILED: an attempt answered {r[2]} {r[3]} (only 503 may say the node cannot decide now)")
    return None not in (not_ready, taken_out, ready, back_in) and bool(paid) and not crashes


def chaos_schemathesis(args):
    """scripts/schemathesis.sh through HAProxy for --schemathesis-seconds while the partitioned node is
    cut off from the database (HAProxy has taken it out) for the first half, and after it is back."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemathesis.sh")
    out = os.path.join(args.state, "schemathesis")
    env = dict(os.environ, SCHEMATHESIS_URL=args.base, SCHEMATHESIS_API_KEY=args.api_key, SCHEMATHESIS_OUT=out)
    seconds = args.schemathesis_seconds
    fault = "no fault (no partition here)"
    healed = None
    try:
        if args.partition_netns:
            wait_until = time.monotonic() + 30
            while time.monotonic() < wait_until:
                if (haproxy_server_status(args, "tender_nodes", args.partition_node) or "").startswith("UP"):
                    break
                time.sleep(0.2)
            partition(args, True)
            cut_at = time.monotonic()
            while time.monotonic() < cut_at + 30:
                if (haproxy_server_status(args, "tender_nodes", args.partition_node) or "").startswith("DOWN"):
                    break
                time.sleep(0.2)
            fault = (f"{args.partition_node} cut off from the database (out of HAProxy after "
                     f"{time.monotonic() - cut_at:.1f} s) for the first {seconds / 2:.0f} s, then healed")
        started = time.monotonic()
        process = subprocess.Popen(["bash", script, str(int(seconds))], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        if args.partition_netns:
            try:
                process.wait(max(0.0, started + seconds / 2 - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            partition(args, False)
            healed = time.monotonic()
        output, _ = process.communicate(timeout=seconds + 240)
    finally:
        if healed is None and args.partition_netns:
            partition(args, False)
    lines = output.splitlines()
    for line in lines:
        if line.startswith("schemathesis: ") or process.returncode != 0:
            log(line)
    answers = next((l[len("schemathesis: "):] for l in lines if l.startswith("schemathesis: answers ")), "no answers counted")
    passed = next((l for l in lines if "every check passed" in l), None)
    cases = passed.split(" on ", 1)[1].split(" (", 1)[0] if passed else "?"
    print(f"chaos: schemathesis against openapi.yaml through HAProxy for {seconds:.0f} s, {fault}: {answers}; "
          f"{'every check passed on ' + cases if passed else 'FAILED (' + out + '/last-run.log)'} "
          f"({time.monotonic() - started:.0f} s)", flush=True)
    return process.returncode == 0 and passed is not None


def stop_primary_immediately(args, ports):
    view = cluster_view(ports)
    name = [m["name"] for m in (view or {}).get("members", []) if m.get("role") == "leader"][0]
    data = os.path.join(args.state, name, "data")
    command = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", data, "-m", "immediate", "stop"]
    if os.geteuid() == 0:
        command = ["runuser", "-u", args.service_user, "--"] + command
    subprocess.run(command, capture_output=True, timeout=30)
    log(f"stopped PostgreSQL primary {name} with pg_ctl -m immediate")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    wait = sub.add_parser("wait-cluster")
    wait.add_argument("--rest", required=True)
    wait.add_argument("--members", type=int, required=True)
    wait.add_argument("--seconds", type=float, default=60)
    run = sub.add_parser("run")
    run.add_argument("--base", required=True)
    run.add_argument("--api-key", required=True)
    run.add_argument("--psql-url", required=True)
    run.add_argument("--rest", required=True)
    run.add_argument("--state", required=True)
    run.add_argument("--kill-node", default="")
    run.add_argument("--readyz-port", type=int, required=True, help="a node that is not killed")
    run.add_argument("--payments", type=int, default=1000)
    run.add_argument("--concurrency", type=int, default=16)
    run.add_argument("--request-timeout", type=float, default=20)
    run.add_argument("--prepare-seconds", type=float, default=90)
    run.add_argument("--pay-seconds", type=float, default=120)
    run.add_argument("--settle-seconds", type=float, default=60)
    chaos = sub.add_parser("chaos")
    for name in ("--base", "--api-key", "--psql-url", "--rest", "--state"):
        chaos.add_argument(name, required=True)
    chaos.add_argument("--kill-node", required=True)
    chaos.add_argument("--readyz-port", type=int, required=True)
    chaos.add_argument("--service-user", default="tender-pg")
    chaos.add_argument("--payments", type=int, default=900, help="prepared sessions: 300 a fault")
    chaos.add_argument("--concurrency", type=int, default=16)
    chaos.add_argument("--request-timeout", type=float, default=20)
    chaos.add_argument("--prepare-seconds", type=float, default=90)
    chaos.add_argument("--fault-seconds", type=float, default=15)
    chaos.add_argument("--slow-clients", type=int, default=200)
    chaos.add_argument("--partition-netns", default="", help="the network namespace the partitioned node runs in")
    chaos.add_argument("--partition-node", default="node3")
    chaos.add_argument("--partition-host", default="", help="the node's address (its end of the veth pair)")
    chaos.add_argument("--partition-port", type=int, default=0)
    chaos.add_argument("--partition-db-host", default="", help="HAProxy's PostgreSQL front end as the node reaches it")
    chaos.add_argument("--partition-db-port", type=int, default=0)
    chaos.add_argument("--partition-seconds", type=float, default=15)
    chaos.add_argument("--schemathesis-seconds", type=float, default=60, help="0: no Schemathesis run")
    chaos.add_argument("--only", default="", help="a subset of kill,pgstop,slow,partition,schemathesis")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so a partition in force is healed (finally) before the script's cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    commands = {"wait-cluster": cmd_wait_cluster, "run": cmd_run, "chaos": cmd_chaos}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
