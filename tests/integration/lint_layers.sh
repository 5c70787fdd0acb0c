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

# kms/: one folder per side of the privilege wall. The wall holds for this
# build (the table passes above); it is enforced on the objects' symbols:
# walling an arrow the code uses fails naming object and symbol.
printf 'wall: kms/http -> kms/state\n' | cat scripts/layers.txt - >"$T/wall.txt"
check "a wall across an arrow the code uses: fails" 1 scripts/check-layers "$T/wall.txt"
assert "names the wall, object and symbol" \
	grep -qE "privilege wall: .*kms/http/[a-z_]+\.o uses kmsd_[a-z_]+ from kms/state/: objects of kms/http/ may not reference" "$T/out"
sed 's|^kms/http: kms |kms/http: kms kms/keys |' scripts/layers.txt >"$T/open.txt"
check "a table that lets kms/http call kms/keys: fails" 1 scripts/check-layers "$T/open.txt"
assert "names the wall" grep -q "lets kms/http call kms/keys across the wall" "$T/out"
sed 's|^kms/keys: kms kms/state |kms/keys: kms |' scripts/layers.txt >"$T/no-state.txt"
check "kms/keys -> kms/state forbidden: fails (symbols and headers)" 1 \
	scripts/check-layers "$T/no-state.txt"
assert "names the folder header" \
	grep -q "kms/keys/keys.h includes kms/state/state.h (folder kms/state/): kms/keys -> kms/state" "$T/out"
grep -v '^kms/daemon:' scripts/layers.txt >"$T/no-daemon.txt"
check "a built folder of kms/ without a line fails" 1 scripts/check-layers "$T/no-daemon.txt"
assert "names the folder" grep -q "folder kms/daemon/ (objects in .*) has no line" "$T/out"

# File-level circles (scripts/check-circles): none in kms/; two files that
# need each other are one, printed with the symbols.
check "no file-level circle in kms/" 0 scripts/check-circles kms
mkdir -p "$T/tree/x" "$T/tree/build/x"
printf 'int b(int);\nint a(int n) { return n ? b(n - 1) : 0; }\n' >"$T/tree/x/a.c"
printf 'int a(int);\nint b(int n) { return n ? a(n - 1) : 1; }\n' >"$T/tree/x/b.c"
printf 'int c(void) { return 2; }\n' >"$T/tree/x/c.c"
for f in a b c; do cc -c -o "$T/tree/build/x/$f.o" "$T/tree/x/$f.c"; done
check "a circle of two files: fails" 1 env SL_CIRCLES_ROOT="$T/tree" BUILD=build scripts/check-circles x
assert "prints the circle and its symbols" \
	grep -q "circle: x/a.c, x/b.c: x/a.c (b) -> x/b.c (a) -> x/a.c" "$T/out"

finish
