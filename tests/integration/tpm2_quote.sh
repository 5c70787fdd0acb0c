#!/usr/bin/env bash
# seclaunch attest / verify against a real swtpm: good quotes (RSA and ECC AKs,
# two PCR banks), the persistent AK, and every tamper case failing with exit 3
# and naming the check.
. "$(dirname "$0")/lib.sh"

N=5ec1a0c4000102030405060708090a0b0c0d0e0f101112131415161718191a1b

start_swtpm tpm || exit 1

# ---- good quotes -----------------------------------------------------------
check "rsa: attest" 0 "$SL" attest --tee tpm2 --nonce $N --export-ak "$T/ak.pem" -o "$T/ev.json"
check "rsa: verify with --ak-pin" 0 "$SL" verify "$T/ev.json" --nonce $N --ak-pin "$T/ak.pem" --json
cp "$T/out" "$T/claims.json"
assert "rsa: claims name the kind, binding, trust" \
	test "$(claim "$T/claims.json" tee.kind)/$(claim "$T/claims.json" binding)/$(claim "$T/claims.json" tpm.ak.trust)/$(claim "$T/claims.json" tpm.ak.alg)" = "tpm2/$N/pin/rsa"
pcr0=$(tpm2_pcrread sha256:0 | sed -n 's/.*0 *: 0x//p' | tr 'A-F' 'a-f')
assert "rsa: tpm.pcr.sha256.0 is the TPM's PCR 0" test "$(claim "$T/claims.json" tpm.pcr.sha256.0)" = "$pcr0"
assert "rsa: default selection is sha256:0-7" \
	test "$(python3 -c 'import json,sys; print(sorted(k for k in json.load(open(sys.argv[1])) if k.startswith("tpm.pcr.")))' "$T/claims.json" | tr -d "[]' ")" = \
	"tpm.pcr.sha256.0,tpm.pcr.sha256.1,tpm.pcr.sha256.2,tpm.pcr.sha256.3,tpm.pcr.sha256.4,tpm.pcr.sha256.5,tpm.pcr.sha256.6,tpm.pcr.sha256.7"
assert "rsa: clock claims present" test "$(claim "$T/claims.json" tpm.reset_count)" != "<absent>"

check "rsa: second attest" 0 "$SL" attest --tee tpm2 --nonce $N -o "$T/ev2.json"
assert "rsa: the AK is the same key on every invocation (persistent)" \
	test "$(ev_get "$T/ev.json" ak_name)" = "$(ev_get "$T/ev2.json" ak_name)"
assert "rsa: AK at persistent handle 0x81010002" sh -c 'tpm2_getcap handles-persistent | grep -q 0x81010002'
assert "no transient object left in the TPM" test -z "$(tpm2_getcap handles-transient)"

check "rsa: two banks sha1+sha256" 0 "$SL" attest --tee tpm2 --nonce $N --pcrs sha1:0,1,2+sha256:0,7,16 -o "$T/ev3.json"
check "rsa: two banks verify" 0 "$SL" verify "$T/ev3.json" --nonce $N --ak-pin "$T/ak.pem" --json
assert "rsa: both banks in the claims" \
	test "$(claim "$T/out" tpm.pcr.sha1.2)" != "<absent>" -a "$(claim "$T/out" tpm.pcr.sha256.16)" != "<absent>"

# A PCR extended by the test shows up with the value the test computes.
tpm2_pcrextend 16:sha256=$(printf 'seclaunch' | sha256sum | cut -c1-64) >/dev/null
want16=$(python3 -c 'import hashlib; print(hashlib.sha256(bytes(32)+hashlib.sha256(b"seclaunch").digest()).hexdigest())')
check "extended PCR: attest" 0 "$SL" attest --tee tpm2 --nonce $N --pcrs sha256:16 -o "$T/ev16.json"
check "extended PCR: verify" 0 "$SL" verify "$T/ev16.json" --nonce $N --ak-pin "$T/ak.pem" --json
assert "extended PCR: tpm.pcr.sha256.16 is the expected extend" test "$(claim "$T/out" tpm.pcr.sha256.16)" = "$want16"

check "ecc: attest (sha256+sha384)" 0 "$SL" attest --tee tpm2 --ak-alg ecc --nonce $N --pcrs sha256:0,1,2,3+sha384:0,7 --export-ak "$T/eak.pem" -o "$T/eev.json"
check "ecc: verify with --ak-pin" 0 "$SL" verify "$T/eev.json" --nonce $N --ak-pin "$T/eak.pem" --json
assert "ecc: claims say ecc and carry both banks" \
	test "$(claim "$T/out" tpm.ak.alg)/$(claim "$T/out" tpm.pcr.sha384.7 | wc -c)" = "ecc/97"
assert "ecc: AK at persistent handle 0x81010003" sh -c 'tpm2_getcap handles-persistent | grep -q 0x81010003'
check "--no-binding verifies and says so" 0 "$SL" verify "$T/ev.json" --no-binding --ak-pin "$T/ak.pem" --json
assert "--no-binding: binding=unchecked" test "$(claim "$T/out" binding)" = unchecked

if [ -e /dev/sev-guest ] || [ -e /dev/tdx_guest ] || [ -d /sys/kernel/config/tsm/report ]; then
	skip "--tee auto picks tpm2" "this machine has a TEE, which auto prefers"
else
	check "--tee auto picks the TPM when there is no TEE" 0 "$SL" attest --tee auto --nonce $N -o "$T/auto.json"
	assert "--tee auto: kind tpm2" test "$(ev_get "$T/auto.json" kind)" = tpm2
fi

# ---- usage -----------------------------------------------------------------
check_err "verify without a binding option is a usage error" 1 "exactly one of" "$SL" verify "$T/ev.json" --ak-pin "$T/ak.pem"
check_err "attest with a bad --pcrs" 1 "PCR index" "$SL" attest --tee tpm2 --pcrs sha256:24 -o "$T/x.json"
check_err "attest with an unknown bank" 1 "unknown bank" "$SL" attest --tee tpm2 --pcrs md5:1 -o "$T/x.json"
check_err "verify --at that is not RFC 3339" 1 "--at" "$SL" verify "$T/ev.json" --nonce $N --ak-pin "$T/ak.pem" --at yesterday
check_err "verify --nonce that is not hex" 1 "--nonce" "$SL" verify "$T/ev.json" --nonce xyz --ak-pin "$T/ak.pem"
check_err "verify of a missing file" 2 "nothere.json" "$SL" verify "$T/nothere.json" --nonce $N --ak-pin "$T/ak.pem"
echo '{"kind": "tpm2",' >"$T/broken.json"
check_err "verify of a file that is not JSON" 2 "broken.json: line" "$SL" verify "$T/broken.json" --nonce $N --ak-pin "$T/ak.pem"
check_err "verify --ak-pin that is not a key" 2 "not a PEM public key" "$SL" verify "$T/ev.json" --nonce $N --ak-pin "$T/ev.json"
check_err "attest without -o" 1 "-o EVIDENCE.json is required" "$SL" attest --tee tpm2 --nonce $N
check_err "attest --tee of an unknown kind" 1 "--tee: 'sgx' is not one of auto, tpm2" "$SL" attest --tee sgx --nonce $N -o "$T/x.json"
check_err "attest --ak-alg of an unknown type" 1 "rsa or ecc" "$SL" attest --tee tpm2 --ak-alg dsa -o "$T/x.json"

# ---- trust -----------------------------------------------------------------
check_err "no trust anchor: AK not trusted" 3 "AK not trusted" "$SL" verify "$T/ev.json" --nonce $N
check_err "pin of another key: AK not trusted" 3 "AK not trusted: the AK is not the pinned key" "$SL" verify "$T/ev.json" --nonce $N --ak-pin "$T/eak.pem"

# ---- tamper cases: each exits 3 and names its check -------------------------
check_err "wrong nonce" 3 "TPMS_ATTEST.extraData" "$SL" verify "$T/ev.json" --nonce ${N%??}00 --ak-pin "$T/ak.pem"
check_err "shorter nonce" 3 "TPMS_ATTEST.extraData" "$SL" verify "$T/ev.json" --nonce 5ec1 --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" pcrs.sha256.3 edit
check_err "one PCR value changed" 3 "pcrDigest: .* does not match the supplied PCR values" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest flip -1
check_err "pcrDigest changed" 3 "pcrDigest" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" signature flip -1
check_err "signature bit flipped" 3 "signature: does not verify with the AK" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/eev.json" "$T/t.json" signature flip -3
check_err "ecc: signature bit flipped" 3 "signature: does not verify with the AK" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/eak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest set 4:8014
check_err "attest type changed (CERTIFY)" 3 "TPMS_ATTEST.type: 0x8014 is not TPM_ST_ATTEST_QUOTE" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest set 0:ff544348
check_err "magic changed" 3 "TPMS_ATTEST.magic: 0xff544348 is not TPM_GENERATED_VALUE" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest truncate
check_err "TPMS_ATTEST truncated" 3 "TPMS_ATTEST: malformed" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" signature truncate
check_err "TPMT_SIGNATURE truncated" 3 "TPMT_SIGNATURE: malformed" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" ak_public truncate
check_err "TPM2B_PUBLIC truncated" 3 "ak_public" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest append
check_err "TPMS_ATTEST trailing bytes" 3 "TPMS_ATTEST: trailing bytes" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" signature append
check_err "TPMT_SIGNATURE trailing bytes" 3 "TPMT_SIGNATURE: trailing bytes" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" ak_public append
check_err "TPM2B_PUBLIC trailing bytes" 3 "ak_public: trailing bytes" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" ak_name replace "\"$(ev_get "$T/eev.json" ak_name)\""
check_err "ak_name not the AK's name" 3 "evidence.ak_name: does not match" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" pcrs replace '{"sha256": {"0": "00"}}'
check_err "PCR values missing for the selection" 3 "evidence.pcrs" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" tpms_attest delete
check_err "TPMS_ATTEST missing" 3 "evidence.tpms_attest: missing" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"

# AK public swapped for another TPM's AK (and its name): the signature no
# longer verifies, even with that other AK pinned.
SAVE_TCTI=$SWTPM_TCTI
start_swtpm other || exit 1
check "other TPM: attest" 0 "$SL" attest --tee tpm2 --nonce $N --export-ak "$T/oak.pem" -o "$T/oev.json"
ev_edit "$T/ev.json" "$T/t.json" ak_public copy-from "$T/oev.json"
ev_edit "$T/t.json" "$T/t.json" ak_name copy-from "$T/oev.json"
check_err "AK public swapped for another TPM's" 3 "signature: does not verify with the AK" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/oak.pem"
export SECLAUNCH_TCTI=$SAVE_TCTI TPM2TOOLS_TCTI=$SAVE_TCTI

# An AK without the restricted attribute (made with tpm2-tools): attest refuses
# to use it, and a quote it made (tpm2_quote) fails verification.
# (no resource manager: flush what each tool leaves loaded)
tpm2_createprimary -C o -g sha256 -G rsa -c "$T/prim.ctx" >/dev/null && tpm2_flushcontext -t &&
	tpm2_create -C "$T/prim.ctx" -G rsa2048:rsassa-sha256 -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' \
		-u "$T/ur.pub" -r "$T/ur.priv" >/dev/null && tpm2_flushcontext -t &&
	tpm2_load -C "$T/prim.ctx" -u "$T/ur.pub" -r "$T/ur.priv" -c "$T/ur.ctx" >/dev/null && tpm2_flushcontext -t &&
	tpm2_evictcontrol -C o -c "$T/ur.ctx" 0x81010020 >/dev/null && tpm2_flushcontext -t
check_err "attest refuses an unrestricted key as AK" 7 "restricted is not set" env SECLAUNCH_AK_HANDLE=81010020 "$SL" attest --tee tpm2 --nonce $N -o "$T/x.json"
tpm2_readpublic -c 0x81010020 -o "$T/ur.tss" >/dev/null
tpm2_readpublic -c 0x81010020 -f pem -o "$T/ur.pem" >/dev/null
tpm2_quote -c 0x81010020 -l sha256:0,1 -q $N -m "$T/ur.msg" -s "$T/ur.sig" -o "$T/ur.pcrs" -g sha256 >/dev/null
check_err "AK without the restricted attribute" 3 "AK attributes: restricted is not set" "$SL" verify --from-tpm2-tools "$T/ur.msg" "$T/ur.sig" "$T/ur.pcrs" --ak-public "$T/ur.tss" --nonce $N --ak-pin "$T/ur.pem"

finish
