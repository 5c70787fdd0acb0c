#!/usr/bin/env bash
# seclaunchd's release and enrollment records answer "which machine, in
# which region, got dataset X's key": the AK name, the TEE kinds, the
# measurements, the region and whether it was verified, the client address,
# the whole claim set, and the job's id at the record's top level; the CEF
# and OCSF exports carry them (CEF: source address, device uid and region;
# OCSF: the source endpoint, the rest in unmapped), and validate against OCSF 1.3.0.
# /metrics answers only the admin token.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
start_swtpm tpm
start_kms "$T/kms" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" -q
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id k
head -c 4000 /dev/urandom >plain
check "encrypt" 0 "$SL" encrypt "${K[@]}" --admin-token-file "$KMS_TOKEN" --key-id k --dataset-id dsx plain -o d.sld
check "run a job (dev policy)" 0 "$SL" run --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" \
	"${K[@]}" --tcti "$SWTPM_TCTI" --stage host d.sld -- true
start_swtpm other
check_err "a TPM that never enrolled: denied (3)" 3 "ak_not_enrolled" "$SL" decrypt "${K[@]}" d.sld -o x.bin

cat >subject.py <<'EOP'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
rel = [r for r in recs if r.get("event") == "kms.release"]
allow = [r for r in rel if r["decision"] == "allow" and r["details"].get("job")]
deny = [r for r in rel if r["decision"] == "deny"]
enr = [r for r in recs if r.get("event") == "kms.enroll"]
what = sys.argv[2]
def subject_ok(r, need_measurements):
    s = r["details"]["subject"]
    return (isinstance(s.get("ak_name"), str) and s["ak_name"].startswith("000b")
            and s.get("tee_kinds") == ["tpm2"] and s.get("client") == "127.0.0.1"
            and "region_verified" in s and isinstance(s.get("claims"), dict)
            and (not need_measurements or any(k.startswith("tpm.pcr.") for k in s["measurements"])))
if what == "job_id":
    ok = allow and all(r["job_id"] and r["job_id"] == r["details"]["job"]["id"] for r in allow)
elif what == "allow":
    ok = allow and all(subject_ok(r, True) and r["details"]["subject"]["claims"].get("tpm.ak.name")
                       == r["details"]["subject"]["ak_name"] for r in allow)
elif what == "deny":
    ok = deny and all(subject_ok(r, False) for r in deny)
elif what == "enroll":
    ok = enr and all(r["details"]["subject"]["client"] == "127.0.0.1" for r in enr)
else:
    ok = False
sys.exit(0 if ok else 1)
EOP
L=$KMS_STATE/audit.log
check "the release record carries job_id at the top level, equal to the job's id" 0 python3 subject.py "$L" job_id
check "the allow record names the AK, TEE kind, measurements, client and the claims" 0 python3 subject.py "$L" allow
check "the denial record names the (unenrolled) AK and the client" 0 python3 subject.py "$L" deny
check "enrollment records name the client" 0 python3 subject.py "$L" enroll
check "CEF export" 0 "$SL" audit export --format cef "$L"
assert "CEF: src and deviceExternalId (the AK)" grep -q "src=127.0.0.1.*deviceExternalId=000b" "$T/out"
check "OCSF export" 0 "$SL" audit export --format ocsf -o ocsf.jsonl "$L"
check "OCSF export validates against OCSF 1.3.0 (tests/vectors/ocsf)" 0 \
	python3 "$SL_ROOT/tests/integration/ocsf_validate.py" --schema "$SL_VECTORS/ocsf" ocsf.jsonl ||
	sed 's/^/    /' "$T/out" | head -n 20
assert "OCSF: releases and enrollments are API Activity, the client the source endpoint, the KMS the destination, the subject in unmapped" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
r=[e for e in ev if e["unmapped"]["event"] in ("kms.release", "kms.enroll") and "subject" in (e["unmapped"]["details"] or {})]
rel=[e for e in r if e["unmapped"]["event"] == "kms.release"]
ok = rel and all(e["class_uid"] == 6003 and e["src_endpoint"] == {"ip": "127.0.0.1"}
                 and e["dst_endpoint"].get("hostname") == e["unmapped"]["host"]
                 and e["unmapped"]["details"]["subject"]["ak_name"].startswith("000b")
                 and "device" not in e for e in r)
sys.exit(0 if ok else 1)' ocsf.jsonl
assert "OCSF: the seclaunchd log covers API Activity, Application Lifecycle, Entity Management and Base Event" python3 -c '
import json,sys
got={json.loads(l)["class_uid"] for l in open(sys.argv[1])}
sys.exit(0 if {0, 6002, 6003, 3004} <= got else print(sorted(got)) or 1)' ocsf.jsonl
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$KMS_CA" "$KMS_URL/metrics")
assert "/metrics without the admin token: 401 (got $code)" test "$code" = 401
assert "/metrics with the admin token: the counters" sh -c "curl -sf --cacert '$KMS_CA' -H \"Authorization: Bearer \$(cat '$KMS_TOKEN')\" '$KMS_URL/metrics' | grep -q '^seclaunchd_enrolled_aks 1'"
finish
