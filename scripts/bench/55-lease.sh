#!/usr/bin/env bash
# Workload identity and leases: (1) AK revoked -> job stopped and its staged
# data zeroed, p50/p99 over 20 trials (a fresh swtpm and AK each), as a
# ratio of the renewal interval (goal: p99 <= interval + 2 s); (2) the CPU
# cost of a renewal on the server (seclaunchd's utime+stime) and the client
# (seclaunch run's), beside a release; (3) launch latency with the workload
# measurement on, against tpm2_quote + tpm2_checkquote (goal <= 1.0x).
# SL_BENCH_LEASE_TRIALS overrides the 20 trials, SL_BENCH_LAUNCH_PAIRS the 11
# launch pairs; SL_BENCH_LEASE_PARTS (default 123) picks the parts; with
# SL_BENCH_BASE_BIN (an earlier build of seclaunch) part 3 times it in the same
# pairs. Prints figures; asserts nothing.
set -uo pipefail
. "$(dirname "$0")/lib.bash"
export SL_ROOT SL_BIN
need_tools swtpm tpm2_quote tpm2_checkquote tpm2_createek tpm2_createak python3
TRIALS=${SL_BENCH_LEASE_TRIALS:-20}
PARTS=${SL_BENCH_LEASE_PARTS:-123}
TTL=2 # renewal every TTL/2 = 1 s
export SECLAUNCH_WORKLOAD_LOG=$W/wl.json

"$SL" policy keygen --secret-key "$W/p.key" --public-key "$W/p.pub" -W >/dev/null || die "policy keygen"
cat >"$W/policy.json" <<EOF
{"version": 1, "allow_unverified_region": true, "keys": {"bench-key": ["bench-lease", "bench-once", "model:*"]},
 "datasets": [{"id": "bench-lease", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"], "key_ttl": $TTL},
              {"id": "bench-once", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "output_destinations": [{"url": "file://$W/dest*", "region": "gcp:europe-west4"}]},
              {"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "output_destinations": [{"url": "file://$W/dest*", "region": "gcp:europe-west4"}]}]}
EOF
"$SL" policy sign --secret-key "$W/p.key" --policy "$W/policy.json" >/dev/null || die "policy sign"
start_kms "$W/kms" --policy "$W/policy.json" --policy-pubkey "$W/p.pub" || die "seclaunchd did not start"
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
TOK=$W/kms/admin.token
"$SL" key create "${K[@]}" --admin-token-file "$TOK" --id bench-key >/dev/null 2>&1 || die "key create"
for d in bench-lease bench-once; do
	head -c $((1024 * 1024)) /dev/urandom >"$W/plain"
	"$SL" encrypt "${K[@]}" --key-id bench-key --admin-token-file "$TOK" --dataset-id $d -q \
		"$W/plain" -o "$W/$d.sld" || die "encrypt $d"
done
rm -f "$W/plain"
RUN=(run --policy "$W/policy.json" --policy-pubkey "$W/p.pub" "${K[@]}" --stage host
	--region gcp:europe-west4 --audit-log "$W/audit.log" -q --kill-grace 1)

# ---- (1) revocation -> stopped and zeroed ----------------------------------
if [[ $PARTS == *1* ]]; then
python3 - "$SL" "$W" "$TRIALS" "$TTL" "$TOK" "${K[@]}" -- "${RUN[@]}" <<'EOF' || die "revocation trials"
import json, os, statistics, subprocess, sys, time
sl, w, trials, ttl, tok = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rest = sys.argv[6:]
kms = rest[:rest.index("--")]
run = rest[rest.index("--") + 1:]
lib = os.environ["SL_ROOT"] + "/tests/testlib/lib.bash"
ts = []
for i in range(trials):
    # a fresh TPM (and so a fresh AK) per trial: a revoked AK stays revoked
    st = os.path.join(w, "tpm%d" % i)
    os.makedirs(st)
    port = int(subprocess.check_output(["bash", "-c", ". %s >/dev/null; free_port_pair" % lib]).strip())
    tpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--tpmstate", "dir=" + st,
                            "--server", "type=tcp,port=%d,bindaddr=127.0.0.1" % port,
                            "--ctrl", "type=tcp,port=%d,bindaddr=127.0.0.1" % (port + 1),
                            "--flags", "not-need-init,startup-clear"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    tcti = "swtpm:host=127.0.0.1,port=%d" % port
    env = dict(os.environ, SECLAUNCH_TCTI=tcti, SECLAUNCH_WORKLOAD_LOG=os.path.join(st, "wl.json"))
    try:
        out = subprocess.check_output([sl, "enroll"] + kms + ["--json"], env=env, stderr=subprocess.DEVNULL)
        ak = json.loads(out)["ak_name"]
        mark = os.path.join(st, "started")
        job = subprocess.Popen([sl] + run + ["--tcti", tcti, os.path.join(w, "bench-lease.sld"), "--",
                                "sh", "-c", "touch %s; exec sleep 60" % mark],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            if os.path.exists(mark):
                break
            time.sleep(0.01)
        # revoke at a random point of the renewal interval
        time.sleep((i % 10) / 10.0 * (ttl / 2.0))
        t0 = time.perf_counter()
        subprocess.check_call([sl, "enroll", "revoke"] + kms + ["--admin-token-file", tok, ak],
                              env=env, stdout=subprocess.DEVNULL)
        rc = job.wait(timeout=30)
        ts.append(time.perf_counter() - t0)
        if rc != 3:
            sys.exit("trial %d: seclaunch run exited %d, want 3" % (i, rc))
    finally:
        tpm.terminate()
        tpm.wait()
ts.sort()
p = lambda q: ts[min(len(ts) - 1, int(round(q * (len(ts) - 1))))]
iv = ttl / 2.0
print("AK revoked -> job stopped, data zeroed (%d trials, renewal interval %.1f s, --kill-grace 1):" % (trials, iv))
print("  p50 %.2f s (%.2fx interval)   p99 %.2f s (%.2fx interval)   goal p99 <= interval + 2 s = %.1f s"
      % (p(0.5), p(0.5) / iv, p(0.99), p(0.99) / iv, iv + 2))
EOF
fi

# ---- (2) CPU of a renewal beside a release ---------------------------------
start_swtpm tpmcpu || die "swtpm"
"$SL" enroll "${K[@]}" >/dev/null 2>&1 || die "enroll"
if [[ $PARTS == *2* ]]; then
python3 - "$SL" "$KMS_PID" "$W" -- "${RUN[@]}" <<'EOF' || die "cpu"
import os, resource, subprocess, sys, time
sl, kpid, w = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = sys.argv[sys.argv.index("--") + 1:]
tck = os.sysconf("SC_CLK_TCK")
def proc_cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tck
def kms_cpu():
    # seclaunchd and its key process (KEK operations run there)
    kids = []
    for t in os.listdir("/proc/%d/task" % kpid):
        try:
            kids += open("/proc/%d/task/%s/children" % (kpid, t)).read().split()
        except OSError:
            pass
    return proc_cpu(kpid) + sum(proc_cpu(int(k)) for k in kids)
def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
def audit_count(ev):
    return sum(1 for l in open(os.path.join(w, "audit.log")) if '"%s"' % ev in l)
N = 10
k0, c0 = kms_cpu(), child_cpu()
for _ in range(N):
    subprocess.check_call([sl] + run + [os.path.join(w, "bench-once.sld"), "--", "true"])
k_rel, c_rel = (kms_cpu() - k0) / N, (child_cpu() - c0) / N
r0 = audit_count("run.lease_renewed")
k0, c0 = kms_cpu(), child_cpu()
subprocess.check_call([sl] + run + [os.path.join(w, "bench-lease.sld"), "--", "sleep", "10.5"])
k1, c1 = kms_cpu() - k0, child_cpu() - c0
n = audit_count("run.lease_renewed") - r0
# the leased run is one release plus n renewals (plus the idle sleep's nothing)
k_ren, c_ren = (k1 - k_rel) / max(n, 1), (c1 - c_rel) / max(n, 1)
print("CPU per operation (seclaunchd and its key process: utime+stime; client: seclaunch run's own):")
print("  release (whole run of `true`):   server %.1f ms   client %.1f ms" % (k_rel * 1e3, c_rel * 1e3))
print("  renewal (%d in a 10.5 s job):    server %.1f ms   client %.1f ms   (%.2fx / %.2fx a release)"
      % (n, k_ren * 1e3, c_ren * 1e3, k_ren / k_rel if k_rel else 0, c_ren / c_rel if c_rel else 0))
EOF
fi

# ---- (3) launch latency with the measurement on ----------------------------
[[ $PARTS == *3* ]] || exit 0
# Pairs alternate (seclaunch run, the peer, seclaunch run, ...) so that load
# from other work on a shared machine falls on both alike. SL_BENCH_BASE_BIN
# (a seclaunch built from an earlier commit) is timed in the same pairs:
# before and after in one run.
tpm2_createek -c "$W/ek.ctx" -G rsa -u "$W/ek.pub" >/dev/null 2>&1 || die "tpm2_createek"
tpm2_createak -C "$W/ek.ctx" -c "$W/ak.ctx" -G rsa -g sha256 -s rsassa -u "$W/ak.pub" -f pem \
	>/dev/null 2>&1 || die "tpm2_createak"
tpm2_flushcontext -t >/dev/null 2>&1
LAUNCH_RUN=()
for a in "${RUN[@]}"; do
	[ "$a" = -q ] || LAUNCH_RUN+=("$a")
done
# SL_BENCH_LAUNCH_OUTPUTS=1: every launch also resumes a checkpoint and
# writes an output (--resume model=DEST --output model=DEST2): the one
# attested release then carries the input, the checkpoint and the output key
if [ "${SL_BENCH_LAUNCH_OUTPUTS:-0}" = 1 ]; then
	mkdir -p "$W/ckpt"
	"$SL" "${RUN[@]}" --tcti "$SWTPM_TCTI" --output model="$W/dest" "$W/bench-once.sld" -- \
		sh -c 'echo w > "$SECLAUNCH_OUTPUT_DIR/model/w"' || die "the first checkpoint"
	LAUNCH_RUN+=(--resume model="$W/dest" --output model="$W/dest2")
fi
python3 - "$SL" "${SL_BENCH_BASE_BIN:-}" "$W" "$SWTPM_TCTI" "${SL_BENCH_LAUNCH_PAIRS:-11}" \
	"${LAUNCH_RUN[@]}" <<'EOF' || die "launch timing"
import os, re, statistics, subprocess, sys, time
sl, base, w, tcti, pairs, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:]
marker = os.path.join(w, "first")
nonce = os.urandom(32).hex()
env = dict(os.environ, TPM2TOOLS_TCTI=tcti)
def launch(binary, phases):
    if os.path.exists(marker):
        os.unlink(marker)
    t0 = time.time_ns()
    r = subprocess.run([binary] + args + ["-v", "--tcti", tcti, os.path.join(w, "bench-once.sld"), "--",
                        "touch", marker], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if r.returncode != 0:
        sys.exit("seclaunch run failed: " + r.stderr.decode(errors="replace"))
    for name, ms in re.findall(r"time: (.+?) ([0-9.]+) ms", r.stderr.decode(errors="replace")):
        phases.setdefault(name, []).append(float(ms))
    return (os.stat(marker).st_mtime_ns - t0) / 1e9
def peer():
    t0 = time.perf_counter()
    subprocess.run(["tpm2_quote", "-c", w + "/ak.ctx", "-l", "sha256:0,1,2,3,4,5,6,7,15", "-q", nonce,
                    "-m", w + "/msg", "-s", w + "/sig", "-o", w + "/pcrs", "-g", "sha256"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    subprocess.run(["tpm2_flushcontext", "-t"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    subprocess.run(["tpm2_checkquote", "-u", w + "/ak.pub", "-m", w + "/msg", "-s", w + "/sig",
                    "-f", w + "/pcrs", "-g", "sha256", "-q", nonce],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0
launch(sl, {})  # warm-up: page cache, the AK in place
ts, ps, bs, ph, bph = [], [], [], {}, {}
for _ in range(pairs):
    ts.append(launch(sl, ph))
    ps.append(peer())
    if base:
        bs.append(launch(base, bph))
med = statistics.median
print("launch latency with the workload measurement on (1 MiB, start -> job's first instruction,")
print("median of %d alternating pairs):" % pairs)
print("  seclaunch run (identity, PCR 15 extend, challenge, quote incl. PCR 15, replay, release, stage): %.4f s" % med(ts))
print("  tpm2_quote + tpm2_flushcontext + tpm2_checkquote (PCRs 0-7, 15) on the same swtpm:           %.4f s" % med(ps))
print("  ratio: %.2fx (goal <= 1.0x)" % (med(ts) / med(ps)))
if base:
    print("  before (SL_BENCH_BASE_BIN=%s): %.4f s, ratio %.2fx" % (base, med(bs), med(bs) / med(ps)))
print("  where the time goes (seclaunch run -v, median ms%s):" % (", after / before" if base else ""))
for name in list(ph) + [n for n in bph if n not in ph]:
    a = "%8.2f" % med(ph[name]) if name in ph else "%8s" % "-"
    b = " / %.2f" % med(bph[name]) if name in bph else (" / -" if base else "")
    print("    %-56s %s%s" % (name, a, b))
EOF
