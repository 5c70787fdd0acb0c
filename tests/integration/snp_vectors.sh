#!/usr/bin/env bash
# SEV-SNP through the CLI: `seclaunch evidence import` then `seclaunch verify`
# on every real report in $SL_VECTORS/amd-sev-snp (README: all valid at the
# given time), claims compared with the report bytes read here with xxd at
# the ABI offsets, and tamper / time / usage cases naming the failed check.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/amd-sev-snp
TRUST=$V/trust

# report VEK time bootloader/tee/snp/microcode product
while read -r rep vek at tcb product; do
	name=${rep%_report.bin}
	ev=$T/$name.json
	check "$name: import" 0 "$SL" evidence import --kind sev-snp --report "$V/$rep" \
		--certs "$V/$vek" -o "$ev"
	rd=$(hexat "$V/$rep" 0x50 64)
	check "$name: verify" 0 "$SL" verify "$ev" --expect-report-data "$rd" \
		--collateral "$TRUST" --at "$at"
	assert "$name: measurement = bytes 0x90..0xbf" \
		[ "$(claim snp.measurement)" = "$(hexat "$V/$rep" 0x90 48)" ]
	assert "$name: chip_id = bytes 0x1a0..0x1df" \
		[ "$(claim snp.chip_id)" = "$(hexat "$V/$rep" 0x1a0 64)" ]
	assert "$name: host_data = bytes 0xc0..0xdf" \
		[ "$(claim snp.host_data)" = "$(hexat "$V/$rep" 0xc0 32)" ]
	got_tcb="$(claim snp.reported_tcb.bootloader)/$(claim snp.reported_tcb.tee)/$(claim snp.reported_tcb.snp)/$(claim snp.reported_tcb.microcode)"
	assert "$name: reported TCB $tcb (README)" [ "$got_tcb" = "$tcb" ]
	assert "$name: product $product" [ "$(claim snp.product)" = "$product" ]
	assert "$name: binding verified" [ "$(claim binding)" = verified ]
	# tamper: measurement, report_data, policy, TCB, chip id, signature r, s
	for t in "0x90 0x01 signature" "0x50 0x01 signature" "0x0a 0x08 signature" \
		"0x180 0x01 TCB" "0x2a0 0x01 signature" "0x2e8 0x01 signature"; do
		set -- $t
		flip "$V/$rep" "$T/bad.bin" "$1" "$2"
		"$SL" evidence import --kind sev-snp --report "$T/bad.bin" --certs "$V/$vek" \
			-o "$T/bad.json" --force 2>/dev/null
		check_err "$name: flipped byte $1 fails ($3)" 3 "$3" "$SL" verify "$T/bad.json" \
			--no-binding --collateral "$TRUST" --at "$at"
	done
	check_err "$name: other report_data" 3 "binding" "$SL" verify "$ev" \
		--expect-report-data "00$(echo "$rd" | cut -c3-)" --collateral "$TRUST" --at "$at"
	check_err "$name: before the VEK was issued" 3 "not yet valid" "$SL" verify "$ev" \
		--no-binding --collateral "$TRUST" --at 2020-01-01T00:00:00Z
done <<'LIST'
gsg_milan_report.bin gsg_milan_vcek.der 2024-01-01T00:00:00Z 2/0/5/68 Milan
virtee_milan_report.bin virtee_milan_vcek.der 2024-01-01T00:00:00Z 3/0/8/115 Milan
trustee_milan_report.bin trustee_milan_vcek.der 2024-01-01T00:00:00Z 3/0/8/115 Milan
trustee_milan_vlek_report.bin trustee_milan_vlek.der 2025-06-01T00:00:00Z 4/0/24/217 Milan
azure_milan_v2_report.bin azure_milan_v2_vcek.der 2024-01-01T00:00:00Z 3/0/8/115 Milan
azure_milan_v3_report.bin azure_milan_v3_vcek.pem 2025-06-01T00:00:00Z 4/0/24/219 Milan
azure_genoa_v3_report.bin azure_genoa_vcek.pem 2025-06-01T00:00:00Z 10/0/23/84 Genoa
LIST

# the hex form of the virtee report imports to the same evidence
check "virtee hex import" 0 "$SL" evidence import --kind sev-snp \
	--report "$V/virtee_milan_report.hex" --certs "$V/virtee_milan_vcek.der" -o "$T/hex.json"
assert "hex and binary imports agree" cmp -s "$T/hex.json" "$T/virtee_milan.json"

# the VLEK expired 2025-12-10: valid at 2025-06-01 (above), not now
check_err "VLEK expired now" 3 "expired" "$SL" verify "$T/trustee_milan_vlek.json" \
	--no-binding --collateral "$TRUST"
# a VCEK from another chip
"$SL" evidence import --kind sev-snp --report "$V/gsg_milan_report.bin" \
	--certs "$V/virtee_milan_vcek.der" -o "$T/wrongchip.json"
check_err "VCEK of another chip" 3 "hwID" "$SL" verify "$T/wrongchip.json" --no-binding \
	--collateral "$TRUST" --at 2024-01-01T00:00:00Z
# a chain ending at a self-made ARK (openssl, now): not pinned
mkdir -p "$T/fake"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/fake/ark.key" -subj "/CN=ARK-Milan" \
	-days 30 -out "$T/fake/ark.crt" 2>/dev/null
awk '/BEGIN CERT/{n++} n==1' "$TRUST/ask_ark_milan.pem" >"$T/fake/ask.pem"
check_err "self-made ARK" 3 "not a pinned AMD root" "$SL" verify "$T/virtee_milan.json" \
	--no-binding --collateral "$T/fake" --at 2024-01-01T00:00:00Z
# truncated, unknown version
head -c 1183 "$V/gsg_milan_report.bin" >"$T/short.bin"
check_err "truncated report" 3 "1183 bytes" "$SL" evidence import --kind sev-snp \
	--report "$T/short.bin" -o "$T/short.json"
flip "$V/gsg_milan_report.bin" "$T/v6.bin" 0 4
check_err "unknown version 6" 3 "version 6" "$SL" evidence import --kind sev-snp \
	--report "$T/v6.bin" -o "$T/v6.json"
# usage
check_err "import without --kind" 1 "required" "$SL" evidence import --report "$V/gsg_milan_report.bin" -o "$T/x.json"
check_err "import --kind sgx" 1 "want sev-snp, tdx, aws-nitro or azure-cvm" "$SL" evidence import --kind sgx \
	--report "$V/gsg_milan_report.bin" -o "$T/x.json"
check_err "import refuses to overwrite" 2 "exists" "$SL" evidence import --kind sev-snp \
	--report "$V/gsg_milan_report.bin" -o "$T/gsg_milan.json"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/o.key" \
	-subj "/CN=example" -days 30 -out "$T/other.crt" 2>/dev/null
check_err "a non-AMD certificate" 2 "not an AMD" "$SL" evidence import --kind sev-snp \
	--report "$V/gsg_milan_report.bin" --certs "$T/other.crt" -o "$T/y.json"
check_err "two ARKs" 2 "two certificates" "$SL" evidence import --kind sev-snp \
	--report "$V/gsg_milan_report.bin" --certs "$T/fake/ark.crt" --certs "$T/fake/ark.crt" \
	-o "$T/y.json"
# collection on a machine without SEV-SNP fails cleanly (attestation error)
if [ ! -e /dev/sev-guest ] && [ ! -d /sys/kernel/config/tsm/report ]; then
	check_err "attest --tee sev-snp without SNP" 3 "sev-guest" "$SL" attest --tee sev-snp \
		--nonce 00112233 -o "$T/none.json"
	assert "nothing written" test ! -e "$T/none.json"
else
	skip "attest --tee sev-snp without SNP" "this machine has an SNP guest device or configfs-tsm"
fi
"$SL" evidence import --help >"$T/help"
for f in --kind --report --certs --ccel --output --force --help; do
	assert "help names $f" grep -q -- "$f" "$T/help"
done
finish
