// The local Adyen stand-in, written to a temporary directory and run with python3 by AdyenStandIn.
// Kept as Swift source so the test target needs no resources.
let adyenStandInScript = #"""
# A stand-in for Adyen's Checkout API v71 (POST /payments, POST /payments/{pspReference}/refunds) that checks every
# request against a hand-written subset of Adyen's published OpenAPI (CheckoutService-v71: PaymentRequest,
# PaymentRefundRequest, Amount, CardDetails, ThreeDSecureData) and answers like Adyen: Authorised, Refused with a
# refusalReason, Error, Cancelled, Pending, Received, 5xx, a slow answer, a malformed one; refunds answer 201
# "received". The subset is stricter than Adyen: it admits only the fields Tender sends, each with Adyen's type,
# enum and length constraints, and additionalProperties false as the spec declares for these schemas.
# Also speaks Tender's own http protocol (/authorizations, /refunds) for the mutual-TLS tests.
# Ports: "http" (plain, loopback) and "mtls" (HTTPS requiring a client certificate from the test CA).
# Every call is recorded; GET /_calls returns them. Exits when stdin closes or after a lifetime.
import base64, binascii, json, os, secrets, ssl, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
LIFETIME_SECONDS = float(sys.argv[2])

def path(name):
    return os.path.join(DIR, name)

def openssl(*args):
    subprocess.run(["openssl", *args], cwd=DIR, check=True, capture_output=True, timeout=30)

def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=Tender test " + name,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

def make_leaf(name, ca, common_name, extensions):
    with open(path(name + ".ext"), "w") as f:
        f.write(extensions)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + common_name)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2",
            "-extfile", name + ".ext", "-out", name + ".pem")
    os.chmod(path(name + ".key"), 0o600)

make_ca("ca")
make_ca("other-ca")
make_leaf("server", "ca", "localhost",
          "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
make_leaf("client", "ca", "tender.test", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
make_leaf("stranger", "other-ca", "stranger.test", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")

API_KEY = "AQE" + secrets.token_urlsafe(30)
with open(path("api-key"), "w") as f:
    f.write(API_KEY + "\n")
os.chmod(path("api-key"), 0o600)

# --- the schema subset (transcribed by hand from CheckoutService-v71) -------------------------------------------
STRING = {"type": "string"}
BYTE = {"type": "string", "format": "byte"}
AMOUNT = {"type": "object", "additionalProperties": False, "required": ["currency", "value"],
          "properties": {"currency": {"type": "string", "minLength": 3, "maxLength": 3},
                         "value": {"type": "integer", "format": "int64"}}}
CARD_DETAILS = {"type": "object", "additionalProperties": False,
                # Adyen requires none of these; a card payment without them cannot be made, so the subset does.
                "required": ["type", "number", "expiryMonth", "expiryYear"],
                "properties": {"type": {"type": "string", "enum": ["bcmc", "scheme", "networkToken", "giftcard", "card"]},
                               "number": STRING, "expiryMonth": STRING, "expiryYear": STRING,
                               "holderName": {"type": "string", "maxLength": 15000}, "brand": STRING}}
THREE_DS_DATA = {"type": "object", "additionalProperties": False,
                 "properties": {"authenticationResponse": {"type": "string", "enum": ["Y", "N", "U", "A"]},
                                "directoryResponse": {"type": "string", "enum": ["A", "C", "D", "I", "N", "R", "U", "Y"]},
                                "cavv": BYTE, "eci": STRING, "tokenAuthenticationVerificationValue": BYTE,
                                "threeDSVersion": STRING, "xid": BYTE, "dsTransID": STRING}}
PAYMENT_REQUEST = {"type": "object", "additionalProperties": False,
                   "required": ["merchantAccount", "reference", "amount", "paymentMethod", "returnUrl"],
                   "properties": {"amount": AMOUNT, "merchantAccount": STRING,
                                  "reference": {"type": "string", "maxLength": 80},
                                  "returnUrl": {"type": "string", "maxLength": 8000},
                                  "paymentMethod": CARD_DETAILS, "mpiData": THREE_DS_DATA,
                                  "shopperInteraction": {"type": "string", "enum": ["Ecommerce", "ContAuth", "Moto", "POS"]},
                                  "recurringProcessingModel": {"type": "string",
                                                               "enum": ["CardOnFile", "Subscription", "UnscheduledCardOnFile"]},
                                  "additionalData": {"type": "object", "additionalProperties": STRING}}}
PAYMENT_REFUND_REQUEST = {"type": "object", "additionalProperties": False, "required": ["merchantAccount", "amount"],
                          "properties": {"amount": AMOUNT, "merchantAccount": STRING,
                                         "reference": {"type": "string", "maxLength": 80},
                                         "merchantRefundReason": {"type": "string",
                                                                  "enum": ["FRAUD", "CUSTOMER REQUEST", "RETURN", "DUPLICATE",
                                                                           "OTHER"]}}}

def validate(value, schema, where, out):
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            out.append(where + ": expected object"); return
        for name in schema.get("required", []):
            if name not in value:
                out.append(where + "." + name + ": required")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                validate(item, properties[name], where + "." + name, out)
            elif extra is False:
                out.append(where + "." + name + ": not allowed (additionalProperties false)")
            elif isinstance(extra, dict):
                validate(item, extra, where + "." + name, out)
    elif kind == "string":
        if not isinstance(value, str):
            out.append(where + ": expected string"); return
        if "enum" in schema and value not in schema["enum"]:
            out.append(where + ": not one of " + ",".join(schema["enum"]))
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1 << 30):
            out.append(where + ": length out of range")
        if schema.get("format") == "byte":
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                out.append(where + ": not base64")
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int) or not (-(1 << 63) <= value < (1 << 63)):
            out.append(where + ": expected int64")

def card_rules(body, out):
    # Domain rules beyond the schema: a PAN of 12-19 digits, MM and YYYY expiry, a 20-byte cryptogram.
    card = body.get("paymentMethod") or {}
    number = card.get("number", "")
    if not (number.isdigit() and 12 <= len(number) <= 19):
        out.append("paymentMethod.number: expected 12-19 digits")
    if not (len(card.get("expiryMonth", "")) == 2 and card["expiryMonth"].isdigit() and 1 <= int(card["expiryMonth"]) <= 12):
        out.append("paymentMethod.expiryMonth: expected MM")
    if not (len(card.get("expiryYear", "")) == 4 and card["expiryYear"].isdigit()):
        out.append("paymentMethod.expiryYear: expected YYYY")

# --- behaviour -----------------------------------------------------------------------------------------------
LOCK = threading.Lock()
CALLS = []
STORED = {}       # Idempotency-Key -> (status, body): Adyen answers a repeated key with the first answer
SEEN = {}         # Idempotency-Key -> calls
IN_FLIGHT = set() # keys whose first request is being processed
PAYMENTS = {}     # pspReference -> amount
COUNTER = [0]

def psp():
    with LOCK:
        COUNTER[0] += 1
        return "%016d" % (8815000000000000 + COUNTER[0])

def service_error(status, code, message, kind):
    return status, {"status": status, "errorCode": code, "message": message, "errorType": kind, "pspReference": psp()}

def payment_answer(body, calls):
    value = body["amount"]["value"]
    ending = value % 100
    base = {"merchantReference": body.get("reference"), "amount": body["amount"]}
    if ending == 70 and calls == 1:
        return 500, {"status": 500, "errorCode": "901", "message": "Internal error", "errorType": "internal"}, False
    if ending == 71:
        return 503, {"status": 503, "errorCode": "905", "message": "Service unavailable", "errorType": "internal"}, False
    if ending == 72 and calls == 1:
        time.sleep(1.5)
    if ending == 73:
        return 200, "<html>gateway</html>", False
    reference = psp()
    answers = {51: ("Refused", "Not enough balance", "12"), 54: ("Refused", "Expired Card", "6"),
               57: ("Refused", "Declined Non Generic", "27"), 60: ("Error", "Acquirer Error", "4"),
               61: ("Cancelled", None, None), 62: ("Pending", None, None), 63: ("Received", None, None),
               74: ("RedirectShopper", None, None)}
    result, reason, code = answers.get(ending, ("Authorised", None, None))
    answer = dict(base, resultCode=result, pspReference=reference)
    if reason:
        answer.update(refusalReason=reason, refusalReasonCode=code)
    if result == "Authorised":
        answer["additionalData"] = {"authCode": "123456", "paymentMethod": "visa"}
        with LOCK:
            PAYMENTS[reference] = value
    return 200, answer, True

def refund_answer(payment_psp, body):
    if payment_psp not in PAYMENTS:
        return service_error(422, "167", "Original pspReference required for this operation", "validation") + (True,)
    if body["amount"]["value"] % 100 == 13 or body["amount"]["value"] > PAYMENTS[payment_psp]:
        return service_error(422, "137", "Invalid amount specified", "validation") + (True,)
    return 201, {"merchantAccount": body["merchantAccount"], "paymentPspReference": payment_psp, "pspReference": psp(),
                 "reference": body.get("reference"), "status": "received", "amount": body["amount"]}, True

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, answer):
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_calls":
            with LOCK:
                self.reply(200, {"calls": CALLS})
        else:
            self.reply(404, {})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = self.path.split("/")
        key = self.headers.get("Idempotency-Key")
        violations = []
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
            violations.append("body: not JSON")
        if self.path in ("/authorizations", "/refunds"):
            # Tender's own protocol (docs/processor-protocol.md), for the mutual-TLS tests.
            self.record(key, body, violations, 200)
            self.reply(200, {"status": "approved", "processorReference": "tp_" + psp(), "authorizationCode": "TLS001"})
            return
        if self.headers.get("Content-Type") != "application/json":
            violations.append("header Content-Type: expected application/json")
        if not key or len(key) > 64:
            violations.append("header Idempotency-Key: required, at most 64 characters")
        if self.headers.get("X-API-Key") != API_KEY:
            self.record(key, body, violations + ["header X-API-Key: wrong or missing"], 401)
            self.reply(*service_error(401, "000", "HTTP Status Response - Unauthorized", "security"))
            return
        if self.path == "/v71/payments":
            schema, kind = PAYMENT_REQUEST, "payment"
        elif len(parts) == 5 and parts[1] == "v71" and parts[2] == "payments" and parts[4] == "refunds":
            schema, kind = PAYMENT_REFUND_REQUEST, "refund"
        else:
            self.record(key, body, violations + ["path: unknown"], 404)
            self.reply(404, {})
            return
        if body is not None:
            validate(body, schema, "body", violations)
            if kind == "payment" and not violations:
                card_rules(body, violations)
        if violations:
            self.record(key, body, violations, 422)
            self.reply(*service_error(422, "702", "; ".join(violations), "validation"))
            return
        with LOCK:
            SEEN[key] = SEEN.get(key, 0) + 1
            calls = SEEN[key]
            stored = STORED.get(key)
            busy = stored is None and key in IN_FLIGHT
            if not stored and not busy:
                IN_FLIGHT.add(key)
        if stored:
            self.record(key, body, [], stored[0])
            self.reply(*stored)
            return
        if busy:
            # Adyen: a second request with a key whose first is still being processed.
            self.record(key, body, [], 422)
            self.reply(*service_error(422, "704", "request already processed or in progress", "validation"))
            return
        try:
            status, answer, keep = payment_answer(body, calls) if kind == "payment" else refund_answer(parts[3], body)
            with LOCK:
                if keep:
                    STORED[key] = (status, answer)
        finally:
            with LOCK:
                IN_FLIGHT.discard(key)
        self.record(key, body, [], status)
        self.reply(status, answer)

    def record(self, key, body, violations, status):
        with LOCK:
            CALLS.append({"path": self.path, "idempotencyKey": key, "apiKey": self.headers.get("X-API-Key"),
                          "contentType": self.headers.get("Content-Type"), "authorization": self.headers.get("Authorization"),
                          "body": body, "violations": violations, "status": status,
                          "clientCertificate": bool(getattr(self.connection, "getpeercert", lambda: None)())})

class Server(ThreadingHTTPServer):
    daemon_threads = True
    tls_context = None

    def finish_request(self, request, client_address):
        request.settimeout(15)
        connection = request
        if self.tls_context is not None:
            connection = self.tls_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            try:
                connection.do_handshake()
            except (ssl.SSLError, OSError):
                # The alert goes out and the socket stays open briefly, so the client reads the alert (TLS 1.3
                # refuses a missing client certificate after the client finished its side of the handshake).
                time.sleep(0.5)
                connection.close()
                return
        try:
            self.RequestHandlerClass(connection, client_address, self)
        except (ssl.SSLError, OSError):
            pass
        finally:
            try:
                connection.close()
            except OSError:
                pass

def serve(tls_context):
    server = Server(("127.0.0.1", 0), Handler)
    server.tls_context = tls_context
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]

context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(path("server.pem"), path("server.key"))
context.verify_mode = ssl.CERT_REQUIRED
context.load_verify_locations(path("ca.pem"))

ports = {"http": serve(None), "mtls": serve(context)}
with open(path("ready.json.tmp"), "w") as f:
    json.dump(ports, f)
os.rename(path("ready.json.tmp"), path("ready.json"))

def exit_when_parent_goes():
    sys.stdin.read()
    os._exit(0)
threading.Thread(target=exit_when_parent_goes, daemon=True).start()
time.sleep(LIFETIME_SECONDS)
os._exit(0)
"""#
