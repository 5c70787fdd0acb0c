#!/usr/bin/env bash
# What seclaunchd records and limits around its admin and attested
# endpoints: a refused token on /metrics, GET /v1/keys and GET /v1/aks is
# audited under its own event (kms.metrics, kms.key.list, kms.ak.list);
# admin calls on an unknown key or AK (rotate, disable, wrap, revoke) are
# audited as denials; junk lease renewals and output-key requests are
# limited per source (429 with Retry-After) and their cheap refusals
# aggregated (one record in full, then one summary of that event).
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
cat >req.py <<'EOP'
# req.py CA URL TOKEN < lines "METHOD PATH [BODY]" -> "STATUS RETRY_AFTER BODY" a line;
#   junk EVENT N -> N renewals (/v1/renew) or output-key requests (/v1/output)
#   with fresh unknown nonces; prints the statuses (STATUS:CODE)
import base64, http.client, json, os, ssl, sys, urllib.parse
ca, url, token = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
def call(method, path, body=""):
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
    h = {"Content-Type": "application/json"}
    if token != "-":
        h["Authorization"] = "Bearer " + token
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    out = r.status, r.getheader("Retry-After") or "-", r.read().decode(errors="replace")
    c.close()
    return out
def b64(n): return base64.b64encode(os.urandom(n)).decode()
W = base64.b64encode(b"\x01" + bytes(60)).decode()
for line in sys.stdin:
    a = line.split(None, 2)
    if not a:
        continue
    if a[0] == "junk":
        out = []
        for _ in range(int(a[2])):
            att = {"nonce": b64(32), "eph_pub": b64(32), "policy_digest": b64(32),
                   "evidence": [{"kind": "tpm2"}], "job": {"id": "0011223344556677"}}
            if a[1] == "renew":
                att["keys"] = [{"key_id": "k", "dataset_id": "d", "wrapped_dek": W}]
                s, ra, b = call("POST", "/v1/renew", json.dumps(att))
            else:
                att["outputs"] = [{"output_id": "model:0011223344556677",
                                   "destination": "file:///tmp/out/"}]
                s, ra, b = call("POST", "/v1/output", json.dumps(att))
            code = "-"
            if b.startswith("{"):
                code = (json.loads(b).get("reasons") or [{}])[0].get("code", "-")
            out.append("%d:%s:%s" % (s, code, ra))
        print(" ".join(out))
    else:
        s, ra, b = call(a[0], a[1], a[2].strip() if len(a) > 2 else "")
        print(s, ra, b.replace("\n", " "))
    sys.stdout.flush()
EOP
ask() { python3 req.py "$KMS_CA" "$KMS_URL" "${1:-$(cat "$KMS_TOKEN")}"; }
log() { cat "$KMS_STATE/audit.log"; }
denials() { # EVENT: deny records of that event
	log | grep "\"event\":\"$1\"" | grep -c '"decision":"deny"'
}

printf '{"refusal_rate_per_min": 5, "audit_aggregate_s": 600}\n' >cfg.json
start_kms "$T/k1" --config "$T/cfg.json" || exit 1
W0=wrong-token-0123456789abcdef
echo "GET /metrics" | ask $W0 >m.out
assert "/metrics with a wrong token: 401" grep -q '^401 ' m.out
assert "... and audited as a kms.metrics denial" test "$(denials kms.metrics)" -eq 1
echo "GET /v1/keys" | ask $W0 >kl.out
assert "GET /v1/keys with a wrong token: audited as kms.key.list (not kms.key.show)" \
	test "$(denials kms.key.list)" -eq 1 -a "$(denials kms.key.show)" -eq 0
echo "GET /v1/aks" | ask $W0 >al.out
assert "GET /v1/aks with a wrong token: audited as kms.ak.list (not kms.ak.revoke)" \
	test "$(denials kms.ak.list)" -eq 1 -a "$(denials kms.ak.revoke)" -eq 0

D=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
ask >nf.out <<EOF
POST /v1/keys/nokey/rotate {}
POST /v1/keys/nokey/disable {}
POST /v1/keys/nokey/wrap {"dataset_id":"d","dek":"$D"}
POST /v1/aks/revoke {"name":"000b0102"}
EOF
assert "rotate, disable, wrap of an unknown key and revoke of an unknown AK: 404" \
	test "$(grep -c '^404 ' nf.out)" -eq 4
assert "the unknown-key rotate is audited" test "$(denials kms.key.rotate)" -eq 1
assert "the unknown-key disable is audited" test "$(denials kms.key.disable)" -eq 1
assert "the unknown-key wrap is audited" test "$(denials kms.key.wrap)" -eq 1
assert "the unknown-AK revoke is audited, naming the AK" \
	sh -c "grep '\"event\":\"kms.ak.revoke\"' '$KMS_STATE/audit.log' | grep '\"decision\":\"deny\"' | grep -q 000b0102"

echo "junk renew 8" | ask >renew.out
cat renew.out
assert "junk renewals within the limit: 403 nonce_unknown" \
	test "$(tr ' ' '\n' <renew.out | grep -c '^403:nonce_unknown:')" -eq 5
assert "past the limit: 429 with Retry-After" \
	test "$(tr ' ' '\n' <renew.out | grep -Ec '^429:-:[0-9]+$')" -eq 3
assert "one kms.renew record of nonce_unknown in full (the rest counted)" \
	test "$(log | grep '"event":"kms.renew"' | grep -c '"code":"nonce_unknown"')" -eq 1
assert "one kms.renew record of rate_limited in full" \
	test "$(log | grep '"event":"kms.renew"' | grep -c '"code":"rate_limited"')" -eq 1
stop_pid "$KMS_PID"
assert "at stop: a kms.renew summary counts the other four refusals" \
	grep -q '"event":"kms.renew".*"aggregated":{[^}]*"reason":"nonce_unknown","count":4,' "$KMS_STATE/audit.log"
check "the log with its summaries verifies" 0 \
	"$SL" audit verify --pubkey "$KMS_STATE/audit.pub" --require-final-checkpoint "$KMS_STATE/audit.log"

start_kms "$T/k2" --config "$T/cfg.json" || exit 1
echo "junk output 7" | ask >output.out
cat output.out
assert "junk output-key requests within the limit: 403 nonce_unknown" \
	test "$(tr ' ' '\n' <output.out | grep -c '^403:nonce_unknown:')" -eq 5
assert "past the limit: 429" test "$(tr ' ' '\n' <output.out | grep -Ec '^429:-:[0-9]+$')" -eq 2
assert "one kms.output record of nonce_unknown in full" \
	test "$(log | grep '"event":"kms.output"' | grep -c '"code":"nonce_unknown"')" -eq 1
stop_pid "$KMS_PID"
assert "at stop: a kms.output summary counts the other four" \
	grep -q '"event":"kms.output".*"aggregated":{[^}]*"reason":"nonce_unknown","count":4,' "$KMS_STATE/audit.log"
finish
