#!/usr/bin/env bash
# Interoperability with tpm2-tools, both directions: a quote seclaunch collects
# verifies with tpm2_checkquote, and one tpm2_quote makes verifies with
# seclaunch verify --from-tpm2-tools.
. "$(dirname "$0")/lib.sh"

N=00112233445566778899aabbccddeeff
start_swtpm tpm || exit 1

# ---- seclaunch -> tpm2_checkquote -------------------------------------------
check "rsa: attest --export-tpm2-tools" 0 "$SL" attest --tee tpm2 --nonce $N --pcrs sha256:0,1,2,3+sha1:0,7 --export-tpm2-tools "$T/s" -o "$T/ev.json"
check "rsa: tpm2_checkquote accepts seclaunch's quote" 0 tpm2_checkquote -u "$T/s.ak.pem" -m "$T/s.msg" -s "$T/s.sig" -f "$T/s.pcrs" -q $N -g sha256
check "rsa: tpm2_checkquote rejects a wrong nonce" 1 tpm2_checkquote -u "$T/s.ak.pem" -m "$T/s.msg" -s "$T/s.sig" -f "$T/s.pcrs" -q ${N%??}01 -g sha256
check "ecc: attest --export-tpm2-tools" 0 "$SL" attest --tee tpm2 --ak-alg ecc --nonce $N --pcrs sha256:0,1,2,3,4,5,6,7,8,9+sha384:0 --export-tpm2-tools "$T/e" -o "$T/eev.json"
check "ecc: tpm2_checkquote accepts seclaunch's quote (10 PCRs: two digest lists)" 0 tpm2_checkquote -u "$T/e.ak.pem" -m "$T/e.msg" -s "$T/e.sig" -f "$T/e.pcrs" -q $N -g sha256
# the exported files read back through --from-tpm2-tools give the same claims
check "export -> import round trip verifies" 0 "$SL" verify --from-tpm2-tools "$T/e.msg" "$T/e.sig" "$T/e.pcrs" --ak-public "$T/e.ak.pub" --nonce $N --ak-pin "$T/e.ak.pem" --json
assert "round trip: the AK file was read as a TPM2B_PUBLIC" [ "$(claim "$T/out" tpm.ak.file_format)" = tpm2b_public ]
jq 'del(."tpm.ak.file_format")' "$T/out" >"$T/rt.json"
check "the original evidence verifies" 0 "$SL" verify "$T/eev.json" --nonce $N --ak-pin "$T/e.ak.pem" --json
jq . "$T/out" >"$T/orig.json"
assert "round trip: same claims" cmp -s "$T/orig.json" "$T/rt.json"

# ---- tpm2_quote -> seclaunch --------------------------------------------------
# tpm2-tools' own AK (tpm2_createak under tpm2_createek), made persistent.
tpm2_createek -c "$T/ek.ctx" -G rsa -u "$T/ek.pub" >/dev/null && tpm2_flushcontext -t &&
	tpm2_createak -C "$T/ek.ctx" -c "$T/ak.ctx" -G rsa -g sha256 -s rsassa -u "$T/ak.pub" >/dev/null &&
	tpm2_flushcontext -t && tpm2_flushcontext -s &&
	tpm2_evictcontrol -C o -c "$T/ak.ctx" 0x81010030 >/dev/null && tpm2_flushcontext -t
tpm2_readpublic -c 0x81010030 -f pem -o "$T/ak.pem" >/dev/null
tpm2_readpublic -c 0x81010030 -o "$T/ak.tss" >/dev/null
tpm2_quote -c 0x81010030 -l sha256:0,1,2,3,4,5,6,7,8,9,10+sha1:0,1 -q $N -m "$T/q.msg" -s "$T/q.sig" -o "$T/q.pcrs" -g sha256 >/dev/null
check "tpm2_quote (rsa, two banks) verifies with seclaunch" 0 "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/ak.tss" --nonce $N --ak-pin "$T/ak.pem" --json
assert "tpm2_quote: claims carry both banks" test "$(claim "$T/out" tpm.pcr.sha1.1)" != "<absent>" -a "$(claim "$T/out" tpm.pcr.sha256.10)" != "<absent>"
check_err "tpm2_quote: wrong nonce" 3 "extraData" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/ak.tss" --nonce ${N%??}01 --ak-pin "$T/ak.pem"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[132+4+4+2]^=1; open(sys.argv[2],"wb").write(b)' "$T/q.pcrs" "$T/bad.pcrs"
check_err "tpm2_quote: a PCR value edited in the PCR file" 3 "pcrDigest" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/bad.pcrs" --ak-public "$T/ak.tss" --nonce $N --ak-pin "$T/ak.pem"
head -c 600 "$T/q.pcrs" >"$T/short.pcrs"
check_err "tpm2_quote: a truncated PCR file" 3 "PCR file" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/short.pcrs" --ak-public "$T/ak.tss" --nonce $N --ak-pin "$T/ak.pem"
# the AK in every form the tools write: TPMT_PUBLIC, PEM and DER SubjectPublicKeyInfo
tpm2_readpublic -c 0x81010030 -f der -o "$T/ak.der" >/dev/null
tail -c +3 "$T/ak.tss" >"$T/ak.tpmt"
for f in tpmt_public:ak.tpmt pem:ak.pem der:ak.der; do
	check "tpm2_quote with --ak-public as ${f%%:*} verifies" 0 "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/${f#*:}" --nonce $N --ak-pin "$T/ak.pem" --json
	assert "--ak-public ${f#*:}: read as ${f%%:*} (claim tpm.ak.file_format)" [ "$(claim "$T/out" tpm.ak.file_format)" = "${f%%:*}" ]
done
assert "a bare key: the AK's attributes are unverified, no TPM name" [ "$(claim "$T/out" tpm.ak.attributes)" = unverified ] && [ "$(claim "$T/out" tpm.ak.name)" = "<absent>" ]
check_err "a PEM AK without --ak-pin: no TPM name to trust" 3 "has no TPM name" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/ak.pem" --nonce $N
check_err "a PEM AK that is not the quote's signer" 3 "does not verify" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/s.ak.pem" --nonce $N --ak-pin "$T/s.ak.pem"
head -c 300 /dev/urandom >"$T/junk.pub"
check_err "--ak-public junk: names the file and the forms accepted" 2 "junk.pub: not an AK public key.*TPM2B_PUBLIC.*TPMT_PUBLIC.*PEM or DER" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --ak-public "$T/junk.pub" --nonce $N --ak-pin "$T/ak.pem"
check_err "--from-tpm2-tools without --ak-public" 1 "ak-public" "$SL" verify --from-tpm2-tools "$T/q.msg" "$T/q.sig" "$T/q.pcrs" --nonce $N --ak-pin "$T/ak.pem"

tpm2_createak -C "$T/ek.ctx" -c "$T/eak.ctx" -G ecc -g sha256 -s ecdsa -u "$T/eak.pub" >/dev/null &&
	tpm2_flushcontext -t && tpm2_flushcontext -s &&
	tpm2_evictcontrol -C o -c "$T/eak.ctx" 0x81010031 >/dev/null && tpm2_flushcontext -t
tpm2_readpublic -c 0x81010031 -f pem -o "$T/eak.pem" >/dev/null
tpm2_readpublic -c 0x81010031 -o "$T/eak.tss" >/dev/null
tpm2_quote -c 0x81010031 -l sha256:0,7 -q $N -m "$T/eq.msg" -s "$T/eq.sig" -o "$T/eq.pcrs" -g sha256 >/dev/null
check "tpm2_quote (ecc) verifies with seclaunch" 0 "$SL" verify --from-tpm2-tools "$T/eq.msg" "$T/eq.sig" "$T/eq.pcrs" --ak-public "$T/eak.tss" --nonce $N --ak-pin "$T/eak.pem"
# SHA-1 quotes stay refused, and say so
tpm2_createak -C "$T/ek.ctx" -c "$T/sak.ctx" -G rsa -g sha1 -s rsassa -u "$T/sak.pub" >/dev/null &&
	tpm2_flushcontext -t && tpm2_flushcontext -s &&
	tpm2_evictcontrol -C o -c "$T/sak.ctx" 0x81010032 >/dev/null && tpm2_flushcontext -t
tpm2_readpublic -c 0x81010032 -f pem -o "$T/sak.pem" >/dev/null
if tpm2_quote -c 0x81010032 -l sha256:0 -q $N -m "$T/sq.msg" -s "$T/sq.sig" -o "$T/sq.pcrs" -g sha1 >/dev/null 2>&1; then
	check_err "a SHA-1 quote is refused, saying so" 3 "SHA-1 quotes are refused" "$SL" verify --from-tpm2-tools "$T/sq.msg" "$T/sq.sig" "$T/sq.pcrs" --ak-public "$T/sak.pub" --nonce $N --ak-pin "$T/sak.pem"
else
	_fail "tpm2_quote -g sha1 with a SHA-1 AK"
fi
assert "no transient object left in the TPM" test -z "$(tpm2_getcap handles-transient)"

finish
