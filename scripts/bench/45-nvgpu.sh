#!/usr/bin/env bash
# NVIDIA GPU report verifications per second, H100 and Blackwell (`seclaunch
# verify --repeat N`: parse, the 5-certificate chain to the pinned root, FWID, the report's
# P-384 signature, binding, claims), against OpenSSL's floor for the same
# public-key work: `openssl speed ecdsap384` verifies/s divided by 5 (four
# certificate signatures and the report's). Prints figures; asserts nothing.
set -euo pipefail
SL=${SL_BIN:-bin}/seclaunch
V=${SL_VECTORS:-${SL_ROOT:-.}/tests/vectors}
[ -d "$V/nvidia-gpu" ] || { echo "no vectors at $V: skipped"; exit 0; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
N=${SL_BENCH_N:-300}

evidence() {
	python3 -c 'import base64,json,sys
r=open(sys.argv[1],"rb").read(); c=open(sys.argv[2],"rb").read()
json.dump({"kind":"nvidia-gpu","report":base64.b64encode(r).decode(),
           "certs":base64.b64encode(c).decode()},open(sys.argv[3],"w"))' \
		"$V/nvidia-gpu/$1" "$V/nvidia-gpu/$2" "$3"
}
evidence hopperAttestationReport.bin hopper_cert_chain_case1.txt "$T/h100.json"
evidence blackwellAttestationReport.bin blackwell_cert_chain_case1.txt "$T/gb202.json"

p384=$(openssl speed -seconds 3 ecdsap384 2>/dev/null | awk '/nistp384/ && /ecdsa/ { print $NF }' | tail -n1)
printf "%-56s %10s %10s\n" "" "wall /s" "CPU /s"
awk -v p384="$p384" 'BEGIN { printf "%-56s %10s %10.1f\n", "openssl speed ecdsap384 verify / 5", "", p384 / 5 }'

# rate LABEL EVIDENCE NONCE: N verifications in one process
rate() {
	local t0 t1 cpu
	t0=$(date +%s%N)
	/usr/bin/time -o "$T/cpu" -f "%U %S" "$SL" verify "$2" --nonce "$3" \
		--at 2025-06-01T00:00:00Z --repeat "$N" -q >/dev/null
	t1=$(date +%s%N)
	cpu=$(tail -n1 "$T/cpu")
	awk -v l="$1" -v n="$N" -v ns=$((t1 - t0)) -v cpu="$cpu" -v p384="$p384" 'BEGIN {
		split(cpu, c, " "); s = c[1] + c[2]; if (s <= 0) s = 0.001
		printf "%-56s %10.1f %10.1f  (%.2f x the 5 x P-384 floor)\n", l, n / (ns / 1e9),
		       n / s, (n / s) / (p384 / 5)
	}'
}
rate "H100 report: chain, FWID, signature, nonce, claims" "$T/h100.json" \
	931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb
rate "Blackwell (GB202) report: the same, DICE TcbInfo FWID" "$T/gb202.json" \
	4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e
# No eight real GPUs' reports answer one nonce, so an eight-GPU set is not
# measured end to end; its cost is eight of the reports above plus the set's
# bookkeeping (attest/nvgpu_set.c), which tests/unit/nvgpu_set_test.c checks.
