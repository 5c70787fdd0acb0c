#!/usr/bin/env bash
# The job's side of seclaunch run, against real swtpm and seclaunchd:
#  - the command is resolved before anything is attested (127 not found,
#    126 not executable, as env(1)); nothing is released, the refusal audited;
#  - one line at the end: "job exited N; data and keys wiped" (none with -q);
#  - a job that ignores SIGINT/SIGTERM: a second signal escalates to SIGKILL
#    after --kill-grace, said on stderr;
#  - a job that escapes its process group (setsid + double fork) is contained
#    (cgroup v2, or the subreaper fallback forced with SECLAUNCH_NO_CGROUP=1):
#    nothing of it outlives the run, --timeout included;
#  - --user: the job cannot read the audit key, the KMS admin token or the
#    launcher's /proc files, and still reads its data (root only);
#  - CUDA probing messages only with -v; a denial printed once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash" # start_tpm

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip run_job "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip run_job "seclaunch run or seclaunchd not built"
	finish
fi
PY=$(python3 -c "import sys; print(sys.executable)")

start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'EOF2'
{"version": 1, "description": "run_job", "allow_unverified_region": true,
 "keys": {"jk": ["job-ds"]},
 "datasets": [{"id": "job-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]}]}
EOF2
minisign -S -s "$T/p.key" -m "$T/policy.json" -t job >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id jk
printf 'job-data-%s\n' "$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')" >"$T/plain"
check "encrypt" 0 "$SL" encrypt "${K[@]}" --key-id jk --admin-token-file "$KMS_TOKEN" \
	--dataset-id job-ds -q "$T/plain" -o "$T/ds.sld"
check "audit key" 0 "$SL" audit keygen --secret-key "$T/audit.key" --public-key "$T/audit.pub"
AUDIT=$T/audit.log
R=(run --policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --stage host --audit-log "$AUDIT" --audit-key "$T/audit.key")

# last_record EVENT: the newest audit record of that event
last_record() { grep "\"$1\"" "$AUDIT" | tail -n 1; }
# lines of the audit log: what a run appended is what comes after $mark
mark() { if [ -f "$AUDIT" ]; then wc -l <"$AUDIT"; else echo 0; fi; }
since() { tail -n +$(($1 + 1)) "$AUDIT"; }

# ---- the command is resolved before anything is attested ------------------
m=$(mark)
check_err "absolute path that does not exist: exit 127" 127 "cannot execute '$T/no-such-cmd'" \
	"$SL" "${R[@]}" "$T/ds.sld" -- "$T/no-such-cmd"
assert "not found: nothing attested or released (no preflight, no release record)" \
	bash -c "! tail -n +$((m + 1)) '$AUDIT' | grep -q -e '\"run.preflight\"' -e '\"run.release\"'"
assert "not found: the refusal is audited with exit code 127" \
	bash -c "tail -n +$((m + 1)) '$AUDIT' | grep '\"run.error\"' | grep -q '\"step\":\"command\".*\"exit_code\":127'"
check_err "a name not in the job's PATH: exit 127, naming the PATH" 127 \
	"not found in the job's PATH \(/nowhere\)" \
	"$SL" "${R[@]}" --env PATH=/nowhere "$T/ds.sld" -- no-such-command-here
printf '#!/bin/sh\nexit 0\n' >"$T/noexec.sh"
chmod 644 "$T/noexec.sh"
check_err "a file without the execute bit: exit 126" 126 "noexec.sh': not executable" \
	"$SL" "${R[@]}" "$T/ds.sld" -- "$T/noexec.sh"
check_err "a directory: exit 126" 126 "is a directory" "$SL" "${R[@]}" "$T/ds.sld" -- "$T"
m=$(mark)
mkdir -p "$T/bin1" "$T/bin2"
cp "$T/noexec.sh" "$T/bin1/twice"
printf '#!/bin/sh\necho second\n' >"$T/bin2/twice"
chmod 755 "$T/bin2/twice"
check "PATH lookup goes past a match that is not executable (as execvp)" 0 \
	"$SL" "${R[@]}" -q --env "PATH=$T/bin1:$T/bin2" "$T/ds.sld" -- twice
assert "the executable one ran" grep -qx second "$T/out"

# ---- the last line, and -q ---------------------------------------------------
check "a job exiting 0" 0 "$SL" "${R[@]}" "$T/ds.sld" -- true
assert "ends with 'job exited 0; data and keys wiped'" \
	bash -c "tail -n 1 '$T/err' | grep -qx 'seclaunch run: job exited 0; data and keys wiped'"
check "a job exiting 7" 7 "$SL" "${R[@]}" "$T/ds.sld" -- sh -c 'exit 7'
assert "ends with 'job exited 7; ...'" \
	bash -c "tail -n 1 '$T/err' | grep -qx 'seclaunch run: job exited 7; data and keys wiped'"
check "-q" 0 "$SL" "${R[@]}" -q "$T/ds.sld" -- true
assert "-q: no final line" bash -c "! grep -q 'job exited' '$T/err'"

# ---- a source build's job imports seclaunch_data without --env PYTHONPATH ----
check "python3 -c 'import seclaunch_data' with no --env" 0 "$SL" "${R[@]}" -q "$T/ds.sld" -- \
	"$PY" -c 'import seclaunch_data, sys; print(seclaunch_data.__file__); sys.exit(0 if seclaunch_data.datasets() else 3)'
assert "... from this source tree's jobside/python" \
	grep -qx "$(cd "$SL_ROOT/jobside/python" && pwd -P)/seclaunch_data.py" "$T/out"
check "--env PYTHONPATH=DIR: the user's value wins" 0 "$SL" "${R[@]}" -q --env "PYTHONPATH=$T" \
	"$T/ds.sld" -- "$PY" -c 'import os; print(os.environ["PYTHONPATH"])'
assert "... PYTHONPATH is exactly DIR" grep -qx "$T" "$T/out"

# ---- CUDA probing only with -v ----------------------------------------------
check "--stage auto" 0 "$SL" "${R[@]}" --stage auto "$T/ds.sld" -- true
if grep -q "staging in host memory" "$T/err"; then
	assert "no usable GPU, without -v: no CUDA probing message" \
		bash -c "! grep -Eqi 'cuda|cuInit|nvml' '$T/err'"
	check "--stage auto -v" 0 "$SL" "${R[@]}" --stage auto -v "$T/ds.sld" -- true
	assert "with -v: the probe's reason is given" grep -q "staging in host memory: ." "$T/err"
else
	skip "CUDA messages only with -v" "a usable GPU here: no fallback message to hide"
fi

# ---- a denial is printed once -------------------------------------------------
check_err "region denial" 4 "denies dataset job-ds" \
	"$SL" run --policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI" \
	--region aws:us-east-1 --stage host --audit-log "$AUDIT" "$T/ds.sld" -- true
n=$(grep -c "is not in the allowed regions" "$T/err")
assert "the denial's reason appears once on stderr (got $n)" test "$n" -eq 1

# ---- a job that ignores SIGINT and SIGTERM -------------------------------------
# drive SIG1 SIG2 GRACE: starts the run, waits for the job's pid file, sends
# SIG1 to seclaunch, checks the job still runs 1 s later, sends SIG2; prints
# "<exit status> <seconds from SIG2 to exit> <job alive after SIG1: 1/0>".
cat >"$T/stubborn.py" <<'EOF2'
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(300)
EOF2
drive() {
	rm -f "$T/stub.pid"
	python3 - "$1" "$2" "$T/stub.pid" "$T/drive.err" "$SL" "${R[@]}" --kill-grace "$3" "$T/ds.sld" -- \
		"$PY" "$T/stubborn.py" "$T/stub.pid" <<'EOF2'
import os, subprocess, sys, time
s1, s2, pidf, errf, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
p = subprocess.Popen(cmd, stderr=open(errf, "wb"))
deadline = time.time() + 60
while not os.path.exists(pidf) and time.time() < deadline and p.poll() is None:
    time.sleep(0.02)
time.sleep(0.2)
job = int(open(pidf).read())
p.send_signal(s1)
time.sleep(1)
alive = 1
try:
    os.kill(job, 0)
except ProcessLookupError:
    alive = 0
t = time.time()
p.send_signal(s2)
try:
    rc = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    p.kill(); rc = p.wait(); os.kill(job, 9)
    rc = "hung"
print(rc, round(time.time() - t, 1), alive)
EOF2
}
read -r rc secs alive < <(drive 15 15 2)
assert "SIGTERM once: the job (ignoring it) still runs" test "$alive" = 1
assert "SIGTERM twice, --kill-grace 2: SIGKILL, exit 137 (got $rc)" test "$rc" = 137
assert "... about 2 s after the second signal (took $secs s)" \
	python3 -c "import sys; sys.exit(not 1.5 <= float('$secs') <= 8)"
assert "the escalation is said on stderr" grep -q "SIGTERM again: the job gets SIGKILL in 2 s" "$T/drive.err"
assert "and the kill" grep -q "did not stop within 2 s: SIGKILL" "$T/drive.err"
assert "ends with 'job exited 137; data and keys wiped'" \
	bash -c "tail -n 1 '$T/drive.err' | grep -qx 'seclaunch run: job exited 137; data and keys wiped'"
assert "the job-exit record says escalated and killed" \
	bash -c "grep '\"run.job.exit\"' '$AUDIT' | tail -n 1 | grep -q '\"killed\":true.*\"escalated\":true'"
read -r rc secs alive < <(drive 2 2 1)
assert "SIGINT twice, --kill-grace 1: exit 137 (got $rc after $secs s)" test "$rc" = 137
assert "SIGINT again is said" grep -q "SIGINT again: the job gets SIGKILL in 1 s" "$T/drive.err"

# ---- a job that escapes its process group ------------------------------------
# the job: a setsid'd, double-forked `sleep 300` writes its pid to FILE; the
# job itself exits at once (or, with "wait", sleeps past --timeout).
cat >"$T/escape.sh" <<'EOF2'
#!/bin/sh
setsid sh -c 'trap "" TERM INT HUP; sleep 300 & echo $! >"$1"; wait' _ "$1" </dev/null >/dev/null 2>&1 &
for i in $(seq 1 100); do [ -s "$1" ] && break; sleep 0.05; done
[ "${2:-}" = wait ] && sleep 300
exit 0
EOF2
chmod 755 "$T/escape.sh"
gone() { # pidfile
	local p
	p=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$p" ] || return 1
	! kill -0 "$p" 2>/dev/null
}
cg_expected=cgroup
if ! grep -q cgroup2 /proc/self/mountinfo; then cg_expected=subreaper; fi
for mode in auto subreaper; do
	envs=()
	[ "$mode" = subreaper ] && envs=(env SECLAUNCH_NO_CGROUP=1)
	rm -f "$T/gc.$mode"
	check "$mode: the escaping job runs, exit 0" 0 "${envs[@]}" "$SL" "${R[@]}" "$T/ds.sld" -- "$T/escape.sh" "$T/gc.$mode"
	assert "$mode: the grandchild's pid was written" test -s "$T/gc.$mode"
	assert "$mode: the setsid'd grandchild is gone after the run" gone "$T/gc.$mode"
	want=$cg_expected
	[ "$mode" = subreaper ] && want=subreaper
	rec=$(last_record run.job.exit)
	if [ "$mode" = auto ] && [ "$want" = cgroup ] && ! echo "$rec" | grep -q '"containment":"cgroup"'; then
		skip "auto: cgroup containment" "no writable cgroup v2 here; the subreaper was used"
		want=subreaper
	fi
	assert "$mode: the job-exit record names the containment ($want)" \
		bash -c "echo '$rec' | grep -q '\"containment\":\"$want\"'"
	assert "$mode: and counts what it killed" \
		bash -c "echo '$rec' | grep -Eq '\"leftover_killed\":[1-9]'"
	rm -f "$T/gct.$mode"
	check "$mode: --timeout 1 with an escaped grandchild that ignores SIGTERM: 143" 143 \
		"${envs[@]}" "$SL" "${R[@]}" --timeout 1 --kill-grace 1 "$T/ds.sld" -- "$T/escape.sh" "$T/gct.$mode" wait
	assert "$mode: --timeout: the grandchild is gone too" gone "$T/gct.$mode"
	assert "$mode: --timeout: recorded" \
		bash -c "grep '\"run.job.exit\"' '$AUDIT' | tail -n 1 | grep -q '\"timed_out\":true'"
done

# ---- --user ---------------------------------------------------------------------
check_err "--user with an unknown user: usage error" 1 "no user 'no-such-user-x'" \
	"$SL" "${R[@]}" --user no-such-user-x "$T/ds.sld" -- true
if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
	skip "--user nobody" "needs root and a 'nobody' user (CI runs as root)"
	finish
fi
# the job's files: a directory nobody can enter and write; $T itself only
# traversable, so $T/audit.key (0600 root) is where --audit-key names it
chmod 711 "$T"
mkdir -m 1777 "$T/pub"
cp "$SL_ROOT/jobside/python/"*.py "$T/pub/"
cat >"$T/pub/probe.py" <<'EOF2'
import os, sys, hashlib
sys.path.insert(0, os.path.dirname(__file__))
import seclaunch_data as sd
out, files = sys.argv[1], sys.argv[2:]
res = ["uid %d" % os.getuid()]
def tryread(name, path):
    try:
        with open(path, "rb") as f:
            f.read(1)
        res.append("%s readable" % name)
    except OSError as e:
        res.append("%s refused %s" % (name, type(e).__name__))
for i, f in enumerate(files):
    tryread("file%d" % i, f)
ppid = os.getppid()
tryread("environ", "/proc/%d/environ" % ppid)
tryread("mem", "/proc/%d/mem" % ppid)
for name, ds in sd.datasets().items():
    res.append("data %s %s" % (name, hashlib.sha256(ds.memoryview()).hexdigest()))
open(out, "w").write("\n".join(res) + "\n")
EOF2
chmod 644 "$T/pub/"*.py
want=$(sha256sum <"$T/plain" | cut -d' ' -f1)
# an interpreter the job's user may execute (a python under /root is not one)
PYU=
for c in "$PY" /usr/bin/python3 /usr/local/bin/python3; do
	if setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c '[ -x "$0" ] && "$0" -c "import hashlib"' "$c" 2>/dev/null; then
		PYU=$c
		break
	fi
done
if [ -z "$PYU" ]; then
	skip "--user nobody" "no python3 that user nobody may execute"
	finish
fi
probe() { # out [extra run args...]
	local out=$1
	shift
	"$SL" "${R[@]}" "$@" "$T/ds.sld" -- "$PYU" "$T/pub/probe.py" "$out" "$T/audit.key" "$KMS_TOKEN"
}
# --user: the dataset is opened as the job's user. A root-only copy (0600 in
# a 0700 folder) is refused before any KMS request, naming the path
mkdir -m 0700 "$T/vault"
cp "$T/ds.sld" "$T/vault/private.sld"
chmod 0600 "$T/vault/private.sld"
rel0=$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")
check_err "--user nobody naming a root-only dataset: exit 2, the job's user cannot read it" 2 \
	"$T/vault/private.sld: cannot open: the job's user nobody .*cannot read it" \
	"$SL" "${R[@]}" --user nobody "$T/vault/private.sld" -- "$PYU" -c pass
assert "... no release request reached the KMS" \
	test "$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")" = "$rel0"
check "the same dataset for a root job: runs" 0 "$SL" "${R[@]}" "$T/vault/private.sld" -- true
# the dataset the probes read: readable by nobody
chmod 0644 "$T/ds.sld"
check "as root without --user: the job runs" 0 probe "$T/pub/root.out"
assert "control: without --user a root job CAN read the audit key (the test can see it)" \
	grep -qx "file0 readable" "$T/pub/root.out"
assert "without --user the launcher warns that the job can read the audit key" \
	grep -q "can read the audit key" "$T/err"
check "--user nobody: the job runs" 0 probe "$T/pub/nobody.out" --user nobody
cat "$T/pub/nobody.out"
assert "--user nobody: the job runs as uid 65534" grep -qx "uid 65534" "$T/pub/nobody.out"
assert "--user nobody: the audit key file is refused" grep -q "^file0 refused" "$T/pub/nobody.out"
assert "--user nobody: the KMS admin token is refused" grep -q "^file1 refused" "$T/pub/nobody.out"
assert "--user nobody: /proc/<launcher>/environ is refused" grep -q "^environ refused" "$T/pub/nobody.out"
assert "--user nobody: /proc/<launcher>/mem is refused" grep -q "^mem refused" "$T/pub/nobody.out"
assert "--user nobody: the job still reads its data" grep -qx "data job-ds $want" "$T/pub/nobody.out"
assert "--user nobody: no warning about the audit key" bash -c "! grep -q 'can read the audit key' '$T/err'"
assert "--user: recorded in the job-exit record" \
	bash -c "grep '\"run.job.exit\"' '$AUDIT' | tail -n 1 | grep -q '\"user\":\"nobody\"'"
check "--user nobody:nogroup" 0 probe "$T/pub/ng.out" --user nobody:nogroup
assert "--user nobody:nogroup: uid 65534" grep -qx "uid 65534" "$T/pub/ng.out"
printf '#!/bin/sh\nexit 0\n' >"$T/pub/rootonly.sh"
chmod 700 "$T/pub/rootonly.sh"
m=$(mark)
check_err "--user nobody, a command only root may execute: 126 before attesting" 126 \
	"not executable by user nobody" "$SL" "${R[@]}" --user nobody "$T/ds.sld" -- "$T/pub/rootonly.sh"
assert "... nothing released" bash -c "! tail -n +$((m + 1)) '$AUDIT' | grep -q '\"run.release\"'"
if command -v setpriv >/dev/null; then
	cp "$SL" "$T/pub/seclaunch"
	chmod 755 "$T/pub/seclaunch"
	check_err "not root: --user naming another user is refused" 1 "only root can run the job as another user" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$T/pub/seclaunch" run --policy x --policy-pubkey y \
		--kms https://127.0.0.1:1 --audit-log "$T/pub/a.log" --user root "$T/ds.sld" -- true
else
	skip "not root: --user refused" "setpriv not installed"
fi
finish
