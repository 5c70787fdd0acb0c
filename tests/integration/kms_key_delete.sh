#!/usr/bin/env bash
# A forced delete destroys the key: after `key delete --force` and a new
# `key create` under the same id, a dataset encrypted under the old key no
# longer opens (its KEK is wiped from the key process that used it, and no
# replica's cache serves the new key's id with the old KEK), and what is
# wrapped under the new key opens on every replica and after a restart —
# on SQLite (one replica, restarted) and on two replicas sharing
# PostgreSQL. Then wraps racing a delete on two replicas: a delete that
# answers 200 outlives no wrap that answered 200 (that dataset would be
# under a deleted key), and no wrap answers 503 for the key having gone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

cd "$T" || exit 1
head -c 50000 /dev/urandom >plain
start_swtpm tpm1

# recreate NAME URL CA TOKEN: encrypt under k, force-delete, recreate k
recreate() {
	local n=$1 url=$2 ca=$3 tok=$4
	local A=(--kms "$url" --kms-ca "$ca" --admin-token-file "$tok")
	check "$n: key create k" 0 "$SL" key create "${A[@]}" --id k
	check "$n: encrypt under k" 0 "$SL" encrypt "${A[@]}" --key-id k --dataset-id old plain -o "$n-old.sld"
	check "$n: it decrypts" 0 "$SL" decrypt --kms "$url" --kms-ca "$ca" "$n-old.sld" -o "$n-old.0"
	check "$n: key delete --force" 0 "$SL" key delete "${A[@]}" --id k --force
	check "$n: key create k again" 0 "$SL" key create "${A[@]}" --id k
	check "$n: encrypt under the new k" 0 "$SL" encrypt "${A[@]}" --key-id k --dataset-id new plain -o "$n-new.sld"
}

# --- SQLite: one replica, restarted -------------------------------------------
start_kms "$T/sq" || exit 1
check "sqlite: enroll" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
recreate sqlite "$KMS_URL" "$KMS_CA" "$KMS_TOKEN"
check_err "sqlite: the old dataset no longer opens (unwrap_failed)" 4 "unwrap_failed" \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" sqlite-old.sld -o sq.1
check "sqlite: the new dataset opens" 0 "$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" sqlite-new.sld -o sq.2
assert "sqlite: round trip" cmp -s plain sq.2
stop_kms
start_kms "$T/sq" || exit 1
check "sqlite: after a restart the new dataset opens" 0 "$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" sqlite-new.sld -o sq.3
check_err "sqlite: after a restart the old one does not" 4 "unwrap_failed" \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" sqlite-old.sld -o sq.4
stop_kms

if ! pg_bin >/dev/null; then
	skip "PostgreSQL server binaries not installed: the two-replica cases"
	finish
fi

# --- two replicas on PostgreSQL ------------------------------------------------
start_pg || exit 1
printf '{"store": "%s", "enroll_rate_per_min": 0}\n' "$PG_URI" >store.json
replica() { start_replica "$1" "$T/store.json"; }
replica A || exit 1
replica B || exit 1
TOKEN=$T/A/admin.token
check "pg: enroll on A" 0 "$SL" enroll --kms "$URL_A" --kms-ca "$CA_A" -q
# both replicas' key processes hold the old KEK before the delete
check "pg: key create k" 0 "$SL" key create --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" --id k
check "pg: encrypt under k on A" 0 "$SL" encrypt --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" \
	--key-id k --dataset-id old plain -o pg-old.sld
check "pg: the old dataset opens on A" 0 "$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" pg-old.sld -o p.0
check "pg: the old dataset opens on B" 0 "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" pg-old.sld -o p.1
check "pg: key delete --force on A" 0 "$SL" key delete --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" --id k --force
check "pg: key create k again on B" 0 "$SL" key create --kms "$URL_B" --kms-ca "$CA_B" --admin-token-file "$TOKEN" --id k
check_err "pg: the old dataset no longer opens on A" 4 "unwrap_failed" \
	"$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" pg-old.sld -o p.2
check_err "pg: nor on B" 4 "unwrap_failed" "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" pg-old.sld -o p.3
check "pg: encrypt under the new k on A" 0 "$SL" encrypt --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$TOKEN" \
	--key-id k --dataset-id new plain -o pg-new.sld
check "pg: wrapped on A, opens on B" 0 "$SL" decrypt --kms "$URL_B" --kms-ca "$CA_B" pg-new.sld -o p.4
assert "pg: round trip" cmp -s plain p.4
KMS_PID=$PID_A
stop_kms
replica A || exit 1
check "pg: opens on A after its restart" 0 "$SL" decrypt --kms "$URL_A" --kms-ca "$CA_A" pg-new.sld -o p.5

# --- wraps on B racing a delete on A -------------------------------------------
cat >race.py <<'EOP'
import base64, http.client, json, ssl, sys, threading, time, urllib.parse
url_a, ca_a, url_b, ca_b, token, rounds = sys.argv[1:7]
def conn(url, ca):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPSConnection(u.hostname, u.port, timeout=30,
                                       context=ssl.create_default_context(cafile=ca))
H = {"Authorization": "Bearer " + open(token).read().strip()}
def post(c, path, body):
    c.request("POST", path, body=json.dumps(body), headers=H)
    r = c.getresponse(); r.read()
    return r.status
bad, statuses = [], {}
for rnd in range(int(rounds)):
    key = f"race{rnd}"
    assert post(conn(url_a, ca_a), "/v1/keys", {"id": key}) == 201
    wc = [conn(url_b, ca_b) for _ in range(8)]
    dc = conn(url_a, ca_a)
    for c in wc + [dc]:
        c.connect()
    go = threading.Barrier(9)
    wraps, dele = [None] * 8, [None]
    def wrap(i):
        go.wait()
        time.sleep(0.0005 * i)
        wraps[i] = post(wc[i], f"/v1/keys/{key}/wrap",
                        {"dataset_id": f"d{i}", "dek": base64.b64encode(bytes(32)).decode()})
    def delete():
        go.wait()
        time.sleep(0.002)
        dele[0] = post(dc, f"/v1/keys/{key}/delete", {})
    ts = [threading.Thread(target=wrap, args=(i,)) for i in range(8)] + [threading.Thread(target=delete)]
    [t.start() for t in ts]; [t.join() for t in ts]
    for s in wraps + dele:
        statuses[s] = statuses.get(s, 0) + 1
    if dele[0] == 200 and 200 in wraps:
        bad.append((rnd, "delete 200 after wraps 200", wraps))
    if 503 in wraps or dele[0] == 503:
        bad.append((rnd, "503", wraps, dele[0]))
    if dele[0] not in (200, 409) or any(w not in (200, 404, 409) for w in wraps):
        bad.append((rnd, "unexpected", wraps, dele[0]))
print("statuses", statuses, "bad", bad)
sys.exit(1 if bad else 0)
EOP
check "pg: 8 wraps on B against a delete on A, 8 rounds: no lost wrap, no 503" 0 \
	python3 race.py "$URL_A" "$CA_A" "$URL_B" "$CA_B" "$TOKEN" 8
cat "$T/out"
finish
