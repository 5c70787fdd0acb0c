# Helpers shared by the kms_* tests and scripts/bench/30-kms.sh (source
# after lib.sh).

# build_probe: compiles tests/integration/kms_probe.c against the library
# under test into $T/kms_probe (sets PROBE).
build_probe() {
	local build=${SL_BUILD:-$SL_ROOT/build} san=
	local pkgs="libsodium libcrypto tss2-esys tss2-mu tss2-rc tss2-tctildr libcurl jansson libmicrohttpd"
	if nm "$build/libseclaunch.a" 2>/dev/null | grep -q __asan_init; then
		san="-fsanitize=address,undefined"
	fi
	PROBE=$T/kms_probe
	# shellcheck disable=SC2046
	cc -std=c11 -D_GNU_SOURCE -O2 $san -I"$SL_ROOT/include" -I"$SL_ROOT/launcher" \
		$(pkg-config --cflags $pkgs) "$SL_ROOT/tests/integration/kms_probe.c" \
		"$build/libseclaunch.a" $(pkg-config --libs $pkgs) -lpthread -ldl -lm -o "$PROBE"
}

# wrapped_of FILE.sld: the header's wrapped DEK (base64).
wrapped_of() {
	"$SL" inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"]["wrapped_dek"])'
}

# kms_metric NAME_WITH_LABELS: the value of one metric line (0 when absent).
kms_metric() {
	local v
	v=$(curl -s --cacert "$KMS_CA" "$KMS_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }')
	echo "${v:-0}"
}
