#!/usr/bin/env bash
# seclaunchd's state store under load: releases per second and p50/p99 at 1,
# 16 and 64 concurrent clients for the SQLite store (single node), a
# PostgreSQL store with one replica, and PostgreSQL with two replicas (the
# clients split across both), each release with full evidence verification
# (TPM quote, enrolled AK read from the store), the challenge used up in the
# store, the KEK unwrap in the key process, sealing, and the audit record on
# disk; next to each, GET /v1/health over the same connections (the TLS +
# HTTP ceiling) and the ratio, and the CPU the replicas (network and key
# processes) spent per release. For SQLite also an open-loop row: 64
# connections offering a fixed rate, latency counted from when each release
# was due. Then the load: 64 launcher processes (one probe process each, one
# connection) alternately on the two replicas, every sealed DEK opened and
# compared with the DEK its request named; errors and key mix-ups are
# counted apart ("failed" is both).
# swtpm quotes serially, so quotes are prepared before each timed phase.
# SL_BENCH_STORE_N: releases per level (default 1000); SL_BENCH_LOAD_N:
# releases in the load phase (default 6400 = 64 processes x 100 each; the
# issue asks for 64 x 1000, which means preparing 64,000 serial swtpm
# quotes first: 5 to 10 minutes on a busy 2-CPU machine, and they must all
# be used within challenge_ttl_s, 600 s at most; set SL_BENCH_LOAD_N=64000
# to run it); SL_BENCH_STORES, SL_BENCH_OPEN_RATE below. Prints figures;
# asserts nothing.
set -uo pipefail
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
export SL_BUILD=${SL_BUILD:-$SL_ROOT/${BUILD:-build}}
N=${SL_BENCH_STORE_N:-1000}
LOAD=${SL_BENCH_LOAD_N:-6400}
# SL_BENCH_OPEN_RATE: the offered rate of the open-loop row (default 500/s)
OPEN=${SL_BENCH_OPEN_RATE:-500}
# SL_BENCH_STORES: which stores to measure ("sqlite pg", the default, or one)
STORES=${SL_BENCH_STORES:-sqlite pg}
[ -x "$SL_BIN/seclaunchd" ] || { echo "35-kms-store: $SL_BIN/seclaunchd not built"; exit 1; }
. "$(dirname "$0")/lib.bash"
. "$SL_ROOT/tests/integration/tpm2_lib.bash"
. "$SL_ROOT/tests/integration/kms_lib.bash"
. "$SL_ROOT/tests/testlib/pg.bash"
cd "$T" || exit 1
build_probe || { echo "35-kms-store: cannot build the probe"; exit 1; }
start_swtpm_tcti tpm >/dev/null
HAVE_PG=1
pg_bin >/dev/null || { HAVE_PG=0; echo "35-kms-store: no PostgreSQL server binaries: SQLite only"; }

# replica NAME CONFIG: a --dev seclaunchd sharing A's keys and token
replica() {
	local n=$1
	mkdir -p -m 700 "$T/$n"
	[ "$n" != A ] && [ -f "$T/A/master.key" ] && cp -p "$T/A/master.key" "$T/A/registry.key" "$T/A/admin.token" "$T/$n/"
	start_kms "$T/$n" --config "$2" || return 1
	eval "URL_$n=\$KMS_URL CA_$n=\$KMS_CA PID_$n=\$KMS_PID"
}

prepare() { # enroll, a key, 64 datasets' wrapped DEKs with their digests
	"$SL" enroll --kms "$URL_A" --kms-ca "$CA_A" -q || return 1
	"$SL" key create --kms "$URL_A" --kms-ca "$CA_A" --admin-token-file "$T/A/admin.token" --id bench -q || return 1
	bench_wrap_keys "$CA_A" "$URL_A" "$T/A/admin.token" >keys.txt
}

# CPU seconds (user + system) of the running replicas and their key
# processes, from /proc
server_cpu() {
	local p k t=0
	for p in ${PID_A:-} ${PID_B:-}; do
		kill -0 "$p" 2>/dev/null || continue
		for k in "$p" $(pgrep -P "$p"); do
			t=$(awk -v t="$t" -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", t + ($14 + $15) / hz }' "/proc/$k/stat" 2>/dev/null || echo "$t")
		done
	done
	echo "$t"
}

descendants() {
	local c
	for c in $(pgrep -P "$1"); do
		echo "$c"
		descendants "$c"
	done
}

# CPU seconds of the PostgreSQL server (postmaster and its backends; the
# backends that exited since keep no count here, the pool keeps them alive)
db_cpu() {
	local k t=0
	[ -n "${PG_PID:-}" ] && kill -0 "$PG_PID" 2>/dev/null || { echo 0; return; }
	for k in "$PG_PID" $(descendants "$PG_PID"); do
		t=$(awk -v t="$t" -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", t + ($14 + $15) / hz }' "/proc/$k/stat" 2>/dev/null || echo "$t")
	done
	echo "$t"
}

# The statements PostgreSQL has executed so far (pg_stat_statements), or
# nothing without it. Between two of them (the timed phase: challenges and
# quotes are prepared before) each release's share. (pg_stat_database's
# transaction counts lag by up to a second: not used.)
db_work() {
	[ -n "${PG_STATS:-}" ] && kill -0 "${PG_PID:-0}" 2>/dev/null || return 0
	$PSQL -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'" 2>/dev/null
}

# burst LABEL N CONC URL... : one probe per URL (CONC split), run together;
# $RATE (releases/s in all, split likewise): open loop instead of closed
burst() {
	local label=$1 n=$2 c=$3 i=0 k
	shift 3
	k=$#
	for u in "$@"; do
		local ca
		ca=$( [ "$u" = "${URL_A:-}" ] && echo "$CA_A" || echo "$CA_B")
		KMS_PROBE_RATE=$(( ${RATE:-0} / k )) KMS_PROBE_GO=$T/go "$PROBE" "$u" "$ca" burst $((n / k)) $((c / k > 0 ? c / k : 1)) keys.txt >"b$i.out" 2>"b$i.err" &
		eval "BP$i=\$!"
		i=$((i + 1))
	done
	# every probe prepares its quotes first; then all start at once
	rm -f "$T/go"
	for ((j = 0; j < i; j++)); do
		while ! grep -q prepared "b$j.err" 2>/dev/null && eval "kill -0 \$BP$j" 2>/dev/null; do sleep 0.05; done
	done
	local c0 c1 d0 d1 s0 s1
	c0=$(server_cpu) d0=$(db_cpu) s0=$(db_work)
	touch "$T/go"
	for ((j = 0; j < i; j++)); do eval "wait \$BP$j"; done
	c1=$(server_cpu) d1=$(db_cpu) s1=$(db_work)
	rm -f "$T/go"
	python3 - "$label" "$c" "$c0" "$c1" "$d0" "$d1" "$s0" "$s1" b*.out <<'EOP' | tee -a results.txt
import re, sys
label, c, c0, c1, d0, d1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
s0, s1 = [int(x) for x in sys.argv[7].split()], [int(x) for x in sys.argv[8].split()]
files = sys.argv[9:]
rows = [dict(re.findall(r"(\w+)=([\d.]+)", open(f).read())) for f in files]
# the probes start together: the rate is all requests over the longest wall time
n = sum(int(r["requests"]) for r in rows)
per_s = n / max(float(r["wall_s"]) for r in rows)
client = sum(float(r["client_cpu_ms_per_request"]) * int(r["requests"]) for r in rows) / n
print(f"{label} concurrency={c} per_s={per_s:.0f} p50_ms={max(float(r['p50_ms']) for r in rows):.2f} "
      f"p99_ms={max(float(r['p99_ms']) for r in rows):.2f} errors={sum(int(r['errors']) for r in rows)} "
      f"mixups={sum(int(r['mixups']) for r in rows)} failed={sum(int(r['failed']) for r in rows)} "
      f"requests={n} offered_per_s={sum(float(r['offered_per_s']) for r in rows):.0f} "
      f"server_cpu_ms_per_release={(c1 - c0) * 1000 / n:.3f} db_cpu_ms_per_release={(d1 - d0) * 1000 / n:.3f} "
      f"client_cpu_ms_per_request={client:.3f}"
      + (f" statements_per_release={(s1[0] - s0[0]) / n:.2f}" if s0 and s1 else ""))
EOP
	rm -f b*.out b*.err
	for u in "$@"; do
		local ca
		ca=$( [ "$u" = "${URL_A:-}" ] && echo "$CA_A" || echo "$CA_B")
		"$PROBE" "$u" "$ca" health "$n" "$c" | sed "s/^health/health-$label/" >>results.txt
		break
	done
}

# load N PROCS: PROCS probe processes (one connection each, like as many
# launchers), alternately on replica A and B, N releases in all; they
# prepare their quotes one process after the other (one software TPM
# serves one client at a time: 64 processes quoting at once starve each
# other), then all start together. Every challenge must still be live when
# its release is sent: the preparation of all N must fit challenge_ttl_s.
load() {
	local n=$1 p=$2 j u ca
	rm -f "$T/go" l*.out l*.err
	for ((j = 0; j < p; j++)); do
		if ((j % 2 == 0)); then u=$URL_A ca=$CA_A; else u=$URL_B ca=$CA_B; fi
		KMS_PROBE_GO=$T/go "$PROBE" "$u" "$ca" burst $((n / p)) 1 keys.txt >"l$j.out" 2>"l$j.err" &
		eval "LP$j=\$!"
		while ! grep -q prepared "l$j.err" 2>/dev/null && eval "kill -0 \$LP$j" 2>/dev/null; do sleep 0.05; done
	done
	echo "load: prepared in $SECONDS s since the bench started"
	touch "$T/go"
	for ((j = 0; j < p; j++)); do eval "wait \$LP$j"; done
	rm -f "$T/go"
	grep -h "kms_probe: " l*.err | grep -v prepared | head -5
	python3 - "$p" $((n / p)) l*.out <<'EOP' | tee -a results.txt
import re, sys
p, each, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = [dict(re.findall(r"(\w+)=([\d.]+)", open(f).read())) for f in files]
done = [r for r in rows if "requests" in r]
if not done:
    print(f"load concurrency={p} processes={p} per_s=0 p50_ms=0 p99_ms=0 errors={int(p) * each} mixups=0 "
          f"failed={int(p) * each} requests=0 lost_processes={p}")
    sys.exit(0)
lost = len(files) - len(done)  # a probe that printed nothing: all its releases failed
per_s = sum(int(r["requests"]) for r in done) / max(float(r["wall_s"]) for r in done)
print(f"load concurrency={p} processes={p} per_s={per_s:.0f} "
      f"p50_ms={max(float(r['p50_ms']) for r in done):.2f} "
      f"p99_ms={max(float(r['p99_ms']) for r in done):.2f} "
      f"errors={sum(int(r['errors']) for r in done) + lost * each} mixups={sum(int(r['mixups']) for r in done)} "
      f"failed={sum(int(r['failed']) for r in done) + lost * each} "
      f"requests={sum(int(r['requests']) for r in done)} lost_processes={lost}")
EOP
	rm -f l*.out l*.err
}

echo "35-kms-store: $(nproc) CPUs, $N releases per level, audit log on disk"
case " $STORES " in *" sqlite "*)
	echo '{"challenge_ttl_s": 600, "max_challenges": 400000}' >sqlite.json
	replica A sqlite.json || exit 1
	prepare || exit 1
	for c in 1 16 64; do burst sqlite "$N" "$c" "$URL_A"; done
	# 64 connected clients offering a fixed rate (open loop): the latency
	# a launcher sees when the service is not saturated
	RATE=$OPEN burst sqlite-open "$N" 64 "$URL_A"
	stop_pid "$PID_A"
	PID_A=
	;;
esac
case " $STORES " in *" pg "*) ;; *) HAVE_PG=0 ;; esac

if [ "$HAVE_PG" = 1 ]; then
	start_pg || exit 1
	# pg_stat_statements counts the statements each release makes
	if $PSQL -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" && stop_pg &&
		restart_pg && $PSQL -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"; then
		PG_STATS=1
	else
		echo "35-kms-store: no pg_stat_statements: statements per release not counted"
		kill -0 "$PG_PID" 2>/dev/null || restart_pg || exit 1
	fi
	printf '{"store": "%s", "challenge_ttl_s": 600, "max_challenges": 400000}\n' "$PG_URI" >pg.json
	rm -rf "$T/A"
	replica A pg.json || exit 1
	prepare || exit 1
	for c in 1 16 64; do burst pg1 "$N" "$c" "$URL_A"; done
	replica B pg.json || exit 1
	for c in 2 16 64; do burst pg2 "$N" "$c" "$URL_A" "$URL_B"; done
	echo "load: 64 launcher processes across two replicas, $LOAD releases, every DEK checked"
	load "$LOAD" 64
fi

python3 - results.txt <<'EOP'
import os, re, sys
rows = {}
for line in open(sys.argv[1]):
    kind = line.split()[0]
    f = dict(re.findall(r"(\w+)=([\d.]+)", line))
    rows[(kind, f["concurrency"])] = f
cpus = os.cpu_count() or 1
print("\nstore        clients  releases/s  p50 ms  p99 ms  errors  mix-ups   health/s  release/health  server CPU ms/release  PostgreSQL CPU ms/release  client CPU ms/release")
for store in ("sqlite", "sqlite-open", "pg1", "pg2"):
    for c in ("1", "2", "16", "64"):
        r, h = rows.get((store, c)), rows.get(("health-" + store, c))
        if r:
            hs = float(h["per_s"]) if h else 0
            print(f"{store:<12} {c:>7}  {float(r['per_s']):>10.0f}  {float(r['p50_ms']):>6.2f}  {float(r['p99_ms']):>6.2f}  {r['errors']:>6}  {r['mixups']:>7}   {hs:>8.0f}  {float(r['per_s'])/hs if hs else 0:>14.2f}  {float(r['server_cpu_ms_per_release']):>21.3f}  {float(r.get('db_cpu_ms_per_release', 0)):>25.3f}  {float(r['client_cpu_ms_per_request']):>21.3f}")
o = rows.get(("sqlite-open", "64"))
if o:
    print(f"(sqlite-open: 64 connections offering {float(o['offered_per_s']):.0f} releases/s, open loop; latency counted from when each release was due)")
p = rows.get(("pg1", "64"))
if p:
    srv, db = float(p["server_cpu_ms_per_release"]), float(p.get("db_cpu_ms_per_release", 0))
    print(f"PostgreSQL, one replica, 64 clients: seclaunchd {srv:.3f} + PostgreSQL {db:.3f} ms CPU per release on the same {cpus} CPUs "
          f"-> at most {cpus * 1000 / (srv + db):.0f}/s")
for store in ("pg1", "pg2"):
    for c in ("1", "2", "16", "64"):
        r = rows.get((store, c))
        if r and "statements_per_release" in r:
            print(f"{store} {c:>2} clients: PostgreSQL ran {float(r['statements_per_release']):.2f} statements per release")
l = rows.get(("load", "64"))
if l:
    print(f"\nload, 64 launcher processes over 2 replicas: {l['requests']} releases, {float(l['per_s']):.0f}/s, "
          f"p99 {float(l['p99_ms']):.2f} ms (the worst process's), errors: {l['errors']}, key mix-ups: {l['mixups']}")
r = rows.get(("sqlite", "64"))
if r:
    srv, cli = float(r["server_cpu_ms_per_release"]), float(r["client_cpu_ms_per_request"])
    print(f"\ngoal (SQLite, 64 clients): >= 2000 releases/s: {float(r['per_s']):.0f}; p99 < 20 ms: {float(r['p99_ms']):.2f} ms")
    if srv > 0:
        print(f"server CPU per release (network + key process): {srv:.3f} ms -> at most {cpus * 1000 / srv:.0f} releases/s on {cpus} otherwise idle CPUs; "
              f"with this client's {cli:.3f} ms on the same CPUs: {cpus * 1000 / (srv + cli):.0f}/s")
    print(f"Little's law: 64 clients that each wait for their answer (closed loop) at {float(r['per_s']):.0f}/s wait "
          f"{64000 / float(r['per_s']):.1f} ms on average; a p99 under 20 ms at 64 clients needs more than 3200 releases/s")
    print(f"load average during the run: {open('/proc/loadavg').read().split()[0]} (other work on these CPUs lowers every figure)")
EOP
