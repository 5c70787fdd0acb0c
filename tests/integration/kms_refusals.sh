#!/usr/bin/env bash
# seclaunchd's refusals: cheap checks before verification (an unknown nonce
# costs no evidence verification; the /metrics counter says so), the
# per-source refusal limit (429 with Retry-After, before the body is read),
# the audit aggregation of cheap refusals (one record in full, then one
# summary carrying the count), fail-closed auditing (no kms.start record: no
# start, exit 7 naming the log; a decision that cannot be recorded is 503,
# denials included), the --dev state directory check (0777 or another
# owner refused), the policy's keys map on /v1/keys/{id}/wrap, and repeated
# evidence / keys in one release (400 naming the index).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kms_lib.bash"

cd "$T" || exit 1

cat >req.py <<'EOP'
# req.py CA URL [TOKEN] < commands; one command a line, one answer a line:
#   post PATH BODY            -> STATUS RETRY_AFTER BODY
#   release-unknown N FILE    -> N releases with fresh unknown nonces and the
#                                evidence array in FILE; prints the statuses
#   release-fresh N FILE      -> N releases, each with a nonce from
#                                /v1/challenge and its policy digest
#   metric NAME               -> the value ("absent" when not exported)
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
        print(v[0] if v else "absent")
    sys.stdout.flush()
EOP
# ask CMD...: one request per line on stdin, answers on stdout
ask() { python3 req.py "$KMS_CA" "$KMS_URL" "$(cat "$KMS_TOKEN")"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$KMS_PID/stat"; }
records() { # event reason-code: kms.release records of a denial code (in full or summary)
	grep -c "\"event\":\"$1\".*\"code\":\"$2\"" "$KMS_STATE/audit.log"
}

# ---- 8: the nonce first; aggregated refusals -----------------------------
# Eight distinct real SEV-SNP reports (with their VCEKs): the most a
# release may carry, and the most expensive to verify.
S=$SL_VECTORS/amd-sev-snp
n=0
for r in trustee_milan:trustee_milan_vcek.der gsg_milan:gsg_milan_vcek.der \
	virtee_milan:virtee_milan_vcek.der azure_milan_v2:azure_milan_v2_vcek.der \
	azure_milan_v3:azure_milan_v3_vcek.pem azure_genoa_v3:azure_genoa_vcek.pem \
	trustee_milan_vlek:trustee_milan_vlek.der; do
	"$SL" evidence import --kind sev-snp --report "$S/${r%%:*}_report.bin" \
		--certs "$S/${r#*:}" -o "snp$n.json" 2>/dev/null && n=$((n + 1))
done
# an eighth distinct item: the first report without its certificate
"$SL" evidence import --kind sev-snp --report "$S/trustee_milan_report.bin" -o "snp$n.json" 2>/dev/null &&
	n=$((n + 1))
python3 -c 'import json,sys; print(json.dumps([json.load(open(f)) for f in sys.argv[1:]]))' snp*.json >ev8.json
assert "eight distinct SEV-SNP evidence items from the vectors" test "$n" -eq 8

printf '{"refusal_rate_per_min": 100000, "audit_aggregate_s": 600, "collateral_dir": "%s"}\n' \
	"$S/trust" >cfg_a.json
start_kms "$T/ka" --config "$T/cfg_a.json" || exit 1
N=30
t0=$(cpu_ticks)
echo "release-unknown $N ev8.json" | ask >unknown.out
t1=$(cpu_ticks)
assert "$N releases with unknown nonces: all 403 nonce_unknown" \
	test "$(tr ' ' '\n' <unknown.out | grep -c '^403:nonce_unknown$')" -eq $N
assert "unknown nonces cost no evidence verification (metrics counter stays 0)" \
	test "$(echo 'metric seclaunchd_evidence_verified_total' | ask)" = 0
assert "the refusals were aggregated: the first in full, $((N - 1)) counted" \
	test "$(echo 'metric seclaunchd_audit_aggregated_total' | ask)" = $((N - 1))
assert "one kms.release record of nonce_unknown written so far (not one fsync each)" \
	test "$(records kms.release nonce_unknown)" -eq 1
t2=$(cpu_ticks)
echo "release-fresh $N ev8.json" | ask >fresh.out
t3=$(cpu_ticks)
assert "$N releases with fresh nonces: all refused after verification" \
	test "$(tr ' ' '\n' <fresh.out | grep -Ec '^403:(binding_mismatch|evidence_invalid|ak_not_enrolled)$')" -eq $N
assert "fresh nonces: every evidence item was verified ($((8 * N)) items)" \
	test "$(echo 'metric seclaunchd_evidence_verified_total' | ask)" = $((8 * N))
assert "refusals after verification are each written in full" \
	test "$(grep -Ec '"event":"kms.release".*"code":"(binding_mismatch|evidence_invalid|ak_not_enrolled)"' "$KMS_STATE/audit.log")" -eq $N
tck=$(getconf CLK_TCK)
python3 -c "import sys; t=$tck; n=$N; print('# server cpu_ms_per_release unknown_nonce=%.2f fresh_nonce_8_snp=%.2f' % (($t1-$t0)*1000/t/n, ($t3-$t2)*1000/t/n))"
stop_pid "$KMS_PID"
assert "at stop: one summary record carries the count of the counted refusals" \
	grep -q "\"aggregated\":{[^}]*\"reason\":\"nonce_unknown\",\"count\":$((N - 1))," "$KMS_STATE/audit.log"
assert "the summary names the source" \
	grep -q '"aggregated":{[^}]*"source":"127.0.0.1"' "$KMS_STATE/audit.log"
check "the log with its summary verifies under the checkpoint key" 0 \
	"$SL" audit verify --pubkey "$KMS_STATE/audit.pub" --require-final-checkpoint "$KMS_STATE/audit.log"

# ---- 8: per-source refusal limit -------------------------------------------
printf '{"refusal_rate_per_min": 5}\n' >cfg_b.json
start_kms "$T/kb" --config "$T/cfg_b.json" || exit 1
echo "release-unknown 5 ev8.json" | ask >lim.out
assert "five refusals within the limit: 403" test "$(grep -o '403:nonce_unknown' lim.out | wc -l)" -eq 5
echo "post /v1/release {\"nonce\":\"not even parsed\"}" | ask >lim429.out
assert "the sixth release from the source: 429 before its body is read" \
	grep -Eq '^429 [0-9]+ .*too many refused releases from 127.0.0.1' lim429.out
assert "429 carries Retry-After (seconds until a refusal is allowed again)" \
	bash -c "test \$(cut -d' ' -f2 lim429.out) -ge 1 && test \$(cut -d' ' -f2 lim429.out) -le 12"
assert "a challenge is still served to the source" \
	bash -c "echo 'post /v1/challenge {}' | python3 req.py '$KMS_CA' '$KMS_URL' | grep -q '^200 '"
assert "the 429 is audited (rate_limited)" test "$(records kms.release rate_limited)" -eq 1
assert "rate_limited shows in the denial metrics" \
	test "$(echo 'metric seclaunchd_denials_total{reason="rate_limited"}' | ask)" = 1
stop_pid "$KMS_PID"

# ---- 9: fail closed when the audit log cannot be written -------------------
mkdir -p "$T/kc" && mkdir "$T/kc/audit.log"
# (the first record of a fresh --dev state is the development output key's
# creation, then kms.start: whichever cannot be written stops it)
check_err "the audit log cannot be written (it is a directory): exit 7 naming it" 7 \
	"audit log $T/kc/audit.log(: cannot write the kms.start record|: .*Is a directory)" \
	timeout 20 "$SLD" --dev --state "$T/kc" --listen 127.0.0.1:0
assert "... and it never listened (no url file)" test ! -e "$T/kc/url"
: >"$T/notadir"
printf '{"audit_log": "%s/notadir/audit.log"}\n' "$T" >cfg_c.json
mkdir -p "$T/kc2"
check_err "the audit log cannot be opened (its parent is a file): exit 7 naming it" 7 \
	"audit log $T/notadir/audit.log" \
	timeout 20 "$SLD" --dev --state "$T/kc2" --listen 127.0.0.1:0 --config "$T/cfg_c.json"

start_kms "$T/kd" || exit 1
echo 'post /v1/keys {"id":"k"}' | ask >/dev/null
echo "release-unknown 1 ev8.json" | ask >/dev/null # one in full: the window is open
rm -f "$KMS_STATE/audit.log" && mkdir "$KMS_STATE/audit.log" # the log is gone from under it
ask >broken.out <<EOF
post /v1/keys/k/wrap {"dataset_id":"d","dek":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
EOF
python3 req.py "$KMS_CA" "$KMS_URL" "wrong-token-0123456789" >>broken.out <<EOF
post /v1/keys {"id":"k2"}
EOF
echo "release-unknown 1 ev8.json" | ask >>broken.out
echo 'post /v1/enroll {"ek_pub":"AAAA","ak_pub":"AAAA"}' | ask >>broken.out
cat broken.out | cut -c1-160
assert "a grant (wrap) that cannot be recorded: 503 audit-unavailable" \
	bash -c "sed -n 1p broken.out | grep -Eq '^503 [0-9]+ .*audit-unavailable'"
assert "a failed admin authentication that cannot be recorded: 503, not 401" \
	bash -c "sed -n 2p broken.out | grep -Eq '^503 [0-9]+ .*audit-unavailable'"
assert "a release refusal that would only be counted: 503 while the log fails" \
	bash -c "sed -n 3p broken.out | grep -q '^503:'"
assert "an enrollment refusal that cannot be recorded: 503" \
	bash -c "sed -n 4p broken.out | grep -Eq '^503 [0-9]+ .*audit-unavailable'"
assert "the 503s are counted in /metrics" \
	test "$(echo 'metric seclaunchd_audit_unrecorded_total' | ask)" -ge 4
stop_pid "$KMS_PID"

# ---- 10: the --dev state directory -----------------------------------------
mkdir -m 0777 "$T/open" && chmod 0777 "$T/open"
check_err "--dev refuses a state directory of mode 0777, naming it and the fix" 2 \
	"$T/open: state directory has mode 0777.*chmod 700 $T/open" \
	timeout 20 "$SLD" --dev --state "$T/open" --listen 127.0.0.1:0
assert "... before writing anything into it" test -z "$(ls -A "$T/open")"
if [ "$(id -u)" = 0 ]; then
	mkdir -m 0700 "$T/theirs" && chown 12345:12345 "$T/theirs"
	check_err "--dev refuses a state directory owned by another uid" 2 \
		"$T/theirs: state directory is owned by uid 12345, not by uid 0" \
		timeout 20 "$SLD" --dev --state "$T/theirs" --listen 127.0.0.1:0
else
	skip "--dev refuses a foreign-owned state directory" "needs root to chown"
fi

# ---- 12: wrap follows the policy's keys map --------------------------------
"$SL" policy keygen --secret-key p.key --public-key p.pub -W >/dev/null 2>&1
cat >pol.json <<'EOF'
{"version": 1, "allow_unverified_region": true,
 "keys": {"kek-clin": ["clinical-*"], "kek-unlisted-elsewhere": ["x"]},
 "datasets": [{"id": "*", "allowed_regions": ["eu"], "tee_kinds": ["tpm2"]}]}
EOF
"$SL" policy sign --secret-key p.key --policy pol.json >/dev/null 2>&1
start_kms "$T/ke" --policy "$T/pol.json" --policy-pubkey "$T/p.pub" || exit 1
D=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
ask >wrap.out <<EOF
post /v1/keys {"id":"kek-clin"}
post /v1/keys {"id":"kek-other"}
post /v1/keys/kek-clin/wrap {"dataset_id":"clinical-7","dek":"$D"}
post /v1/keys/kek-clin/wrap {"dataset_id":"public-1","dek":"$D"}
post /v1/keys/kek-other/wrap {"dataset_id":"clinical-7","dek":"$D"}
EOF
assert "wrap allowed by the keys map: 200 with a wrapped DEK" \
	bash -c "sed -n 3p wrap.out | grep -q '^200 .*wrapped_dek'"
assert "wrap for a dataset the key may not serve: 403 naming the rule" \
	bash -c "sed -n 4p wrap.out | grep -q \"^403 .*keys.kek-clin: key 'kek-clin' may not serve dataset 'public-1'\""
assert "wrap under a key the policy does not list: 403" \
	bash -c "sed -n 5p wrap.out | grep -q \"^403 .*key 'kek-other' is not in the policy\""
assert "the refused wraps are audited as denials" \
	test "$(grep -c '"event":"kms.key.wrap".*"decision":"deny"' "$KMS_STATE/audit.log")" -eq 2

# ---- 13: repeated items in one release ---------------------------------------
python3 - >dup.in <<'EOP'
import base64, json
W = base64.b64encode(b"\x01" + bytes(60)).decode()
Z = base64.b64encode(bytes(32)).decode()
k = {"key_id": "kek-clin", "dataset_id": "clinical-7", "wrapped_dek": W}
base = {"nonce": Z, "eph_pub": Z, "policy_digest": Z}
print("post /v1/release " + json.dumps(dict(base, evidence=[{"kind": "tpm2"}], keys=[k, k])))
print("post /v1/release " + json.dumps(dict(base, evidence=[{"kind": "tpm2", "n": 1}, {"kind": "tdx"}, {"kind": "tpm2", "n": 1}], keys=[k])))
EOP
ask <dup.in >dup.out
assert "the same key twice in one release: 400 naming the index" \
	bash -c "sed -n 1p dup.out | grep -q '^400 .*keys\[1\]: repeats keys\[0\]'"
assert "the same evidence item twice: 400 naming the index" \
	bash -c "sed -n 2p dup.out | grep -q '^400 .*evidence\[2\]: repeats evidence\[0\]'"
stop_pid "$KMS_PID"

finish
