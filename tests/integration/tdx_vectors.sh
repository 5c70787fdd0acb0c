#!/usr/bin/env bash
# TDX through the CLI: `seclaunch evidence import --kind tdx` then `seclaunch
# verify` on every real quote (README: valid at 2026-02-15T00:00:00Z), claims
# compared with the quote bytes read here with xxd at the TD report body
# offsets, tamper / time cases, and the 2023 PCS collateral (TCB status).
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS
AT=2026-02-15T00:00:00Z

while read -r q fmspc debug; do
	name=$(basename "$q")
	name=${name%.*}
	ev=$T/$name.json
	ver=$(xxd -s 0 -l 1 -p "$V/$q")
	b=$((ver == 4 ? 48 : 54)) # v5: u16 body_type + u32 body_size before the body
	check "$name: import" 0 "$SL" evidence import --kind tdx --report "$V/$q" -o "$ev"
	rd=$(hexat "$V/$q" $((b + 520)) 64)
	check "$name: verify" 0 "$SL" verify "$ev" --expect-report-data "$rd" --at "$AT"
	assert "$name: mrtd = body+136" [ "$(claim tdx.mrtd)" = "$(hexat "$V/$q" $((b + 136)) 48)" ]
	assert "$name: rtmr0 = body+328" [ "$(claim tdx.rtmr0)" = "$(hexat "$V/$q" $((b + 328)) 48)" ]
	assert "$name: rtmr2 = body+424" [ "$(claim tdx.rtmr2)" = "$(hexat "$V/$q" $((b + 424)) 48)" ]
	assert "$name: mrseam = body+16" [ "$(claim tdx.mrseam)" = "$(hexat "$V/$q" $((b + 16)) 48)" ]
	assert "$name: tee_tcb_svn = body+0" \
		[ "$(claim tdx.tee_tcb_svn)" = "$(hexat "$V/$q" $b 16)" ]
	assert "$name: fmspc $fmspc (README)" [ "$(claim tdx.fmspc)" = "$fmspc" ]
	assert "$name: debug $debug" [ "$(claim tdx.attributes.debug)" = "$debug" ]
	assert "$name: tee.kind" [ "$(claim tee.kind)" = tdx ]
	for t in "$((b + 136)) quote signature" "$((b + 520)) quote signature" \
		"$((b + 120)) quote signature" "$((b + 584 + (ver == 5 ? 64 : 0) + 4 + 134 + 10)) QE report signature"; do
		set -- $t
		flip "$V/$q" "$T/bad.bin" "$1" 1
		"$SL" evidence import --kind tdx --report "$T/bad.bin" -o "$T/bad.json" --force 2>/dev/null
		check_err "$name: flipped byte $1 fails ($2 $3)" 3 "$2 $3" "$SL" verify "$T/bad.json" \
			--no-binding --at "$AT"
	done
	check_err "$name: other report data" 3 "REPORTDATA" "$SL" verify "$ev" \
		--expect-report-data "ff$(echo "$rd" | cut -c3-)" --at "$AT"
	check_err "$name: after the PCK CA expired" 3 "expired" "$SL" verify "$ev" --no-binding \
		--at 2034-01-01T00:00:00Z
done <<'LIST'
intel-tdx/gtg_quote_v4_spr_e4.dat 50806f000000 false
intel-tdx/trustee_quote_4.dat 50806f000000 true
intel-tdx/gtg_quote_v5_sample.dat 90c06f000000 false
intel-tdx/trustee_quote_5.dat 90c06f000000 false
intel-tdx/trustee_quote_6.dat 00a06d080000 false
intel-tdx/gtg_cos113_quote_v4.dat 00806f050000 false
azure-cvm/tdx/td-quote.bin 00806f050000 false
LIST

# TCB status from the 2023 PCS collateral (signed while its signer was valid)
C=$V/intel-tdx/collateral
mkdir -p "$T/coll"
cp "$C/gtg_tcbinfo_fmspc_50806f000000.json" "$C/gtg_qe_identity_td_qe.json" \
	"$C/tcb_signing_chain.pem" "$C/gtg_pckcrl_platform.der" "$C/gtg_rootcrl.der" "$T/coll/"
check "trustee_quote_4 with collateral" 0 "$SL" verify "$T/trustee_quote_4.json" --no-binding \
	--collateral "$T/coll" --at "$AT"
assert "trustee_quote_4: UpToDate (README)" [ "$(claim tdx.tcb_status)" = UpToDate ]
assert "trustee_quote_4: CRL checked" [ "$(claim tdx.pck_crl)" = checked ]
assert "trustee_quote_4: collateral stale at $AT" [ "$(claim tdx.collateral_stale)" = true ]
check "gtg_quote_v4_spr_e4 with collateral" 0 "$SL" verify "$T/gtg_quote_v4_spr_e4.json" \
	--no-binding --collateral "$T/coll" --at "$AT"
assert "gtg_quote_v4_spr_e4: no TCB level (README)" [ "$(claim tdx.tcb_status)" = NotSupported ]
# the trustee TCB info was signed after the included TCB signing cert expired
mkdir -p "$T/coll2"
cp "$C/trustee_tcbinfo_fmspc_00a06d080000.json" "$C/tcb_signing_chain.pem" "$T/coll2/"
check_err "trustee TCB info: signer expired at issueDate" 3 "expired" "$SL" verify \
	"$T/trustee_quote_6.json" --no-binding --collateral "$T/coll2" --at "$AT"
# tampered TCB info
sed 's/"pcesvn":11/"pcesvn":10/' "$C/gtg_tcbinfo_fmspc_50806f000000.json" \
	>"$T/coll/gtg_tcbinfo_fmspc_50806f000000.json"
check_err "tampered TCB info" 3 "does not verify" "$SL" verify "$T/trustee_quote_4.json" \
	--no-binding --collateral "$T/coll" --at "$AT"
# the CCEL event log of the COS 113 VM replays to its quote's RTMRs (README)
CC=$V/intel-tdx/ccel/gtg_cos113_ccel_data.dat
check "cos113 import with CCEL" 0 "$SL" evidence import --kind tdx \
	--report "$V/intel-tdx/gtg_cos113_quote_v4.dat" --ccel "$CC" -o "$T/ccel.json"
check "cos113 verify with CCEL" 0 "$SL" verify "$T/ccel.json" --no-binding --at "$AT"
assert "CCEL replayed" [ "$(claim tdx.ccel)" = replayed ]
assert "CCEL: 43 events after the Spec ID event (README)" [ "$(claim tdx.ccel.events)" = 43 ]
# a digest changed inside the log: the replay no longer matches
python3 - "$T/ccel.json" "$T/ccel_bad.json" <<'PY'
import base64, json, sys
d = json.load(open(sys.argv[1]))
log = bytearray(base64.b64decode(d["ccel"]))
i = log.find(bytes.fromhex("0c00"), 200)  # a SHA-384 digest after the Spec ID event
log[i + 2] ^= 1
d["ccel"] = base64.b64encode(bytes(log)).decode()
json.dump(d, open(sys.argv[2], "w"))
PY
check_err "CCEL digest changed" 3 "does not replay to the quote's RTMR" "$SL" verify \
	"$T/ccel_bad.json" --no-binding --at "$AT"
"$SL" evidence import --kind tdx --report "$V/intel-tdx/trustee_quote_4.dat" -o "$T/q4.json"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); a["ccel"]=b["ccel"]; json.dump(a,open(sys.argv[3],"w"))' \
	"$T/q4.json" "$T/ccel.json" "$T/q4ccel.json"
check_err "CCEL of another TD at verify" 3 "does not replay" "$SL" verify "$T/q4ccel.json" \
	--no-binding --at "$AT"
check_err "--ccel with sev-snp" 1 "only with --kind tdx" "$SL" evidence import --kind sev-snp \
	--report "$SL_VECTORS/amd-sev-snp/gsg_milan_report.bin" --ccel "$CC" -o "$T/z.json"
# collection on a machine without TDX fails cleanly (attestation error)
if [ ! -d /sys/kernel/config/tsm/report ]; then
	check_err "attest --tee tdx without configfs-tsm" 3 "configfs-tsm" "$SL" attest --tee tdx \
		--nonce 00112233 -o "$T/none.json"
else
	skip "attest --tee tdx without configfs-tsm" "this machine has configfs-tsm"
fi
# format and usage
head -c 600 "$V/intel-tdx/trustee_quote_4.dat" >"$T/short.dat"
check_err "truncated quote" 3 "need" "$SL" evidence import --kind tdx --report "$T/short.dat" \
	-o "$T/s.json"
flip "$V/intel-tdx/trustee_quote_4.dat" "$T/v3.dat" 0 7
check_err "quote version 3" 3 "version 3" "$SL" evidence import --kind tdx --report "$T/v3.dat" \
	-o "$T/v3.json"
check_err "tdx with --certs" 1 "PCK chain" "$SL" evidence import --kind tdx \
	--report "$V/intel-tdx/trustee_quote_4.dat" --certs "$C/intel_sgx_root_ca.pem" -o "$T/c.json"
finish
