#!/usr/bin/env bash
# Azure confidential VMs: every evidence file of $SL_VECTORS/azure-cvm (CoCo
# agent formats v0..v2, SNP Milan/Genoa and TDX) imported and verified end to
# end — HCL report -> hardware report -> runtime data -> HCLAkPub -> vTPM
# quote with its nonce — plus the standalone HCL/quote files, the README's
# negative cases and tampering of each link.
. "$(dirname "$0")/lib.sh"

A=$SL_VECTORS/azure-cvm
TRUST=$SL_VECTORS/amd-sev-snp/trust
AT=2025-06-01T00:00:00Z
# extraData of a TPMS_ATTEST (hex): magic 4, type 2, qualifiedSigner TPM2B, extraData TPM2B
extra() {
	python3 - "$1" <<'PY'
import sys, struct
b = bytes.fromhex(sys.argv[1])
o = 6
n = struct.unpack_from(">H", b, o)[0]; o += 2 + n
n = struct.unpack_from(">H", b, o)[0]; print(b[o + 2:o + 2 + n].hex())
PY
}
# the quote message of an evidence file as hex (array of ints or hex string)
msg_hex() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
q = d.get("tpm_quote") or d.get("quote")
m = q["message"]
print(bytes(m).hex() if isinstance(m, list) else m)
PY
}
# runtime data of the HCL report in an imported evidence file: vmUniqueId
vm_id() {
	python3 - "$1" <<'PY'
import base64, json, struct, sys
h = base64.b64decode(json.load(open(sys.argv[1]))["hcl_report"])
n = struct.unpack_from("<I", h, 0x4d0)[0]
print(json.loads(h[0x4d4:0x4d4 + n])["vm-configuration"]["vmUniqueId"])
PY
}

while read -r f tee; do
	name=$(echo "$f" | tr / _)
	name=${name%.json}
	ev=$T/$name.json
	check "$name: import" 0 "$SL" evidence import --kind azure-cvm --report "$A/$f" -o "$ev"
	nonce=$(extra "$(msg_hex "$A/$f")")
	check "$name: verify with the quote nonce" 0 "$SL" verify "$ev" --nonce "$nonce" \
		--collateral "$TRUST" --at "$AT"
	assert "$name: tee.kind $tee" [ "$(claim tee.kind)" = "$tee" ]
	assert "$name: binding verified" [ "$(claim binding)" = verified ]
	assert "$name: AK trusted through the HCL report" [ "$(claim tpm.ak.trust)" = azure-hcl ]
	assert "$name: vm id from the runtime data" [ "$(claim azure.vm.unique_id)" = "$(vm_id "$ev")" ]
	check_err "$name: another nonce" 3 "extraData" "$SL" verify "$ev" --nonce 00112233 \
		--collateral "$TRUST" --at "$AT"
	# tamper: one byte of the runtime data (README), of the quote message, a PCR
	python3 - "$ev" "$T/t1.json" "$T/t2.json" "$T/t3.json" <<'PY'
import base64, json, sys
d = json.load(open(sys.argv[1]))
def b(s): return bytearray(base64.b64decode(s))
def e(x): return base64.b64encode(bytes(x)).decode()
h = b(d["hcl_report"]); h[0x4d4 + 30] ^= 1
t = dict(d); t["hcl_report"] = e(h); json.dump(t, open(sys.argv[2], "w"))
m = b(d["tpm_quote"]["message"]); m[-1] ^= 1
t = json.loads(json.dumps(d)); t["tpm_quote"]["message"] = e(m); json.dump(t, open(sys.argv[3], "w"))
p = b(d["tpm_quote"]["pcrs"][0]); p[0] ^= 1
t = json.loads(json.dumps(d)); t["tpm_quote"]["pcrs"][0] = e(p); json.dump(t, open(sys.argv[4], "w"))
PY
	check_err "$name: runtime data byte flipped" 3 "runtime data" "$SL" verify "$T/t1.json" \
		--no-binding --collateral "$TRUST" --at "$AT"
	check_err "$name: quote message flipped" 3 "vTPM quote signature" "$SL" verify \
		"$T/t2.json" --no-binding --collateral "$TRUST" --at "$AT"
	check_err "$name: PCR 0 changed" 3 "pcrDigest" "$SL" verify "$T/t3.json" --no-binding \
		--collateral "$TRUST" --at "$AT"
done <<'LIST'
snp/evidence-v0.json sev-snp
snp/evidence-v1.json sev-snp
snp/evidence-v2.json sev-snp
snp/evidence-genoa.json sev-snp
tdx/evidence-v0.json tdx
tdx/evidence-v1.json tdx
LIST

# the standalone files: HCL report + vTPM quote + VCEK chain / TD quote
mk() { # hcl quote.json out [td-quote]
	python3 - "$@" <<'PY'
import base64, json, sys
d = {"version": 1,
     "hcl_report": base64.urlsafe_b64encode(open(sys.argv[1], "rb").read()).decode(),
     "tpm_quote": json.load(open(sys.argv[2]))}
if len(sys.argv) > 4:
    d["td_quote"] = base64.urlsafe_b64encode(open(sys.argv[4], "rb").read()).decode()
json.dump(d, open(sys.argv[3], "w"))
PY
}
mk "$A/snp/hcl_report_milan_v2.bin" "$A/snp/tpm_quote_milan_v2.json" "$T/milan_v2.in"
check "hcl_report_milan_v2: import with the VCEK chain" 0 "$SL" evidence import \
	--kind azure-cvm --report "$T/milan_v2.in" --certs "$A/snp/vcek_chain_milan_v2.pem" \
	-o "$T/milan_v2.json"
# README: extraData = "challenge"
check "hcl_report_milan_v2: verify (nonce \"challenge\")" 0 "$SL" verify "$T/milan_v2.json" \
	--nonce "$(printf challenge | xxd -p)" --collateral "$TRUST" --at 2024-01-01T00:00:00Z
mk "$A/tdx/hcl-report.bin" "$A/tdx/tpm-quote-v1.json" "$T/tdx.in" "$A/tdx/td-quote.bin"
check "tdx hcl-report: import" 0 "$SL" evidence import --kind azure-cvm --report "$T/tdx.in" \
	-o "$T/tdx.json"
check "tdx hcl-report: verify (nonce \"challenge\")" 0 "$SL" verify "$T/tdx.json" \
	--nonce "$(printf challenge | xxd -p)" --at "$AT"
# README negative: the SNP VM's quote against the TDX VM's HCLAkPub
mk "$A/tdx/hcl-report.bin" "$A/snp/tpm_quote_milan_v2.json" "$T/mix.in" "$A/tdx/td-quote.bin"
"$SL" evidence import --kind azure-cvm --report "$T/mix.in" -o "$T/mix.json"
check_err "quote of another VM's AK" 3 "HCLAkPub" "$SL" verify "$T/mix.json" --no-binding \
	--at "$AT"
# the TDX HCL report with another TD quote: REPORTDATA differs
mk "$A/tdx/hcl-report.bin" "$A/tdx/tpm-quote-v1.json" "$T/tdmix.in" \
	"$SL_VECTORS/intel-tdx/trustee_quote_4.dat"
"$SL" evidence import --kind azure-cvm --report "$T/tdmix.in" -o "$T/tdmix.json"
check_err "TD quote of another TD" 3 "REPORTDATA differs" "$SL" verify "$T/tdmix.json" \
	--no-binding --at 2026-02-15T00:00:00Z
# SNP evidence without any VCEK
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("certs"); json.dump(d,open(sys.argv[2],"w"))' \
	"$T/snp_evidence-v1.json" "$T/novcek.json"
check_err "no VCEK" 3 "VCEK" "$SL" verify "$T/novcek.json" --no-binding --collateral "$TRUST" \
	--at "$AT"
check_err "not JSON" 3 "not JSON" "$SL" evidence import --kind azure-cvm \
	--report "$A/tdx/hcl-report.bin" -o "$T/bad.json"
finish
