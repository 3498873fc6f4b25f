#!/usr/bin/env python3
"""A local stand-in for APNs (tests only): HTTP/2 over TLS on 127.0.0.1, a client certificate required
and verified against --client-ca. Prints its port, then appends one JSON line per request to --log
with the path, method, apns-topic, body and the client certificate's common name. A device token
containing "gone" is answered 410 Unregistered, one containing "busy" 503, anything else 200; one
containing "slow" is answered after 0.3 s (a slow APNs)."""
import argparse
import json
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events


def serve_connection(sock, log, lock):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    subject = dict(item[0] for item in sock.getpeercert().get("subject", ()))
    streams = {}
    while True:
        data = sock.recv(65535)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                streams[event.stream_id] = {"headers": dict(event.headers), "body": b""}
            elif isinstance(event, h2.events.DataReceived):
                streams[event.stream_id]["body"] += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                stream = streams.pop(event.stream_id)
                headers = stream["headers"]
                path = headers.get(":path", "")
                status = 410 if "gone" in path else 503 if "busy" in path else 200
                if "slow" in path:
                    time.sleep(0.3)
                body = b'{"reason":"Unregistered"}' if status == 410 else b""
                with lock:
                    log.write(json.dumps({"path": path, "method": headers.get(":method"), "topic": headers.get("apns-topic"),
                                          "body": stream["body"].decode(), "client": subject.get("commonName"),
                                          "protocol": "h2", "status": status}) + "\n")
                    log.flush()
                conn.send_headers(event.stream_id, [(":status", str(status)), ("content-length", str(len(body)))],
                                  end_stream=not body)
                if body:
                    conn.send_data(event.stream_id, body, end_stream=True)
        sock.sendall(conn.data_to_send())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(args.client_ca)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)
    log = open(args.log, "a")
    lock = threading.Lock()

    def run(raw):
        try:
            with context.wrap_socket(raw, server_side=True) as tls:
                if tls.selected_alpn_protocol() != "h2":
                    return
                serve_connection(tls, log, lock)
        except (ssl.SSLError, OSError) as error:
            with lock:
                log.write(json.dumps({"handshake_failed": str(error)}) + "\n")
                log.flush()

    while True:
        raw, _ = listener.accept()
        threading.Thread(target=run, args=(raw,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
