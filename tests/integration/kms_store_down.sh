#!/usr/bin/env bash
# With its state store down seclaunchd decides nothing and says so: a
# challenge, an AK revocation and the AK list are 503 store-unavailable
# (not 429 busy, not 404 unknown-ak, not 500), and they work again once the
# store is back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

if ! pg_bin >/dev/null; then
	echo "# SKIP: PostgreSQL server binaries not installed (Debian postgresql; scripts/install-deps)"
	exit 77
fi
cd "$T" || exit 1
start_pg || exit 1
printf '{"store": "%s"}\n' "$PG_URI" >store.json
start_kms "$T/k" --config "$T/store.json" || exit 1
cat >req.py <<'EOP'
import http.client, ssl, sys, urllib.parse
ca, url, token = sys.argv[1:4]
u = urllib.parse.urlparse(url)
for line in sys.stdin:
    a = line.split(None, 2)
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca), timeout=60)
    c.request(a[0], a[1], body=a[2].strip() if len(a) > 2 else "",
              headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = c.getresponse()
    print(r.status, r.read().decode(errors="replace").replace("\n", " "))
    sys.stdout.flush()
EOP
ask() { python3 req.py "$KMS_CA" "$KMS_URL" "$(cat "$KMS_OP")"; }
KMS_OP=$KMS_TOKEN # the admin token holds every scope
stop_pg
ask >down.out <<'EOF'
POST /v1/challenge {}
POST /v1/aks/revoke {"name":"000b0102"}
GET /v1/aks
EOF
cat down.out | cut -c1-200
assert "a challenge with the store down: 503 store-unavailable (not 429 busy)" \
	bash -c "sed -n 1p down.out | grep -q '^503 .*store-unavailable'"
assert "a revocation with the store down: 503 (not 404 unknown-ak)" \
	bash -c "sed -n 2p down.out | grep -q '^503 .*store-unavailable'"
assert "the AK list with the store down: 503 (not 500)" \
	bash -c "sed -n 3p down.out | grep -q '^503 .*store-unavailable'"
restart_pg || exit 1
ok=1
for _ in $(seq 40); do
	echo "POST /v1/challenge {}" | ask >up.out
	grep -q '^200 ' up.out && { ok=0; break; }
	sleep 0.25
done
assert "the store back: challenges again" test "$ok" = 0
ask >up2.out <<'EOF'
POST /v1/aks/revoke {"name":"000b0102"}
GET /v1/aks
EOF
assert "... an unknown AK is 404 again, the list 200" \
	bash -c "sed -n 1p up2.out | grep -q '^404 ' && sed -n 2p up2.out | grep -q '^200 '"
stop_pid "$KMS_PID"
stop_pg
finish
