#!/usr/bin/env bash
# seclaunchd under bad and heavy input: malformed JSON, wrong types, missing
# and unknown fields (400 naming the field), oversize bodies (413), unknown
# routes and methods, a flood of 10,000 challenges (bounded table: 429 when
# full, memory stays bounded), and 64 concurrent releases each receiving
# exactly its own key.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
build_probe || exit 1
start_swtpm tpm
echo '{"max_challenges": 4096, "max_body": 65536}' >limits.json
start_kms "$T/kms" --config "$T/limits.json" || exit 1

cat >raw.py <<'EOP'
# raw.py CA URL METHOD PATH [BODY|@FILE] [TOKEN] -> prints "STATUS BODY" on one line
import http.client, ssl, sys, urllib.parse
ca, url, method, path = sys.argv[1:5]
body = sys.argv[5] if len(sys.argv) > 5 else None
if body is not None and body.startswith("@"):
    body = open(body[1:], "rb").read()
elif body is not None:
    body = body.encode()
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca), timeout=20)
h = {"Content-Type": "application/json"}
if len(sys.argv) > 6:
    h["Authorization"] = "Bearer " + sys.argv[6]
try:
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    print(r.status, r.read().decode(errors="replace").replace("\n", " "))
except Exception as e:
    print("000", type(e).__name__, e)
EOP
raw() { python3 raw.py "$KMS_CA" "$KMS_URL" "$@"; }
# want NAME STATUS REGEX METHOD PATH [BODY] [TOKEN]
want() {
	local name=$1 st=$2 re=$3
	shift 3
	local got
	got=$(raw "$@")
	if [[ $got == "$st "* ]] && grep -Eq -- "$re" <<<"$got"; then
		assert "$name" true
	else
		echo "    got: ${got:0:300}"
		assert "$name" false
	fi
}

N=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
W=$(python3 -c 'import base64; print(base64.b64encode(b"\x01" + bytes(60)).decode())')
ok_key="{\"key_id\":\"k1\",\"dataset_id\":\"d\",\"wrapped_dek\":\"$W\"}"
want "malformed JSON: 400 with the position" 400 "invalid JSON at line 1" POST /v1/release '{"nonce": '
want "not an object: 400" 400 "must be a JSON object" POST /v1/release '[1,2]'
want "missing nonce: 400 naming it" 400 "nonce: missing" POST /v1/release '{}'
want "nonce of the wrong type: 400" 400 "nonce: must be a string" POST /v1/release '{"nonce": 5}'
want "nonce of the wrong length: 400" 400 "nonce: must be 32 bytes" POST /v1/release '{"nonce": "AAAA"}'
want "nonce not base64: 400" 400 "nonce" POST /v1/release '{"nonce": "!!!!"}'
want "evidence missing: 400" 400 "evidence: missing" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\"}"
want "evidence not an array: 400" 400 "evidence: must be an array" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\",\"evidence\":{}}"
want "keys empty: 400" 400 "keys: must hold 1..64" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\",\"evidence\":[{}],\"keys\":[]}"
want "key id with a slash: 400" 400 "key_id: must be 1..128" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\",\"evidence\":[{}],\"keys\":[{\"key_id\":\"a/b\",\"dataset_id\":\"d\",\"wrapped_dek\":\"$W\"}]}"
want "wrapped DEK of the wrong size: 400" 400 "wrapped_dek" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\",\"evidence\":[{}],\"keys\":[{\"key_id\":\"k\",\"dataset_id\":\"d\",\"wrapped_dek\":\"AAAA\"}]}"
want "unknown field: 400 naming it" 400 "unknown field .*surprise" POST /v1/release "{\"nonce\":\"$N\",\"surprise\":1}"
want "duplicate field: 400" 400 "duplicate" POST /v1/release '{"nonce":"a","nonce":"b"}'
want "well-formed but unissued: 403 (parsing passed)" 403 "nonce_unknown" POST /v1/release "{\"nonce\":\"$N\",\"eph_pub\":\"$N\",\"policy_digest\":\"$N\",\"evidence\":[{\"kind\":\"tpm2\"}],\"keys\":[$ok_key]}"
want "challenge with a body that is not {}: 400" 400 "unknown field" POST /v1/challenge '{"x":1}'
want "enroll with garbage keys: 403 naming the AK" 403 "AK public" POST /v1/enroll '{"ek_pub":"AAAA","ak_pub":"AAAA"}'
want "activate with an unknown session: 403" 403 "session: unknown" POST /v1/enroll/activate "{\"session\":\"AAAAAAAAAAAAAAAAAAAAAA==\",\"secret\":\"AAAA\"}"
TOKEN=$(cat "$KMS_TOKEN")
want "key create with a bad id: 400" 400 "id: must be" POST /v1/keys '{"id":"../x"}' "$TOKEN"
want "wrap with a short DEK: 400" 400 "dek: must be 32 bytes" POST /v1/keys/k1/wrap '{"dataset_id":"d","dek":"AAAA"}' "$TOKEN"
want "wrap for an unknown key: 404" 404 "unknown key id 'nokey'" POST /v1/keys/nokey/wrap "{\"dataset_id\":\"d\",\"dek\":\"$N\"}" "$TOKEN"
want "unknown route: 404" 404 "no such endpoint" GET /v2/anything
want "wrong method: 405" 405 "use POST" GET /v1/release
want "health" 200 '"status":"ok"' GET /v1/health
head -c 70000 /dev/zero | tr '\0' ' ' >big.json
want "oversize body: 413 naming the cap" 413 "larger than the 65536-byte limit" POST /v1/release @big.json
want "the server is still up" 200 '"status":"ok"' GET /v1/health

# --- 10,000 challenges: the table is bounded ---------------------------------
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$KMS_PID/status"; }
cat >flood.py <<'EOP'
import http.client, ssl, sys, collections, urllib.parse
ca, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=20)
seen = collections.Counter()
for i in range(n):
    c.request("POST", "/v1/challenge", body=b"{}", headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    seen[r.status] += 1
print(" ".join(f"{k}={v}" for k, v in sorted(seen.items())))
EOP
r0=$(rss)
python3 flood.py "$KMS_CA" "$KMS_URL" 10000 >flood1.out
r1=$(rss)
python3 flood.py "$KMS_CA" "$KMS_URL" 10000 >flood2.out
r2=$(rss)
echo "# VmRSS kB: start $r0, after 10k $r1, after 20k $r2; $(cat flood1.out) / $(cat flood2.out)"
assert "flood: exactly the table's 4096 challenges issued, the rest 429" grep -qx "200=4096 429=5904" flood1.out
assert "flood: a full table keeps answering 429" grep -qx "429=10000" flood2.out
assert "flood: the challenge gauge is the cap" test "$(kms_metric seclaunchd_challenges)" -eq 4096
if nm "$SLD" 2>/dev/null | grep -q __asan_init; then
	skip "flood: memory bounded" "AddressSanitizer build (its quarantine holds freed memory)"
else
	assert "flood: memory bounded (< 24 MB growth over 20,000 requests)" test $((r2 - r0)) -lt 24576
	assert "flood: the second 10,000 add < 4 MB" test $((r2 - r1)) -lt 4096
fi

# --- 64 concurrent releases, each with its own key -------------------------------
stop_pid "$KMS_PID"
start_kms "$T/kms2" || exit 1
check "enroll" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
check "key create" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id kc
cat >mkkeys.py <<'EOP'
# 64 random DEKs wrapped for 64 datasets -> "key dataset wrapped sha256(dek)" lines
import base64, hashlib, http.client, json, os, ssl, sys, urllib.parse
ca, url, token, key, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
for i in range(n):
    dek = os.urandom(32)
    body = json.dumps({"dataset_id": f"ds-{i}", "dek": base64.b64encode(dek).decode()})
    c.request("POST", f"/v1/keys/{key}/wrap", body=body, headers={"Authorization": "Bearer " + token})
    r = json.loads(c.getresponse().read())
    print(key, f"ds-{i}", r["wrapped_dek"], hashlib.sha256(dek).hexdigest())
EOP
python3 mkkeys.py "$KMS_CA" "$KMS_URL" "$(cat "$KMS_TOKEN")" kc 64 >keys.txt
assert "64 distinct wrapped DEKs" test "$(cut -d' ' -f3 keys.txt | sort -u | wc -l)" -eq 64
check "64 concurrent releases, each DEK the one wrapped for its dataset" 0 \
	"$PROBE" "$KMS_URL" "$KMS_CA" burst 64 64 keys.txt
grep -h "per_s" "$T/out" | sed 's/^/# /'
assert "64 releases counted" test "$(kms_metric seclaunchd_releases_total)" -eq 64

# --- handler threads: inline mode, limits, SIGTERM with requests queued ------
stop_pid "$KMS_PID"
echo '{"workers": 0}' >inline.json
start_kms "$T/kms2" --config "$T/inline.json" || exit 1
check "workers 0 (handlers on the connection threads): 32 concurrent releases" 0 \
	"$PROBE" "$KMS_URL" "$KMS_CA" burst 32 32 keys.txt
stop_pid "$KMS_PID"
echo '{"workers": 1025}' >toomany.json
check_err "workers above 1024 refused at start" 2 "workers" "$SLD" --dev --state "$T/kms2" --config "$T/toomany.json"
echo '{"workers": 2}' >two.json
start_kms "$T/kms2" --config "$T/two.json" || exit 1
# the probe prepares (challenges + quotes) first, then fires 64 releases at
# 2 workers; SIGTERM lands while most are queued
"$PROBE" "$KMS_URL" "$KMS_CA" burst 64 64 keys.txt >term.out 2>term.err &
BP=$!
for _ in $(seq 200); do grep -q prepared term.err && break; sleep 0.05; done
sleep 0.02
check "SIGTERM with requests queued for the workers: exit 0" 0 stop_kms
wait "$BP"
sed 's/^/# /' term.out; grep -c "HTTP\|Couldn\|connect" term.err | sed 's/^/# requests refused or cut by the stop: /'
check "the log verifies and ends with the closing checkpoint" 0 "$SL" audit verify \
	--pubkey "$T/kms2/audit.pub" --require-final-checkpoint "$T/kms2/audit.log"
check "no release answered with a wrong or unopenable key during the stop" 1 \
	grep -q "kms_probe: release [0-9]* (key" term.err

# --- TLS versions and idle connections (a server with a 2 s idle timeout) ----
echo '{"idle_timeout_s": 2}' >idle.json
start_kms "$T/kms-idle" --config "$T/idle.json" || exit 1
check "TLS 1.3 is served" 0 curl -sf --tlsv1.3 --cacert "$KMS_CA" "$KMS_URL/v1/health"
check "TLS 1.2 is served" 0 curl -sf --tlsv1.2 --tls-max 1.2 --cacert "$KMS_CA" "$KMS_URL/v1/health"
check "TLS 1.1 is refused" 1 python3 -c '
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
ctx.maximum_version = ssl.TLSVersion.TLSv1_1
try:
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])))).close()
except (ssl.SSLError, OSError):
    sys.exit(1)
sys.exit(0)' "${KMS_URL##*:}"
check "an idle connection is closed after idle_timeout_s (2 s)" 0 python3 -c '
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), server_hostname="127.0.0.1")
s.settimeout(10)
t = time.time()
try:
    d = s.recv(1)
except (ssl.SSLError, OSError):
    d = b""
sys.exit(0 if d == b"" and 1.5 < time.time() - t < 8 else 1)' "${KMS_URL##*:}" "$KMS_CA"

finish
