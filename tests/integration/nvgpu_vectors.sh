#!/usr/bin/env bash
# nvidia-gpu evidence through the CLI: the two real H100 reports of
# $SL_VECTORS/nvidia-gpu wrapped into evidence JSON here, `seclaunch verify`
# with their chains, claims compared with bytes read here at offsets the
# vectors' README gives; the README's broken chains; tamper cases (one bit of
# a measurement, the nonce, the signature; truncation; trailing bytes); a
# chain ending at a root made here with openssl; a wrong nonce; collection
# without an NVIDIA driver.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/nvidia-gpu
AT=2025-06-01T00:00:00Z
R1=$V/hopperAttestationReport.bin
C1=$V/hopper_cert_chain_case1.txt
R2=$V/hopper_coco_report1.bin
C2=$V/hopper_coco_certs1.txt
N1=931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb
N2=87d8e24ab336adafe228d49e83d745f6dba4ae505372b6a5704820856b343fec

wrap() { # report certs out
	python3 -c 'import base64,json,sys
r=open(sys.argv[1],"rb").read(); c=open(sys.argv[2],"rb").read()
json.dump({"kind":"nvidia-gpu","report":base64.b64encode(r).decode(),
           "certs":base64.b64encode(c).decode()},open(sys.argv[3],"w"))' "$@"
}
verify() { "$SL" verify "$@" --at "$AT"; }

# --- the real reports ---------------------------------------------------
wrap "$R1" "$C1" "$T/ev1.json"
wrap "$R2" "$C2" "$T/ev2.json"
check "report 1 verifies with its chain" 0 verify "$T/ev1.json" --nonce "$N1"
assert "report 1: nonce claim = bytes 4..35 of the request" \
	[ "$(claim gpu.nonce)" = "$(hexat "$R1" 4 32)" ]
# measurement record at 45; block k+1 = 4-byte header + 3-byte DMTF header + 48
assert "report 1: measurement 1 = bytes 52..99" \
	[ "$(claim gpu.measurement.1)" = "$(hexat "$R1" 52 48)" ]
assert "report 1: measurement 2 = bytes 107..154" \
	[ "$(claim gpu.measurement.2)" = "$(hexat "$R1" 107 48)" ]
assert "report 1: 64 measurement blocks (byte 41)" \
	[ "$(claim gpu.measurements)" = "$((0x$(hexat "$R1" 41 1)))" ]
assert "report 1: driver_version 550.90.07 (README)" [ "$(claim gpu.driver_version)" = 550.90.07 ]
assert "report 1: vbios_version 96.00.9f.00.01 (claims file)" \
	[ "$(claim gpu.vbios_version)" = 96.00.9f.00.01 ]
assert "report 1: fwid = README's leaf FWID" \
	[ "$(claim gpu.fwid)" = f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d ]
assert "report 1: arch hopper, kind nvidia, binding verified" \
	[ "$(claim gpu.arch)/$(claim gpu.kind)/$(claim binding)" = hopper/nvidia/verified ]
assert "report 1: no feature flag, so gpu.cc=unknown (never on without evidence)" \
	[ "$(claim gpu.cc)" = unknown ]
assert "report 1: gpu.devtools=unknown (no signed field carries it)" \
	[ "$(claim gpu.devtools)" = unknown ]
assert "report 1: cert serial = leaf serial" \
	[ "$(claim gpu.cert.serial)" = 53c22ba15e5d68088282da074ed9fb37aa585771 ]
check "report 2 (one trailing zero byte) verifies with its chain" 0 \
	verify "$T/ev2.json" --nonce "$N2"
assert "report 2: nonce claim = bytes 4..35" [ "$(claim gpu.nonce)" = "$(hexat "$R2" 4 32)" ]
assert "report 2: driver_version 580.95.05" [ "$(claim gpu.driver_version)" = 580.95.05 ]
assert "report 2: FEATURE_FLAG 0 -> gpu.cc=on, single-GPU passthrough" \
	[ "$(claim gpu.cc)/$(claim gpu.mode)" = on/cc-single-gpu ]
assert "report 2: fwid = README's leaf FWID" \
	[ "$(claim gpu.fwid)" = f1ae7d0093a3f5689cced58045c9744f94eb2aa4ddca88135197fb41a7be45576c2881cf920e2cbcc090b1cb921f7b2d ]
check "--no-binding: verifies" 0 verify "$T/ev1.json" --no-binding
assert "--no-binding: binding=unchecked" [ "$(claim binding)" = unchecked ]

# --- the README's negatives ---------------------------------------------
wrap "$R1" "$C2" "$T/x.json"
check_err "report 1 with the other GPU's chain: FWID differs" 3 'FWID does not equal' \
	verify "$T/x.json" --nonce "$N1"
wrap "$R1" "$V/hopper_cert_chain_case2.txt" "$T/x.json"
check_err "chain case 2 (root only)" 3 'at least the GPU.s attestation certificate and the root' \
	verify "$T/x.json" --nonce "$N1"
wrap "$R1" "$V/hopper_cert_chain_case3.txt" "$T/x.json"
check_err "chain case 3 (Provisioner ICA missing)" 3 'certificate chain invalid' \
	verify "$T/x.json" --nonce "$N1"
wrap "$R1" "$V/hopper_cert_chain_case4.txt" "$T/x.json"
check_err "chain case 4 (leaf missing): no FWID" 3 'no FWID extension' \
	verify "$T/x.json" --nonce "$N1"

# --- tamper ---------------------------------------------------------------
flip "$R1" "$T/r" 60 0x01
wrap "$T/r" "$C1" "$T/x.json"
check_err "one bit of measurement 1" 3 'signature .* does not verify' verify "$T/x.json" --nonce "$N1"
flip "$R1" "$T/r" 10 0x80
wrap "$T/r" "$C1" "$T/x.json"
check_err "one bit of the request nonce (binding checked)" 3 'signature .* does not verify' \
	verify "$T/x.json" --nonce "$N1"
check_err "one bit of the request nonce (no binding)" 3 'signature .* does not verify' \
	verify "$T/x.json" --no-binding
flip "$R1" "$T/r" 4050 0x04
wrap "$T/r" "$C1" "$T/x.json"
check_err "one bit of the signature" 3 'signature .* does not verify' verify "$T/x.json" --nonce "$N1"
dv=$(grep -obUa '550\.90\.07' "$R1" | head -n1 | cut -d: -f1)
flip "$R1" "$T/r" "$dv" 0x01 # '5' -> '4' in the opaque driver version
wrap "$T/r" "$C1" "$T/x.json"
check_err "one bit of the opaque driver version" 3 'signature .* does not verify' \
	verify "$T/x.json" --nonce "$N1"
head -c 4100 "$R1" >"$T/r"
wrap "$T/r" "$C1" "$T/x.json"
check_err "truncated report" 3 'response.signature: need 96 bytes' verify "$T/x.json" --nonce "$N1"
head -c 30 "$R1" >"$T/r"
wrap "$T/r" "$C1" "$T/x.json"
check_err "truncated inside the request" 3 'request.nonce' verify "$T/x.json" --nonce "$N1"
{ cat "$R1"; printf 'X'; } >"$T/r"
wrap "$T/r" "$C1" "$T/x.json"
check_err "trailing byte" 3 'trailing bytes after the signature' verify "$T/x.json" --nonce "$N1"
check_err "wrong nonce" 3 'request.nonce does not equal the expected binding' \
	verify "$T/ev1.json" --nonce "$N2"
check_err "nonce longer than the 32-byte SPDM nonce" 3 'does not fit the 32-byte SPDM nonce' \
	verify "$T/ev1.json" --nonce "${N1}00"

# a chain that copies the subjects but ends at a root made here
openssl ecparam -name secp384r1 -genkey -noout -out "$T/rk.pem" 2>/dev/null
openssl req -x509 -new -key "$T/rk.pem" -subj "/CN=NVIDIA Device Identity CA/O=NVIDIA" \
	-days 30 -sha384 -out "$T/root.pem" 2>/dev/null
openssl ecparam -name secp384r1 -genkey -noout -out "$T/lk.pem" 2>/dev/null
openssl req -new -key "$T/lk.pem" -subj "/CN=GH100 A01 GSP FMC LF" -out "$T/l.csr" 2>/dev/null
# the leaf carries the real FWID in the extension the verifier reads
fwid=$(sed -n 's/.*"fwid":"\([0-9a-f]*\)".*/\1/p' "$V/hopperAttestationReport-claims.txt")
printf 'keyUsage=critical,digitalSignature\n2.23.133.5.4.1=DER:3042020101303d06096086480165030402020430%s\n' "$fwid" \
	>"$T/ext.cnf"
openssl x509 -req -in "$T/l.csr" -CA "$T/root.pem" -CAkey "$T/rk.pem" -CAcreateserial \
	-days 30 -sha384 -extfile "$T/ext.cnf" -out "$T/leaf.pem" 2>/dev/null
cat "$T/leaf.pem" "$T/root.pem" >"$T/chain.pem"
wrap "$R1" "$T/chain.pem" "$T/x.json"
check_err "chain ending at a self-made root" 3 'pinned NVIDIA Device Identity CA' \
	verify "$T/x.json" --nonce "$N1"
# the real chain with its root swapped for the self-made one
awk '/BEGIN/{n++} n<=4' "$C1" >"$T/chain4.pem"
cat "$T/chain4.pem" "$T/root.pem" >"$T/x.pem"
wrap "$R1" "$T/x.pem" "$T/x.json"
check_err "real intermediates under a self-made root" 3 'pinned NVIDIA Device Identity CA' \
	verify "$T/x.json" --nonce "$N1"

# --- evidence JSON ---------------------------------------------------------
python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); del e["certs"]; json.dump(e,open(sys.argv[2],"w"))' \
	"$T/ev1.json" "$T/x.json"
check_err "evidence without certs" 3 'evidence.certs' verify "$T/x.json" --nonce "$N1"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); e["driver"]={"cc":"on","devtools":True}; json.dump(e,open(sys.argv[2],"w"))' \
	"$T/ev2.json" "$T/x.json"
check "driver settings (unsigned) with devtools on" 0 verify "$T/x.json" --nonce "$N2"
assert "driver devtools=true makes gpu.devtools=true (only ever worse)" \
	[ "$(claim gpu.devtools)/$(claim gpu.driver.devtools)" = true/true ]
python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); e["driver"]={"cc":"off","devtools":False}; json.dump(e,open(sys.argv[2],"w"))' \
	"$T/ev2.json" "$T/x.json"
check "driver settings (unsigned) with cc off" 0 verify "$T/x.json" --nonce "$N2"
assert "driver cc=off lowers gpu.cc; devtools=false does not make gpu.devtools false" \
	[ "$(claim gpu.cc)/$(claim gpu.devtools)" = off/unknown ]
python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); e["driver"]={"cc":"on","extra":1}; json.dump(e,open(sys.argv[2],"w"))' \
	"$T/ev2.json" "$T/x.json"
check_err "driver settings with an unknown field" 3 'evidence.driver: unknown field' \
	verify "$T/x.json" --nonce "$N2"

# --- collection without a GPU ----------------------------------------------
if [ -e /dev/nvidiactl ] || ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1; then
	skip "collect without a driver" "this machine has an NVIDIA driver"
else
	check_err "collect without a driver: clear message, exit 7" 7 \
		'no NVIDIA driver \(libnvidia-ml.so.1 not found\)' \
		"$SL" attest --tee nvidia-gpu --nonce "$N1" -o "$T/g.json"
	assert "collect without a driver: no evidence file" [ ! -e "$T/g.json" ]
fi
# --- seclaunchd: a captured GPU report replayed against a fresh challenge ---
if start_kms "$T/kms"; then
	release "$T/ev1.json"
	assert "seclaunchd: replayed GPU report refused (403, binding_mismatch, names the nonce)" \
		sh -c "grep -qx 403 '$T/code' && grep -q 'binding_mismatch' '$T/body' &&
		       grep -q 'request.nonce does not equal the expected binding' '$T/body'"
	wrap "$R1" "$V/hopper_cert_chain_case3.txt" "$T/x.json"
	release "$T/x.json"
	assert "seclaunchd: broken GPU chain refused (403, evidence_invalid)" \
		sh -c "grep -qx 403 '$T/code' && grep -q 'evidence_invalid' '$T/body' &&
		       grep -q 'GPU certificate chain' '$T/body'"
else
	_failed=$((_failed + 1))
	echo "not ok - seclaunchd did not start"
fi

finish
