#!/usr/bin/env bash
# AWS Nitro Enclaves through the CLI: `seclaunch evidence import --kind
# aws-nitro` then `seclaunch verify` on the three real documents in
# $SL_VECTORS/aws-nitro (README: each valid at its own timestamp), the nonce
# as the binding, expiry now, collection refused cleanly; and the text forms
# vendors publish reports in (hex, base64) for SEV-SNP, TDX and Nitro,
# converted here with xxd -p and base64, importing to the same evidence.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/aws-nitro

# payload nonce (hex) of a document, read with python3 (no CBOR in the shell)
nonce_of() {
	python3 - "$1" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
i = b.find(b"enonce")
assert i > 0
i += 6
h = b[i]
if h == 0xf6:
    print("")
elif h == 0x59:
    n = int.from_bytes(b[i+1:i+3], "big"); print(b[i+3:i+3+n].hex())
else:
    assert h == 0x58; n = b[i+1]; print(b[i+2:i+2+n].hex())
PY
}

while read -r doc at debug pcr0; do
	name=${doc%.cbor}
	ev=$T/$name.json
	check "$name: import" 0 "$SL" evidence import --kind aws-nitro --report "$V/$doc" -o "$ev"
	assert "$name: read as binary" grep -q "read as binary" "$T/err"
	n=$(nonce_of "$V/$doc")
	if [ -n "$n" ]; then
		check "$name: verify, nonce = binding" 0 "$SL" verify "$ev" --nonce "$n" --at "$at" --json
		assert "$name: binding verified" [ "$(claim "$T/out" binding)" = verified ]
	else
		check "$name: verify (no nonce in the document)" 0 "$SL" verify "$ev" --no-binding --at "$at" --json
	fi
	assert "$name: tee.kind aws-nitro" [ "$(claim "$T/out" tee.kind)" = aws-nitro ]
	assert "$name: debug $debug" [ "$(claim "$T/out" nitro.debug)" = "$debug" ]
	assert "$name: PCR0 ${pcr0:0:16}..." [ "$(claim "$T/out" nitro.pcr0 | cut -c1-${#pcr0})" = "$pcr0" ]
	if [ -n "$n" ]; then
		check_err "$name: another nonce" 3 "nonce" "$SL" verify "$ev" --nonce "00${n:2}" --at "$at"
	else
		check_err "$name: a binding asked of a document without nonce" 3 "nonce is absent" \
			"$SL" verify "$ev" --nonce 00112233 --at "$at"
	fi
	check_err "$name: verified now, the leaf has expired" 3 "expired" "$SL" verify "$ev" --no-binding
done <<'LIST'
evervault_2022-10-13_doc.cbor 2022-10-13T08:58:02Z false f4d48b81a460c9916d1e685119074bf24660afd3e34fae9fca0a0d28d9d5599936332687e6f66fc890ac8cf150142d8b
evervault_2022-10-12_debug_doc.cbor 2022-10-12T13:50:06Z true 000000000000000000000000
evervault_2023-09-18_debug_doc.cbor 2023-09-18T15:03:30Z true 000000000000000000000000
LIST

# the published base64 form, and hex, import to the same evidence
check "Nitro .b64 as published" 0 "$SL" evidence import --kind aws-nitro \
	--report "$V/evervault_2023-09-18_debug_doc.b64" -o "$T/b64.json" --json
assert "Nitro .b64: format base64" [ "$(claim "$T/out" format)" = base64 ]
assert "Nitro .b64: same evidence" cmp -s "$T/b64.json" "$T/evervault_2023-09-18_debug_doc.json"
xxd -p "$V/evervault_2022-10-13_doc.cbor" >"$T/doc.hex"
check "Nitro hex" 0 "$SL" evidence import --kind aws-nitro --report "$T/doc.hex" -o "$T/hex.json"
assert "Nitro hex: same evidence" cmp -s "$T/hex.json" "$T/evervault_2022-10-13_doc.json"
check_err "Nitro --certs refused (the document carries its chain)" 1 "cabundle" "$SL" evidence import \
	--kind aws-nitro --report "$V/evervault_2022-10-13_doc.cbor" --certs "$V/aws_nitro_enclaves_root_g1.pem" -o "$T/c.json"
head -c 2000 "$V/evervault_2022-10-13_doc.cbor" >"$T/short.cbor"
check_err "a truncated document" 3 "Nitro document" "$SL" evidence import --kind aws-nitro \
	--report "$T/short.cbor" -o "$T/short.json"

# SEV-SNP and TDX, as hex and base64 (line-wrapped, surrounded by blank lines)
S=$SL_VECTORS/amd-sev-snp/gsg_milan_report.bin
Q=$SL_VECTORS/intel-tdx/trustee_quote_4.dat
"$SL" evidence import --kind sev-snp --report "$S" -o "$T/snp.json" 2>/dev/null
"$SL" evidence import --kind tdx --report "$Q" -o "$T/tdx.json" 2>/dev/null
for f in hex base64; do
	for k in sev-snp:$S:snp tdx:$Q:tdx; do
		IFS=: read -r kind src base <<<"$k"
		{ echo; if [ $f = hex ]; then xxd -p "$src"; else base64 "$src"; fi; echo; } >"$T/$base.$f"
		check "$kind as $f" 0 "$SL" evidence import --kind "$kind" --report "$T/$base.$f" -o "$T/$base-$f.json" --json
		assert "$kind as $f: named" [ "$(claim "$T/out" format)" = $f ]
		assert "$kind as $f: same evidence as binary" cmp -s "$T/$base-$f.json" "$T/$base.json"
	done
done
printf 'this is not a report!\n' >"$T/junk.txt"
check_err "text that is neither hex nor base64" 3 "neither hex nor base64" "$SL" evidence import \
	--kind tdx --report "$T/junk.txt" -o "$T/junk.json"

# no NSM here: collection fails cleanly (system error), nothing written
if [ ! -e /dev/nsm ]; then
	check_err "attest --tee aws-nitro without an NSM" 7 "/dev/nsm" "$SL" attest --tee aws-nitro \
		--nonce 00112233 -o "$T/none.json"
	assert "nothing written" test ! -e "$T/none.json"
else
	skip "attest --tee aws-nitro without an NSM" "this machine has /dev/nsm"
fi
finish
