# req.py CA URL [TOKEN] < commands; one command a line, one answer a line:
#   post PATH BODY            -> STATUS RETRY_AFTER BODY
#   release-unknown N FILE    -> N releases with fresh unknown nonces and the
#                                evidence array in FILE; prints the statuses
#   release-fresh N FILE      -> N releases, each with a nonce from
#                                /v1/challenge and its policy digest
#   metric NAME               -> the value
import base64, http.client, json, os, ssl, sys, urllib.parse
ca, url = sys.argv[1], sys.argv[2]
token = sys.argv[3] if len(sys.argv) > 3 else None
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
conn = [None]
def call(method, path, body=None, auth=True):
    for attempt in (0, 1):
        if conn[0] is None:
            conn[0] = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
        h = {"Content-Type": "application/json"}
        if token and auth:
            h["Authorization"] = "Bearer " + token
        try:
            conn[0].request(method, path, body=body, headers=h)
            r = conn[0].getresponse()
            return r.status, r.getheader("Retry-After") or "-", r.read().decode(errors="replace")
        except (http.client.HTTPException, OSError):
            conn[0] = None
            if attempt:
                raise
W = base64.b64encode(b"\x01" + bytes(60)).decode()
def b64(n): return base64.b64encode(os.urandom(n)).decode()
def release(nonce, digest, ev):
    return json.dumps({"nonce": nonce, "eph_pub": b64(32), "policy_digest": digest,
                       "evidence": ev, "keys": [{"key_id": "k", "dataset_id": "d", "wrapped_dek": W}]})
for line in sys.stdin:
    a = line.split(None, 2)
    if not a:
        continue
    if a[0] == "post":
        s, ra, b = call("POST", a[1], a[2].strip() if len(a) > 2 else "", auth=True)
        print(s, ra, b.replace("\n", " "))
    elif a[0] in ("release-unknown", "release-fresh"):
        n, ev = int(a[1]), json.load(open(a[2].strip()))
        out = []
        for _ in range(n):
            if a[0] == "release-fresh":
                s, _, b = call("POST", "/v1/challenge", "{}")
                ch = json.loads(b)
                nonce, digest = ch["nonce"], ch["policy_digest"]
            else:
                nonce, digest = b64(32), b64(32)
            s, _, b = call("POST", "/v1/release", release(nonce, digest, ev))
            code = json.loads(b).get("reasons", [{}])[0].get("code", "-") if b.startswith("{") else "-"
            out.append("%d:%s" % (s, code))
        print(" ".join(out))
    elif a[0] == "metric":
        s, _, b = call("GET", "/metrics")
        v = [l.split()[1] for l in b.splitlines() if l.split() and l.split()[0] == a[1].strip()]
        print(v[0] if v else "0")
    sys.stdout.flush()
