#!/usr/bin/env bash
# SEV-SNP and TDX claims from real vectors through the policy engine
# (`seclaunch policy explain`): measurements, min_tcb, debug_allowed and
# tee_kinds decide as the policy says. (The region comes from an unverified
# claim the policy allows, since no cloud identity document exists here.)
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS
cd "$T" || exit 1
"$SL" policy keygen --secret-key p.key --public-key p.pub -W >/dev/null

claims() { # evidence out verify-args...: verified claims plus an unverified EU region
	local ev=$1 out=$2
	shift 2
	"$SL" verify "$ev" --json "$@" >"$out.raw" || return 1
	python3 - "$out.raw" "$out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"cloud.provider": "aws", "cloud.region": "eu-west-1", "cloud.region_verified": "false"})
json.dump(c, open(sys.argv[2], "w"))
PY
}
policy() { # name json: writes and signs NAME.json
	printf '%s\n' "$2" >"$1.json"
	"$SL" policy sign --secret-key p.key --policy "$1.json" >/dev/null
}
explain() { # policy claims
	"$SL" policy explain --policy "$1.json" --policy-pubkey p.pub --claims "$2" --dataset d-1 --key k
}

S=$V/amd-sev-snp
"$SL" evidence import --kind sev-snp --report "$S/trustee_milan_report.bin" \
	--certs "$S/trustee_milan_vcek.der" -o snp.json
claims snp.json snp.claims --expect-report-data "$(hexat "$S/trustee_milan_report.bin" 0x50 64)" \
	--collateral "$S/trust" --at 2024-01-01T00:00:00Z
M=$(hexat "$S/trustee_milan_report.bin" 0x90 48)
head='"version":1,"allow_unverified_region":true,"keys":{"k":["d-*"]}'
policy snp_ok "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"sev-snp\"],\"measurements\":{\"sev-snp\":{\"measurement\":[\"$M\"]}},\"min_tcb\":{\"sev-snp\":{\"bootloader\":3,\"tee\":0,\"snp\":8,\"microcode\":115}}}]}"
check "SNP: measurement, TCB, no debug: allowed" 0 explain snp_ok snp.claims
policy snp_tcb "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"sev-snp\"],\"min_tcb\":{\"sev-snp\":{\"microcode\":116}}}]}"
check "SNP: microcode 115 below a minimum of 116: denied" 4 explain snp_tcb snp.claims
assert "the denial names the TCB" grep -q "microcode is 115, minimum 116" "$T/out"
policy snp_meas "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"sev-snp\"],\"measurements\":{\"sev-snp\":{\"measurement\":[\"00$(echo "$M" | cut -c3-)\"]}}}]}"
check "SNP: another measurement: denied" 4 explain snp_meas snp.claims
policy tdx_only "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tdx\"]}]}"
check "SNP evidence, TDX-only rule: denied" 4 explain tdx_only snp.claims
# the gsg report's guest policy allows debugging (0xb0000, bit 19)
"$SL" evidence import --kind sev-snp --report "$S/gsg_milan_report.bin" \
	--certs "$S/gsg_milan_vcek.der" -o gsg.json
claims gsg.json gsg.claims --expect-report-data 0102030405 --collateral "$S/trust" \
	--at 2024-01-01T00:00:00Z
policy any_snp "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"sev-snp\"]}]}"
check "SNP debug guest: denied by default" 4 explain any_snp gsg.claims
assert "the denial names debug" grep -qi "debug" "$T/out"

# TDX: trustee_quote_4 has the DEBUG attribute; 2023 collateral says UpToDate
C=$V/intel-tdx/collateral
mkdir -p coll
cp "$C/gtg_tcbinfo_fmspc_50806f000000.json" "$C/gtg_qe_identity_td_qe.json" \
	"$C/tcb_signing_chain.pem" coll/
"$SL" evidence import --kind tdx --report "$V/intel-tdx/trustee_quote_4.dat" -o q4.json
claims q4.json q4.claims --no-binding --collateral coll --at 2026-02-15T00:00:00Z
assert "verified claims say binding=unchecked" grep -q '"binding": "unchecked"' q4.claims.raw
"$SL" evidence import --kind tdx --report "$V/intel-tdx/gtg_quote_v4_spr_e4.dat" -o spr.json
claims spr.json spr.claims --expect-report-data \
	"$(hexat "$V/intel-tdx/gtg_quote_v4_spr_e4.dat" $((48 + 520)) 64)" --collateral coll \
	--at 2026-02-15T00:00:00Z
policy tdx_tcb "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tdx\"],\"min_tcb\":{\"tdx\":{\"tcb_status\":[\"UpToDate\"]}},\"measurements\":{\"tdx\":{\"mrtd\":[\"$(hexat "$V/intel-tdx/gtg_quote_v4_spr_e4.dat" $((48 + 136)) 48)\"]}}}]}"
check "TDX: no matching TCB level (NotSupported): denied" 4 explain tdx_tcb spr.claims
assert "the denial names the TCB status" grep -q "NotSupported" "$T/out"
policy tdx_dbg "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tdx\"],\"debug_allowed\":true,\"min_tcb\":{\"tdx\":{\"tcb_status\":[\"UpToDate\"]}}}]}"
check "TDX debug TD, UpToDate, but its evidence is not bound: denied" 4 explain tdx_dbg q4.claims
policy tdx_nodbg "{$head,\"datasets\":[{\"id\":\"d-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tdx\"]}]}"
check "TDX debug TD under the default: denied" 4 explain tdx_nodbg q4.claims
assert "the denial names debug" grep -qi "debug" "$T/out"
finish
