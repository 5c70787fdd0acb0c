#!/usr/bin/env bash
# The layering check (scripts/check-layers) on this build's objects: the
# real table passes, and a table that forbids an arrow the code uses fails
# naming the object and symbol (nm), or the file and header (includes), and
# the arrow.
. "$(dirname "$0")/lib.sh"
SL_BUILD=${SL_BUILD:-$SL_ROOT/build}
cd "$SL_ROOT" || exit 2
if ! command -v nm >/dev/null; then
	skip "layering" "needs nm (binutils)"
	finish
fi
if [ ! -f "$SL_BUILD/policy/policy_eval.o" ]; then
	skip "layering" "no objects in $SL_BUILD (build first)"
	finish
fi
export BUILD=$SL_BUILD SL_LAYERS_NO_BUILD=1

check "the module table holds for this build" 0 scripts/check-layers

sed 's/^policy: core crypto/policy: crypto/' scripts/layers.txt >"$T/no-core.txt"
check "policy -> core forbidden: fails" 1 scripts/check-layers "$T/no-core.txt"
assert "names object, symbol and arrow" \
	grep -q "policy/policy_eval.o uses sl_claims_get from core/: policy -> core is not allowed" "$T/out"

sed 's/^attest: core crypto/attest: crypto/' scripts/layers.txt >"$T/no-http.txt"
check "attest -> core forbidden: the HTTP helper's callers are named" 1 \
	scripts/check-layers "$T/no-http.txt"
assert "names snp_kds.o and sl_http_fetch" \
	grep -q "attest/snp_kds.o uses sl_http_fetch from core/: attest -> core" "$T/out"

sed 's|^include/seclaunch/json.h: core|include/seclaunch/json.h: attest|' scripts/layers.txt >"$T/hdr.txt"
check "a header of a module policy may not call: fails" 1 scripts/check-layers "$T/hdr.txt"
assert "names the file, the header and the arrow" \
	grep -q "policy/policy_parse.c includes seclaunch/json.h (module attest/): policy -> attest is not allowed" "$T/out"

grep -v '^audit:' scripts/layers.txt >"$T/no-audit.txt"
check "a built module without a line fails" 1 scripts/check-layers "$T/no-audit.txt"
assert "names the module" grep -q "module audit/ (Makefile MODULES) has no line" "$T/out"

finish
