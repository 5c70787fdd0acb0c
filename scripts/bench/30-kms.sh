#!/usr/bin/env bash
# seclaunchd key releases: releases per second and p50/p99 latency at 1, 16
# and 64 concurrent clients, each release with full evidence verification
# (TPM quote signature, PCR digest, binding, enrolled AK), policy
# evaluation, KEK unwrap, sealing to the client's key, the audit record
# (fsync'd, on disk: concurrent releases share an fsync, see docs/audit.md)
# and the answer over TLS 1.3 on a keep-alive connection. One more run at 64
# clients puts the audit log on tmpfs to show what the disk costs.
# swtpm quotes serially, so every challenge and its quote is prepared before
# the timed phase, and every answer (the sealed DEK opened with the request's
# key and compared with the DEK wrapped for its dataset) is checked after it,
# so the client takes as little of the 2 CPUs as it can while timed; it
# prints its own CPU per request next to the server's. The peer, run the
# same way: GET /v1/health over the same connections (the TLS + HTTP
# ceiling). Goal: >= 2,000 releases/s and p99 < 20 ms at 64 clients.
# SL_BENCH_KMS_N overrides the releases per level (default 2000). Prints
# figures; asserts nothing.
set -uo pipefail
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
export SL_BUILD=${SL_BUILD:-$SL_ROOT/${BUILD:-build}}
N=${SL_BENCH_KMS_N:-2000}
for tool in swtpm python3 cc; do
	command -v "$tool" >/dev/null || { echo "30-kms: $tool is not installed"; exit 1; }
done
[ -x "$SL_BIN/seclaunchd" ] || { echo "30-kms: $SL_BIN/seclaunchd not built"; exit 1; }
. "$(dirname "$0")/lib.bash"
. "$SL_ROOT/tests/integration/tpm2_lib.bash"
. "$SL_ROOT/tests/integration/kms_lib.bash"
cd "$T" || exit 1
build_probe || { echo "30-kms: cannot build the probe against $SL_BUILD/libseclaunch.a"; exit 1; }
start_swtpm_tcti tpm >/dev/null
AUDIT_DIR=$(mktemp -d /dev/shm/sl-bench-audit.XXXXXX)
trap '_cleanup; rm -rf "$AUDIT_DIR"' EXIT
# the default audit log, $T/kms/audit.log, is on the disk that holds $T
echo '{"challenge_ttl_s": 600, "max_challenges": 200000}' >bench.json
start_kms "$T/kms" --config "$T/bench.json" || exit 1
"$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q || exit 1
"$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id bench -q || exit 1
bench_wrap_keys "$KMS_CA" "$KMS_URL" "$KMS_TOKEN" >keys.txt
echo "seclaunchd: $(nproc) CPUs, default threads (2 connection threads, 64 workers), local keystore, dev policy, RSA-2048 AK, audit log on $(df --output=source "$T" | tail -1) ($(findmnt -no FSTYPE -T "$T")), $N releases per level"
# CPU seconds seclaunchd has used (user + system), from /proc
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$KMS_PID/stat"; }
for c in 1 16 64; do
	"$PROBE" "$KMS_URL" "$KMS_CA" burst "$N" "$c" keys.txt 2>prep.err >burst.out &
	BP=$!
	# the CPU the server spends in the timed phase only (preparation is
	# challenges, which cost it almost nothing, but start counting after it)
	while kill -0 "$BP" 2>/dev/null && ! grep -q prepared prep.err; do sleep 0.05; done
	c0=$(cpu_s)
	wait "$BP"
	c1=$(cpu_s)
	echo "$(cat burst.out) server_cpu_ms_per_release=$(python3 -c "print(f'{($c1 - $c0) * 1000 / $N:.3f}')")" | tee -a results.txt
	grep -h "prepared" prep.err | sed 's/^kms_probe: /  (untimed) /'
	"$PROBE" "$KMS_URL" "$KMS_CA" health "$N" "$c" | sed 's/^/  peer: /' | tee -a results.txt
done
# the same at 64 clients with the audit log on tmpfs (no disk)
stop_pid "$KMS_PID"
echo "{\"challenge_ttl_s\": 600, \"max_challenges\": 200000, \"audit_log\": \"$AUDIT_DIR/audit.log\"}" >tmpfs.json
start_kms "$T/kms" --config "$T/tmpfs.json" || exit 1
"$PROBE" "$KMS_URL" "$KMS_CA" burst "$N" 64 keys.txt 2>/dev/null | sed 's/^release /release-tmpfs-audit /' | tee -a results.txt
python3 - results.txt <<'EOP'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip().replace("peer: ", "")
    kind = line.split()[0]
    f = dict(re.findall(r"(\w+)=([\d.]+)", line))
    rows[(kind, f["concurrency"])] = f
print("\naudit log on disk")
print("concurrency  releases/s  p50 ms  p99 ms   health/s  release/health  server CPU ms/release  client CPU ms/release")
for c in ("1", "16", "64"):
    r, h = rows.get(("release", c)), rows.get(("health", c))
    if r and h:
        print(f"{c:>11}  {float(r['per_s']):>10.0f}  {float(r['p50_ms']):>6.2f}  {float(r['p99_ms']):>6.2f}   {float(h['per_s']):>8.0f}  {float(r['per_s'])/float(h['per_s']):>14.2f}  {float(r.get('server_cpu_ms_per_release', 0)):>21.3f}  {float(r.get('client_cpu_ms_per_request', 0)):>21.3f}")
import os
cpus = os.cpu_count() or 1
r = rows.get(("release", "64"))
if r and float(r.get("server_cpu_ms_per_release", 0)) > 0:
    cap = cpus * 1000 / float(r["server_cpu_ms_per_release"])
    both = float(r["server_cpu_ms_per_release"]) + float(r.get("client_cpu_ms_per_request", 0))
    print(f"server CPU per release at 64 clients: {float(r['server_cpu_ms_per_release']):.3f} ms -> at most {cap:.0f} releases/s on {cpus} otherwise idle CPUs")
    print(f"server + bench client CPU per release: {both:.3f} ms -> at most {cpus * 1000 / both:.0f} releases/s while both share these {cpus} CPUs")
    print(f"Little's law: 64 requests in flight at {float(r['per_s']):.0f}/s means a mean latency of {64000/float(r['per_s']):.1f} ms")
d = rows.get(("release-tmpfs-audit", "64"))
if d:
    print(f"with the audit log on tmpfs instead, 64 clients: {float(d['per_s']):.0f} releases/s, p50 {float(d['p50_ms']):.2f} ms, p99 {float(d['p99_ms']):.2f} ms")
r = rows.get(("release", "64"))
if r:
    rate, p99 = float(r['per_s']), float(r['p99_ms'])
    print(f"goal at 64 clients, audit on disk: >= 2000 releases/s: {rate:.0f} ({rate / 2000:.2f}x the goal, {'met' if rate >= 2000 else 'NOT met'}); p99 < 20 ms: {p99:.2f} ms ({20 / p99:.2f}x, {'met' if p99 < 20 else 'NOT met'})")
EOP
stop_pid "$KMS_PID"
