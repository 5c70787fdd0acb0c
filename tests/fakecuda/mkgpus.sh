#!/usr/bin/env bash
# mkgpus.sh DIR N: the device identities of N fake GPUs for the NVML
# stand-in (fakenvml.c, FAKENVML_DIR=DIR): a test root (P-384, self-signed,
# "Fake NVIDIA Device Identity CA") and a shared provisioner ICA, and per GPU
# i in DIR/gpu<i>/ a chain of the real one's depth (five certificates, leaf
# first: "GB100 A01 GSP FMC LF", the GPU's RT and BROM ICAs, the provisioner
# ICA, the root), key.pem (the leaf's key, which signs reports) and fwid.hex
# (the FWID in the leaf's standard DICE TcbInfo, 2.23.133.5.4.1.1). The
# leaf's subjectAltName carries the device id NVIDIA:GB100:48B02D28458FDD<ii>.
# DIR/root.sha256: the root's fingerprint, for the test copies of the
# programs (SECLAUNCH_TEST_NVGPU_ROOT_SHA256, tests/fakecuda/nvgpu_testroot.c).
set -euo pipefail
D=$1
N=$2
mkdir -p "$D"
key() { openssl ecparam -name secp384r1 -genkey -noout -out "$1" 2>/dev/null; }
# sign SUBJECT KEY ISSUER_CERT ISSUER_KEY OUT EXTFILE
sign() {
	openssl req -new -key "$2" -subj "$1" -out "$5.csr" 2>/dev/null
	openssl x509 -req -in "$5.csr" -CA "$3" -CAkey "$4" -set_serial "0x$(openssl rand -hex 16)" \
		-days 30 -sha384 -extfile "$6" -out "$5" 2>/dev/null
	rm -f "$5.csr"
}
printf 'basicConstraints=critical,CA:true\nkeyUsage=critical,keyCertSign,cRLSign\n' >"$D/ca.ext"
key "$D/root.key"
openssl req -x509 -new -key "$D/root.key" -subj "/CN=Fake NVIDIA Device Identity CA/O=seclaunch tests" \
	-days 30 -sha384 -addext basicConstraints=critical,CA:true \
	-addext keyUsage=critical,keyCertSign,cRLSign -out "$D/root.pem" 2>/dev/null
openssl x509 -in "$D/root.pem" -outform DER | sha256sum | cut -d' ' -f1 >"$D/root.sha256"
key "$D/prov.key"
sign "/CN=Fake GB100 Provisioner ICA 1/O=seclaunch tests" "$D/prov.key" "$D/root.pem" "$D/root.key" \
	"$D/prov.pem" "$D/ca.ext"
for ((i = 0; i < N; i++)); do
	g=$D/gpu$i
	mkdir -p "$g"
	id=$(printf '48B02D28458FDD%02X' "$i")
	key "$g/brom.key"
	sign "/CN=GB100 A01 FSP BROM/serialNumber=$id" "$g/brom.key" "$D/prov.pem" "$D/prov.key" \
		"$g/brom.pem" "$D/ca.ext"
	key "$g/rt.key"
	sign "/CN=GB100 A01 FSP RT/serialNumber=$id" "$g/rt.key" "$g/brom.pem" "$g/brom.key" \
		"$g/rt.pem" "$D/ca.ext"
	key "$g/key.pem"
	# the same firmware on every GPU: one FWID
	fwid=$(printf 'fake GPU firmware' | openssl dgst -sha384 -r | cut -d' ' -f1)
	printf '%s\n' "$fwid" >"$g/fwid.hex"
	# DiceTcbInfo { vendor [0] "NVIDIA", fwids [6] { { sha384, fwid } } }
	printf '%s\n' "keyUsage=critical,digitalSignature" \
		"basicConstraints=critical,CA:false" \
		"subjectAltName=otherName:1.3.6.1.4.1.412.274.1;UTF8:NVIDIA:GB100:$id" \
		"2.23.133.5.4.1.1=DER:304980064e5649444941a63f303d0609608648016503040202" \
		>"$g/leaf.ext"
	sed -i "\$s/\$/0430$fwid/" "$g/leaf.ext"
	sign "/CN=GB100 A01 GSP FMC LF/serialNumber=$id" "$g/key.pem" "$g/rt.pem" "$g/rt.key" \
		"$g/leaf.pem" "$g/leaf.ext"
	cat "$g/leaf.pem" "$g/rt.pem" "$g/brom.pem" "$D/prov.pem" "$D/root.pem" >"$g/chain.pem"
done
