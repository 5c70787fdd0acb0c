#!/usr/bin/env bash
# NVIDIA GPU report verifications per second, H100 and Blackwell (`seclaunch
# verify --repeat N`: parse, the 5-certificate chain to the pinned root, FWID, the report's
# P-384 signature, binding, claims), against OpenSSL's floor for the same
# public-key work: `openssl speed ecdsap384` verifies/s divided by 5 (four
# certificate signatures and the report's). Then an eight-GPU set (one
# evidence item, eight reports bound to one nonce, each with its own
# 5-certificate chain: the NVML stand-in's GPUs, tests/fakecuda/, verified by
# the test copy of seclaunch that pins their test root) against the floor
# divided by 40 (eight GPUs' five signatures). The process's verification
# cache (attest/vcache.c) keeps each chain that passed, so after the first
# of the N verifications only the reports' signatures are verified again
# (what seclaunchd does for GPUs it has seen): each line also gives the
# ratio to that floor, one P-384 verification a GPU. Prints figures;
# asserts nothing.
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

# rate LABEL EVIDENCE NONCE [SIGS [N [AT [BIN]]]]: N verifications in one
# process, against the floor of SIGS P-384 verifications each
rate() {
	local t0 t1 cpu sigs=${4:-5} n=${5:-$N} at=${6-2025-06-01T00:00:00Z} bin=${7:-$SL}
	t0=$(date +%s%N)
	/usr/bin/time -o "$T/cpu" -f "%U %S" "$bin" verify "$2" --nonce "$3" \
		${at:+--at "$at"} --repeat "$n" -q >/dev/null
	t1=$(date +%s%N)
	cpu=$(tail -n1 "$T/cpu")
	awk -v l="$1" -v n="$n" -v ns=$((t1 - t0)) -v cpu="$cpu" -v p384="$p384" -v k="$sigs" 'BEGIN {
		split(cpu, c, " "); s = c[1] + c[2]; if (s <= 0) s = 0.001
		printf "%-56s %10.1f %10.1f  (%.2f x the %d x P-384 floor; %.2f x %d x, chains cached)\n",
		       l, n / (ns / 1e9), n / s, (n / s) / (p384 / k), k, (n / s) / (p384 / (k / 5)), k / 5
	}'
}
rate "H100 report: chain, FWID, signature, nonce, claims" "$T/h100.json" \
	931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb
rate "Blackwell (GB202) report: the same, DICE TcbInfo FWID" "$T/gb202.json" \
	4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e
awk -v p384="$p384" 'BEGIN { printf "%-56s %10s %10.1f\n", "openssl speed ecdsap384 verify / 40 (a set of 8)", "", p384 / 40 }'

# No eight real GPUs' reports answer one nonce: the eight-GPU set comes from
# the NVML stand-in, whose chains have the real ones' depth (five
# certificates, P-384) and end at a test root only the test copy pins.
B=${SL_BUILD:-${SL_ROOT:-.}/build}
TB=$B/tests/nvgpu-testroot/seclaunch
FAKENVML=$B/tests/fakecuda/libnvidia-ml.so.1
if [ ! -x "$TB" ] || [ ! -f "$FAKENVML" ] || ! command -v openssl >/dev/null; then
	echo "eight-GPU set: $TB or the NVML stand-in not built (make build-tests): skipped"
	exit 0
fi
"${SL_ROOT:-.}/tests/fakecuda/mkgpus.sh" "$T/g" 8
nonce=$(openssl rand -hex 32)
export LD_LIBRARY_PATH=$(dirname "$FAKENVML") FAKENVML_DIR=$T/g FAKENVML_GPUS=8 \
	SECLAUNCH_TEST_NVGPU_ROOT_SHA256=$(cat "$T/g/root.sha256")
"$TB" attest --tee nvidia-gpu --nonce "$nonce" -o "$T/set8.json" -q
rate "eight-GPU set (8 reports, 8 chains, one nonce, set rules)" "$T/set8.json" "$nonce" 40 \
	$(((N + 7) / 8)) "" "$TB"
