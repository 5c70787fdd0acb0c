#!/usr/bin/env bash
# SEV-SNP report and TDX quote verifications per second (`seclaunch verify
# --repeat N`: the whole verification each time, collateral read from a local
# directory), against OpenSSL's floor: `openssl speed ecdsap384` verifies/s
# for SNP (one P-384 signature), half the ecdsap256 verify rate for TDX (the
# quote and QE report signatures). Prints figures; asserts nothing.
# TDX with collateral twice: at a time inside the collateral's validity
# (issueDate..nextUpdate), the case a fleet's verifier is in and the one the
# goal is for, and at a time past nextUpdate, where the verification cache
# serves nothing (attest/vcache.h) and the collateral's signatures are
# verified again each time. N is large enough that the process start (about
# 20 ms of CPU: dynamic linking, OpenSSL and libsodium set-up) stays a small
# part of the rate, as it is in seclaunchd.
set -euo pipefail
SL=${SL_BIN:-bin}/seclaunch
V=${SL_VECTORS:-${SL_ROOT:-.}/tests/vectors}
[ -d "$V/amd-sev-snp" ] || { echo "no vectors at $V: skipped"; exit 0; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
N=${SL_BENCH_N:-2000}

rate() { # cmd... (doing N verifications): prints "wall-rate cpu-rate" per second
	local t0 t1 cpu
	t0=$(date +%s%N)
	/usr/bin/time -o "$T/cpu" -f "%U %S" "$@" >/dev/null
	cpu=$(tail -n1 "$T/cpu")
	t1=$(date +%s%N)
	awk -v n="$N" -v ns=$((t1 - t0)) -v cpu="$cpu" \
		'BEGIN { split(cpu, c, " "); s = c[1] + c[2]; if (s <= 0) s = 0.001;
		         printf "%.1f %.1f", n / (ns / 1e9), n / s }'
}
# openssl speed's verify/s column for one curve
ossl_verify() {
	openssl speed -seconds 3 "$1" 2>/dev/null | awk -v c="$2" '$0 ~ c && /ecdsa/ { print $NF }' | tail -n1
}

mkdir -p "$T/snp" "$T/tdx"
cp "$V/amd-sev-snp/trust/ask_ark_milan.pem" "$T/snp/"
"$SL" evidence import --kind sev-snp --report "$V/amd-sev-snp/gsg_milan_report.bin" \
	--certs "$V/amd-sev-snp/gsg_milan_vcek.der" -o "$T/snp.json"
"$SL" evidence import --kind tdx --report "$V/intel-tdx/trustee_quote_4.dat" -o "$T/tdx.json"
C=$V/intel-tdx/collateral
cp "$C/gtg_tcbinfo_fmspc_50806f000000.json" "$C/gtg_qe_identity_td_qe.json" \
	"$C/tcb_signing_chain.pem" "$C/gtg_pckcrl_platform.der" "$C/gtg_rootcrl.der" "$T/tdx/"
# a collateral directory changed in the last two seconds is read again at
# each verification (attest/coll_dir.h); a fleet's is older than that
sleep 2.1

snp=$(rate "$SL" verify "$T/snp.json" --no-binding --collateral "$T/snp" \
	--at 2024-01-01T00:00:00Z --repeat "$N" -q)
tdx=$(rate "$SL" verify "$T/tdx.json" --no-binding --at 2026-02-15T00:00:00Z --repeat "$N" -q)
# the TCB info's nextUpdate is 2023-07-18, the QE identity's and the PCK
# CRL's 2023-07-08
tdxc=$(rate "$SL" verify "$T/tdx.json" --no-binding --collateral "$T/tdx" \
	--at 2023-07-01T00:00:00Z --repeat "$N" -q)
tdxs=$(rate "$SL" verify "$T/tdx.json" --no-binding --collateral "$T/tdx" \
	--at 2026-02-15T00:00:00Z --repeat "$N" -q)
p384=$(ossl_verify ecdsap384 nistp384)
p256=$(ossl_verify ecdsap256 nistp256)

# openssl speed reports CPU-time rates; compare those with ours
awk -v n="$N" -v snp="$snp" -v tdx="$tdx" -v tdxc="$tdxc" -v tdxs="$tdxs" -v p384="$p384" -v p256="$p256" 'BEGIN {
	split(snp, a, " "); split(tdx, b, " "); split(tdxc, c, " "); split(tdxs, d, " ")
	printf "%-56s %10s %10s\n", "", "wall /s", "CPU /s"
	printf "%-56s %10s %10.1f\n", "openssl speed ecdsap384 verify", "", p384
	printf "%-56s %10s %10.1f\n", "openssl speed ecdsap256 verify / 2", "", p256 / 2
	printf "%-56s %10.1f %10.1f  (%.2f x the P-384 floor; goal >= 0.80)\n",
	       "SEV-SNP report: signature, VCEK->ASK->ARK, hwID, TCB", a[1], a[2], a[2] / p384
	printf "%-56s %10.1f %10.1f  (%.2f x the 2 x P-256 floor)\n",
	       "TDX quote: 2 signatures, QE binding, PCK chain", b[1], b[2], b[2] / (p256 / 2)
	printf "%-56s %10.1f %10.1f  (%.2f x the 2 x P-256 floor; goal >= 0.50)\n",
	       "TDX quote + TCB info, QE identity, CRLs", c[1], c[2], c[2] / (p256 / 2)
	printf "%-56s %10.1f %10.1f  (%.2f x the 2 x P-256 floor)\n",
	       "  the same past the collateral'"'"'s nextUpdate (stale)", d[1], d[2], d[2] / (p256 / 2)
	printf "(%d verifications a run; SL_BENCH_N sets it)\n", n
}'
