#!/usr/bin/env python3
"""A misbehaving object store for tests/integration/remote_sources.sh.

remote_fake.py ROOT PORTFILE LOG [--tls CERT KEY] [--secret KEYID:SECRET]
               [--token T] [--swap DIR]

Serves the files under ROOT at /MODE/REL (HTTP/1.1, Range) on a free
127.0.0.1 port (written to PORTFILE), with TLS when --tls is given. The
first path segment chooses how it behaves; only shard-*.sld objects
misbehave, the manifest is served as is unless the mode says otherwise:

  good       ranges served correctly
  lie        Content-Range names another range than the one asked
  short      a body shorter than the range (Content-Length agrees with it)
  long       a body longer than the range: the range and 64 KiB more
             (Content-Range names the range, Content-Length the longer body)
  stall      headers and a few bytes of the body, then nothing
  redirect   302 to another host, for every object
  swap       shards come from the folder given with --swap
  flaky429   the first 2 requests of each range answered 429, then good
  flaky503   the same with 503
  deny403    403 for every object
  miss404    404 for shards
  norange    200 with the whole object whatever the Range
  close      closes the connection half-way through every shard body
  closeonce  closes half-way through the first try of each range only
  sigv4      checks an AWS SigV4 signature (GET, header form) with the key
             given by --secret (403 SignatureDoesNotMatch otherwise)
  sigv4t     the same, and x-amz-security-token must be --token
  gcsauth    requires "Authorization: Bearer T" (--token)
  stalllate  as stall, for every shard but shard-00000
  tamperstall  shard-00000 with its last byte flipped (a chunk's tag), every
             other shard as stall
  drip       headers, then the shard body one byte every 0.7 s (about 1.4 B/s:
             never a second without a byte for long, never anywhere)

Metadata services (plain HTTP instance): PUT /latest/api/token and
/latest/meta-data/iam/security-credentials/[ROLE] (IMDSv2: the token is
required), /computeMetadata/v1/instance/service-accounts/default/token
(Metadata-Flavor: Google required).

Every request is logged to LOG as "METHOD PATH RANGE -> STATUS".
"""
import datetime
import hashlib
import hmac
import http.server
import json
import os
import re
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

args = sys.argv[1:]
ROOT, PORTFILE, LOG = args[0], args[1], args[2]
opt = {}
i = 3
while i < len(args):
    if args[i] == "--tls":
        opt["tls"] = (args[i + 1], args[i + 2])
        i += 3
    else:
        opt[args[i][2:]] = args[i + 1]
        i += 2

lock = threading.Lock()
counts = {}
IMDS_TOKEN = "imds-" + os.urandom(8).hex()
SESSION_TOKEN = opt.get("token", "")


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


def sigv4_ok(h, method, path, want_token):
    """AWS SigV4 check of a GET: canonical request, string to sign, the
    HMAC chain from the secret. Returns None or the reason."""
    kid, secret = opt["secret"].split(":", 1)
    auth = h.get("Authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
                 r"\s*SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$", auth)
    if not m:
        return "no SigV4 Authorization header"
    akid, date, region, service, signed, sig = m.groups()
    if akid != kid:
        return "InvalidAccessKeyId"
    amzdate = h.get("x-amz-date", "")
    if not amzdate.startswith(date):
        return "x-amz-date does not match the credential scope"
    names = signed.split(";")
    if "host" not in names:
        return "host not signed"
    canon_headers = ""
    for n in names:
        v = h.get_all(n)
        if v is None:
            return "signed header %s missing" % n
        canon_headers += "%s:%s\n" % (n, ",".join(" ".join(x.split()) for x in v))
    u = urllib.parse.urlsplit(path)
    q = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
    canon_q = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                                  urllib.parse.quote(v, safe="-_.~")) for k, v in sorted(q))
    payload = h.get("x-amz-content-sha256", hashlib.sha256(b"").hexdigest())
    creq = "\n".join([method, urllib.parse.quote(u.path, safe="/-_.~"), canon_q, canon_headers,
                      signed, payload])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        return "SignatureDoesNotMatch"
    if want_token and h.get("x-amz-security-token") != SESSION_TOKEN:
        return "InvalidToken"
    return None


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        log("%s %s %s -> %d" % (self.command, self.path, self.headers.get("Range", "-"), code))

    def do_PUT(self):
        if self.path == "/latest/api/token":
            if "X-aws-ec2-metadata-token-ttl-seconds" not in self.headers:
                return self.reply(400)
            return self.reply(200, IMDS_TOKEN.encode())
        self.reply(405)

    def metadata(self):
        p = self.path
        if p.startswith("/latest/"):
            if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
                return self.reply(401)
            if p == "/latest/meta-data/iam/security-credentials/":
                return self.reply(200, b"test-role")
            if p == "/latest/meta-data/iam/security-credentials/test-role":
                kid, secret = opt["secret"].split(":", 1)
                return self.reply(200, json.dumps({
                    "Code": "Success", "AccessKeyId": kid, "SecretAccessKey": secret,
                    "Token": SESSION_TOKEN, "Expiration": "2099-01-01T00:00:00Z"}).encode())
            return self.reply(404)
        if p == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403)
            return self.reply(200, json.dumps({"access_token": opt["token"],
                                               "expires_in": 3599,
                                               "token_type": "Bearer"}).encode())
        return None

    def do_GET(self):
        if self.path.startswith("/latest/") or self.path.startswith("/computeMetadata/"):
            return self.metadata()
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        if len(parts) != 2:
            return self.reply(404)
        mode, rel = parts
        name = os.path.basename(rel)
        shard = name.startswith("shard-")
        if mode == "stalllate":
            mode = "stall" if shard and name != "shard-00000.sld" else "good"
        tamper = mode == "tamperstall" and name == "shard-00000.sld"
        if mode == "tamperstall":
            mode = "stall" if shard and not tamper else "good"
        rng = self.headers.get("Range")
        key = (mode, rel, rng)
        with lock:
            counts[key] = counts.get(key, 0) + 1
            n = counts[key]
        if mode == "redirect":
            return self.reply(302, headers=[("Location", "https://localhost:1/good/" + rel)])
        if mode == "deny403":
            return self.reply(403, b"<Error><Code>AccessDenied</Code></Error>")
        if mode == "miss404" and shard:
            return self.reply(404)
        if mode in ("flaky429", "flaky503") and shard and n <= 2:
            return self.reply(int(mode[5:]), headers=[("Retry-After", "0")])
        if mode in ("sigv4", "sigv4t"):
            why = sigv4_ok(self.headers, "GET", self.path, mode == "sigv4t")
            if why is not None:
                body = ("<Error><Code>%s</Code></Error>" % why).encode()
                return self.reply(403, body)
        if mode == "gcsauth" and self.headers.get("Authorization") != "Bearer " + opt["token"]:
            return self.reply(401, b"<Error><Code>AuthenticationRequired</Code></Error>")
        path = os.path.join(ROOT, rel)
        if mode == "swap" and shard:
            path = os.path.join(opt["swap"], name)
        if ".." in rel.split("/") or not os.path.isfile(path):
            return self.reply(404)
        data = open(path, "rb").read()
        if tamper:
            data = data[:-1] + bytes([data[-1] ^ 1])
        total = len(data)
        m = re.match(r"bytes=(\d+)-(\d+)$", rng or "")
        if not m or mode == "norange" and shard:
            return self.reply(200, data)
        a, b = int(m.group(1)), min(int(m.group(2)), total - 1)
        body = data[a:b + 1]
        cr = "bytes %d-%d/%d" % (a, b, total)
        if shard and mode == "lie":
            cr = "bytes %d-%d/%d" % (a + 1, b + 1, total)
        if shard and mode == "short":
            body = body[:len(body) // 2]
        if shard and mode == "long":
            body = body + os.urandom(65536)
        self.send_response(206)
        self.send_header("Content-Range", cr)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        log("%s %s %s -> 206" % (self.command, self.path, rng))
        cut = shard and (mode == "close" or mode == "closeonce" and n == 1)
        if shard and mode == "drip":
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.7)
            except OSError:
                pass  # the client gave up: what the test wants
            return
        if shard and mode == "stall":
            self.wfile.write(body[:100])
            self.wfile.flush()
            time.sleep(600)
            return
        if cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S(("127.0.0.1", 0), H)
if "tls" in opt:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*opt["tls"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
