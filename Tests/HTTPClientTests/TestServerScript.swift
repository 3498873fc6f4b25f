// The local test servers, written to a temporary directory and run with python3 by TestServers.
// Kept as Swift source so the test target needs no resources.
let testServerScript = #"""
# Local test servers for HTTPClientTests: plain HTTP, HTTPS with required client certificates,
# HTTPS with an untrusted certificate, a TLS 1.1-only server, and a silent TCP listener.
# Certificates are generated here with the openssl CLI. Exits when stdin closes or after a lifetime.
import json, os, socket, ssl, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
LIFETIME_SECONDS = float(sys.argv[2])

def openssl(*args):
    subprocess.run(["openssl", *args], cwd=DIR, check=True, capture_output=True, timeout=30)

def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=Tender " + name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")

def make_leaf(name, ca, common_name, extensions):
    with open(os.path.join(DIR, name + ".ext"), "w") as f:
        f.write(extensions)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + common_name)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2",
            "-extfile", name + ".ext", "-out", name + ".pem")

SERVER_EXT = ("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
              "subjectAltName=DNS:apple-pay-gateway.test,DNS:localhost,IP:127.0.0.1\n")
make_ca("ca")
make_ca("rogue-ca")
make_leaf("server", "ca", "apple-pay-gateway.test", SERVER_EXT)
make_leaf("rogue-server", "rogue-ca", "apple-pay-gateway.test", SERVER_EXT)
make_leaf("client", "ca", "merchant.tender.test", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")

def path(name):
    return os.path.join(DIR, name)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=(), content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def client_common_name(self):
        getpeercert = getattr(self.connection, "getpeercert", None)
        certificate = getpeercert() if getpeercert else None
        for entry in (certificate or {}).get("subject", ()):
            for key, value in entry:
                if key == "commonName":
                    return value
        return None

    def route(self):
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        parts = self.path.split("/")
        if self.path == "/echo" or self.path.startswith("/paymentservices/"):
            answer = {"method": self.command, "path": self.path, "contentType": self.headers.get("Content-Type"),
                      "idempotencyKey": self.headers.get("Idempotency-Key"),
                      "expect": self.headers.get("Expect"),
                      "clientCommonName": self.client_common_name(),
                      "received": json.loads(data) if data else None}
            self.reply(200, json.dumps(answer).encode())
        elif self.path == "/redirect":
            self.reply(302, b"", [("Location", "/echo")])
        elif parts[1] == "bytes":
            self.reply(200, b"x" * int(parts[2]), content_type="application/octet-stream")
        elif parts[1] == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            remaining = int(parts[2])
            while remaining > 0:
                size = min(remaining, 4096)
                self.wfile.write(b"%x\r\n" % size + b"y" * size + b"\r\n")
                remaining -= size
            self.wfile.write(b"0\r\n\r\n")
        elif parts[1] == "headers":
            self.reply(200, b"{}", [("X-Filler-%d" % i, "f" * 100) for i in range(int(parts[2]))])
        elif parts[1] == "sleep":
            time.sleep(int(parts[2]) / 1000)
            self.reply(200, b"{}")
        elif parts[1] == "status":
            self.reply(int(parts[2]), b"{}", [("Retry-After", "1")])
        else:
            self.reply(404, b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = route

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
                # Like a graceful TLS server: the alert goes out and the socket stays open briefly, so the
                # client reads the alert instead of a reset (TLS 1.3 rejects client certificates after the
                # client has finished its side of the handshake).
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

def server_context(certificate, require_client=False):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(path(certificate + ".pem"), path(certificate + ".key"))
    if require_client:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(path("ca.pem"))
    return context

ports = {"http": serve(None),
         "mtls": serve(server_context("server", require_client=True)),
         "tls": serve(server_context("server")),
         "rogue": serve(server_context("rogue-server"))}

# TLS 1.1 only; needs security level 0 under OpenSSL 3. A local probe proves it really speaks 1.1.
ports["tls11"] = None
try:
    legacy = server_context("server")
    legacy.set_ciphers("DEFAULT:@SECLEVEL=0")
    legacy.minimum_version = ssl.TLSVersion.TLSv1
    legacy.maximum_version = ssl.TLSVersion.TLSv1_1
    legacy_port = serve(legacy)
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    probe.set_ciphers("DEFAULT:@SECLEVEL=0")
    probe.minimum_version = ssl.TLSVersion.TLSv1
    probe.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", legacy_port), timeout=5) as raw:
        with probe.wrap_socket(raw) as tls:
            if tls.version() == "TLSv1.1":
                ports["tls11"] = legacy_port
except (ssl.SSLError, OSError, ValueError):
    pass

# Accepts connections and never sends a byte.
silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(64)
held = []
def hold():
    while True:
        connection, _ = silent.accept()
        held.append(connection)
threading.Thread(target=hold, daemon=True).start()
ports["silent"] = silent.getsockname()[1]

# A port that was free a moment ago: connecting to it is refused.
closed = socket.socket()
closed.bind(("127.0.0.1", 0))
ports["closed"] = closed.getsockname()[1]
closed.close()

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
