#!/usr/bin/env bash
# Two seclaunchd replicas sharing one PostgreSQL database (a private cluster
# started here as a child): an enrollment on A releases on B; enrollments on
# both are all kept; a challenge used on one is refused on both; 1000 key
# creations and 1000 enrollment challenges spread concurrently over both
# are all present (the keys usable on
# both); kill -9 of a replica in the middle of a burst keeps every
# acknowledged key; PostgreSQL stopped mid-run makes both answer 503 (no
# key released, no decision recorded) and they recover once it is back; a
# store of another schema version stops a replica from starting.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

if ! pg_bin >/dev/null; then
	echo "# SKIP: PostgreSQL server binaries not installed (Debian postgresql; scripts/install-deps)"
	exit 77
fi
cd "$T" || exit 1
start_pg || exit 1
printf '{"store": "%s", "enroll_rate_per_min": 0}\n' "$PG_URI" >store.json

replica() { start_replica "$1" "$T/store.json"; }
replica A || exit 1
replica B || exit 1
TOKEN=$T/A/admin.token
assert "both replicas use the PostgreSQL store" grep -q "state store postgresql" "$T/B/log"

head -c 100000 /dev/urandom >plain
start_swtpm tpm1
check "enroll on A" 0 "$SL" enroll --kms "$URL_A" --kms-ca "$CA_A" -q
check "key create on A" 0 "$SL" key create --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" --id k1
check "encrypt through A" 0 "$SL" encrypt --kms "$URL_A" --kms-ca "$CA_A" --key-id k1 \
	--admin-token-file "$TOKEN" --dataset-id ds1 plain -o a.sld
check "enrolled on A, released by B" 0 "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" a.sld -o b.bin
assert "round trip through B" cmp -s plain b.bin
check_err "key id taken on A is taken on B" 5 "409|exists" \
	"$SL" key create --kms "$URL_B" --kms-ca "$CA_B" --admin-token-file "$TOKEN" --id k1

# a second TPM enrolls on B: A's enrollment stays (the registry file of
# earlier releases was rewritten whole by each process)
start_swtpm tpm2
check "enroll a second TPM on B" 0 "$SL" enroll --kms "$URL_B" --kms-ca "$CA_B" -q
assert "both AKs are in the store" test "$($PSQL -c 'select count(*) from aks')" = 2
check "the second TPM releases on A" 0 "$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" a.sld -o c.bin

# --- a challenge is single-use across replicas ------------------------------------
cat >replay.py <<'EOP'
import base64, http.client, json, ssl, sys, urllib.parse
def conn(url, ca):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
def post(url, ca, path, body):
    c = conn(url, ca)
    c.request("POST", path, body=json.dumps(body))
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")
url_a, ca_a, url_b, ca_b = sys.argv[1:5]
st, ch = post(url_a, ca_a, "/v1/challenge", {})
assert st == 200, (st, ch)
b64 = lambda b: base64.b64encode(b).decode()
req = {"nonce": ch["nonce"], "eph_pub": b64(bytes(range(32))), "policy_digest": ch["policy_digest"],
       "evidence": [{"kind": "tpm2", "quote": "AA==", "signature": "AA==", "ak_pub": "AA=="}],
       "keys": [{"key_id": "k1", "dataset_id": "ds1", "wrapped_dek": b64(bytes(61))}]}
codes = []
for url, ca in ((url_b, ca_b), (url_a, ca_a), (url_b, ca_b)):
    st, body = post(url, ca, "/v1/release", req)
    codes.append((st, [r.get("code") for r in body.get("reasons", [])]))
print(json.dumps(codes))
first, second, third = codes
ok = (first[0] in (400, 403) and "nonce_unknown" not in first[1]
      and second == (403, ["nonce_reused"]) and third == (403, ["nonce_reused"]))
sys.exit(0 if ok else 1)
EOP
check "a nonce from A is known to B; once presented, refused on both" 0 \
	python3 replay.py "$URL_A" "$CA_A" "$URL_B" "$CA_B"
cat "$T/out"

# --- 1000 key creations spread over both, concurrently -------------------------------
cat >burst.py <<'EOP'
import base64, http.client, json, ssl, sys, threading, urllib.parse
urls = sys.argv[1].split(","); cas = sys.argv[2].split(","); token = open(sys.argv[3]).read().strip()
n, prefix, out = int(sys.argv[4]), sys.argv[5], sys.argv[6]
acked, errors, lock = [], [], threading.Lock()
def worker(w, nthreads):
    u = urllib.parse.urlparse(urls[w % len(urls)])
    ctx = ssl.create_default_context(cafile=cas[w % len(urls)])
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
    for i in range(w, n, nthreads):
        try:
            c.request("POST", "/v1/keys", body=json.dumps({"id": f"{prefix}{i}"}),
                      headers={"Authorization": "Bearer " + token})
            r = c.getresponse(); r.read()
            with lock:
                (acked if r.status == 201 else errors).append((f"{prefix}{i}", r.status))
        except Exception as e:
            with lock:
                errors.append((f"{prefix}{i}", str(e)))
            c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
ts = [threading.Thread(target=worker, args=(w, 16)) for w in range(16)]
[t.start() for t in ts]; [t.join() for t in ts]
open(out, "w").write("".join(k + "\n" for k, _ in acked))
print(f"acked={len(acked)} errors={len(errors)} {errors[:3]}")
EOP
check "1000 concurrent key creations over A and B" 0 \
	python3 burst.py "$URL_A,$URL_B" "$CA_A,$CA_B" "$TOKEN" 1000 c c.txt
cat "$T/out"
assert "all 1000 acknowledged" test "$(wc -l <c.txt)" = 1000
assert "all 1000 in the store, each with its version 1" \
	test "$($PSQL -c "select count(*) from keys k join kek_versions v on v.key_id = k.id and v.version = 1 where k.id like 'c%'")" = 1000
cat >wrapall.py <<'EOP'
import base64, http.client, json, ssl, sys, urllib.parse
url, ca, token, ids = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().strip(), open(sys.argv[4]).read().split()
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
bad = []
for k in ids:
    c.request("POST", f"/v1/keys/{k}/wrap", body=json.dumps({"dataset_id": "d", "dek": base64.b64encode(bytes(32)).decode()}),
              headers={"Authorization": "Bearer " + token})
    r = c.getresponse(); r.read()
    if r.status != 200:
        bad.append((k, r.status))
print("unusable:", bad[:5], len(bad))
sys.exit(1 if bad else 0)
EOP
check "every key made on either replica wraps on A" 0 python3 wrapall.py "$URL_A" "$CA_A" "$TOKEN" c.txt
check "every key made on either replica wraps on B" 0 python3 wrapall.py "$URL_B" "$CA_B" "$TOKEN" c.txt

# --- 1000 enrollments (the credential challenge) spread concurrently over both --------
# tpm2-tools makes an EK and an AK in the second TPM; each /v1/enroll opens a
# pending session in the shared store (activation is exercised above)
if command -v tpm2_createak >/dev/null &&
	tpm2_createek -c ek.ctx -G rsa -u ek.pub >/dev/null && tpm2_flushcontext -t &&
	tpm2_createak -C ek.ctx -c ak.ctx -G rsa -g sha256 -s rsassa -u ak.pub >/dev/null; then
	cat >enrolls.py <<'EOP'
import base64, http.client, json, ssl, sys, threading, urllib.parse
urls = sys.argv[1].split(","); cas = sys.argv[2].split(",")
body = json.dumps({"ek_pub": base64.b64encode(open("ek.pub", "rb").read()).decode(),
                   "ak_pub": base64.b64encode(open("ak.pub", "rb").read()).decode()})
sessions, errors, lock = [], [], threading.Lock()
def worker(w):
    u = urllib.parse.urlparse(urls[w % 2])
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=cas[w % 2]), timeout=30)
    for i in range(w, 1000, 16):
        c.request("POST", "/v1/enroll", body=body)
        r = c.getresponse(); b = r.read()
        with lock:
            (sessions if r.status == 200 else errors).append(json.loads(b).get("session") if r.status == 200 else r.status)
ts = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f"sessions={len(sessions)} distinct={len(set(sessions))} errors={len(errors)} {errors[:3]}")
sys.exit(0 if len(set(sessions)) == 1000 and not errors else 1)
EOP
	$PSQL -c "delete from pending"
	check "1000 concurrent enrollment challenges over A and B: 1000 distinct sessions" 0 \
		python3 enrolls.py "$URL_A,$URL_B" "$CA_A,$CA_B"
	cat "$T/out"
	assert "all 1000 pending enrollments are in the store" test "$($PSQL -c 'select count(*) from pending')" = 1000
else
	skip "1000 enrollments" "tpm2-tools could not make an EK and AK"
fi

# --- kill -9 of a replica in the middle of a burst -----------------------------------
python3 burst.py "$URL_B" "$CA_B" "$TOKEN" 100000 d d.txt >burst.out 2>&1 &
BPID=$!
# (the burst's keys: d0, d1, ...; not the --dev service's own dev-outputs).
# A key in the store may not be acknowledged yet: each of the 16 workers
# has at most one committed and unanswered, so 50 + 16 in the store means
# at least 50 acknowledged before the kill
for _ in $(seq 800); do
	[ "$($PSQL -c "select count(*) from keys where id like 'd%' and id != 'dev-outputs'")" -ge 66 ] && break
	sleep 0.05
done
kill -9 "$PID_B"
wait "$BPID"
echo "# $(wc -l <d.txt) key creations acknowledged by B before kill -9"
assert "the burst was under way" test "$(wc -l <d.txt)" -ge 50
check "every key B acknowledged before kill -9 is usable on A" 0 python3 wrapall.py "$URL_A" "$CA_A" "$TOKEN" d.txt
replica B || exit 1
check "B restarts clean and releases" 0 "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" a.sld -o d.bin

# --- PostgreSQL stopped mid-run: fail closed (503), then recover -----------------------
lines_before=$(wc -l <"$T/A/audit.log")
stop_pg
check_err "release with the database down: refused as unavailable (5), not decided" 5 "503|unavailable" \
	"$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" a.sld -o e.bin
assert "no plaintext while the database is down" test ! -e e.bin
check_err "key create with the database down: 503" 5 "503|unavailable" \
	"$SL" key create --kms "$URL_B" --kms-ca "$CA_B" --admin-token-file "$TOKEN" --id down1
assert "no release or refusal was recorded as a decision meanwhile" \
	sh -c "! tail -n +$((lines_before + 1)) '$T/A/audit.log' | grep -q '\"event\":\"kms.release\"'"
restart_pg || exit 1
ok=1
for _ in $(seq 40); do
	"$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" a.sld -o f.bin 2>/dev/null && { ok=0; break; }
	rm -f f.bin
	sleep 0.25
done
assert "after PostgreSQL is back A releases again" test "$ok" = 0
check "and B creates keys again" 0 "$SL" key create --kms "$URL_B" --kms-ca "$CA_B" --admin-token-file "$TOKEN" --id up1

# --- a store of another schema version ---------------------------------------------------
$PSQL -c "update meta set v = 3 where k = 'schema'"
mkdir -p -m 700 "$T/C"
cp -p "$T/A/master.key" "$T/A/registry.key" "$T/A/admin.token" "$T/C/"
check_err "a replica older than the store's schema refuses to start, naming both versions" 2 \
	"schema version 3, this seclaunchd reads version 2 only.*upgrade this one" \
	timeout 20 "$SLD" --dev --state "$T/C" --listen 127.0.0.1:0 --config "$T/store.json"
$PSQL -c "update meta set v = 2 where k = 'schema'"

stop_pid "$PID_A"
stop_pid "$KMS_PID"
stop_pg
finish
