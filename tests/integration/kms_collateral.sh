#!/usr/bin/env bash
# seclaunchd's collateral_dir: SEV-SNP evidence that carries only its VCEK
# verifies at the KMS when the AMD ASK/ARK bundles are in collateral_dir (the
# release then fails on the binding alone, as a captured report must), and is
# refused naming the missing ARK without it.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/amd-sev-snp
check "import a real Milan report with its VCEK only" 0 \
	"$SL" evidence import --kind sev-snp --report "$V/gsg_milan_report.bin" \
	--certs "$V/gsg_milan_vcek.der" -o "$T/ev.json"


# without collateral_dir: the chain cannot reach a pinned ARK
if start_kms "$T/kms-none"; then
	release "$T/ev.json"
	assert "no collateral_dir: refused, names the missing AMD ARK" \
		sh -c "grep -qx 403 '$T/code' && grep -q 'evidence_invalid' '$T/body' &&
		       grep -q 'no AMD ARK' '$T/body'"
	stop_pid "$KMS_PID"
else
	_failed=$((_failed + 1))
	echo "not ok - seclaunchd did not start"
fi

# with collateral_dir: the chain verifies, only the (captured) binding fails
printf '{"collateral_dir": "%s"}\n' "$V/trust" >"$T/collateral.json"
if start_kms "$T/kms-coll" --config "$T/collateral.json"; then
	release "$T/ev.json"
	assert "collateral_dir: chain verified, refused only for the binding" \
		sh -c "grep -qx 403 '$T/code' && grep -q 'binding' '$T/body' &&
		       ! grep -q 'no AMD ARK' '$T/body'"
else
	_failed=$((_failed + 1))
	echo "not ok - seclaunchd did not start with collateral_dir"
fi

# an unknown configuration key is still refused
printf '{"collateral_directory": "%s"}\n' "$V/trust" >"$T/bad.json"
check_err "a misspelt key is refused, naming it" 2 'collateral_directory' \
	"$SLD" --dev --state "$T/kms-bad" --listen 127.0.0.1:0 --config "$T/bad.json"

finish
