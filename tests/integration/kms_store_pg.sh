#!/usr/bin/env bash
# The PostgreSQL store as a release uses it (the challenge used up, the AK
# and key rows read, in one round trip) against what a shared database
# invites, with two replicas of store_pool 2 (handlers queue for the pool):
# each replica holds no more connections than store_pool says; one release
# request replayed to both replicas at once is granted exactly once (the
# others are refused as nonce_reused), round after round; a database writer
# without the registry key who edits the AK row (its enrollment time, its
# EK) gets no release on either replica, and the row put back releases
# again; an edited KEK row opens nothing; PostgreSQL restarted in the middle
# of a burst of releases: no DEK goes to the wrong request, the pool
# reconnects (the first release after the restart is served on both
# replicas), and nonces are still single use.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

if ! pg_bin >/dev/null; then
	echo "# SKIP: PostgreSQL server binaries not installed (Debian postgresql; scripts/install-deps)"
	exit 77
fi
cd "$T" || exit 1
build_probe || { echo "cannot build kms_probe" >&2; exit 1; }
start_pg || exit 1
printf '{"store": "%s", "store_pool": 2, "enroll_rate_per_min": 0, "refusal_rate_per_min": 0}\n' \
	"$PG_URI" >store.json

replica() { start_replica "$1" "$T/store.json"; }
replica A || exit 1
replica B || exit 1
TOKEN=$T/A/admin.token
assert "the replicas start with the pool of store_pool" grep -q "state store postgresql (2 connections)" "$T/B/log"
# each replica: 2 in the network process, at most 2 in the key process
assert "two replicas hold at most 8 connections" \
	test "$($PSQL -c "select count(*) from pg_stat_activity where application_name = 'seclaunchd'")" -le 8

start_swtpm tpm
head -c 50000 /dev/urandom >plain
check "enroll on A" 0 "$SL" enroll --kms "$URL_A" --kms-ca "$CA_A" -q
check "key create on A" 0 "$SL" key create --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" --id k1
check "encrypt through A" 0 "$SL" encrypt --kms "$URL_A" --kms-ca "$CA_A" --key-id k1 \
	--admin-token-file "$TOKEN" --dataset-id ds1 plain -o a.sld
check "released by B" 0 "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" a.sld -o b.bin
assert "round trip through B" cmp -s plain b.bin
W=$(wrapped_of a.sld)
dec() { "$SL" decrypt --kms "$1" --kms-ca "$2" a.sld -o "$3"; }

# --- one request replayed to both replicas at once: exactly one grant -------------
cat >replay.py <<'EOP'
import http.client, json, ssl, sys, threading, urllib.parse
url_a, ca_a, url_b, ca_b, body = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], open(sys.argv[5]).read()
targets = [(url_a, ca_a), (url_b, ca_b)] * 8
conns = []
for url, ca in targets:
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca), timeout=60)
    c.connect()
    conns.append(c)
go = threading.Barrier(len(conns))
res = [None] * len(conns)
def send(i):
    go.wait()
    conns[i].request("POST", "/v1/release", body=body, headers={"Content-Type": "application/json"})
    r = conns[i].getresponse()
    b = json.loads(r.read() or b"{}")
    res[i] = (r.status, [x.get("code") for x in b.get("reasons", [])])
ts = [threading.Thread(target=send, args=(i,)) for i in range(len(conns))]
[t.start() for t in ts]; [t.join() for t in ts]
won = [r for r in res if r[0] == 200]
lost = [r for r in res if r == (403, ["nonce_reused"])]
print(f"granted={len(won)} nonce_reused={len(lost)} other={[r for r in res if r[0] != 200 and r not in lost]}")
sys.exit(0 if len(won) == 1 and len(lost) == len(res) - 1 else 1)
EOP
replay_rounds() { # LABEL
	local r ok=0
	for r in 1 2 3 4 5; do
		"$PROBE" "$URL_A" "$CA_A" body k1 ds1 "$W" >body.json || { ok=1; break; }
		python3 replay.py "$URL_A" "$CA_A" "$URL_B" "$CA_B" body.json >replay.out 2>&1 || { ok=1; cat replay.out; break; }
	done
	[ "$ok" = 0 ] && cat replay.out
	return $ok
}
check "one request sent 16 times at once over A and B, 5 rounds: each granted exactly once, the rest nonce_reused" 0 replay_rounds

# --- a database writer without the registry key ---------------------------------------
$PSQL -c "update aks set enrolled = enrolled + 1"
check_err "AK row edited (enrolled): refused on A" 3 "not enrolled|ak_not_enrolled|not trusted" dec "$URL_A" "$CA_A" x1.bin
check_err "AK row edited (enrolled): refused on B" 3 "not enrolled|ak_not_enrolled|not trusted" dec "$URL_B" "$CA_B" x2.bin
assert "no plaintext from a forged row" test ! -e x1.bin -a ! -e x2.bin
assert "the forged row is reported on B" grep -q "does not verify under the registry key" "$T/B/log"
$PSQL -c "update aks set enrolled = enrolled - 1"
check "the row put back: A releases again" 0 dec "$URL_A" "$CA_A" x3.bin
EK=$($PSQL -c "select encode(ek_sha256, 'hex') from aks")
$PSQL -c "update aks set ek_sha256 = sha256(ek_sha256)"
check_err "AK row edited (another EK): refused on B" 3 "not enrolled|ak_not_enrolled|not trusted" dec "$URL_B" "$CA_B" x4.bin
$PSQL -c "update aks set ek_sha256 = decode('$EK', 'hex')"
check "the row put back: B releases again" 0 dec "$URL_B" "$CA_B" x5.bin
WK=$($PSQL -c "select encode(wrapped, 'hex') from kek_versions where key_id = 'k1' and version = 1")
$PSQL -c "update kek_versions set wrapped = overlay(wrapped placing '\\x00'::bytea from 30 for 1) where key_id = 'k1'"
check_err "KEK row edited: refused on A, naming the master key check" 4 "does not authenticate under the master key" \
	dec "$URL_A" "$CA_A" x6.bin
assert "no plaintext from an edited KEK row" test ! -e x6.bin
$PSQL -c "update kek_versions set wrapped = decode('$WK', 'hex') where key_id = 'k1'"
check "the KEK row put back: A releases again" 0 dec "$URL_A" "$CA_A" x7.bin

# --- PostgreSQL restarted in the middle of a burst ------------------------------------
python3 - "$CA_A" "$URL_A" "$(cat "$TOKEN")" >keys.txt <<'EOP'
import base64, hashlib, http.client, json, os, ssl, sys, urllib.parse
ca, url, token = sys.argv[1:4]
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
for i in range(8):
    dek = os.urandom(32)
    c.request("POST", "/v1/keys/k1/wrap", body=json.dumps({"dataset_id": f"ds-{i}", "dek": base64.b64encode(dek).decode()}), headers={"Authorization": "Bearer " + token})
    print("k1", f"ds-{i}", json.loads(c.getresponse().read())["wrapped_dek"], hashlib.sha256(dek).hexdigest())
EOP
rm -f go
KMS_PROBE_GO=$T/go "$PROBE" "$URL_A" "$CA_A" burst 600 16 keys.txt >burst.out 2>burst.err &
BP=$!
for _ in $(seq 1200); do
	grep -q prepared burst.err 2>/dev/null && break
	kill -0 "$BP" 2>/dev/null || break
	sleep 0.1
done
touch go
sleep 0.5
stop_pg
sleep 1
restart_pg || exit 1
wait "$BP"
cat burst.out
assert "the burst ran" grep -q "requests=600" burst.out
assert "no DEK went to another request (mixups=0)" grep -q " mixups=0 " burst.out
check "the first release after the restart is served on A" 0 dec "$URL_A" "$CA_A" y1.bin
check "and on B" 0 dec "$URL_B" "$CA_B" y2.bin
assert "the right plaintext" cmp -s plain y2.bin
check "after the restart a request replayed to both at once is still granted exactly once" 0 replay_rounds

stop_pid "$PID_A"
stop_pid "$PID_B"
stop_pg
finish
