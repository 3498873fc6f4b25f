"""End-to-end webhook tests: real `tender serve` processes deliver to a local receiver that verifies every
delivery with the Standard Webhooks reference library (`standardwebhooks` from PyPI).

Run by scripts/webhooks-test.sh (which makes the venv and the databases); environment:
  TENDER_BIN, WEBHOOKS_DB (insecure-target database), WEBHOOKS_STRICT_DB (target rules on),
  WEBHOOKS_KEY / WEBHOOKS_STRICT_KEY (sandbox API keys), WEBHOOKS_OUT (log directory), PSQL.
"""
import http.server
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MERCHANT = "merchant.dev.tender.sandbox"
BIN = os.environ["TENDER_BIN"]
OUT = os.environ["WEBHOOKS_OUT"]
PSQL = os.environ.get("PSQL", "psql").split()
passed = 0
failed = 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """One HTTP server; each endpoint is a path /<name> with a scripted list of answers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.scripts = {}      # name -> list of (status, headers, delay_s); then 200
        self.secrets = {}      # name -> [secret, ...]: every one must verify
        self.received = []     # dicts: name, id, body, headers, at, verified
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                name = self.path.strip("/")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    script = receiver.scripts.get(name, [])
                    status, extra, delay = script.pop(0) if script else (200, {}, 0)
                    keys = list(receiver.secrets.get(name, []))
                verified = bool(keys)
                for key in keys:
                    try:
                        Webhook(key).verify(body, headers)
                    except WebhookVerificationError:
                        verified = False
                with receiver.lock:
                    receiver.received.append({"name": name, "id": headers.get("webhook-id"), "body": body,
                                              "headers": headers, "at": time.time(), "verified": verified,
                                              "status": status})
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.port, name)

    def script(self, name, answers):
        with self.lock:
            self.scripts[name] = list(answers)

    def of(self, name):
        with self.lock:
            return [r for r in self.received if r["name"] == name]


class Server:
    """A `tender serve` process on a free port."""

    def __init__(self, db, label, extra_env):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.label = label
        env = dict(os.environ)
        env.update({"TENDER_DATABASE_URL": db, "TENDER_LOG_FORMAT": "text", "SWIFT_BACKTRACE": "enable=no",
                    "TENDER_WEBHOOK_TIMEOUT_MS": "1000", "TENDER_WEBHOOK_RETRY_SCHEDULE_MS": "300,300,300",
                    "TENDER_WEBHOOK_POLL_MS": "100", "TENDER_WEBHOOK_CLAIM_BATCH": "2",
                    "TENDER_APPLE_PAY_GATEWAY_HOSTS": "gateway.invalid"})
        env.update(extra_env)
        self.log = open(os.path.join(OUT, "serve-%s.log" % label), "ab")
        self.proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:%d" % self.port], env=env,
                                     stdout=self.log, stderr=self.log)
        for _ in range(300):
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=1).read()
                return
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None:
                    raise SystemExit("webhooks: serve %s exited (see %s)" % (label, self.log.name))
                time.sleep(0.1)
        raise SystemExit("webhooks: serve %s not up" % label)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill9()


def api(server, key, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.base + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def sql(db, text):
    return subprocess.run(PSQL + ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", db, "-c", text],
                          check=True, capture_output=True, text=True).stdout.strip()


def emit(db, count=1, event_type="payment.succeeded"):
    """Writes `count` events into the outbox (as a payment's transaction would) and notifies."""
    ids = ["evt_" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
           for _ in range(count)]
    values = []
    for event_id in ids:
        body = json.dumps({"id": event_id, "type": event_type, "createdAt": "2026-12-01T00:00:00Z",
                           "data": {"object": {"id": "pay_" + event_id[4:], "status": "succeeded"}}},
                          separators=(",", ":"))
        values.append("('%s', '%s', '%s', 'pay_%s', now(), '%s')" % (event_id, MERCHANT, event_type, event_id[4:], body))
    sql(db, "BEGIN; INSERT INTO events (event_id, merchant_id, event_type, object_id, created_at, body) VALUES "
        + ",".join(values) + "; SELECT pg_notify('tender_events', '%s'); COMMIT;" % MERCHANT)
    return ids


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def check(name, function):
    global passed, failed
    started = time.time()
    try:
        function()
        passed += 1
        print("webhooks: ok   %s (%.1fs)" % (name, time.time() - started), flush=True)
    except Exception as error:  # noqa: BLE001 - a test failure of any kind is reported and counted
        failed += 1
        print("webhooks: FAIL %s: %r" % (name, error), flush=True)


def create(server, key, receiver, name, events=("*",), **extra):
    status, endpoint = api(server, key, "POST", "/v1/webhook-endpoints",
                           dict({"url": receiver.url(name), "enabledEvents": list(events)}, **extra))
    assert status == 201, (status, endpoint)
    assert endpoint["secret"].startswith("whsec_") and endpoint["id"].startswith("we_")
    receiver.secrets[name] = [endpoint["secret"]]
    return endpoint


def attempts(server, key, endpoint_id):
    status, page = api(server, key, "GET", "/v1/webhook-endpoints/%s/deliveries?limit=100" % endpoint_id)
    assert status == 200, page
    return list(reversed(page["data"]))


def main():
    db, key = os.environ["WEBHOOKS_DB"], os.environ["WEBHOOKS_KEY"]
    receiver = Receiver()
    insecure = {"TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS": "true"}
    s1 = Server(db, "a", insecure)
    try:
        run_delivery_cases(s1, key, db, receiver)
        s1 = run_crash_case(s1, key, db, receiver, insecure)
        run_two_nodes_case(s1, key, db, receiver, insecure)
    finally:
        s1.stop()
    strict = Server(os.environ["WEBHOOKS_STRICT_DB"], "strict", {})
    try:
        run_target_cases(strict, os.environ["WEBHOOKS_STRICT_KEY"], os.environ["WEBHOOKS_STRICT_DB"], receiver)
    finally:
        strict.stop()
    log = open(os.path.join(OUT, "serve-a.log")).read()
    check("the insecure-targets switch is logged as a warning",
          lambda: assert_true("TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS" in log, "no warning"))
    print("webhooks: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def assert_true(condition, message):
    assert condition, message


def run_delivery_cases(s1, key, db, receiver):
    def delivered_and_verified():
        endpoint = create(s1, key, receiver, "basic", events=["payment.succeeded"])
        [event_id] = emit(db)
        emit(db, event_type="refund.failed")  # not subscribed
        wait_for(lambda: receiver.of("basic"), 10, "a delivery")
        time.sleep(0.5)
        got = receiver.of("basic")
        assert len(got) == 1, len(got)
        assert got[0]["verified"] and got[0]["id"] == event_id, got[0]["headers"]
        stored = sql(db, "SELECT body FROM events WHERE event_id = '%s'" % event_id)
        assert got[0]["body"].decode() == stored, "body differs from the stored event"
        assert abs(int(got[0]["headers"]["webhook-timestamp"]) - time.time()) < 30
        [a] = attempts(s1, key, endpoint["id"])
        assert a["eventId"] == event_id and a["httpStatus"] == 200 and a["attemptNumber"] == 1, a
    check("a delivery verifies with standardwebhooks, body byte-exact, only subscribed types", delivered_and_verified)

    def retries():
        endpoint = create(s1, key, receiver, "retry")
        receiver.script("retry", [(500, {}, 0), (502, {}, 0)])
        [event_id] = emit(db)
        wait_for(lambda: len(receiver.of("retry")) >= 3, 15, "three attempts")
        got = receiver.of("retry")
        assert all(r["verified"] and r["id"] == event_id for r in got)
        wait_for(lambda: len(attempts(s1, key, endpoint["id"])) == 3, 5, "three attempts recorded")
        assert [a["httpStatus"] for a in attempts(s1, key, endpoint["id"])] == [500, 502, 200]
    check("non-2xx answers are retried on the schedule until delivered", retries)

    def retry_after():
        create(s1, key, receiver, "later")
        receiver.script("later", [(503, {"Retry-After": "2"}, 0)])
        emit(db)
        wait_for(lambda: len(receiver.of("later")) >= 2, 15, "the retry")
        first, second = receiver.of("later")[:2]
        assert second["at"] - first["at"] >= 1.9, second["at"] - first["at"]
    check("Retry-After is honoured (2 s over a 300 ms schedule)", retry_after)

    def timeout():
        endpoint = create(s1, key, receiver, "slow")
        receiver.script("slow", [(200, {}, 2.5)])
        emit(db)
        wait_for(lambda: len(receiver.of("slow")) >= 2, 15, "the retry after a timeout")
        wait_for(lambda: len(attempts(s1, key, endpoint["id"])) >= 2, 5, "attempts recorded")
        first, second = attempts(s1, key, endpoint["id"])[:2]
        assert first["error"] == "timeout" and first.get("httpStatus") is None, first
        assert 900 <= first["durationMilliseconds"] < 2_400, first
        assert second["httpStatus"] == 200, second
    check("an answer slower than TENDER_WEBHOOK_TIMEOUT_MS is a timeout, retried", timeout)

    run_disable_cases(s1, key, db, receiver)
    run_rotation_and_redelivery_cases(s1, key, db, receiver)


def run_disable_cases(s1, key, db, receiver):
    def gone():
        endpoint = create(s1, key, receiver, "gone")
        receiver.script("gone", [(410, {}, 0)])
        [first] = emit(db)
        wait_for(lambda: api(s1, key, "GET", "/v1/webhook-endpoints/" + endpoint["id"])[1]["status"] == "disabled",
                 10, "the endpoint disabled")
        status, view = api(s1, key, "GET", "/v1/webhook-endpoints/" + endpoint["id"])
        assert view["disabledReason"] == "gone", view
        [second] = emit(db)
        time.sleep(1.0)
        assert len(receiver.of("gone")) == 1, "a disabled endpoint got a delivery"
        status, view = api(s1, key, "PATCH", "/v1/webhook-endpoints/" + endpoint["id"], {"status": "enabled"})
        assert status == 200 and view["status"] == "enabled" and "disabledReason" not in view, view
        wait_for(lambda: {first, second} <= {r["id"] for r in receiver.of("gone")[1:]}, 10, "the backlog")
        assert all(r["verified"] for r in receiver.of("gone"))
    check("410 disables the endpoint; enabling it again delivers the backlog", gone)

    def exhausted():
        endpoint = create(s1, key, receiver, "down")
        receiver.script("down", [(500, {}, 0)] * 10)
        emit(db)
        wait_for(lambda: api(s1, key, "GET", "/v1/webhook-endpoints/" + endpoint["id"])[1]["status"] == "disabled",
                 15, "the endpoint disabled")
        assert api(s1, key, "GET", "/v1/webhook-endpoints/" + endpoint["id"])[1]["disabledReason"] == "retries_exhausted"
        assert len(attempts(s1, key, endpoint["id"])) == 4  # the first attempt and three retries
    check("an exhausted schedule disables the endpoint (retries_exhausted)", exhausted)



def run_rotation_and_redelivery_cases(s1, key, db, receiver):
    def rotation():
        endpoint = create(s1, key, receiver, "rotate")
        old = receiver.secrets["rotate"][0]
        status, rotated = api(s1, key, "POST", "/v1/webhook-endpoints/%s/rotate-secret" % endpoint["id"])
        assert status == 200 and rotated["secret"].startswith("whsec_") and rotated["secret"] != old, rotated
        receiver.secrets["rotate"] = [old, rotated["secret"]]  # each must verify on its own
        emit(db)
        wait_for(lambda: receiver.of("rotate"), 10, "a delivery")
        got = receiver.of("rotate")[0]
        assert got["verified"], "not both secrets verify"
        assert len(got["headers"]["webhook-signature"].split(" ")) == 2, got["headers"]["webhook-signature"]
        assert "secret" not in api(s1, key, "GET", "/v1/webhook-endpoints/" + endpoint["id"])[1]
    check("after rotate-secret both the old and the new secret verify (two signatures)", rotation)

    def redirect():
        endpoint = create(s1, key, receiver, "moved")
        receiver.script("moved", [(302, {"Location": receiver.url("target")}, 0)])
        emit(db)
        wait_for(lambda: len(attempts(s1, key, endpoint["id"])) >= 1, 10, "an attempt")
        first = attempts(s1, key, endpoint["id"])[0]
        assert first["httpStatus"] == 302 and first["error"] == "redirect_not_followed", first
        time.sleep(0.5)
        assert not receiver.of("target"), "a redirect was followed"
    check("a redirect is not followed (302, redirect_not_followed)", redirect)

    def redeliver():
        endpoint = create(s1, key, receiver, "again", events=["payment.succeeded"])
        [event_id] = emit(db)
        wait_for(lambda: receiver.of("again"), 10, "the first delivery")
        status, body = api(s1, key, "POST", "/v1/events/%s/redeliver" % event_id, {"endpointId": endpoint["id"]})
        assert status == 202, (status, body)
        wait_for(lambda: len(receiver.of("again")) == 2, 10, "the redelivery")
        assert all(r["id"] == event_id and r["verified"] for r in receiver.of("again"))
        status, body = api(s1, key, "POST", "/v1/events/%s/redeliver" % event_id, {"endpointId": endpoint["id"], "x": 1})
        assert status == 400 and body["code"] == "unknown_field", body
        status, body = api(s1, key, "POST", "/v1/events/evt_nosuch/redeliver", {"endpointId": endpoint["id"]})
        assert status == 404 and body["code"] == "event_not_found", body
    check("POST /v1/events/{id}/redeliver sends the event again (202)", redeliver)


def run_crash_case(s1, key, db, receiver, insecure):
    holder = {"server": s1}

    def crash():
        create(s1, key, receiver, "crash")
        receiver.script("crash", [(200, {}, 0.3)] * 40)
        ids = emit(db, 20)
        wait_for(lambda: len(receiver.of("crash")) >= 3, 20, "deliveries under way")
        holder["server"].kill9()
        holder["server"] = Server(db, "a", insecure)
        wait_for(lambda: set(ids) <= {r["id"] for r in receiver.of("crash")}, 60, "every event after the crash")
        assert all(r["verified"] for r in receiver.of("crash"))
        pending = sql(db, "SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w USING (endpoint_id) "
                          "WHERE w.url LIKE '%/crash' AND d.state <> 'delivered'")
        wait_for(lambda: sql(db, "SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w USING (endpoint_id) "
                                 "WHERE w.url LIKE '%/crash' AND d.state <> 'delivered'") == "0", 20,
                 "every delivery marked delivered (%s pending)" % pending)
    check("kill -9 of tender serve mid-delivery: every event delivered, none lost", crash)
    return holder["server"]


def run_two_nodes_case(s1, key, db, receiver, insecure):
    def two_nodes():
        s2 = Server(db, "b", insecure)
        try:
            create(s1, key, receiver, "pair")
            ids = emit(db, 60)
            wait_for(lambda: set(ids) <= {r["id"] for r in receiver.of("pair")}, 30, "every event")
            time.sleep(0.5)
            got = [r["id"] for r in receiver.of("pair")]
            assert len(got) == len(set(got)) == 60, "%d requests for %d events" % (len(got), len(set(got)))
        finally:
            s2.stop()
    check("two serve processes on one database deliver each event once", two_nodes)


def run_target_cases(strict, key, db, receiver):
    def refused_at_registration():
        cases = [("http://example.com/hook", "url_not_https"),
                 ("https://127.0.0.1:%d/x" % receiver.port, "url_address_not_allowed"),
                 ("https://10.0.0.1/hook", "url_address_not_allowed"),
                 ("https://169.254.169.254/latest/meta-data/", "url_address_not_allowed"),
                 ("https://[::1]/hook", "url_address_not_allowed"),
                 ("https://2130706433/hook", "url_address_not_allowed"),
                 ("https://localhost/hook", "url_address_not_allowed"),
                 ("https://user:pw@example.com/hook", "url_invalid")]
        for url, code in cases:
            status, body = api(strict, key, "POST", "/v1/webhook-endpoints", {"url": url, "enabledEvents": ["*"]})
            assert status == 422 and body["code"] == code, (url, status, body)
        status, body = api(strict, key, "POST", "/v1/webhook-endpoints",
                           {"url": "https://example.com/h", "enabledEvents": ["*"], "secret": "x"})
        assert status == 400 and body["code"] == "unknown_field", body
    check("SSRF: http, loopback, 10.0.0.1, 169.254.169.254, ::1 and credentials refused with their codes",
          refused_at_registration)

    def refused_on_connect():
        name = socket.gethostname()
        try:
            if not socket.gethostbyname(name).startswith("127."):
                name = "localhost."
        except OSError:
            name = "localhost."
        status, endpoint = api(strict, key, "POST", "/v1/webhook-endpoints",
                               {"url": "https://%s:%d/strict" % (name, receiver.port), "enabledEvents": ["*"]})
        assert status == 201, (status, endpoint)
        emit(db)
        wait_for(lambda: attempts(strict, key, endpoint["id"]), 10, "an attempt")
        first = attempts(strict, key, endpoint["id"])[0]
        assert first["error"] == "address_not_allowed" and first.get("httpStatus") is None, first
        assert not receiver.of("strict"), "the receiver was reached"
    check("SSRF: a name resolving to loopback is refused on the address libcurl connects to (address_not_allowed)",
          refused_on_connect)


if __name__ == "__main__":
    sys.exit(main())
