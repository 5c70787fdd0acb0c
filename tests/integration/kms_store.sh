#!/usr/bin/env bash
# seclaunchd's state on disk: keys and enrollments survive a restart; a
# tampered or truncated keystore or registry, a wrong master key or unsafe
# permissions stop the service from starting with a clear error; a kill -9
# in the middle of a burst of key creations leaves a keystore that loads
# with every acknowledged key; bad configuration is refused.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
start_swtpm tpm
S=$T/kms
start_kms "$S" || exit 1
head -c 50000 /dev/urandom >plain
check "enroll" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
for k in k1 k2 k3; do
	check "key create $k" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id $k
done
check "encrypt" 0 "$SL" encrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" --key-id k2 \
	--admin-token-file "$KMS_TOKEN" --dataset-id ds plain -o a.sld
check "SIGTERM: graceful stop, exit 0" 0 stop_kms
assert "the audit log closes with a checkpoint" sh -c "tail -n1 '$S/audit.log' | grep -q '\"event\":\"checkpoint\"'"
assert "state files are private (0600)" sh -c "test \$(stat -c %a '$S/keystore') = 600 && test \$(stat -c %a '$S/registry.json') = 600 && test \$(stat -c %a '$S/admin.token') = 600"

start_kms "$S" || exit 1
check "after a restart the key and enrollment are there: decrypt" 0 \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
assert "round trip" cmp -s plain dec.bin
stop_pid "$KMS_PID"

# sld_start DIR: runs seclaunchd in the foreground (it must refuse to start)
sld_start() { timeout 20 "$SLD" --dev --state "$S" --listen 127.0.0.1:0 "$@"; }
cp "$S/keystore" keystore.good
cp "$S/registry.json" registry.good
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[len(b)//2]^=1; open(sys.argv[1],"wb").write(b)' "$S/keystore"
check_err "keystore with a flipped byte: refuses to start (6)" 6 "keystore does not authenticate" sld_start
head -c 40 keystore.good >"$S/keystore"
check_err "truncated keystore: refuses to start (6)" 6 "keystore.*(truncated|not a seclaunchd keystore)" sld_start
cp keystore.good "$S/keystore"
cat keystore.good keystore.good >"$S/keystore"
check_err "extended keystore: refuses to start (6)" 6 "truncated or extended" sld_start
cp keystore.good "$S/keystore"
cp "$S/master.key" master.good
head -c 32 /dev/urandom >"$S/master.key"
check_err "another master key: refuses to start (6)" 6 "does not authenticate under the master key" sld_start
cp master.good "$S/master.key"
chmod 644 "$S/master.key"
check_err "world-readable master key: refuses (2) naming the mode" 2 "master.key.*(mode|permission|readable)" sld_start
chmod 600 "$S/master.key"
# change one hex digit of the enrolled AK's name (always to a different one)
python3 - "$S/registry.json" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
m = re.search(r'"name": "000b([0-9a-f])', s)
c = "1" if m.group(1) == "0" else "0"
open(p, "w").write(s[:m.start(1)] + c + s[m.end(1):])
PY
check_err "edited registry: refuses to start (6)" 6 "registry MAC does not verify" sld_start
head -c 50 registry.good >"$S/registry.json"
check_err "truncated registry: refuses to start (6)" 6 "registry is not valid JSON" sld_start
cp registry.good "$S/registry.json"
echo '{"threads": 2, "colour": "blue"}' >bad.json
check_err "unknown config key: refused naming it" 2 'unknown key "colour"' sld_start --config bad.json
echo '{"threads": "many"}' >bad2.json
check_err "config value of the wrong type" 2 '"threads" must be an integer' sld_start --config bad2.json
echo '{"threads": 2}' >prod.json
check_err "production config missing required keys: refused naming one" 2 '"listen" is required' \
	timeout 20 "$SLD" --config prod.json
check_err "usage: --dev without --state" 1 "needs --state" "$SLD" --dev

# --- kill -9 in the middle of a burst of key creations ---------------------------
start_kms "$S" || exit 1
cat >burst.py <<'EOP'
import http.client, json, ssl, sys, urllib.parse
ca, url, token, out = sys.argv[1:5]
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
with open(out, "w") as f:
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=5)
    for i in range(100000):
        try:
            c.request("POST", "/v1/keys", body=json.dumps({"id": f"b{i}"}), headers={"Authorization": "Bearer " + token})
            r = c.getresponse()
            r.read()
            if r.status == 201:
                f.write(f"b{i}\n")
                f.flush()
        except Exception:
            break
EOP
python3 burst.py "$KMS_CA" "$KMS_URL" "$(cat "$KMS_TOKEN")" acked.txt &
BPID=$!
for _ in $(seq 200); do [ -f acked.txt ] && [ "$(wc -l <acked.txt)" -ge 20 ] && break; sleep 0.05; done
kill -9 "$KMS_PID"
wait "$BPID"
echo "# $(wc -l <acked.txt) key creations acknowledged before kill -9"
assert "the burst was under way when killed" test "$(wc -l <acked.txt)" -ge 20
start_kms "$S" || exit 1
assert "after kill -9 the keystore loads" test -s "$S/url"
cat >check_keys.py <<'EOP'
import base64, http.client, json, ssl, sys, urllib.parse
ca, url, token, acked = sys.argv[1:5]
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
missing = []
for k in open(acked).read().split():
    c.request("POST", f"/v1/keys/{k}/wrap", body=json.dumps({"dataset_id": "d", "dek": base64.b64encode(bytes(32)).decode()}), headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        missing.append(k)
print("missing:", " ".join(missing))
sys.exit(1 if missing else 0)
EOP
check "every acknowledged key survived the kill" 0 python3 check_keys.py "$KMS_CA" "$KMS_URL" "$(cat "$KMS_TOKEN")" acked.txt
check "the old dataset still decrypts" 0 "$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o dec2.bin
assert "temp files of the killed writer are removed at start" sh -c "! ls '$S' | grep -q '^keystore.*tmp'"
finish
