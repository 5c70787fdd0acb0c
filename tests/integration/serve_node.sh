#!/usr/bin/env bash
# seclaunch serve (real swtpm, real seclaunchd over TLS): one attested launch
# for the node, then the data service for processes that are not its
# children, as long as they run as the job's user and send the step's token;
# no token, a wrong token, a malformed request and another uid are refused
# and audited; SIGTERM and the end of --until-pid stop it with a wipe record
# that names the node and the Slurm job and step; a policy denial exits 4
# with nothing served; usage mistakes exit 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

job_prologue serve_node swtpm python3 setpriv

start_tpm tpm || exit 1
cp /bin/true "$T/jobbin"
mkdir src
for i in $(seq 0 11); do head -c $((20000 + i * 3000)) /dev/urandom >"src/s$i.bin"; done
serve_setup serve_node node "$T/jobbin" "--epochs=*"

SA=(--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --stage host --region gcp:europe-west4)
releases() { grep -c '"event":"kms.release"' "$KMS_STATE/audit.log"; }

# ---- usage -----------------------------------------------------------------
check_err "serve without a dataset: exit 1" 1 "no dataset" "$SL" serve "${SA[@]}"
check_err "serve --ready-fd of a closed descriptor: exit 1" 1 "ready-fd" \
	"$SL" serve "${SA[@]}" --ready-fd 57 ds
# a usage error after --ready-fd: whoever waits there (the SPANK plugin)
# gets the exit code on it, the message on stderr
check_err "serve --ready-fd 3 with a --resume no --output names: exit 1" 1 "no --output model" \
	"$SL" serve "${SA[@]}" --ready-fd 3 --resume model=/nowhere ds 3>"$T/usage.ready"
assert "... the ready line is the error, exit 1" \
	python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; sys.exit(not (e["exit"] == 1 and e["code"] == "SL_E_USAGE"))' "$T/usage.ready"
check_err "serve --socket of a relative path: exit 1" 1 "absolute path" \
	"$SL" serve "${SA[@]}" --socket rel.sock ds
check_err "serve takes no job options (--env): exit 1" 1 "env" \
	"$SL" serve "${SA[@]}" --env A=b ds
check "serve --help says what it does" 0 "$SL" serve --help
assert "... the token and the stop conditions" grep -q "SIGTERM" "$T/out"
cp "$T/out" "$T/help"
missing=
for opt in $(sed -n 's/^[[:space:]]*{"\([a-z-]*\)", [a-z_]*, [A-Z_]*, NULL}.*/\1/p' \
	"$SL_ROOT/launcher/cmd/cmd_serve.c" "$SL_ROOT/launcher/run/run_int.h" "$SL_ROOT/launcher/cli/region_id.h"); do
	grep -q -- "--$opt" "$T/help" || missing="$missing --$opt"
done
assert "serve --help names every option of its parser${missing:+ (missing:$missing)}" test -z "$missing"

# ---- one serve, many processes -----------------------------------------------
before=$(releases)
SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURMD_NODENAME=node-a \
	"$SL" serve "${SA[@]}" --audit-log "$T/audit.log" --socket "$T/data.sock" \
	--ready-file "$T/ready.json" ds 2>"$T/serve.err" &
sp=$!
_PIDS+=("$sp")
for _ in $(seq 300); do [ -s "$T/ready.json" ] && break; sleep 0.05; done
assert "serve writes its ready line when the socket is up" test -S "$T/data.sock" -a -s "$T/ready.json"
assert "the ready file is private (0600)" test "$(stat -c %a "$T/ready.json")" = 600
TOKEN=$("$PY" -c "import json; print(json.load(open('$T/ready.json'))['token'])")
"$PY" -c "import json; print(json.dumps(json.load(open('$T/ready.json'))['data']))" >data.json
assert "the token is 64 hex digits" test "${#TOKEN}" = 64
assert "the tasks' SECLAUNCH_DATA carries no inherited descriptor" \
	"$PY" -c "import json,sys; d=json.load(open('data.json'))['node-1']; sys.exit('fd' in d or 'path' in d)"

cat >reader.py <<'EOF2'
import hashlib, json, sys
import seclaunch_data as sd
ds = sd.get("node-1")
print(json.dumps({p: hashlib.sha256(bytes(ds.view(p))).hexdigest() for p in ds.files()}))
EOF2
reader() { # reader OUT [env...]: a process that is not serve's child
	local out=$1
	shift
	env -i PATH=/usr/bin:/bin PYTHONPATH="$SL_ROOT/jobside/python" PYTHONDONTWRITEBYTECODE=1 \
		SECLAUNCH_DATA_SOCKET="$T/data.sock" "$@" "$PY" reader.py >"$out" 2>"$out.err"
}
sums_ok() {
	"$PY" - "$1" want.sums <<'EOF2'
import json, sys
got = json.load(open(sys.argv[1]))
want = dict(reversed(l.split()) for l in open(sys.argv[2]))
sys.exit(0 if got == want else 1)
EOF2
}
reader r1.json SECLAUNCH_DATA_TOKEN="$TOKEN" SECLAUNCH_DATA="$(cat data.json)"
assert "a process with the token and SECLAUNCH_DATA reads every file exactly" sums_ok r1.json
reader r2.json SECLAUNCH_DATA_TOKEN="$TOKEN"
assert "a second process with the socket and token only (list) reads them too" sums_ok r2.json
reader r3.json SECLAUNCH_DATA="$(cat data.json)"
assert "no token: refused" grep -q "refused: no token" r3.json.err
reader r4.json SECLAUNCH_DATA_TOKEN="${TOKEN:0:63}0" SECLAUNCH_DATA="$(cat data.json)"
[ "${TOKEN:63:1}" = 0 ] && reader r4.json SECLAUNCH_DATA_TOKEN="${TOKEN:0:63}1" SECLAUNCH_DATA="$(cat data.json)"
assert "a wrong token (one digit off): refused" grep -q "refused: wrong token" r4.json.err
"$PY" - "$T/data.sock" >raw.txt <<'EOF2'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(b"{not json")
msg, fds, _, _ = socket.recv_fds(s, 4096, 1)
print(json.loads(msg).get("error"), len(fds))
EOF2
assert "a malformed request (no token readable): refused, no descriptor" test "$(cat raw.txt)" = "refused 0"
setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" - "$T/data.sock" "$TOKEN" >other.txt 2>&1 <<'EOF2'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1])
    s.send(json.dumps({"op": "open", "dataset": "node-1", "token": sys.argv[2]}).encode())
    msg, fds, _, _ = socket.recv_fds(s, 4096, 1)
    print(json.loads(msg).get("error"), len(fds))
except OSError as e:
    print("os-error", e.errno)
EOF2
assert "another uid, with the token: cannot reach the socket (0600, EACCES)" \
	test "$(cat other.txt)" = "os-error 13"
assert "one release for the node, however many processes read" test "$(releases)" = $((before + 1))
kill -TERM "$sp"
wait "$sp"
rc=$?
assert "SIGTERM stops serve: exit 0" test "$rc" = 0
assert "... it says it wiped" grep -q "stopped (signal 15); data and keys wiped" "$T/serve.err"
assert "... the socket is gone" test ! -e "$T/data.sock"
assert "the refusals are audited" test "$(grep -c '"event":"run.data.refused"' "$T/audit.log")" -ge 3
"$PY" - "$T/audit.log" >wipe.txt <<'EOF2'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["event"] == "run.wipe":
        d = r["details"]
        c = d.get("context", {})
        print(d["after"], d["all_zeroed"], c.get("node"), c.get("slurm_job_id"), c.get("slurm_step_id"))
    if r["event"] == "run.start":
        print("start", r["details"].get("mode"))
EOF2
assert "run.start says mode serve" grep -q "^start serve$" wipe.txt
assert "run.wipe: after the signal, all zeroed, node, Slurm job and step" \
	grep -q "^signal 15 True node-a 77 3$" wipe.txt
assert "the KMS's release record carries the Slurm context" \
	grep -q '"slurm_job_id":"77"' "$KMS_STATE/audit.log"

# ---- --user: the datasets are opened as the job's user ----------------------------
# root-only datasets (0600 in a 0700 folder) named for a nobody job: refused
# before any KMS request, naming the path; root is no confused deputy
# (timeout: served instead, serve would not stop by itself)
mkdir -m 0700 "$T/vault"
cp -r ds "$T/vault/private"
chmod -R go-rwx "$T/vault/private"
check "encrypt a root-only SLD file" 0 "$SL" encrypt "${KMSA[@]}" --key-id ds-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id node-1 -q src/s0.bin -o "$T/vault/private.sld"
chmod 0600 "$T/vault/private.sld"
chmod 0711 "$T"
before=$(releases)
check_err "serve --user nobody naming a root-only SLD file: exit 2, its user cannot read it" 2 \
	"$T/vault/private.sld: cannot open: the job's user nobody .*cannot read it" \
	timeout 120 "$SL" serve "${SA[@]}" --audit-log "$T/audit-v.log" --user nobody "$T/vault/private.sld"
check_err "serve --user nobody naming a root-only dataset folder: exit 2, the same" 2 \
	"$T/vault/private: cannot open: the job's user nobody .*cannot read it" \
	timeout 120 "$SL" serve "${SA[@]}" --audit-log "$T/audit-v.log" --user nobody "$T/vault/private"
assert "... no release request reached the KMS" test "$(releases)" = "$before"
# the folder's files are opened through its descriptor: the user must be
# able to search it, not only list it
chmod 0755 "$T/vault" "$T/vault/private"
chmod 0744 "$T/vault/private"
check_err "serve --user nobody, a folder nobody may list but not search: exit 2" 2 \
	"$T/vault/private: cannot open: the job's user nobody .*cannot read the folder" \
	timeout 120 "$SL" serve "${SA[@]}" --audit-log "$T/audit-v.log" --user nobody "$T/vault/private"
assert "... no release request reached the KMS" test "$(releases)" = "$before"
# options end at the first dataset: an operand that looks like an option is a
# dataset (that does not exist), not an option (no file made, no log moved)
check_err "serve DATA --ready-file=F: not taken as an option; refused (exit 1)" 1 \
	"'--ready-file=$T/injected' after the dataset ds: options come before the datasets" \
	timeout 120 "$SL" serve "${SA[@]}" --audit-log "$T/audit-v.log" ds "--ready-file=$T/injected"
assert "... no ready file made" test ! -e "$T/injected"

# ---- --user: the uid check -----------------------------------------------------
# the dataset readable by the job's user
chmod -R a+rX "$T/ds"
# --ready-file is made by the job's user: where that user cannot create a
# file (a root-only folder), serve fails before it serves, and root makes
# nothing there for it
mkdir -m 0700 "$T/rootonly"
check_err "serve --user nobody --ready-file in a root-only folder: refused, exit 7" 7 \
	"--ready-file: $T/rootonly/r.json: cannot create it as the job's user nobody" \
	timeout 120 "$SL" serve "${SA[@]}" --audit-log "$T/audit-r.log" --user nobody \
	--ready-file "$T/rootonly/r.json" -q ds
assert "... no file made there" test ! -e "$T/rootonly/r.json"
# ... and in the user's own folder it is the user's file
mkdir -m 0700 "$T/home-u"
chown nobody "$T/home-u"
# root's own runtime folder (as a root login has it: /run/user/0, 0700) is
# one the job's user cannot pass through: serve must not put the socket there
mkdir -m 0700 "$T/root-run"
XDG_RUNTIME_DIR="$T/root-run" \
	"$SL" serve "${SA[@]}" --audit-log "$T/audit-u.log" --user nobody --ready-file "$T/home-u/ready-u.json" \
	-q ds 2>"$T/serve-u.err" &
sp=$!
_PIDS+=("$sp")
for _ in $(seq 300); do [ -s "$T/home-u/ready-u.json" ] && break; sleep 0.05; done
read -r usock utok < <("$PY" -c "import json; r=json.load(open('$T/home-u/ready-u.json')); print(r['socket'], r['token'])")
assert "--user: the ready file belongs to the job's user" test "$(stat -c %U "$T/home-u/ready-u.json")" = nobody
env -i PATH=/usr/bin:/bin PYTHONPATH="$SL_ROOT/jobside/python" PYTHONDONTWRITEBYTECODE=1 SECLAUNCH_DATA_SOCKET="$usock" \
	SECLAUNCH_DATA_TOKEN="$utok" "$PY" reader.py >u1.json 2>u1.err
assert "--user nobody: root with the right token is refused (not the job's user)" \
	grep -q "not the job's user" u1.err
chmod 0755 "$T"
env -i PATH=/usr/bin:/bin PYTHONPATH="$SL_ROOT/jobside/python" PYTHONDONTWRITEBYTECODE=1 \
	SECLAUNCH_DATA_SOCKET="$usock" SECLAUNCH_DATA_TOKEN="$utok" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" "$T/reader.py" >u2.json 2>u2.err
chmod 0700 "$T"
assert "--user nobody: the socket is not under the caller's runtime folder" \
	test "${usock#"$T/root-run/"}" = "$usock"
assert "--user nobody: nobody with the token reads every file" sums_ok u2.json
[ -s u2.json ] || sed 's/^/    /' u2.err
# the socket's folder is the job's user's: that user swaps it for a link to
# a root folder holding a file of the socket's name; serve's clean-up at
# the stop must remove its own socket, not root's file through the link
udir=$(dirname "$usock")
mkdir -m 0700 "$T/rootsock"
echo canary >"$T/rootsock/data.sock"
setpriv --reuid=65534 --regid=65534 --clear-groups \
	sh -c 'mv "$1" "$1.moved" && ln -s "$2" "$1"' _ "$udir" "$T/rootsock"
kill -INT "$sp"
wait "$sp"
assert "SIGINT stops it too: exit 0" test $? = 0
assert "... its socket folder swapped for a link: root's file of that name is left" \
	test "$(cat "$T/rootsock/data.sock" 2>/dev/null)" = canary
assert "... and its own socket is removed, through the folder it made" test ! -e "$udir.moved/data.sock"
rm -f "$udir"
rm -rf "$udir.moved"

# ---- --until-pid -----------------------------------------------------------------
sleep 600 &
slp=$!
_PIDS+=("$slp")
"$SL" serve "${SA[@]}" --audit-log "$T/audit-p.log" --until-pid "$slp" --ready-file "$T/ready-p.json" \
	-q ds 2>"$T/serve-p.err" &
sp=$!
_PIDS+=("$sp")
for _ in $(seq 300); do [ -s "$T/ready-p.json" ] && break; sleep 0.05; done
kill "$slp"
wait "$slp" 2>/dev/null
for _ in $(seq 50); do kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done
assert "--until-pid: serve stops when that process ends" bash -c "! kill -0 $sp 2>/dev/null"
wait "$sp"
assert "... exit 0" test $? = 0
assert "... and the wipe record says why" grep -q '"after":"--until-pid ended"' "$T/audit-p.log"

# ---- a policy denial: exit 4, nothing served ----------------------------------------
before=$(releases)
check_err "a region the policy does not allow: exit 4, the reasons on stderr" 4 "us-east-1" \
	"$SL" serve "${SA[@]}" --region aws:us-east-1 --audit-log "$T/audit-d.log" \
	--ready-file "$T/ready-d.json" ds
assert "... no ready line, nothing released" test ! -e "$T/ready-d.json" -a "$(releases)" = "$before"

# ---- --output: the tasks write, serve seals when it stops -------------------------
wait_ready() { for _ in $(seq 300); do [ -s "$1" ] && break; sleep 0.05; done; }
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ''))" "$1" "$2"; }
head -c 70000 /dev/urandom >weights.bin
SLURM_JOB_ID=78 SLURM_STEP_ID=0 SLURMD_NODENAME=node-a \
	"$SL" serve "${SA[@]}" --audit-log "$T/audit-o.log" --output "model=$T/dest" \
	--ready-file "$T/ready-o.json" ds 2>"$T/serve-o.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-o.json"
OUTDIR=$(field "$T/ready-o.json" output_dir)
assert "--output: the ready line names the output folder, NAME/ in it" test -n "$OUTDIR" -a -d "$OUTDIR/model"
assert "... the folder is private (0700) and in memory" \
	bash -c "test \"\$(stat -c %a '$OUTDIR')\" = 700 && test \"\$(stat -f -c %T '$OUTDIR')\" = tmpfs"
# a task (not serve's child) writes its model
env -i PATH=/usr/bin:/bin SECLAUNCH_OUTPUT_DIR="$OUTDIR" sh -c 'cp weights.bin "$SECLAUNCH_OUTPUT_DIR/model/"'
kill -TERM "$sp"
wait "$sp"
assert "serve --output, stopped by SIGTERM: exit 0" test $? = 0
assert "... the output is sealed at DEST (LATEST 1, a sharded dataset)" \
	test "$(cat "$T/dest/LATEST" 2>/dev/null)" = 1 -a -f "$T/dest/ckpt-00000001/manifest.sldm"
assert "... no plaintext at DEST (no 64-byte piece of the file in any file there)" \
	"$PY" - weights.bin "$T/dest" <<'EOF2'
import os, sys
w = open(sys.argv[1], "rb").read()
pieces = [w[i:i + 64] for i in range(0, len(w) - 64, 4096)]
for d, _, fs in os.walk(sys.argv[2]):
    for f in fs:
        b = open(os.path.join(d, f), "rb").read()
        if any(p in b for p in pieces):
            sys.exit(1)
EOF2
assert "... the output folder is wiped and gone" test ! -e "$OUTDIR"
assert "... audited: run.output (trigger exit), then run.wipe" \
	"$PY" - "$T/audit-o.log" <<'EOF2'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
names = [r["event"] for r in ev]
sealed = [i for i, r in enumerate(ev) if r["event"] == "run.output" and r["details"].get("trigger") == "exit"
          and r.get("decision") == "allow"]
sys.exit(0 if sealed and names.index("run.wipe") > sealed[0] else 1)
EOF2
assert "the KMS issued the output key for that destination" \
	grep -q "\"event\":\"kms.release\".*file://$T/dest/" "$KMS_STATE/audit.log"
# read back: a second serve resumes it into its own output folder
"$SL" serve "${SA[@]}" --audit-log "$T/audit-r.log" --resume "model=$T/dest" --output "model=$T/dest" \
	--ready-file "$T/ready-r.json" -q ds 2>"$T/serve-r.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-r.json"
OUTDIR=$(field "$T/ready-r.json" output_dir)
assert "--resume: the tasks find the sealed file back, byte for byte" cmp -s weights.bin "$OUTDIR/model/weights.bin"
kill -TERM "$sp"
wait "$sp"
assert "... exit 0; what the folder holds at the stop is sealed again (LATEST 2)" \
	test $? = 0 -a "$(cat "$T/dest/LATEST")" = 2
# --preempt-watch sigterm: the platform's SIGTERM is a preemption (sealed, exit 143)
"$SL" serve "${SA[@]}" --audit-log "$T/audit-pre.log" --output "model=$T/dest-pre" \
	--preempt-watch sigterm --ready-file "$T/ready-pre.json" -q ds 2>"$T/serve-pre.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-pre.json"
OUTDIR=$(field "$T/ready-pre.json" output_dir)
cp weights.bin "$OUTDIR/model/"
kill -TERM "$sp"
wait "$sp"
assert "--preempt-watch sigterm, then SIGTERM: sealed, exit 143" \
	test $? = 143 -a "$(cat "$T/dest-pre/LATEST" 2>/dev/null)" = 1
assert "... run.preempted audited, all saved" grep -q '"event":"run.preempted".*"all_saved":true' "$T/audit-pre.log"
# --preempt-watch gce: a notice from the metadata server stops serve (sealed, exit 143)
cat >meta.py <<'EOF2'
import http.server, os, sys, time
port, flip = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Metadata-Flavor") != "Google" or "/instance/preempted" not in self.path:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        if "wait_for_change" in self.path:
            end = time.time() + 2
            while time.time() < end and not os.path.exists(flip): time.sleep(0.05)
        body = b"TRUE" if os.path.exists(flip) else b"FALSE"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF2
META_PORT=$(free_port)
"$PY" meta.py "$META_PORT" "$T/flip" &
_PIDS+=($!)
wait_port "$META_PORT" 10
"$SL" serve "${SA[@]}" --audit-log "$T/audit-gce.log" --output "model=$T/dest-gce" \
	--preempt-watch "gce=http://127.0.0.1:$META_PORT" --ready-file "$T/ready-gce.json" -q ds \
	2>"$T/serve-gce.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-gce.json"
OUTDIR=$(field "$T/ready-gce.json" output_dir)
cp weights.bin "$OUTDIR/model/"
touch "$T/flip"
for _ in $(seq 100); do kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done
assert "--preempt-watch gce: the notice stops serve by itself" bash -c "! kill -0 $sp 2>/dev/null"
kill -KILL "$sp" 2>/dev/null # (a serve that did not stop fails the next check, not the run)
wait "$sp"
assert "... sealed, exit 143" test $? = 143 -a "$(cat "$T/dest-gce/LATEST" 2>/dev/null)" = 1
assert "... run.wipe says why" grep -q '"after":"preemption notice"' "$T/audit-gce.log"

# outputs only, no dataset: the folder and the seal, nothing to serve but that
"$SL" serve "${SA[@]}" --audit-log "$T/audit-oo.log" --output "model=$T/dest-only" \
	--ready-file "$T/ready-oo.json" -q 2>"$T/serve-oo.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-oo.json"
OUTDIR=$(field "$T/ready-oo.json" output_dir)
assert "--output without a dataset: serve gets ready with an output folder" test -d "$OUTDIR/model"
cp weights.bin "$OUTDIR/model/" 2>/dev/null
kill -TERM "$sp"
wait "$sp"
assert "... stopped: exit 0, sealed" test $? = 0 -a "$(cat "$T/dest-only/LATEST" 2>/dev/null)" = 1
before=$(releases)
check_err "--output to a destination the policy does not allow: exit 4" 4 "denies output model" \
	"$SL" serve "${SA[@]}" --audit-log "$T/audit-od.log" --output "model=$T/elsewhere" \
	--ready-file "$T/ready-od.json" ds
assert "... no ready line, nothing released, nothing written" \
	test ! -e "$T/ready-od.json" -a "$(releases)" = "$before" -a ! -e "$T/elsewhere"

# ---- -- CMD: the tasks' command measured; a workloads rule decides -----------------
head -c 5000 /dev/urandom >wl.bin
check "encrypt a dataset whose rule names its workload" 0 "$SL" encrypt "${KMSA[@]}" --key-id ds-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id node-wl -q wl.bin -o wl.sld
WLA=(--workload-log "$T/wl.log")
check_err "serve ... -- with no command: exit 1" 1 "no command after --" \
	"$SL" serve "${SA[@]}" "${WLA[@]}" wl.sld --
"$SL" serve "${SA[@]}" "${WLA[@]}" --audit-log "$T/audit-w.log" --ready-file "$T/ready-w.json" \
	wl.sld -- "$T/jobbin" --epochs=3 2>"$T/serve-w.err" &
sp=$!
_PIDS+=("$sp")
wait_ready "$T/ready-w.json"
assert "the measured command the rule allows: serve starts (ready line)" test -s "$T/ready-w.json"
kill -TERM "$sp"
wait "$sp"
assert "... exit 0" test $? = 0
assert "... run.measure audited with the command's argv" \
	grep -q "\"event\":\"run.measure\".*\"argv\":\[\"$T/jobbin\",\"--epochs=3\"\]" "$T/audit-w.log"
assert "... the workload log holds the event" grep -q -- "--epochs=3" "$T/wl.log"
before=$(releases)
check_err "another command (/bin/true): refused, exit 4, the rule named" 4 "workloads" \
	"$SL" serve "${SA[@]}" "${WLA[@]}" --audit-log "$T/audit-w2.log" --ready-file "$T/ready-w2.json" \
	wl.sld -- /bin/true --epochs=3
assert "... no ready line, nothing released" test ! -e "$T/ready-w2.json" -a "$(releases)" = "$before"
check_err "the allowed file with other arguments: refused, exit 4" 4 "argv" \
	"$SL" serve "${SA[@]}" "${WLA[@]}" --audit-log "$T/audit-w3.log" wl.sld -- "$T/jobbin" --evil
check_err "no command given (nothing measured): refused, exit 4" 4 "no measured workload" \
	"$SL" serve "${SA[@]}" "${WLA[@]}" --audit-log "$T/audit-w4.log" wl.sld
check_err "a command that does not exist: exit 2, named" 2 "nosuchcmd" \
	"$SL" serve "${SA[@]}" "${WLA[@]}" --audit-log "$T/audit-w5.log" wl.sld -- nosuchcmd-xyz
finish
