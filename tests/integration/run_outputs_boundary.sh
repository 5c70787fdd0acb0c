#!/usr/bin/env bash
# The privilege boundary around the output folder: seclaunch run as root
# for a job of user nobody (--user nobody), whose output folder the job owns
# and may change while root works in it. Each attack is a bounded race loop
# (about 3 s; longer loops in tests/stress/outputs_races.sh):
#  1. the job swaps .seclaunch-checkpoint for a symlink to a root-owned 0600
#     file while it asks for checkpoints: the file keeps its owner and mode
#     (the status file is given its owner on its descriptor, before rename);
#  2. another process of user nobody flips model/a between the folder and a
#     symlink to a root-only folder while root wipes the output folder: every
#     root file there survives unchanged (the wipe walks descriptors);
#  3. the job flips model/d the same way while checkpoints are sealed: no
#     root-only file name in any checkpoint's manifest, no root-only byte in
#     any checkpoint decrypted (the sealing walk and reads stay beneath the
#     output's descriptor);
#  4. checkpoint requests coalesce: a burst of requests is sealed a few
#     times, not once per request, under --checkpoint-min-interval 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

for tool in swtpm minisign python3 setpriv; do
	if ! command -v "$tool" >/dev/null; then
		skip run_outputs_boundary "$tool not installed"
		finish
	fi
done
if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
	skip run_outputs_boundary "needs root and a 'nobody' user (CI runs as root)"
	finish
fi
if ! "$SL" run --help 2>/dev/null | grep -q -- --checkpoint-min-interval || [ ! -x "$SLD" ]; then
	skip run_outputs_boundary "seclaunch run --checkpoint-min-interval or seclaunchd not built"
	finish
fi
PYU=
for c in /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3)"; do
	if setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c '[ -x "$0" ] && "$0" -c "import os"' "$c" 2>/dev/null; then
		PYU=$c
		break
	fi
done
if [ -z "$PYU" ]; then
	skip run_outputs_boundary "no python3 that user nobody may execute"
	finish
fi
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
SECS=${SL_RACE_SECS:-3}
MARKER="ROOTONLY-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"

start_tpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<EOF2
{"version": 1, "description": "run_outputs_boundary", "allow_unverified_region": true,
 "keys": {"ck": ["model:*"]},
 "datasets": [{"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "output_destinations": [{"url": "file://$T/dest*", "region": "gcp:europe-west4"}]}]}
EOF2
minisign -S -s "$T/p.key" -m "$T/policy.json" -t boundary >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id ck
# the job's files: a folder nobody may enter and write; $T itself only traversable
chmod 711 "$T"
mkdir -m 1777 "$T/pub"
cp "$SL_ROOT/jobside/python/"*.py "$T/pub/"
chmod 644 "$T/pub/"*.py
RUN=(run --policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --stage host --audit-log "$T/audit.log" --user nobody
	--env "PYTHONPATH=$T/pub" --env PYTHONDONTWRITEBYTECODE=1)
# A folder and a symlink swapped in one step (renameat2 RENAME_EXCHANGE), so
# the name always exists: half the time the folder, half the time the link.
cat >"$T/pub/flipper.py" <<'EOF2'
import ctypes, os, time
_libc = ctypes.CDLL(None, use_errno=True)
def _xchg(a, b):
    if _libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
def flip(path, target, until, keep_going=lambda: True):
    """Swaps the folder path with a symlink to target until the monotonic
    clock reaches until; ends with the folder back at path. Returns the count."""
    other = path + ".x"
    n = 0
    while time.monotonic() < until and keep_going():
        try:
            if not os.path.lexists(other):
                os.symlink(target, other)
            if not os.path.lexists(path):
                os.rename(other, path) if os.path.isdir(other) and not os.path.islink(other) else os.symlink(target, path)
            _xchg(path, other)
            n += 1
        except OSError:
            pass
        time.sleep(0.0001)
    try:
        if os.path.islink(path) and os.path.isdir(other) and not os.path.islink(other):
            _xchg(path, other)
    except OSError:
        pass
    return n
EOF2

# root-only canaries: a folder of 0600 files of the same names and sizes as the job's
root_folder() { # DIR PREFIX N
	mkdir -m 700 "$1"
	for ((i = 0; i < $3; i++)); do
		printf '%-63s\n' "$MARKER $2$i" >"$1/$(printf '%s%04d' "$2" "$i")"
	done
	printf '%s\n' "$MARKER" >"$1/rootonly.key"
	chmod 600 "$1"/*
	(cd "$1" && sha256sum ./* >"$T/$(basename "$1").sums")
}

# ---- 1. .seclaunch-checkpoint swapped for a symlink -----------------------------
printf 'root canary\n' >"$T/canary1"
chmod 600 "$T/canary1"
cat >"$T/pub/swap_status.py" <<'EOF2'
import os, sys, threading, time
out = os.environ["SECLAUNCH_OUTPUT_DIR"]
target, secs = sys.argv[1], float(sys.argv[2])
status = os.path.join(out, ".seclaunch-checkpoint")
end = time.monotonic() + secs
def swap():
    n = 0
    while time.monotonic() < end:
        tmp = os.path.join(out, "l%d" % (n % 2))
        n += 1
        try:
            os.symlink(target, tmp)
            os.rename(tmp, status)
        except OSError:
            pass
threading.Thread(target=swap, daemon=True).start()
asked = 0
while time.monotonic() < end:
    with open(os.path.join(out, ".seclaunch-checkpoint-request"), "w") as f:
        f.write("1")
    asked += 1
    time.sleep(0.0005)
time.sleep(0.05)
# the swapper's spare links are not outputs: left behind, the run would
# name them as strays and exit 2 (nothing sealed)
for n in (0, 1):
    try:
        os.unlink(os.path.join(out, "l%d" % n))
    except OSError:
        pass
print("asked", asked)
EOF2
check "1: a nobody job swaps .seclaunch-checkpoint for a symlink while asking for checkpoints" 0 \
	"$SL" "${RUN[@]}" --checkpoint-min-interval 0 --output "model=$T/dest1" -- \
	"$PYU" "$T/pub/swap_status.py" "$T/canary1" "$SECS"
assert "1: the root-owned 0600 canary keeps its owner and mode" \
	test "$(stat -c %u:%g:%a "$T/canary1")" = 0:0:600
assert "1: and its contents" grep -qx 'root canary' "$T/canary1"

# ---- 2. the wipe: model/a flipped to a root folder by another nobody process -----
root_folder "$T/root2" f 400
cat >"$T/pub/job2.py" <<'EOF2'
import os, sys, time
out = os.environ["SECLAUNCH_OUTPUT_DIR"]
a = os.path.join(out, "model", "a")
os.mkdir(a)
blob = b"j" * (256 << 10)
for i in range(400):
    with open(os.path.join(a, "f%04d" % i), "wb") as f:
        f.write(blob)
open(sys.argv[1] + ".tmp", "w").write(out)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
for _ in range(1000):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.01)
EOF2
cat >"$T/pub/flip.py" <<'EOF2'
import os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
import flipper
where, go, target, sub, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
for _ in range(3000):
    if os.path.exists(where):
        break
    time.sleep(0.01)
out = open(where).read()
open(go, "w").close()
n = flipper.flip(os.path.join(out, "model", sub), target, time.monotonic() + secs,
                 lambda: os.path.isdir(out))
print("flips", n)
EOF2
rm -f "$T/pub/where2" "$T/pub/go2"
"${AS_NOBODY[@]}" "$PYU" "$T/pub/flip.py" "$T/pub/where2" "$T/pub/go2" "$T/root2" a "$SECS" \
	>"$T/flip2.out" 2>&1 &
FLIP=$!
_PIDS+=("$FLIP")
SECLAUNCH_OUTPUT_NO_NAMESPACE=1 "$SL" "${RUN[@]}" --output "model=$T/dest2" -- \
	"$PYU" "$T/pub/job2.py" "$T/pub/where2" "$T/pub/go2" >"$T/out2" 2>"$T/err2"
wait "$FLIP"
assert "2: the attacker flipped model/a during the run" grep -q 'flips [1-9]' "$T/flip2.out"
assert "2: every root-only file survives the wipe unchanged" \
	bash -c "cd '$T/root2' && sha256sum --quiet -c '$T/root2.sums'"
assert "2: still root's, 0600" test "$(stat -c %u:%a "$T/root2/f0000")" = 0:600

# ---- 3. sealing: model/d flipped to a root folder during checkpoints ----------------
root_folder "$T/root3" g 100
cat >"$T/pub/job3.py" <<'EOF2'
import os, sys, threading, time
import seclaunch_data as sd
import flipper
target, secs = sys.argv[1], float(sys.argv[2])
out = os.environ["SECLAUNCH_OUTPUT_DIR"]
d = os.path.join(out, "model", "d")
os.mkdir(d)
for i in range(100):
    with open(os.path.join(d, "g%04d" % i), "w") as f:
        f.write("%-63s\n" % ("job file %d" % i))
end = time.monotonic() + secs
def flip():
    flipper.flip(d, target, end)
t = threading.Thread(target=flip)
t.start()
n = 0
while time.monotonic() < end:
    try:
        sd.checkpoint(timeout=30)
    except sd.SeclaunchDataError:
        pass
    n += 1
t.join()
print("checkpoints", n)
EOF2
check "3: a nobody job flips model/d to a root folder while checkpoints are sealed" 0 \
	"$SL" "${RUN[@]}" --checkpoint-min-interval 0 --output "model=$T/dest3" -- \
	"$PYU" "$T/pub/job3.py" "$T/root3" "$SECS"
ncks=$(find "$T/dest3" -maxdepth 1 -name 'ckpt-*' | wc -l)
assert "3: checkpoints were sealed ($ncks; those the flip broke failed, the final one holds)" test "$ncks" -ge 1
names_clean() {
	local c
	for c in "$T"/dest3/ckpt-*; do
		"$SL" inspect "$c" >"$T/insp.json" || return 1
		grep -q rootonly.key "$T/insp.json" && { echo "  $c lists rootonly.key"; return 1; }
	done
	return 0
}
assert "3: no checkpoint's manifest lists the root-only file" names_clean
bytes_clean() {
	local c i=0 all
	all=("$T"/dest3/ckpt-*)
	for c in "${all[@]}"; do
		# at most 12 decrypted (each an attested release), spread over all of them
		if [ ${#all[@]} -gt 12 ] && [ $((i++ % ((${#all[@]} + 11) / 12))) -ne 0 ] && [ "$c" != "${all[-1]}" ]; then
			continue
		fi
		rm -rf "$T/plain3"
		"$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" --region gcp:europe-west4 -q "$c" -o "$T/plain3" \
			>/dev/null 2>"$T/dec.err" || { cat "$T/dec.err"; return 1; }
		grep -rqF "$MARKER" "$T/plain3" && { echo "  $c holds root-only bytes"; return 1; }
	done
	return 0
}
assert "3: no root-only byte in the checkpoints (decrypted)" bytes_clean
assert "3: the root folder is unchanged" bash -c "cd '$T/root3' && sha256sum --quiet -c '$T/root3.sums'"

# ---- 4. a burst of requests coalesces ------------------------------------------------
cat >"$T/pub/burst.py" <<'EOF2'
import os, time
out = os.environ["SECLAUNCH_OUTPUT_DIR"]
open(os.path.join(out, "model", "w"), "w").write("weights\n")
end = time.monotonic() + 2
while time.monotonic() < end:
    with open(os.path.join(out, ".seclaunch-checkpoint-request"), "w") as f:
        f.write("1")
    time.sleep(0.001)
EOF2
check "4: a job asks for a checkpoint about a thousand times in 2 s" 0 \
	"$SL" "${RUN[@]}" --checkpoint-min-interval 1 --output "model=$T/dest4" -- "$PYU" "$T/pub/burst.py"
n4=$(cat "$T/dest4/LATEST")
assert "4: at most 5 checkpoints and the final seal were sealed (LATEST $n4)" test "$n4" -le 6
check_err "4: --checkpoint-min-interval takes seconds" 1 "checkpoint-min-interval" \
	"$SL" "${RUN[@]}" --checkpoint-min-interval x --output "model=$T/dest4" -- true
finish
