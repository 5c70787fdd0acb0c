#!/usr/bin/env bash
# `seclaunch policy explain` on the claims `seclaunch verify --json` prints
# gives the decision seclaunchd gives for the same TPM evidence: every reason
# explain names is in seclaunchd's 403, and a rule change flips both.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
build_probe || { echo "cannot build kms_probe" >&2; exit 1; }
# a port picked free can be taken before swtpm binds it (tests run side by side)
for _ in 1 2 3; do
	start_swtpm tpm 2>/dev/null && break
	rm -rf "$T/tpm"
done

# the machine's claims, as an operator would look at them
NONCE=$(python3 -c 'print("5a" * 32)')
check "attest" 0 "$SL" attest --tee tpm2 --nonce "$NONCE" --export-ak ak.pem -o ev.json
check "verify --json" 0 "$SL" verify ev.json --nonce "$NONCE" --ak-pin ak.pem --json
cp "$T/out" claims.json
PCR0=$(python3 -c 'import json; print(json.load(open("claims.json"))["tpm.pcr.sha256.0"])')
assert "claims hold PCR 0" test ${#PCR0} -eq 64

"$SL" policy keygen --secret-key p.key --public-key p.pub -W >/dev/null
# write_policy FILE PCR7-VALUE TEE-KINDS-JSON
write_policy() {
	cat >"$1" <<EOF
{"version": 1,
 "datasets": [
  {"id": "ds-*", "allowed_regions": ["eu"], "tee_kinds": $3,
   "measurements": {"tpm2": {"sha256": {"0": "$PCR0", "7": "$2"}}}}],
 "keys": {"k1": ["ds-*"]}}
EOF
	"$SL" policy sign --secret-key p.key --policy "$1" -q
}
write_policy policy.json "$(python3 -c 'print("ee" * 32)')" '["tpm2"]'

check "explain denies (exit 4)" 4 "$SL" policy explain --policy policy.json --policy-pubkey p.pub \
	--claims claims.json --dataset ds-A --key k1 --json
cp "$T/out" explain.json
python3 -c 'import json; [print(r) for r in json.load(open("explain.json"))["reasons"]]' >explain.reasons
assert "explain: PCR 7 reason" grep -q 'measurements.tpm2.sha256.7: claim tpm.pcr.sha256.7 is' explain.reasons
assert "explain: no region reason" grep -q 'allowed_regions: no region claim' explain.reasons
assert "explain: PCR 0 passes" python3 -c '
import json, sys
m = json.load(open("explain.json"))["matched"]
sys.exit(0 if any("measurements.tpm2.sha256.0: claim tpm.pcr.sha256.0 matches" in x for x in m) else 1)'

# the same policy in seclaunchd, the same TPM, a real release
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || exit 1
export SECLAUNCH_KMS_CA=$KMS_CA
head -c 100000 /dev/urandom >plain
check "enroll" 0 "$SL" enroll --kms "$KMS_URL" -q
check "key create" 0 "$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id k1
check "encrypt --kms" 0 "$SL" encrypt --kms "$KMS_URL" --key-id k1 --admin-token-file "$KMS_TOKEN" \
	--dataset-id ds-A plain -o a.sld
W=$(wrapped_of a.sld)
check "seclaunchd denies the release (exit 4)" 4 "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W"
cp "$T/err" kms.err
n=0
while IFS= read -r reason; do
	n=$((n + 1))
	assert "seclaunchd gives explain's reason $n" grep -qF -- "$reason" kms.err
done <explain.reasons
assert "explain found reasons to compare" test "$n" -ge 2

# the TEE rule changed: both now name tee_kinds as well
write_policy policy2.json "$(python3 -c 'import json; print(json.load(open("claims.json"))["tpm.pcr.sha256.7"])')" '["sev-snp"]'
check "explain denies on the TEE kind" 4 "$SL" policy explain --policy policy2.json --policy-pubkey p.pub \
	--claims claims.json --dataset ds-A --key k1
assert "explain: TEE kind reason" grep -q "tee_kinds: TEE kind 'tpm2' is not allowed (allowed: sev-snp)" "$T/out"
assert "explain: PCR 7 now matches" grep -q "measurements.tpm2.sha256.7: claim tpm.pcr.sha256.7 matches" "$T/out"
stop_pid "$KMS_PID"
start_kms "$T/kms2" --policy "$T/policy2.json" --policy-pubkey "$T/p.pub" || exit 1
check "enroll (2)" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
check "key create (2)" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id k1
check "encrypt --kms (2)" 0 "$SL" encrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" --key-id k1 \
	--admin-token-file "$KMS_TOKEN" --dataset-id ds-A plain -o b.sld
W=$(wrapped_of b.sld)
check_err "seclaunchd denies on the TEE kind too" 4 "tee_kinds: TEE kind 'tpm2' is not allowed \(allowed: sev-snp\)" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W"
assert "and not on PCR 7 any more" sh -c "! grep -q 'sha256.7: claim' '$T/err'"

finish
