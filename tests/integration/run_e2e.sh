#!/usr/bin/env bash
# seclaunch run end to end: real swtpm, seclaunchd --dev over TLS with a
# policy signed by minisign, datasets encrypted under KMS keys. The job is a
# python3 script using jobside/python/seclaunch_data.py. Failure injection
# before the job: KMS down, attestation failure, policy denial, region
# denial, a tampered chunk, a wrong policy signature; after each: no job, the
# exit code, no plaintext marker in any file under $T or /tmp.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip run_e2e "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip run_e2e "seclaunch run or seclaunchd not built"
	finish
fi

# the interpreter itself, not a wrapper script that adds its own variables
PY=$(python3 -c "import sys; print(sys.executable)")
MARKER="SLPLAIN-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
PYHELPER=$SL_ROOT/jobside/python
AUDIT=$T/audit.log

# Deterministic plaintext generator: never written to a file.
gen() { # id size
	python3 - "$1" "$2" "$MARKER" <<'EOF'
import hashlib, sys
name, size, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = bytearray()
i = 0
while len(out) < size:
    out += ("%s,%s,%d,%d\n" % (marker, name, i, (i * 7919) % 1000)).encode()
    i += 1
sys.stdout.buffer.write(bytes(out[:size]))
EOF
}

# grep -q: found is 0 even when other files vanish under it mid-search
no_marker_anywhere() {
	grep -r -q -s -D skip -F "$MARKER" "$T" /tmp
	[ $? -ne 0 ]
}

# the search itself must be able to find the marker
printf 'x%sx\n' "$MARKER" >"$T/canary"
marker_found() { ! no_marker_anywhere; }
assert "the marker search finds a planted marker" marker_found
rm -f "$T/canary"

# ---- setup: TPM, keys, policy, KMS, enrollment, datasets ---------------
start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/policy.pub" -s "$T/policy.key" >/dev/null 2>&1
minisign -G -W -p "$T/other.pub" -s "$T/other.key" >/dev/null 2>&1

write_policy() { # file regions-json tee-kinds-json
	cat >"$1" <<EOF
{
  "version": 1,
  "description": "run_e2e test policy (development: unverified regions)",
  "allow_unverified_region": true,
  "keys": {"e2e-key": ["e2e-*"]},
  "datasets": [
    {"id": "e2e-small", "allowed_regions": $2, "tee_kinds": $3},
    {"id": "e2e-mid", "allowed_regions": $2, "tee_kinds": $3},
    {"id": "e2e-big", "allowed_regions": $2, "tee_kinds": $3},
    {"id": "e2e-snp-only", "allowed_regions": $2, "tee_kinds": ["sev-snp"]}
  ]
}
EOF
	minisign -S -s "$T/policy.key" -m "$1" -t "e2e" >/dev/null 2>&1
}
write_policy "$T/policy.json" '["gcp:europe-west4", "aws:eu-west-1"]' '["tpm2"]'
# a policy signed by someone else
cp "$T/policy.json" "$T/forged.json"
minisign -S -s "$T/other.key" -m "$T/forged.json" -t "e2e" >/dev/null 2>&1

start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/policy.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll the TPM" 0 "$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI"
check "create a key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id e2e-key

# The plaintext goes to encrypt through a memfd (a regular file that is
# never on disk), so no file ever holds the marker.
encrypt() { # id size
	gen "$1" "$2" | python3 -c '
import os, subprocess, sys
fd = os.memfd_create("plain")
os.write(fd, sys.stdin.buffer.read())
args = [a.replace("@IN@", "/proc/self/fd/%d" % fd) for a in sys.argv[1:]]
sys.exit(subprocess.call(args, pass_fds=(fd,)))
' "$SL" encrypt "${KMSA[@]}" --key-id e2e-key --admin-token-file "$KMS_TOKEN" \
		--dataset-id "$1" --chunk-size 64K -q @IN@ -o "$T/$1.sld"
}
check "encrypt e2e-small" 0 encrypt e2e-small 5000
check "encrypt e2e-mid" 0 encrypt e2e-mid $((1024 * 1024 + 77))
check "encrypt e2e-big" 0 encrypt e2e-big $((9 * 1024 * 1024))
check "encrypt e2e-snp-only" 0 encrypt e2e-snp-only 3000
for d in e2e-small e2e-mid e2e-big; do
	echo "$d $(gen $d $(case $d in e2e-small) echo 5000 ;; e2e-mid) echo $((1024 * 1024 + 77)) ;; *) echo $((9 * 1024 * 1024)) ;; esac) | sha256sum | cut -d' ' -f1)"
done | sort >"$T/expected"

# The job: hashes every staged dataset through the helper, checks its own
# environment, writes a marker file that says it ran.
cat >"$T/job.py" <<'EOF'
import hashlib, json, os, sys
import seclaunch_data as sd
out = sys.argv[1]
# before anything is opened or mapped here
fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
with open(out + ".started", "w") as f:
    f.write(str(os.getpid()))
with open(out + ".fds", "w") as f:
    f.write(" ".join(map(str, fds)) + "\n")
lines = []
for name, ds in sorted(sd.datasets().items()):
    lines.append("%s %s" % (name, hashlib.sha256(ds.memoryview()).hexdigest()))
with open(out + ".hashes", "w") as f:
    f.write("\n".join(lines) + "\n")
with open(out + ".methods", "w") as f:
    f.write("\n".join(sorted(ds.method for ds in sd.datasets().values())) + "\n")
env = open("/proc/self/environ", "rb").read().split(b"\0")
names = sorted(e.split(b"=", 1)[0].decode() for e in env if e)
with open(out + ".envnames", "w") as f:
    f.write(" ".join(names) + "\n")
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
if mode == "exit7":
    sys.exit(7)
if mode == "kill":
    os.kill(os.getpid(), 9)
if mode == "sleep":
    import time
    time.sleep(60)
EOF

check "audit checkpoint key" 0 "$SL" audit keygen --secret-key "$T/audit.key" --public-key "$T/audit.pub"
RUNA=(--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --tcti "$SWTPM_TCTI"
	--stage auto --audit-log "$AUDIT" --audit-key "$T/audit.key" --env "PYTHONPATH=$PYHELPER" --env PYTHONDONTWRITEBYTECODE=1)
ALL=("$T/e2e-small.sld" "$T/e2e-mid.sld" "$T/e2e-big.sld")

# ---- the job reads exactly the plaintext, several datasets at once ------
check "run: three datasets, job exits 0" 0 \
	"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "${ALL[@]}" -- "$PY" "$T/job.py" "$T/ok"
assert "job saw exactly the plaintext of each dataset" diff -u "$T/expected" "$T/ok.hashes"
assert "host staging used memfd_secret (small) and memfd (past RLIMIT_MEMLOCK)" \
	grep -qx memfd_secret "$T/ok.methods"
env_allowed() {
	local n ok=1
	for n in $(cat "$T/ok.envnames"); do
		case $n in
		PATH | HOME | LANG | TERM | TZ | LC_* | CUDA_* | NVIDIA_* | SECLAUNCH_DATA | SECLAUNCH_DATA_SOCKET) ;;
		PYTHONPATH | PYTHONDONTWRITEBYTECODE) ;; # given with --env
		*) echo "unexpected variable in the job: $n" >&2; ok=0 ;;
		esac
	done
	grep -qw SECLAUNCH_DATA "$T/ok.envnames" && [ $ok = 1 ]
}
assert "job environment holds only allow-listed names and SECLAUNCH_DATA" env_allowed
cat "$T/ok.fds"
assert "job inherited only 0-2 and the three staged descriptors" \
	test "$(wc -w <"$T/ok.fds")" -eq 7 # 0 1 2, 3 datasets, listdir's own
assert "audit: preflight, release, stage, job start/exit and wipe recorded" \
	bash -c "for e in run.start run.preflight run.release run.stage run.job.start run.job.exit run.wipe; do grep -q \"\\\"\$e\\\"\" '$AUDIT' || exit 1; done"
assert "no plaintext marker in any file after a normal run" no_marker_anywhere

# ---- the job's status is seclaunch's status ----------------------------
check "job exit status 7 propagated" 7 \
	"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" -- "$PY" "$T/job.py" "$T/x7" exit7
check "job killed by SIGKILL -> 137" 137 \
	"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" -- "$PY" "$T/job.py" "$T/k9" kill
check_err "command that does not exist: 127 (as env(1))" 127 "cannot execute" \
	"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" -- "$T/no-such-job"

check "--timeout: a job past it gets SIGTERM -> 143" 143 \
	"$SL" run "${RUNA[@]}" --timeout 1 --region gcp:europe-west4 "$T/e2e-small.sld" -- \
	"$PY" "$T/job.py" "$T/to" sleep
assert "--timeout: recorded as timed out, then wiped" \
	bash -c "tail -n 3 '$AUDIT' | grep -q '\"timed_out\":true' && tail -n 2 '$AUDIT' | grep -q '\"run.wipe\"'"
SL_E2E_PASS=passed-through SL_E2E_HIDDEN=hidden "$SL" run "${RUNA[@]}" --env-pass SL_E2E_PASS \
	--env E2E_SET=1 --region gcp:europe-west4 "$T/e2e-small.sld" -- \
	sh -c 'echo "${SL_E2E_PASS:-} ${SL_E2E_HIDDEN:-none} ${E2E_SET:-}"' >"$T/envpass" 2>/dev/null
assert "--env-pass passes only the named variable; --env sets one" \
	grep -qx "passed-through none 1" "$T/envpass"

check_err "the same dataset twice: refused before the KMS is asked" 2 "same dataset id 'e2e-small'" \
	"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" "$T/e2e-small.sld" -- true

# ---- failure injection before the job ------------------------------------
inject() { # name want-rc regex extra-args... -- (datasets appended)
	local name=$1 want=$2 pat=$3
	shift 3
	rm -f "$T/inj.started"
	check_err "$name: exit $want naming the cause" "$want" "$pat" \
		"$SL" run "$@" -- "$PY" "$T/job.py" "$T/inj"
	assert "$name: no job started" test ! -e "$T/inj.started"
	assert "$name: no plaintext marker in any file under \$T or /tmp" no_marker_anywhere
}

DEADPORT=$(free_port)
inject "KMS down" 5 "KMS|connect|127.0.0.1:$DEADPORT" \
	--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" --kms "https://127.0.0.1:$DEADPORT" \
	--kms-ca "$KMS_CA" --tcti "$SWTPM_TCTI" --audit-log "$AUDIT" --audit-key "$T/audit.key" --region gcp:europe-west4 \
	"$T/e2e-small.sld"

check_err "KMS down, -q: exit 5" 5 "^seclaunch run: error: KMS .*unreachable" \
	"$SL" run "${RUNA[@]}" -q --kms "https://127.0.0.1:$DEADPORT" --region gcp:europe-west4 \
	"$T/e2e-small.sld" -- true
assert "KMS down, -q: stderr is that one line" test "$(wc -l <"$T/err")" -eq 1

# attestation failure: a second TPM that was never enrolled with the KMS
SWTPM_TCTI_ENROLLED=$SWTPM_TCTI
start_swtpm tpm-stranger || { echo "not ok - no second swtpm"; exit 1; }
inject "attestation failure (unenrolled TPM)" 3 "enrol|attest|AK" \
	--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --tcti "$SWTPM_TCTI" \
	--audit-log "$AUDIT" --audit-key "$T/audit.key" --region gcp:europe-west4 "$T/e2e-small.sld"
SWTPM_TCTI=$SWTPM_TCTI_ENROLLED
export SECLAUNCH_TCTI=$SWTPM_TCTI TPM2TOOLS_TCTI=$SWTPM_TCTI

inject "policy denial (TEE kind)" 4 "sev-snp" "${RUNA[@]}" --region gcp:europe-west4 \
	"$T/e2e-small.sld" "$T/e2e-snp-only.sld"

inject "region denial" 4 "us-east-1" "${RUNA[@]}" --region aws:us-east-1 "$T/e2e-small.sld"
assert "region denial: the explanation says nothing was fetched" \
	grep -q "nothing was fetched" "$T/err"

cp "$T/e2e-mid.sld" "$T/tampered.sld"
size=$(stat -c %s "$T/tampered.sld")
python3 - "$T/tampered.sld" $((size / 2)) <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))
EOF
inject "tampered chunk in the middle" 6 "chunk" "${RUNA[@]}" --region gcp:europe-west4 \
	"$T/e2e-small.sld" "$T/tampered.sld"
assert "tampered chunk: the wipe is recorded" bash -c "tail -n 3 '$AUDIT' | grep -q '\"run.wipe\"'"

inject "wrong policy signature" 4 "signature" \
	--policy "$T/forged.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --tcti "$SWTPM_TCTI" \
	--audit-log "$AUDIT" --audit-key "$T/audit.key" --region gcp:europe-west4 "$T/e2e-small.sld"

# ---- SIGTERM to seclaunch while the job runs ------------------------------
rm -f "$T/sig.started"
"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" -- \
	"$PY" "$T/job.py" "$T/sig" sleep >"$T/sig.out" 2>&1 &
slpid=$!
for _ in $(seq 200); do [ -s "$T/sig.started" ] && break; sleep 0.05; done
jobpid=$(cat "$T/sig.started" 2>/dev/null || echo 0)
assert "SIGTERM: the job started" test "$jobpid" -gt 0
envdump_ok=1
if [ "$jobpid" -gt 0 ] && grep -q -a -F "$MARKER" "/proc/$jobpid/environ" 2>/dev/null; then envdump_ok=0; fi
assert "no plaintext in /proc/<job>/environ" test "$envdump_ok" -eq 1
kill -TERM "$slpid"
wait "$slpid"
rc=$?
assert "SIGTERM: seclaunch exits 143" test "$rc" -eq 143
assert "SIGTERM: the job is gone" bash -c "! kill -0 $jobpid 2>/dev/null"
assert "SIGTERM: forwarded signal and wipe recorded" \
	bash -c "tail -n 4 '$AUDIT' | grep -q '\"forwarded_signal\":15' && tail -n 3 '$AUDIT' | grep -q '\"run.wipe\"'"

# ---- seclaunch killed outright: PR_SET_PDEATHSIG takes the job with it ----
rm -f "$T/kill9.started"
"$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/e2e-small.sld" -- \
	"$PY" "$T/job.py" "$T/kill9" sleep >/dev/null 2>&1 &
slpid=$!
for _ in $(seq 200); do [ -s "$T/kill9.started" ] && break; sleep 0.05; done
jobpid=$(cat "$T/kill9.started" 2>/dev/null || echo 0)
kill -KILL "$slpid"
wait "$slpid" 2>/dev/null
gone=0
for _ in $(seq 40); do
	kill -0 "$jobpid" 2>/dev/null || { gone=1; break; }
	sleep 0.05
done
assert "SIGKILL to seclaunch: the job dies with it (PR_SET_PDEATHSIG)" test "$jobpid" -gt 0 -a "$gone" = 1

if [ -x "$SL" ] && "$SL" audit --help >/dev/null 2>&1; then
	# the run killed with SIGKILL above never wrote its closing checkpoint:
	# its records are a tail no signature covers
	check "audit log of all these runs verifies" 0 "$SL" audit verify --pubkey "$T/audit.pub" \
		--allow-unsigned-tail "$AUDIT"
fi
finish
