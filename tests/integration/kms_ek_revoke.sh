#!/usr/bin/env bash
# Revocation names the machine, not only the AK: after `enroll revoke`, the
# same TPM (the same EK) cannot come back with a second AK at another handle
# (403 naming the EK, audited), and releases nothing, until an admin
# re-admits the EK (`enroll readmit`, audited; refused without the admin
# token); then a new AK enrolls and releases, while the revoked AK stays
# revoked. `enroll list` says revoked (text and --json), and lists the
# revoked machine.
. "$(dirname "$0")/lib.sh"

for tool in swtpm python3; do
	command -v "$tool" >/dev/null || { echo "# SKIP: $tool not installed"; exit 77; }
done
cd "$T" || exit 1
start_swtpm tpm
start_kms "$T/kms" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
A=(--admin-token-file "$KMS_TOKEN")
head -c 20000 /dev/urandom >plain
check "enroll the first AK" 0 "$SL" enroll "${K[@]}" -q
check "key create" 0 "$SL" key create "${K[@]}" "${A[@]}" --id k1
check "encrypt" 0 "$SL" encrypt "${K[@]}" "${A[@]}" --key-id k1 --dataset-id ds plain -o a.sld
check "the enrolled machine decrypts" 0 "$SL" decrypt "${K[@]}" a.sld -o d0.bin
"$SL" enroll list "${K[@]}" "${A[@]}" --json >list0.json
AK=$(python3 -c 'import json; print(json.load(open("list0.json"))["aks"][0]["name"])')
EK=$(python3 -c 'import json; print(json.load(open("list0.json"))["aks"][0]["ek_sha256"])')

check "enroll revoke" 0 "$SL" enroll revoke "${K[@]}" "${A[@]}" "$AK"
assert "the revocation record names the machine's EK" \
	sh -c "grep '\"kms.ak.revoke\"' '$KMS_STATE/audit.log' | grep -q '$EK'"
check_err "the revoked AK releases nothing" 3 "revoked" "$SL" decrypt "${K[@]}" a.sld -o d1.bin
export SECLAUNCH_AK_HANDLE=0x81010010
check_err "the same TPM with a second AK (another handle): enrollment refused naming the EK" 5 \
	"ek_revoked.*$EK" "$SL" enroll "${K[@]}"
assert "that refusal is audited" \
	sh -c "grep '\"kms.enroll\"' '$KMS_STATE/audit.log' | grep '\"deny\"' | grep -q 'ek_revoked'"
check_err "and the second AK releases nothing" 3 "not enrolled|ak_not_enrolled|revoked" \
	"$SL" decrypt "${K[@]}" a.sld -o d2.bin
assert "no plaintext from the refused releases" test ! -e d1.bin -a ! -e d2.bin
unset SECLAUNCH_AK_HANDLE

check "enroll list" 0 "$SL" enroll list "${K[@]}" "${A[@]}"
assert "enroll list (text): the revoked AK says REVOKED, not enrolled" \
	sh -c "grep '^$AK ' '$T/out' | grep -q REVOKED && ! grep '^$AK ' '$T/out' | grep -q '  enrolled  '"
assert "enroll list (text): the machine is listed revoked" grep -q "machine ek sha256:$EK  REVOKED" "$T/out"
check "enroll list --json" 0 "$SL" enroll list "${K[@]}" "${A[@]}" --json
assert "enroll list --json: the AK revoked, its machine too" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
a = [x for x in r["aks"] if x["name"] == sys.argv[2]][0]
sys.exit(not (a["revoked"] is True and a["ek_revoked"] is True and
              [e["ek_sha256"] for e in r["revoked_eks"]] == [sys.argv[3]]))' "$T/out" "$AK" "$EK"

(umask 077 && echo not-the-admin-token-at-all >wrong.token)
check_err "readmit without the admin token: refused" 5 "401|admin" \
	"$SL" enroll readmit "${K[@]}" --admin-token-file wrong.token "$EK"
assert "the refused readmit is audited" \
	sh -c "grep '\"kms.ek.readmit\"' '$KMS_STATE/audit.log' | grep -q '\"deny\"'"
check_err "readmit of an EK that is not revoked: refused naming it" 5 "not revoked" \
	"$SL" enroll readmit "${K[@]}" "${A[@]}" "$(printf '%064d' 7)"
check_err "readmit of a malformed digest: refused naming the field" 5 "ek_sha256" \
	"$SL" enroll readmit "${K[@]}" "${A[@]}" abc
check "an admin re-admits the machine" 0 "$SL" enroll readmit "${K[@]}" "${A[@]}" "$EK"
assert "the re-admission is audited" \
	sh -c "grep '\"kms.ek.readmit\"' '$KMS_STATE/audit.log' | grep '\"allow\"' | grep -q '$EK'"
export SECLAUNCH_AK_HANDLE=0x81010010
check "re-admitted: the second AK enrolls" 0 "$SL" enroll "${K[@]}" -q
check "and releases" 0 "$SL" decrypt "${K[@]}" a.sld -o d3.bin
assert "round trip" cmp -s plain d3.bin
unset SECLAUNCH_AK_HANDLE
check_err "the revoked AK itself stays revoked" 3 "revoked" "$SL" decrypt "${K[@]}" a.sld -o d4.bin
check "the audit log verifies" 0 "$SL" audit verify --chain-only "$KMS_STATE/audit.log"
finish
