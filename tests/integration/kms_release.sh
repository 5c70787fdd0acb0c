#!/usr/bin/env bash
# seclaunchd end to end over TLS on loopback with a real swtpm: enrollment,
# key creation, encryption with the KMS, decryption through an attested
# release; then every refusal with its status (exit code) and reason code.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
build_probe || { echo "cannot build kms_probe" >&2; exit 1; }
start_swtpm tpm
start_kms "$T/kms" || exit 1
export SECLAUNCH_KMS_CA=$KMS_CA
head -c 3000000 /dev/urandom >plain

# --- the full path ------------------------------------------------------
check "enroll the TPM's AK" 0 "$SL" enroll --kms "$KMS_URL"
assert "enroll prints the AK name" grep -Eq "^enrolled AK 000b[0-9a-f]{64}$" "$T/out"
check "enroll is idempotent" 0 "$SL" enroll --kms "$KMS_URL" -q
check "key create" 0 "$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id k1
check_err "key create of an existing id: 409" 5 "409 Conflict: key 'k1' already exists" \
	"$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id k1
check "encrypt --kms" 0 "$SL" encrypt --kms "$KMS_URL" --key-id k1 --admin-token-file "$KMS_TOKEN" \
	--dataset-id ds-A plain -o a.sld
assert "the header names the KMS and key" \
	sh -c "'$SL' inspect a.sld | grep -q '\"key_id\": \"k1\"'"
check "decrypt --kms (challenge, quote, release)" 0 "$SL" decrypt --kms "$KMS_URL" a.sld -o dec.bin
assert "plaintext round trip" cmp -s plain dec.bin
assert "release audited as allow" grep -q '"event":"kms.release".*"decision":"allow"' "$KMS_STATE/audit.log"
assert "release audited with no lease (no key_ttl: \"lease\":null)" \
	sh -c "grep '\"event\":\"kms.release\".*\"decision\":\"allow\"' '$KMS_STATE/audit.log' | grep -q '\"lease\":null'"
assert "metrics count the release" test "$(kms_metric seclaunchd_releases_total)" -ge 1
W=$(wrapped_of a.sld)
# root takes a client token file another user owns (the packaged admin.token,
# owner _seclaunchd) when it is owner-only, never one group or others can read
if [ "$(id -u)" -eq 0 ]; then
	cp "$KMS_TOKEN" own.token && chown 65534:65534 own.token && chmod 600 own.token
	check "root: a 0600 token file owned by uid 65534 is taken" 0 \
		"$SL" key create --kms "$KMS_URL" --admin-token-file own.token --id k-own
	chmod 640 own.token
	check_err "root: the same file at 0640 is refused, naming the mode" 2 "own.token: mode 0640" \
		"$SL" key create --kms "$KMS_URL" --admin-token-file own.token --id k-own2
else
	skip "root and another user's token file" "not root"
fi

# --- refusals (exit 4 = denied, exit 3 = evidence not accepted; with the
# reason code: sl_kms_refusal_code is the one mapping, docs/exit-codes.md)
check_err "nonce reused" 4 "\[nonce_reused\]" "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" reuse
check_err "nonce never issued" 4 "\[nonce_unknown\]" "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" unknown-nonce
check_err "evidence bound to another eph_pub" 3 "\[binding_mismatch\].*extraData" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" other-eph
check_err "policy digest skew names both digests" 4 \
	"\[policy_digest_mismatch\].*binds policy [0-9a-f]{64} but this server enforces [0-9a-f]{64}" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" digest
check_err "unknown key id" 4 "\[key_unknown\].*'k9'" "$PROBE" "$KMS_URL" "$KMS_CA" release k9 ds-A "$W"
check_err "wrapped DEK of dataset A presented as B" 4 "\[unwrap_failed\].*key 'k1' for dataset 'ds-B'" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" dataset:ds-B
check_err "wrapped DEK bit-flipped" 4 "\[unwrap_failed\].*key 'k1'" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W" flip
check "the untouched request still releases" 0 "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$W"
assert "denials audited with reasons" grep -q '"decision":"deny","reasons":\[{"code":"nonce_reused"' "$KMS_STATE/audit.log"
assert "denials counted by reason" test "$(kms_metric 'seclaunchd_denials_total{reason="unwrap_failed"}')" -eq 2

# --- admin token ---------------------------------------------------------
echo "not-the-admin-token-at-all" >bad.token
chmod 600 bad.token
check_err "wrong admin token: 401" 5 "401 Unauthorized" \
	"$SL" key create --kms "$KMS_URL" --admin-token-file bad.token --id k2
curl -s -o noauth.json -w '%{http_code}' --cacert "$KMS_CA" -d '{"id":"k3"}' "$KMS_URL/v1/keys" >noauth.code
assert "missing admin token: 401 naming the header" \
	sh -c "grep -qx 401 noauth.code && grep -q 'missing .*Authorization: Bearer' noauth.json"
check_err "encrypt --kms with the wrong token fails before writing" 5 "401" \
	"$SL" encrypt --kms "$KMS_URL" --key-id k1 --admin-token-file bad.token --dataset-id ds-A plain -o b.sld
assert "no output left behind" test ! -e b.sld
assert "failed admin authentication is audited" \
	grep -q '"event":"kms.key.create".*"decision":"deny","reasons":\["POST /v1/keys: the bearer token is not one of seclaunchd.s tokens"\]' "$KMS_STATE/audit.log"

# --- enrollment ----------------------------------------------------------
check_err "enrollment answered with the wrong credential" 5 "403.*activated credential does not match" \
	"$PROBE" "$KMS_URL" "$KMS_CA" enroll-wrong
start_swtpm tpm2
check_err "evidence from a TPM whose AK is not enrolled (exit 3, as from run)" 3 "\[ak_not_enrolled\]" \
	"$SL" decrypt --kms "$KMS_URL" a.sld -o dec2.bin
assert "no plaintext from a refused release" test ! -e dec2.bin
check "after enrolling that TPM it releases" 0 "$SL" enroll --kms "$KMS_URL" -q
check "decrypt from the second TPM" 0 "$SL" decrypt --kms "$KMS_URL" a.sld -o dec2.bin

# --- production enrollment: an EK certificate is required ------------------
mkdir ekca
printf '{"ek_ca_dir": "%s/ekca", "accept_ek_without_cert": false}' "$T" >ekca.json
start_kms "$T/kms-ekca" --config "$T/ekca.json" || exit 1
check_err "EK without a certificate where an EK CA is configured: refused" 5 \
	"403.*ek_cert: an EK certificate that chains to the EK CA is required" \
	"$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA"
assert "nothing was enrolled" test "$(sqlite3 "$KMS_STATE/state.db" 'select count(*) from aks')" = 0
stop_pid "$KMS_PID"
# a TPM whose EK certificate a local CA issued (swtpm_setup + swtpm_localca)
L=$T/localca
mkdir -p "$L/ca" "$T/ektpm"
cat >"$L/swtpm-localca.conf" <<EOC
statedir = $L/ca
signingkey = $L/ca/signkey.pem
issuercert = $L/ca/issuercert.pem
certserial = $L/ca/certserial
EOC
cat >"$L/swtpm_setup.conf" <<EOC
create_certs_tool = /usr/bin/swtpm_localca
create_certs_tool_config = $L/swtpm-localca.conf
create_certs_tool_options = /etc/swtpm-localca.options
active_pcr_banks = sha256,sha1
EOC
if swtpm_setup --tpm2 --create-ek-cert --tpmstate "$T/ektpm" --config "$L/swtpm_setup.conf" --overwrite >"$T/setup.log" 2>&1; then
	SAVE_TCTI=$SECLAUNCH_TCTI
	start_swtpm ektpm
	mkdir ekca-local
	cp "$L/ca/issuercert.pem" ekca-local/
	printf '{"ek_ca_dir": "%s/ekca-local"}' "$T" >ekca-local.json
	start_kms "$T/kms-ekca-local" --config "$T/ekca-local.json" || exit 1
	check "EK certificate chaining to the EK CA: enrolled" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA"
	assert "the enrollment recorded the EK certificate" \
		grep -q '"event":"kms.enroll".*"ek_cert":true' "$KMS_STATE/audit.log"
	stop_pid "$KMS_PID"
	start_kms "$T/kms-ekca" --config "$T/ekca.json" || exit 1
	check_err "EK certificate from a CA the server does not trust: refused" 5 "403 Forbidden: .*[Cc]ertificate" \
		"$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA"
	stop_pid "$KMS_PID"
	export SECLAUNCH_TCTI=$SAVE_TCTI TPM2TOOLS_TCTI=$SAVE_TCTI
else
	skip "enrollment with an EK certificate" "swtpm_setup --create-ek-cert failed: $(tail -n1 "$T/setup.log")"
fi

# --- nonce expiry: a server whose challenges live 1 s ---------------------
echo '{"challenge_ttl_s": 1}' >ttl.json
MAIN_URL=$KMS_URL MAIN_CA=$KMS_CA MAIN_STATE=$KMS_STATE
start_kms "$T/kms-ttl" --config "$T/ttl.json" || exit 1
check "enroll with the short-TTL server" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
check "key create there" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" \
	--admin-token-file "$KMS_TOKEN" --id k1
check "encrypt there" 0 "$SL" encrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" --key-id k1 \
	--admin-token-file "$KMS_TOKEN" --dataset-id ds-A plain -o ttl.sld
check_err "nonce expired" 4 "\[nonce_expired\]" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$(wrapped_of ttl.sld)" expire:2
check "in time it releases" 0 "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ds-A "$(wrapped_of ttl.sld)"

# --- a signed policy with PCR rules per dataset ----------------------------
cat >policy.json <<'EOP'
{"version": 1,
 "allow_unverified_region": true,
 "datasets": [
  {"id": "ok-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"]},
  {"id": "pcr-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"],
   "measurements": {"tpm2": {"sha256": {"7": ["ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"]}}}}
 ],
 "keys": {"k1": ["ok-*", "pcr-*"]}}
EOP
check "policy keygen" 0 "$SL" policy keygen --secret-key pol.key --public-key pol.pub -W
check "policy sign" 0 "$SL" policy sign --secret-key pol.key --policy policy.json
start_kms "$T/kms-pol" --policy "$T/policy.json" --policy-pubkey "$T/pol.pub" || exit 1
check "enroll (signed policy)" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
check "key create (signed policy)" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" \
	--admin-token-file "$KMS_TOKEN" --id k1
for ds in ok-1 pcr-1; do
	check "encrypt $ds" 0 "$SL" encrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" --key-id k1 \
		--admin-token-file "$KMS_TOKEN" --dataset-id $ds plain -o $ds.sld
done
export KMS_PROBE_IDENTITY='[{"kind": "unsigned", "region": "aws:eu-west-1"}]'
check "dataset whose rule the claims meet: released" 0 \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 ok-1 "$(wrapped_of ok-1.sld)"
check_err "PCR values not allowed for the key's dataset" 4 \
	"\[policy_denied\].*measurements\.tpm2\.sha256\.7.*tpm\.pcr\.sha256\.7" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release k1 pcr-1 "$(wrapped_of pcr-1.sld)"
check_err "without a region the policy refuses" 4 "\[policy_denied\].*no region claim" \
	env -u KMS_PROBE_IDENTITY "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ok-1 "$(wrapped_of ok-1.sld)"
check_err "a client holding another policy version: skew names both digests" 4 \
	"\[policy_digest_mismatch\]" "$PROBE" "$KMS_URL" "$KMS_CA" release k1 ok-1 "$(wrapped_of ok-1.sld)" digest
assert "the signed policy's digest is in the audit records" \
	grep -q "\"policy_digest\":\"$(sha256sum policy.json | cut -c1-64)\"" "$KMS_STATE/audit.log"
unset KMS_PROBE_IDENTITY
finish
