#!/usr/bin/env python3
"""An HTTPS front for moto_server, for tests/integration/remote_multipart.sh.

s3_proxy.py PORTFILE UPSTREAM_PORT CERT KEY LOG [--hold SECONDS]

Forwards every request (method, path and query, headers, body) to
http://127.0.0.1:UPSTREAM_PORT and its answer back, on a free 127.0.0.1
port over TLS (written to PORTFILE). Logs "METHOD PATH?QUERY -> STATUS"
to LOG, and "inflight N" as each UploadPart starts, N the number of them
under way then (itself included). --hold: each UploadPart waits that long
before it is forwarded (so parts sent at once overlap).

Faults, read from the file PORTFILE.fail at each request when it exists:
"403 N" answers UploadPart number N with 403 (not retried), "503 N K"
answers it 503 K times (retried), "complete-error" answers
CompleteMultipartUpload with 200 and an <Error> body (as S3 may),
"403-put NAME [HOLD]" answers a plain PUT of an object named NAME (its
last path component) with 403 at once and holds every other plain PUT of
an .sld object HOLD seconds before it is forwarded (so the refusal comes
while other shards are under way), "hold-put HOLD" only holds them.
Every request is logged as "begin METHOD PATH?QUERY" when it arrives, and
"putinflight N" as each plain PUT starts (N: those under way then).
"""
import http.client
import http.server
import os
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

portfile, upstream, cert, key, logf = sys.argv[1:6]
hold = float(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[6] == "--hold" else 0.0
lock = threading.Lock()
state = {"inflight": 0, "putinflight": 0, "counts": {}}


def log(line):
    with lock, open(logf, "a") as f:
        f.write(line + "\n")


def fault():
    try:
        with open(portfile + ".fail") as f:
            return f.read().split()
    except OSError:
        return []


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body=b"", ctype="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        log("%s %s -> %d" % (self.command, self.path, status))

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query, keep_blank_values=True)
        is_part = self.command == "PUT" and "partNumber" in q and "uploadId" in q
        log("begin %s %s" % (self.command, self.path))
        f = fault()
        if self.command == "PUT" and not is_part:
            obj = urllib.parse.urlparse(self.path).path.rsplit("/", 1)[-1]
            with lock:
                state["putinflight"] += 1
                with open(logf, "a") as lf:
                    lf.write("putinflight %d\n" % state["putinflight"])
            try:
                if len(f) >= 2 and f[0] == "403-put" and f[1] == obj:
                    return self.answer(403, b"<Error><Code>AccessDenied</Code></Error>")
                held = (f[2] if len(f) >= 3 and f[0] == "403-put" else
                        f[1] if len(f) >= 2 and f[0] == "hold-put" else None)
                if held is not None and obj.endswith(".sld"):
                    time.sleep(float(held))
                return self.forward(body)
            finally:
                with lock:
                    state["putinflight"] -= 1
        if is_part:
            pn = q["partNumber"][0]
            with lock:
                state["inflight"] += 1
                with open(logf, "a") as lf:
                    lf.write("inflight %d\n" % state["inflight"])
            try:
                time.sleep(hold)
                if len(f) >= 2 and f[0] == "403" and f[1] == pn:
                    return self.answer(403, b"<Error><Code>AccessDenied</Code></Error>")
                if len(f) >= 3 and f[0] == "503" and f[1] == pn:
                    with lock:
                        c = state["counts"].get(pn, 0)
                        state["counts"][pn] = c + 1
                    if c < int(f[2]):
                        return self.answer(503, b"<Error><Code>SlowDown</Code></Error>")
                return self.forward(body)
            finally:
                with lock:
                    state["inflight"] -= 1
        if (f and f[0] == "complete-error" and self.command == "POST" and "uploadId" in q):
            return self.answer(200, b"<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code>"
                               b"<Message>We encountered an internal error.</Message></Error>")
        return self.forward(body)

    def forward(self, body):
        c = http.client.HTTPConnection("127.0.0.1", int(upstream), timeout=60)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        c.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST") else None,
                  headers=hdrs)
        r = c.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        c.close()
        log("%s %s -> %d" % (self.command, self.path, r.status))

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


s = S(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
