#!/usr/bin/env bash
# seclaunchd's state store (SQLite, the embedded default): keys and
# enrollments survive a restart; a tampered KEK row, a forged AK row are
# refused with a clear error; another master key or registry key than the
# store was made with, a symlinked secret file, a store file (or its -wal /
# -shm) that others may read or another user owns stop the service from
# starting, naming the file; a store of another schema
# version stops the service from starting; seclaunchd migrate imports the
# files of earlier releases (registry.json, keystore) so old datasets still
# decrypt; seclaunchd backup makes a consistent copy that restores; a kill -9
# in the middle of a burst of key creations keeps every acknowledged key;
# bad configuration is refused.
. "$(dirname "$0")/lib.sh"

if ! command -v sqlite3 >/dev/null || ! python3 -c 'import cryptography' 2>/dev/null; then
	echo "# SKIP: needs the sqlite3 tool and python3-cryptography (scripts/install-deps)"
	exit 77
fi
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
assert "state files are private (0600)" sh -c "test \$(stat -c %a '$S/state.db') = 600 && test \$(stat -c %a '$S/admin.token') = 600"
# (and dev-outputs, the --dev service's own output key)
assert "the store holds the AK and the three keys" test "$(sqlite3 "$S/state.db" 'select count(*) from aks; select count(*) from keys where id != '"'dev-outputs'"'')" = "$(printf '1\n3')"
assert "no KEK in the clear in the store" sh -c "! sqlite3 '$S/state.db' 'select hex(wrapped) from kek_versions' | grep -qv '^[0-9A-F]\\{120\\}\$'"

start_kms "$S" || exit 1
check "after a restart the key and enrollment are there: decrypt" 0 \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
assert "round trip" cmp -s plain dec.bin
stop_pid "$KMS_PID"

# sld_start DIR: runs seclaunchd in the foreground (it must refuse to start)
sld_start() { timeout 20 "$SLD" --dev --state "$S" --listen 127.0.0.1:0 "$@"; }
check_out() {
	local name=$1 want=$2 pat=$3
	shift 3
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -Eq -- "$pat" "$T/out"; then
		_pass "$name"
	else
		_fail "$name: exit $rc (want $want), stdout must match /$pat/"
		sed 's/^/    out: /' "$T/out" "$T/err" | head -n 5
	fi
}
dec() { "$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o "$1"; }

# a KEK row edited in the database: the release is refused naming it
cp "$S/state.db" state.good
sqlite3 "$S/state.db" "update kek_versions set wrapped = zeroblob(60) where key_id = 'k2'"
start_kms "$S" || exit 1
check_err "tampered KEK row: release denied (4) naming the master key check" 4 "does not authenticate under the master key" dec x1.bin
assert "no plaintext from a refused release" test ! -e x1.bin
stop_kms
cp state.good "$S/state.db"
# another master key or registry key than the store was made with: refused
# at start by the store's key-check values (exit 6, naming the file)
cp "$S/master.key" master.good
cp "$S/registry.key" registry.good
head -c 32 /dev/urandom >"$S/master.key"
check_err "another master key: refuses to start (6) naming master.key" 6 \
	"master.key: not the master key this state store was made with" sld_start
cp master.good "$S/master.key"
head -c 32 /dev/urandom >"$S/registry.key"
check_err "another registry key: refuses to start (6) naming registry.key" 6 \
	"registry.key: not the registry key this state store was made with" sld_start
cp registry.good "$S/registry.key"
# a store of before the key-check values gets them at its next start
sqlite3 "$S/state.db" "delete from keychecks"
start_kms "$S" || exit 1
assert "a store without key-check values starts and records them" \
	grep -q "key-check value of the master key recorded" "$S/log"
check "and serves" 0 dec x2.bin
stop_kms
assert "both values are in the store" test "$(sqlite3 "$S/state.db" 'select count(*) from keychecks')" = 2
head -c 32 /dev/urandom >"$S/master.key"
check_err "from then on another master key is refused (6)" 6 "master.key: not the master key" sld_start
cp master.good "$S/master.key"
# secret files are never opened through a symbolic link
mv "$S/audit.key" audit.key.real
ln -s "$T/audit.key.real" "$S/audit.key"
check_err "a symlinked audit.key: refuses to start (2) naming it" 2 \
	"audit.key: a symbolic link" sld_start
rm "$S/audit.key"
mv audit.key.real "$S/audit.key"
# the store file and its -wal / -shm answer to the key-file rule
rm -f "$S/state.db-wal" "$S/state.db-shm"
for m in 666 644 640; do
	chmod $m "$S/state.db"
	check_err "state.db with mode 0$m: refuses to start (2) naming it and the mode" 2 \
		"state.db: mode 0$m lets group or others access a state store file" sld_start
done
chmod 600 "$S/state.db"
if [ "$(id -u)" -eq 0 ]; then
	chown 65534 "$S/state.db"
	check_err "state.db owned by another uid: refuses to start (2) naming the owner" 2 \
		"state.db: state store file owned by uid 65534" sld_start
	chown 0 "$S/state.db"
else
	skip "state.db owned by another uid" "needs root to chown"
fi
: >"$S/state.db-wal"
chmod 644 "$S/state.db-wal"
check_err "a state.db-wal others may read: refused (2) naming it" 2 \
	"state.db-wal: mode 0644" sld_start
rm -f "$S/state.db-wal"
ln -s /tmp/elsewhere "$S/state.db-shm"
check_err "a symlinked state.db-shm: refused (2) naming it" 2 "state.db-shm: a symbolic link" sld_start
rm -f "$S/state.db-shm"
chmod 644 "$S/master.key"
check_err "world-readable master key: refuses (2) naming the mode" 2 "master.key.*(mode|permission|readable)" sld_start
chmod 600 "$S/master.key"
# an AK row added or edited without the registry key does not count
sqlite3 "$S/state.db" "update aks set enrolled = enrolled + 1"
start_kms "$S" || exit 1
check_err "forged AK row: not enrolled (3)" 3 "not enrolled|ak_not_enrolled" dec x3.bin
assert "the forged row is reported" grep -q "does not verify under the registry key" "$S/log"
stop_kms
cp state.good "$S/state.db"
# a store written by a newer release
sqlite3 "$S/state.db" "update meta set v = 3 where k = 'schema'"
check_err "store of a newer schema: refuses to start naming both versions" 2 "schema version 3, this seclaunchd reads version 2 only" sld_start
cp state.good "$S/state.db"
rm -f "$S/state.db-wal" "$S/state.db-shm"

# --- backup and restore (SQLite backup API) ------------------------------------
start_kms "$S" || exit 1
check "backup of the running service's store" 0 "$SLD" backup --dev --state "$S" --to backup.db
check_err "backup never overwrites" 2 "exists|File exists" "$SLD" backup --dev --state "$S" --to backup.db
stop_kms
rm -f "$S/state.db" "$S/state.db-wal" "$S/state.db-shm"
cp backup.db "$S/state.db"
start_kms "$S" || exit 1
check "restored from the backup: decrypt" 0 dec r.bin
assert "round trip after restore" cmp -s plain r.bin
stop_kms

# --- migrate: the files of earlier releases -----------------------------------
# Writes registry.json and keystore in the earlier formats from what the
# store holds (the KEK opened with the master key), then imports them into
# an empty store: the dataset encrypted before still decrypts.
cat >legacy.py <<'EOP'
import hashlib, hmac, json, os, sqlite3, struct, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
d = sys.argv[1]
master = open(f"{d}/master.key", "rb").read()
regkey = open(f"{d}/registry.key", "rb").read()
db = sqlite3.connect(f"{d}/state.db")
keks = []
for kid, w in db.execute("select key_id, wrapped from kek_versions where version = 1 order by key_id"):
    aad = b"seclaunch-kek-v1" + bytes([len(kid)]) + kid.encode() + struct.pack(">I", 1)
    keks.append((kid, AESGCM(master).decrypt(w[:12], w[12:], aad)))
pt = struct.pack(">I", len(keks)) + b"".join(bytes([len(k)]) + k.encode() + v for k, v in keks)
iv = os.urandom(12)
hdr = b"SLKS" + bytes([1, 0, 0, 0]) + iv + struct.pack(">I", len(pt))
ct = AESGCM(master).encrypt(iv, pt, hdr)
open(f"{d}/keystore", "wb").write(hdr + ct)
aks = [{"name": n.hex(), "ek_sha256": e.hex(), "enrolled": "2026-01-01T00:00:00Z"}
       for n, e in db.execute("select name, ek_sha256 from aks")]
doc = {"version": 1, "aks": aks}
mac = hmac.new(regkey, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), hashlib.sha256).hexdigest()
doc["mac"] = mac
open(f"{d}/registry.json", "w").write(json.dumps(doc, indent=1, sort_keys=True))
EOP
check "legacy files written" 0 python3 legacy.py "$S"
rm -f "$S/state.db" "$S/state.db-wal" "$S/state.db-shm"
check_out "migrate --from-state imports the AK and the three keys (and dev-outputs)" 0 "1 AKs imported .0 already there., 4 keys imported .0 already there." \
	"$SLD" migrate --from-state "$S"
check_out "migrate again: nothing twice" 0 "0 AKs imported .1 already there., 0 keys imported .4 already there." \
	"$SLD" migrate --from-state "$S"
start_kms "$S" || exit 1
check "after migrate the old dataset decrypts" 0 dec m.bin
assert "round trip after migrate" cmp -s plain m.bin
stop_kms
sed -i 's/"version": 1/"version": 1 /; s/000b/000c/' "$S/registry.json"
check_err "migrate of an edited registry: refused (6)" 6 "registry MAC does not verify" "$SLD" migrate --from-state "$S"
cp "$S/keystore" ks.bak
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[len(b)//2]^=1; open(sys.argv[1],"wb").write(b)' "$S/keystore"
rm -f "$S/registry.json"
check_err "migrate of a tampered keystore: refused (6)" 6 "keystore does not authenticate" "$SLD" migrate --from-state "$S"
rm -f "$S/keystore"

echo '{"threads": 2, "colour": "blue"}' >bad.json
check_err "unknown config key: refused naming it" 2 'unknown key "colour"' sld_start --config bad.json
echo '{"threads": "many"}' >bad2.json
check_err "config value of the wrong type" 2 '"threads" must be an integer' sld_start --config bad2.json
echo '{"threads": 2}' >prod.json
check_err "production config missing required keys: refused naming one" 2 '"listen" is required' \
	timeout 20 "$SLD" --config prod.json
check_err "usage: --dev without --state" 1 "needs --state" "$SLD" --dev
check_err "usage: migrate without --from-state" 1 "from-state DIR is required" "$SLD" migrate

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
assert "after kill -9 the store opens" test -s "$S/url"
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
assert "the store is consistent after kill -9" test "$(sqlite3 "$S/state.db" 'pragma integrity_check')" = ok
finish
