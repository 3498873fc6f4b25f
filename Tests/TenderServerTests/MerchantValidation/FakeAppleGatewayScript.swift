// A local stand-in for Apple's merchant-validation gateway, run with python3 by FakeAppleGateway.
// Kept as Swift source so the test target needs no resources.
let fakeAppleGatewayScript = #"""
# HTTPS servers that require a client certificate, one port per behaviour, plus a plain-HTTP control port
# that reports every request seen (body bytes, client certificate subject) and every TCP accept.
# Certificates are made here with the openssl CLI. Exits when stdin closes or after a lifetime.
import base64, json, os, socket, ssl, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
LIFETIME_SECONDS = float(sys.argv[2])
HOST = "apple-pay-gateway.test"

def openssl(*args):
    subprocess.run(["openssl", *args], cwd=DIR, check=True, capture_output=True, timeout=30)

def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=Gateway " + name,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

def make_leaf(name, ca, subject, extensions):
    with open(os.path.join(DIR, name + ".ext"), "w") as f:
        f.write(extensions)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2",
            "-extfile", name + ".ext", "-out", name + ".pem")

make_ca("ca")
make_ca("rogue-ca")
make_leaf("server", "ca", "/CN=" + HOST,
          "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:" + HOST + "\n")
CLIENT_EXT = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"
make_leaf("identity", "ca", "/UID=merchant.com.tender.shop/CN=Merchant ID: merchant.com.tender.shop", CLIENT_EXT)
make_leaf("rogue-identity", "rogue-ca", "/CN=Merchant ID: rogue", CLIENT_EXT)

def path(name):
    return os.path.join(DIR, name)

# Apple's answer, deliberately not in any encoder's canonical form (spacing, order, escapes), so a test
# can tell a byte-for-byte pass-through from a re-encoding.
SESSION = (b'{"epochTimestamp":1700000000000, "expiresAt" : 1700003600000,\n'
           b' "merchantSessionIdentifier":"SSH1A2B\\u00e9C3","nonce":"5e1f0a2b","merchantIdentifier":"AB12CD",'
           b'"domainName":"shop.tender.test","displayName":"Tender Shop","signature":"MIAGCSqGSIb3DQEHAqCAMIAC",'
           b'"operationalAnalyticsIdentifier":"Tender Shop:AB12CD","retries":0, "pspId":"AB12CD"}')
REFUSAL = (b'{"statusCode":"417","statusMessage":"Payment Services Exception merchantId=AB12CD '
           b'not registered for domain=shop.tender.test"}')

lock = threading.Lock()
requests = []
accepts = {}
ports = {}

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def client_subject(self):
        certificate = self.connection.getpeercert()
        parts = []
        for entry in (certificate or {}).get("subject", ()):
            for key, value in entry:
                parts.append(key + "=" + value)
        return ",".join(parts)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        mode = self.server.mode
        with lock:
            requests.append({"mode": mode, "method": self.command, "path": self.path,
                             "host": self.headers.get("Host"), "contentType": self.headers.get("Content-Type"),
                             "clientSubject": self.client_subject(),
                             "bodyBase64": base64.b64encode(data).decode()})
        if mode == "ok":
            self.reply(200, SESSION)
        elif mode == "refuse417":
            self.reply(417, REFUSAL)
        elif mode == "error500":
            self.reply(500, b'{"statusCode":"500","statusMessage":"Internal Error"}')
        elif mode == "redirect":
            target = "https://%s:%d/paymentservices/paymentSession" % (HOST, ports["ok"])
            self.reply(302, b"", [("Location", target)])
        elif mode == "notobject":
            self.reply(200, b'["not", "an", "object"]')
        elif mode == "silent":
            time.sleep(30)
        else:
            self.reply(404, b"{}")

    do_GET = do_PUT = do_POST

class Gateway(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode, context):
        self.mode = mode
        self.context = context
        super().__init__(("127.0.0.1", 0), Handler)

    def finish_request(self, request, client_address):
        with lock:
            accepts[self.mode] = accepts.get(self.mode, 0) + 1
        request.settimeout(40)
        connection = self.context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            connection.do_handshake()
        except (ssl.SSLError, OSError):
            # Keep the socket open briefly so the client reads the alert rather than a reset.
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

def context():
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(path("server.pem"), path("server.key"))
    c.verify_mode = ssl.CERT_REQUIRED
    c.load_verify_locations(path("ca.pem"))
    return c

for mode in ["ok", "refuse417", "error500", "redirect", "notobject", "silent"]:
    server = Gateway(mode, context())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ports[mode] = server.server_address[1]

class Control(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with lock:
            body = json.dumps({"requests": requests, "accepts": accepts}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
control.daemon_threads = True
threading.Thread(target=control.serve_forever, daemon=True).start()
ports["control"] = control.server_address[1]

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
