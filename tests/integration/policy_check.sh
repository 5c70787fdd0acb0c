#!/usr/bin/env bash
# `seclaunch policy check`: every error with its JSON path (text and --json),
# suggestions for typos, warnings for dangerous gaps and --strict; and the
# dataset naming rule at encrypt time (each refusal names the character).
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
M=$(printf 'a%.0s' {1..96})

cat >bad.json <<'JSON'
{"version": 1, "datasetz": [],
 "datasets": [{"id": "sales 2026/EU", "allowed_region": ["eu"],
   "allowed_regions": ["eux", "aws:eu-west-9"], "tee_kinds": ["sev-snpp"], "key_ttl": 0}],
 "keys": {"k": ["a*b", "../x"]}}
JSON
check_err "check lists the first error" 2 'bad.json: \$: unknown field .datasetz. \(did you mean .datasets.\?\)' \
	"$SL" policy check --policy bad.json
assert "... and every other one, each with its path" python3 - "$T/err" <<'PY'
import sys
err = open(sys.argv[1]).read()
want = [
    "error: bad.json: $.datasets[0]: unknown field 'allowed_region' (did you mean 'allowed_regions'?)",
    "error: bad.json: $.datasets[0].id: dataset id pattern: ' ' at byte 5 is not allowed",
    "error: bad.json: $.datasets[0].allowed_regions[0]: unknown region group 'eux' (did you mean 'eu'?)",
    "error: bad.json: $.datasets[0].allowed_regions[1]: pattern 'aws:eu-west-9' matches no known region (did you mean 'aws:eu-west-1'?)",
    "error: bad.json: $.datasets[0].tee_kinds[0]: not a TEE kind (tpm2, sev-snp, tdx, aws-nitro) (did you mean 'sev-snp'?)",
    "error: bad.json: $.datasets[0].key_ttl: must be a number of seconds",
    "error: bad.json: $.keys.k[1]: dataset id pattern: '.' at byte 0 is not allowed",
]
missing = [w for w in want if w not in err]
assert not missing, missing
assert err.count("error: bad.json:") == 8, err
PY
check "check --json on an invalid policy: exit 2" 2 "$SL" policy check --json --policy bad.json
assert "--json prints {ok:false, errors:[{path,message}], warnings} on failure" python3 - "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is False and r["warnings"] == [] and r["policy"] == "bad.json", r
assert len(r["errors"]) == 8, r["errors"]
assert all(set(e) == {"path", "message"} for e in r["errors"])
assert {"path": "$.datasets[0].allowed_regions[0]", "message": "unknown region group 'eux' (did you mean 'eu'?)"} in r["errors"]
PY
printf '{"version": 1,' >notjson.json
check "check --json on broken JSON: exit 2, still a report" 2 "$SL" policy check --json --policy notjson.json
assert "the report names \$ and the JSON error" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is False and r["errors"][0]["path"] == "$" and "not valid JSON" in r["errors"][0]["message"]' "$T/out"

# a valid policy with dangerous gaps: warnings, exit 0; --strict: exit 2
cat >gaps.json <<'JSON'
{"version": 1,
 "datasets": [{"id": "clinical-*", "classification": "restricted", "allowed_regions": ["eu"],
   "tee_kinds": ["sev-snp", "tdx"]}]}
JSON
check "check a policy with gaps: valid, exit 0" 0 "$SL" policy check --policy gaps.json
assert "warns: SNP rule without measurements" grep -q "warning: gaps.json: \$.datasets\[0\].measurements: rule 'clinical-\*' allows sev-snp but pins no SEV-SNP launch measurement" "$T/err"
assert "warns: TDX rule without measurements" grep -q "allows tdx but pins no TDX MRTD/RTMR" "$T/err"
assert "warns: rule without min_tcb" grep -q "warning: gaps.json: \$.datasets\[0\].min_tcb: rule 'clinical-\*' sets no minimum TCB" "$T/err"
assert "warns: restricted data without key_ttl" grep -q "warning: gaps.json: \$.datasets\[0\].key_ttl: .*classified 'restricted' but sets no key_ttl" "$T/err"
assert "warns: no keys map" grep -q "warning: gaps.json: \$.keys: no keys map" "$T/err"
assert "says valid with the warning count" grep -q "gaps.json: valid policy v1 (sha256 [0-9a-f]*), 5 warning(s)" "$T/out"
check_err "--strict makes the warnings errors: exit 2" 2 "error: gaps.json: \\\$.datasets\[0\].measurements: \(--strict\) rule" \
	"$SL" policy check --strict --policy gaps.json
check "--strict --json: exit 2" 2 "$SL" policy check --strict --json --policy gaps.json
assert "--strict --json: five errors, no warnings" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is False and len(r["errors"]) == 5 and r["warnings"] == [], r' "$T/out"

cat >good.json <<JSON
{"version": 1,
 "datasets": [{"id": "clinical-*", "classification": "restricted", "allowed_regions": ["eu"],
   "tee_kinds": ["sev-snp"], "measurements": {"sev-snp": {"measurement": "$M"}},
   "min_tcb": {"sev-snp": {"snp": 8}}, "key_ttl": 600,
   "cloud_identity": {"gcp_project_ids": ["ml-train-eu"], "aws_account_ids": ["123456789012"]}}],
 "keys": {"k": ["clinical-*"]}}
JSON
# a tpm2 rule without PCR pins is the same gap as an SNP rule without a measurement
cat >tpm-gap.json <<'JSON'
{"version": 1,
 "datasets": [{"id": "tpm-*", "allowed_regions": ["eu"], "tee_kinds": ["tpm2"]}],
 "keys": {"k": ["tpm-*"]}}
JSON
check_err "--strict: a tpm2 rule without PCR pins is an error, exit 2" 2 \
	"error: tpm-gap.json: \\\$.datasets\[0\].measurements: \(--strict\) rule 'tpm-\*' allows tpm2 but pins no TPM PCR values" \
	"$SL" policy check --strict --policy tpm-gap.json
cat >tpm-pinned.json <<JSON
{"version": 1,
 "datasets": [{"id": "tpm-*", "allowed_regions": ["eu"], "tee_kinds": ["tpm2"],
   "measurements": {"tpm2": {"sha256": {"7": ["$(printf 'a%.0s' $(seq 64))"]}}}}],
 "keys": {"k": ["tpm-*"]}}
JSON
"$SL" policy check --json --policy tpm-pinned.json >"$T/out" 2>"$T/err"
assert "a tpm2 rule that pins PCR 7: no measurements warning" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is True and not [w for w in r["warnings"] if w["path"].endswith(".measurements")], r' "$T/out"
check "a policy without gaps passes --strict" 0 "$SL" policy check --strict --json --policy good.json
assert "--json on success: ok, no errors, no warnings, the digest" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is True and r["errors"] == [] and r["warnings"] == [] and len(r["policy_digest"]) == 64, r' "$T/out"
check_err "usage: check needs --policy" 1 "needs --policy" "$SL" policy check --strict

# --- the dataset naming rule at encrypt time: creating is strict
head -c 1000 /dev/urandom >plain
check "keygen" 0 "$SL" keygen -o k
for id in 'sales 2026/EU' '../../etc' "$(printf 'daten-\xc3\xbc')" 'a*b' '-rf' '=HYPERLINK(1)'; do
	check_err "encrypt refuses dataset id '$id'" 1 "--dataset-id: dataset id: .* at byte [0-9]+ is not allowed" \
		"$SL" encrypt -q --key-file k --dataset-id "$id" plain -o bad.sld
done
assert "no output after the refusals" test ! -e bad.sld
check_err "encrypt --kms refuses before contacting the KMS" 1 "--dataset-id: dataset id: ' ' at byte 5" \
	"$SL" encrypt -q --kms https://127.0.0.1:1 --key-id k --admin-token-file k --dataset-id 'sales 2026' plain -o bad.sld
check "encrypt accepts team:sales-2026.eu_v1" 0 "$SL" encrypt -q --key-file k --dataset-id team:sales-2026.eu_v1 plain -o ok.sld
check "... and it decrypts" 0 "$SL" decrypt -q --key-file k ok.sld -o ok.out
assert "round trip" cmp plain ok.out

# --- and seclaunchd's wrap (a wrap makes a new dataset's key): 400 naming why
if [ -x "$SLD" ]; then
	start_kms "$T/kms" || exit 1
	check "key create" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id kw
	wrap() { # DATASET_ID -> "STATUS BODY"
		python3 - "$KMS_CA" "$KMS_URL" "$(cat "$KMS_TOKEN")" "$1" <<'PY'
import base64, http.client, json, ssl, sys, urllib.parse
ca, url, token, ds = sys.argv[1:5]
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca), timeout=20)
c.request("POST", "/v1/keys/kw/wrap", body=json.dumps({"dataset_id": ds, "dek": base64.b64encode(bytes(32)).decode()}),
          headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode(errors="replace").replace("\n", " "))
PY
	}
	for id in 'sales 2026/EU' '../../etc' 'a*b'; do
		got=$(wrap "$id")
		assert "KMS wrap refuses dataset id '$id' (400, naming the rule)" \
			grep -Eq '^400 .*dataset_id: dataset id: .* at byte [0-9]+ is not allowed' <<<"$got"
	done
	got=$(wrap "team:sales-2026")
	assert "KMS wrap accepts team:sales-2026" grep -q '^200 ' <<<"$got"
	stop_pid "$KMS_PID"
else
	skip "KMS wrap refusals" "no seclaunchd binary in $SL_BIN"
fi

finish
