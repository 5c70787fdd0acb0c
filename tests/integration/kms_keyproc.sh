#!/usr/bin/env bash
# The key process is supervised, and a 503 decides nothing: kill -9 of
# seclaunchd-kek is noticed (audited, /v1/health says so while it is down)
# and it is restarted within seconds, releases working again; a release in
# flight when it died answers 503 and gives its nonce back, so the
# launcher's retry of the identical body is released (not refused as a
# reused nonce, no deny in the audit log); after PostgreSQL restarts
# between releases, the next release succeeds (a pooled connection the
# server closed is found and reconnected before it is used).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

cd "$T" || exit 1
head -c 20000 /dev/urandom >plain
start_swtpm tpm1
start_kms "$T/kms" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" -q
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id k
check "encrypt" 0 "$SL" encrypt "${K[@]}" --admin-token-file "$KMS_TOKEN" --key-id k --dataset-id ds plain -o a.sld

health() { # prints "HTTP-status key_process store"
	python3 - "$KMS_URL" "$KMS_CA" <<'EOP'
import http.client, json, ssl, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPSConnection(u.hostname, u.port, timeout=10, context=ssl.create_default_context(cafile=sys.argv[2]))
c.request("GET", "/v1/health"); r = c.getresponse(); b = json.loads(r.read())
print(r.status, b.get("key_process"), b.get("store"))
EOP
}
kek_pid() { # the key process: a grandchild of seclaunchd named seclaunchd-kek
	local c g
	for c in $(cat /proc/"$KMS_PID"/task/*/children 2>/dev/null); do
		for g in $(cat /proc/"$c"/task/*/children 2>/dev/null); do
			[ "$(cat /proc/"$g"/comm 2>/dev/null)" = seclaunchd-kek ] && echo "$g"
		done
	done | head -n1
}
assert "health: ok with the key process up" test "$(health)" = "200 ok ok"
K1=$(kek_pid)
assert "the key process runs (seclaunchd-kek under its monitor)" test -n "$K1"

# --- kill -9: noticed, audited, restarted ---------------------------------------
kill -STOP "$K1"
kill -9 "$K1"
saw_down=no
for _ in $(seq 100); do
	h=$(health)
	[ "$h" = "503 down ok" ] && saw_down=yes
	K2=$(kek_pid)
	[ -n "$K2" ] && [ "$K2" != "$K1" ] && [ "$h" = "200 ok ok" ] && break
	sleep 0.05
done
assert "a new key process within 5 s (was $K1, now ${K2:-none})" test -n "$K2" -a "$K2" != "$K1"
assert "health: ok again" test "$(health)" = "200 ok ok"
assert "the death is audited" grep -q '"event":"kms.keyproc.exit"' "$KMS_STATE/audit.log"
assert "the restart is audited" grep -q '"event":"kms.keyproc.restart"' "$KMS_STATE/audit.log"
check "releases work after the restart" 0 "$SL" decrypt "${K[@]}" a.sld -o d1
assert "round trip" cmp -s plain d1

# --- a release in flight when it dies: 503, the retry is released -------------
K2=$(kek_pid)
kill -STOP "$K2"
"$SL" decrypt "${K[@]}" a.sld -o d2 >dec.out 2>dec.err &
DEC=$!
sleep 1
kill -9 "$K2"
wait "$DEC"
rc=$?
cat dec.err
assert "the decrypt whose release was in flight succeeds (exit $rc)" test "$rc" = 0
assert "it was retried after a 503" grep -q "retrying" dec.err
assert "not refused as a reused nonce" sh -c "! grep -q nonce_reused dec.err"
assert "no release denial in the audit log" sh -c "! grep '\"event\":\"kms.release\"' '$KMS_STATE/audit.log' | grep -q '\"decision\":\"deny\"'"
stop_kms

# --- PostgreSQL restarted between releases ---------------------------------------
if ! pg_bin >/dev/null; then
	skip "PostgreSQL server binaries not installed: the restart case"
	finish
fi
start_pg || exit 1
printf '{"store": "%s", "enroll_rate_per_min": 0}\n' "$PG_URI" >store.json
start_kms "$T/pgk" --config "$T/store.json" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "pg: enroll" 0 "$SL" enroll "${K[@]}" -q
check "pg: key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id k
check "pg: encrypt" 0 "$SL" encrypt "${K[@]}" --admin-token-file "$KMS_TOKEN" --key-id k --dataset-id ds plain -o p.sld
check "pg: a release" 0 "$SL" decrypt "${K[@]}" p.sld -o p1
stop_pg
restart_pg || exit 1
check "pg: the first release after PostgreSQL restarted succeeds" 0 "$SL" decrypt "${K[@]}" p.sld -o p2
assert "pg: round trip" cmp -s plain p2
assert "pg: no 503 on the way" sh -c "! grep -q retrying '$T/err'"
check "pg: and the next" 0 "$SL" decrypt "${K[@]}" p.sld -o p3
assert "pg: no release denial in the audit log" sh -c "! grep '\"event\":\"kms.release\"' '$KMS_STATE/audit.log' | grep -q '\"decision\":\"deny\"'"
finish
