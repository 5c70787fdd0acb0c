#!/usr/bin/env bash
# Sealed outputs end to end: real swtpm (two machines), seclaunchd --dev with
# a signed policy whose output_destinations allow one folder and one HTTPS
# store. A deterministic training job (pure Python floats, quick) and a
# PyTorch one (Debian's python3-torch, CPU, fixed seeds, Adam; skipped when
# no interpreter imports torch) checkpoint every N steps through the helper's
# checkpoint() (or SIGUSR2); a loopback GCE/AWS metadata server flips to
# "preempted" mid-job; a second run on the other TPM resumes and finishes;
# its final weights are bit-identical to an uninterrupted run's. Then the bad inputs:
# denied destination, flipped bit, a shard from another run, an older
# checkpoint presented as newest, rollback of LATEST, an upload failing
# mid-way, a job over --output-limit. No plaintext byte (a planted marker)
# on any disk path.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3 openssl; do
	if ! command -v "$tool" >/dev/null; then
		skip run_outputs "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help 2>/dev/null | grep -q -- --output || [ ! -x "$SLD" ]; then
	skip run_outputs "seclaunch run --output or seclaunchd not built"
	finish
fi

PY=$(python3 -c "import sys; print(sys.executable)")
MARKER="SLOUT-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
RMARK=$(printf '%s' "$MARKER" | rev)
AUDIT=$T/audit.log

no_marker_anywhere() {
	grep -r -q -s -D skip -F "$MARKER" "$T" /tmp
	[ $? -ne 0 ]
}
printf 'x%sx\n' "$MARKER" >"$T/canary"
marker_found() { ! no_marker_anywhere; }
assert "the marker search finds a planted marker" marker_found
rm -f "$T/canary"

# ---- setup ------------------------------------------------------------------
start_swtpm tpmA || { echo "not ok - no swtpm"; exit 1; }
TCTI_A=$SWTPM_TCTI
start_swtpm tpmB || { echo "not ok - no second swtpm"; exit 1; }
TCTI_B=$SWTPM_TCTI
unset SECLAUNCH_TCTI TPM2TOOLS_TCTI

# an HTTPS store: a CA and a certificate for 127.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=test-ca -keyout "$T/ca.key" -out "$T/ca.pem" >/dev/null 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
	-keyout "$T/srv.key" -out "$T/srv.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$T/ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
	-days 2 -extfile "$T/ext" -out "$T/srv.pem" >/dev/null 2>&1

# PUT/GET store; FAIL_FILE holds "N name": fail the next N PUTs of that object with 503
cat >"$T/store.py" <<'EOF'
import http.server, os, ssl, sys, time
root, port, cert, key, failf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def path_of(self):
        p = os.path.normpath(self.path.split("?")[0]).lstrip("/")
        return None if p.startswith("..") else os.path.join(root, p)
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        if os.path.exists(failf + ".slow"):
            # a slow store: 1 MiB every 0.3 s, so a long upload keeps moving
            body = b""
            while len(body) < n:
                body += self.rfile.read(min(1 << 20, n - len(body)))
                time.sleep(0.3)
        else:
            body = self.rfile.read(n)
        if os.path.exists(failf):
            cnt, name = open(failf).read().split()
            if self.path.endswith("/" + name) and int(cnt) > 0:
                open(failf, "w").write("%d %s" % (int(cnt) - 1, name))
                self.send_response(503); self.end_headers(); return
        p = self.path_of()
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f: f.write(body)
        self.send_response(201); self.send_header("Content-Length", "0"); self.end_headers()
    def do_GET(self):
        p = self.path_of()
        if p is None or not os.path.isfile(p):
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        data = open(p, "rb").read()
        rng = self.headers.get("Range")
        if rng:
            a, b = rng.split("=")[1].split("-")
            a, b = int(a), min(int(b), len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
            data = data[a:b + 1]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
STORE_PORT=$(free_port)
mkdir -p "$T/store"
"$PY" "$T/store.py" "$T/store" "$STORE_PORT" "$T/srv.pem" "$T/srv.key" "$T/fail" &
_PIDS+=($!)
STORE=https://127.0.0.1:$STORE_PORT

# the metadata server: GCE and AWS answer "preempted" once $T/flip exists
cat >"$T/meta.py" <<'EOF'
import http.server, os, sys, time
port, flip = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, body=b""):
        self.send_response(code); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def do_PUT(self):
        if self.path == "/latest/api/token": return self.reply(200, b"tok-123")
        self.reply(404)
    def do_GET(self):
        if self.path.startswith("/computeMetadata/v1/instance/preempted"):
            if self.headers.get("Metadata-Flavor") != "Google": return self.reply(403)
            if "wait_for_change" in self.path:
                end = time.time() + 2
                while time.time() < end and not os.path.exists(flip): time.sleep(0.05)
            return self.reply(200, b"TRUE" if os.path.exists(flip) else b"FALSE")
        if self.path == "/latest/meta-data/spot/instance-action":
            if self.headers.get("X-aws-ec2-metadata-token") != "tok-123": return self.reply(401)
            if os.path.exists(flip): return self.reply(200, b'{"action":"terminate","time":"2026-01-01T00:00:00Z"}')
            return self.reply(404)
        self.reply(404)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
META_PORT=$(free_port)
"$PY" "$T/meta.py" "$META_PORT" "$T/flip" &
_PIDS+=($!)
wait_port "$META_PORT" 10
wait_port "$STORE_PORT" 10

minisign -G -W -p "$T/policy.pub" -s "$T/policy.key" >/dev/null 2>&1
DESTS="{\"url\": \"file://$T/dest*\", \"region\": \"gcp:europe-west4\"},
        {\"url\": \"$STORE/ok/*\", \"region\": \"gcp:europe-west4\"},
        {\"url\": \"s3://bkt/*\", \"region\": \"gcp:europe-west4\"}"
cat >"$T/policy.json" <<EOF
{
  "version": 1,
  "description": "run_outputs test policy (development: unverified regions)",
  "allow_unverified_region": true,
  "keys": {"in-key": ["in-data"], "ckpt-key": ["model:*", "big:*"], "ghost-key": ["ghost:*"], "off-key": ["off:*"]},
  "datasets": [
    {"id": "in-data", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$DESTS]},
    {"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$DESTS]},
    {"id": "big:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$DESTS]},
    {"id": "ghost:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$DESTS]},
    {"id": "off:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$DESTS]}
  ]
}
EOF
minisign -S -s "$T/policy.key" -m "$T/policy.json" -t "outputs" >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/policy.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll TPM A" 0 "$SL" enroll "${KMSA[@]}" --tcti "$TCTI_A"
check "enroll TPM B" 0 "$SL" enroll "${KMSA[@]}" --tcti "$TCTI_B"
check "create the input key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id in-key
check "create the checkpoint key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ckpt-key
check "create a key that is then disabled" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id off-key
check "disable it" 0 "$SL" key disable "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id off-key
head -c 4096 /dev/urandom >"$T/in.bin"
check "encrypt the input" 0 "$SL" encrypt "${KMSA[@]}" --key-id in-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id in-data -q "$T/in.bin" -o "$T/in.sld"

# The job: y = w.x on a fixed pseudo-random stream, SGD, weights as exact
# float hex. Checkpoints every EVERY steps (state.json, through checkpoint()
# or SIGUSR2); its output files carry the marker. A SIGTERM makes it save
# and exit at the next step.
cat >"$T/train.py" <<'EOF'
import json, os, signal, sys, time
import seclaunch_data as sd
# the marker comes reversed: argv is part of the job's workload identity, which
# the audit log records, and only the job's outputs may hold the marker itself
steps, every, nap, marker, prog = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4][::-1], sys.argv[5]
how = sys.argv[6] if len(sys.argv) > 6 else "request"
out = sd.output_dir("model")
state = os.path.join(out, "state.json")
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
w, step = [0.0] * 8, 0
if os.path.exists(state):
    st = json.load(open(state))
    w, step = [float.fromhex(x) for x in st["w"]], st["step"]
def sample(i):
    s = (i * 2654435761 + 12345) % 4294967296
    xs = []
    for _ in range(8):
        s = (s * 1103515245 + 12345) % 2147483648
        xs.append(s / 2147483648.0 - 0.5)
    return xs, sum((k + 1) * x for k, x in enumerate(xs)) * 0.25
def save():
    tmp = state + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"w": [x.hex() for x in w], "step": step, "note": marker}, f)
    os.rename(tmp, state)
    if how == "signal":
        before = open(os.path.join(sd.output_dir(), ".seclaunch-checkpoint")).read() \
            if os.path.exists(os.path.join(sd.output_dir(), ".seclaunch-checkpoint")) else ""
        os.kill(int(os.environ["SECLAUNCH_PID"]), signal.SIGUSR2)
        for _ in range(1000):
            p = os.path.join(sd.output_dir(), ".seclaunch-checkpoint")
            if os.path.exists(p) and open(p).read() != before:
                break
            time.sleep(0.01)
    else:
        sd.checkpoint()
    with open(prog, "a") as f:
        f.write("%d\n" % step)
while step < steps:
    xs, y = sample(step)
    err = sum(a * b for a, b in zip(w, xs)) - y
    w = [a - 0.1 * err * b for a, b in zip(w, xs)]
    step += 1
    if step % every == 0:
        save()
    if stop:
        save()
        sys.exit(0)
    time.sleep(nap)
with open(os.path.join(out, "final.txt"), "w") as f:
    f.write(marker + "\n" + " ".join(x.hex() for x in w) + "\n")
EOF
# reads the restored output back and writes only the final weights' digest
cat >"$T/digest.py" <<'EOF'
import hashlib, sys
import seclaunch_data as sd
data = open(sd.output_dir("model") + "/final.txt", "rb").read()
open(sys.argv[1], "w").write(hashlib.sha256(data).hexdigest() + "\n")
EOF
cat >"$T/big.py" <<'EOF'
import os, sys
import seclaunch_data as sd
with open(sd.output_dir("big") + "/blob", "wb") as f:
    mark = sys.argv[1][::-1]
    f.write((mark + "\n").encode() * (2 * 1024 * 1024 // (len(mark) + 1) + 1))
EOF

check "audit checkpoint key" 0 "$SL" audit keygen --secret-key "$T/audit.key" --public-key "$T/audit.pub"
RUN=(--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --stage host
	--region gcp:europe-west4 --audit-log "$AUDIT" --audit-key "$T/audit.key"
	--env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1)
ev_count() { grep -c "\"event\":\"$1\"" "$AUDIT"; }
ev_has() { grep "\"event\":\"$1\"" "$AUDIT" | grep -q -- "$2"; }

# ---- a denied destination: exit 4 before the job, nothing written ----------
check_err "output to a folder the policy does not list: exit 4" 4 "denies output model" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/elsewhere" "$T/in.sld" -- \
	"$PY" -c "open('$T/denied.started', 'w')"
assert "denied: the job never started" test ! -e "$T/denied.started"
assert "denied: nothing written at the destination" test ! -e "$T/elsewhere"
assert "denied: audited" ev_has run.preflight '"decision":"deny"'

# ---- the KMS is the authority: a key the policy names but the KMS lacks -----------
check_err "the KMS refuses an output key it does not hold: exit 4, its reason shown" 4 "key_unknown" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "ghost=$T/dest_ghost" "$T/in.sld" -- \
	"$PY" -c "open('$T/ghost.started', 'w')"
assert "KMS refusal: the job never started" test ! -e "$T/ghost.started"
assert "KMS refusal: nothing written at the destination" test ! -e "$T/dest_ghost"
assert "KMS refusal: seclaunchd audited the denial with the destination" \
	grep -q "\"event\":\"kms.release\".*\"decision\":\"deny\".*file://$T/dest_ghost/" "$KMS_STATE/audit.log"
assert "KMS refusal: the run audited it" ev_has run.release '"decision":"deny"'
check_err "a disabled key gives no output key: exit 4, key_disabled shown" 4 "key_disabled" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "off=$T/dest_off" "$T/in.sld" -- \
	"$PY" -c "open('$T/off.started', 'w')"
assert "disabled key: the job never started, nothing written" \
	test ! -e "$T/off.started" -a ! -e "$T/dest_off"

# ---- an uninterrupted run ---------------------------------------------------
check "uninterrupted run: 40 steps, a checkpoint every 10" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_full" "$T/in.sld" -- \
	"$PY" "$T/train.py" 40 10 0 "$RMARK" "$T/prog_full"
assert "four checkpoints and the final seal: LATEST is 5" grep -qx 5 "$T/dest_full/LATEST"
assert "each checkpoint is a sharded dataset" test -f "$T/dest_full/ckpt-00000003/manifest.sldm"
assert "the KMS audited the output key with its destination" \
	grep -q "\"event\":\"kms.release\".*file://$T/dest_full/" "$KMS_STATE/audit.log"
# privilege separation: the output keys were made and sealed in the key
# process; seclaunchd's network process never held one
if [ "$(id -u)" -eq 0 ] && [ -z "${ASAN_OPTIONS:-}" ] && python3 -c 'import cryptography' 2>/dev/null; then
	"$SL" inspect "$T/dest_full/ckpt-00000003" >"$T/ckpt3.json"
	check "no output DEK (nor KEK, nor master key) in seclaunchd's network process" 0 \
		python3 "$SL_ROOT/tests/integration/kms_memscan.py" "$KMS_STATE" "$T/ckpt3.json" "$KMS_PID" none
else
	skip "no output DEK in seclaunchd's network process" \
		"the memory scan needs root, python3-cryptography and a build without AddressSanitizer"
fi
check "read the final weights back (resume)" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_full" --output "model=$T/dest_full" -- \
	"$PY" "$T/digest.py" "$T/hash_full"

# ---- the helper's create(): whole files only, inside a declared output -----------
cat >"$T/create.py" <<'EOF'
import os, sys
import seclaunch_data as sd
mark = sys.argv[1][::-1].encode()
final = os.path.join(sd.output_dir("model"), "sub", "weights.bin")
with open(os.path.join(sd.output_dir("model"), "first.txt"), "wb") as f0:
    f0.write(mark)  # so that checkpoint 1 has something to seal
f = sd.create("model", "sub/weights.bin")
f.write(mark * 1000)
f.flush()
assert not os.path.exists(final), "visible before close"
sd.checkpoint()  # checkpoint 1: taken while the file is open
f.close()
assert open(final, "rb").read() == mark * 1000
try:
    with sd.create("model", "half.bin") as g:
        g.write(mark)
        raise KeyError("the job failed mid-write")
except KeyError:
    pass
assert not os.path.exists(os.path.join(sd.output_dir("model"), "half.bin")), "half.bin kept"
for bad in ["../escape", "/abs", "a/../b", "a//b", "", "."]:
    try:
        sd.create("model", bad)
        sys.exit("path accepted: %r" % bad)
    except sd.SeclaunchDataError:
        pass
try:
    sd.create("nosuch", "x")
    sys.exit("an undeclared output accepted")
except sd.SeclaunchDataError as e:
    assert "not declared" in str(e), str(e)
left = [e for e in os.listdir(sd.output_dir()) if e.startswith(".seclaunch-partial")]
assert not left, left
print("create-ok")
EOF
ck_holds() { "$SL" inspect "$T/dest_create/ckpt-0000000$1" | grep -q 'sub/weights.bin'; }
check "create(): whole files in the output; a failed write, escaping paths, an undeclared output refused" \
	0 "$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_create" -- \
	"$PY" "$T/create.py" "$RMARK"
assert "create(): the job's checks all ran" grep -qx create-ok "$T/out"
ck_first() { "$SL" inspect "$T/dest_create/ckpt-00000001" | grep -q 'first.txt'; }
assert "create(): checkpoint 1 was sealed while the file was open" ck_first
assert "create(): checkpoint 1, taken while the file was open, does not hold it" \
	eval '! ck_holds 1'
assert "create(): the final seal holds it" ck_holds 2
check "create(): read back by a resumed run on TPM B" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_create" --output "model=$T/dest_create" -- \
	"$PY" -c "import os, sys, seclaunch_data as sd; d = sd.output_dir('model')
assert open(d + '/sub/weights.bin', 'rb').read() == sys.argv[1][::-1].encode() * 1000
assert not os.path.exists(d + '/half.bin')" "$RMARK"

# ---- strays: files beside the outputs are named, never lost in silence -------
check_err "a job that writes only beside its output (model.bin, not model/model.bin): exit 2" 2 \
	"model.bin is outside every output \(model\): not sealed" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_stray" -- \
	"$PY" -c "import os; d = os.environ['SECLAUNCH_OUTPUT_DIR']; open(d + '/model.bin', 'w').write('w'); os.mkdir(d + '/extra'); open(d + '/extra/x', 'w').write('x'); open(d + '/.seclaunch-mine', 'w').write('h')"
assert "strays: the undeclared folder is named too" grep -q "extra/ is outside every output (model)" "$T/err"
assert "strays: seclaunch's own hidden files are not strays" bash -c "! grep -q '.seclaunch-mine' '$T/err'"
assert "strays: nothing sealed" test ! -e "$T/dest_stray/LATEST"
assert "strays: the run.output record names them" \
	ev_has run.output '"stage":"strays".*"model.bin is outside every output (model): not sealed"'
check_err "strays beside an output that sealed: named, exit 0" 0 \
	"model.bin is outside every output \(model\): not sealed" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_stray2" -- \
	"$PY" -c "import os; d = os.environ['SECLAUNCH_OUTPUT_DIR']; open(d + '/model.bin', 'w').write('w'); open(d + '/model/ok.bin', 'w').write('ok')"
assert "... and the declared output was sealed" grep -qx 1 "$T/dest_stray2/LATEST"
check "a job that writes nothing at all still exits 0" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_stray3" -- true
assert "... without a word about strays" bash -c "! grep -q 'outside every output' '$T/err'"

# ---- file:///PATH/ is the folder PATH, for the policy too ------------------------
check "--output model=file:///DIR/ (the policy lists file://\$T/dest*): exit 0" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=file://$T/dest_url/" -- \
	"$PY" -c "import os, seclaunch_data as sd; open(os.path.join(sd.output_dir('model'), 'w.bin'), 'w').write('url')"
assert "file:// DEST: sealed into the folder" grep -qx 1 "$T/dest_url/LATEST"
assert "file:// DEST: audited as the same destination a folder is" \
	ev_has run.output "\"destination\":\"file://$T/dest_url/\".*\"sequence\":1"
check "--resume model=file:///DIR/ reads it back" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=file://$T/dest_url/" --output "model=$T/dest_url" -- \
	"$PY" -c "import os, sys, seclaunch_data as sd; sys.exit(open(os.path.join(sd.output_dir('model'), 'w.bin')).read() != 'url')"
# a --resume SOURCE the job's user cannot read (root-only checkpoints) is not
# read for it by root: refused before any KMS request, naming the user
mkdir -m 0700 "$T/vault"
cp -r "$T/dest_url" "$T/vault/ck"
chmod 0711 "$T"
rel_before=$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")
check_err "--user nobody --resume of a root-only folder: exit 2, its user cannot read it" 2 \
	"$T/vault/ck/?: cannot open: the job's user nobody .*cannot read it" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --user nobody --resume "model=$T/vault/ck" \
	--output "model=$T/dest_url" -- true
assert "... nothing was asked of the KMS" \
	test "$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")" = "$rel_before"
chmod 0700 "$T"
check_err "a file:// DEST of another host: exit 1" 1 "a folder of this machine" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=file://elsewhere$T/dest_url/" -- true
check_err "a file:// DEST outside the policy's folders is denied like the folder: exit 4" 4 "denies output model" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=file://$T/elsewhere/" -- true

# ---- checkpoints by SIGUSR2, preempted by GCE, resumed on TPM B ----------------
rm -f "$T/flip" "$T/prog_pre"
"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest" \
	--preempt-watch "gce=http://127.0.0.1:$META_PORT" --preempt-grace 10 "$T/in.sld" -- \
	"$PY" "$T/train.py" 40 10 0.05 "$RMARK" "$T/prog_pre" signal >"$T/pre.out" 2>"$T/pre.err" &
RUNPID=$!
for ((i = 0; i < 400; i++)); do
	[ "$(wc -l 2>/dev/null <"$T/prog_pre")" -ge 1 ] 2>/dev/null && break
	sleep 0.05
done
touch "$T/flip"
wait "$RUNPID"
rc=$?
if [ "$rc" -eq 143 ]; then _pass "GCE preemption: outputs saved, exit 143"; else
	_fail "GCE preemption: exit $rc (want 143)"; sed 's/^/    /' "$T/pre.err" | tail -5; fi
assert "preemption audited with what was saved" ev_has run.preempted '"notice":"gce"'
assert "the job was preempted before the end" test "$(tail -n1 "$T/prog_pre")" -lt 40
SEQ_PRE=$(cat "$T/dest/LATEST")
check "resume on TPM B and finish" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest" --output "model=$T/dest" "$T/in.sld" -- \
	"$PY" "$T/train.py" 40 10 0 "$RMARK" "$T/prog_res"
assert "resume audited" ev_has run.resume "\"sequence\":$SEQ_PRE"
check "read the resumed run's final weights back" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --resume "model=$T/dest" --output "model=$T/dest" -- \
	"$PY" "$T/digest.py" "$T/hash_res"
assert "final weights bit-identical to the uninterrupted run's" cmp -s "$T/hash_full" "$T/hash_res"

# ---- SIGTERM from the platform (--preempt-watch sigterm) -------------------
rm -f "$T/prog_term"
"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_term" --preempt-watch sigterm "$T/in.sld" -- \
	"$PY" "$T/train.py" 400 10 0.02 "$RMARK" "$T/prog_term" >"$T/term.out" 2>"$T/term.err" &
RUNPID=$!
for ((i = 0; i < 400; i++)); do
	[ "$(wc -l 2>/dev/null <"$T/prog_term")" -ge 1 ] 2>/dev/null && break
	sleep 0.05
done
kill -TERM "$RUNPID"
wait "$RUNPID"
rc=$?
if [ "$rc" -eq 143 ]; then _pass "SIGTERM to seclaunch: forwarded, outputs sealed, exit 143"; else
	_fail "SIGTERM to seclaunch: exit $rc (want 143)"; sed 's/^/    /' "$T/term.err" | tail -5; fi
assert "SIGTERM preemption audited" ev_has run.preempted '"notice":"sigterm"'
assert "the last line gives the run's exit 143 beside the job's own, not the job's alone" \
	grep -Eqx 'seclaunch run: job exited [0-9]+; seclaunch exits 143 \(preempted, outputs sealed\); data and keys wiped' \
	<(tail -n 1 "$T/term.err")
assert "the job's last state was sealed on SIGTERM" test "$(cat "$T/dest_term/LATEST")" -ge 2

# ---- AWS notice, to the HTTPS store -------------------------------------------
rm -f "$T/flip" "$T/prog_aws"
REM=(--ca-file "$T/ca.pem" --output "model=$STORE/ok/run1/")
"$SL" run "${RUN[@]}" --tcti "$TCTI_A" "${REM[@]}" \
	--preempt-watch "aws=http://127.0.0.1:$META_PORT" --preempt-signal TERM "$T/in.sld" -- \
	"$PY" "$T/train.py" 400 10 0.02 "$RMARK" "$T/prog_aws" >"$T/aws.out" 2>"$T/aws.err" &
RUNPID=$!
for ((i = 0; i < 400; i++)); do
	[ "$(wc -l 2>/dev/null <"$T/prog_aws")" -ge 1 ] 2>/dev/null && break
	sleep 0.05
done
touch "$T/flip"
wait "$RUNPID"
rc=$?
if [ "$rc" -eq 143 ]; then _pass "AWS spot notice: sealed and uploaded, exit 143"; else
	_fail "AWS spot notice: exit $rc (want 143)"; sed 's/^/    /' "$T/aws.err" | tail -5; fi
rm -f "$T/flip"
assert "the store holds LATEST and its manifest" \
	test -f "$T/store/ok/run1/ckpt-$(printf %08d "$(cat "$T/store/ok/run1/LATEST")")/manifest.sldm"
check "resume from the HTTPS store" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --ca-file "$T/ca.pem" --resume "model=$STORE/ok/run1/" \
	--output "model=$STORE/ok/run1/" -- "$PY" -c "import seclaunch_data as sd, os; assert os.path.exists(sd.output_dir('model') + '/state.json')"

# ---- S3 (s3rver: SigV4 PUTs of shards, manifest, LATEST; read back) -------------
# s3rver checks the access key id only, never the signature: a wrong secret
# cannot be tested with it. Started by the test library's start_s3rver when it
# has one, or from $S3RVER_BIN; skipped otherwise.
S3OK=
if declare -F start_s3rver >/dev/null; then
	start_s3rver "$T/s3data" "$T" bkt && S3OK=1
elif [ -n "${S3RVER_BIN:-}" ] && [ -x "$S3RVER_BIN" ]; then
	S3RVER_PORT=$(free_port)
	mkdir -p "$T/s3data"
	"$S3RVER_BIN" -d "$T/s3data" -a 127.0.0.1 -p "$S3RVER_PORT" -s --no-vhost-buckets \
		--key "$T/srv.key" --cert "$T/srv.pem" --configure-bucket bkt >"$T/s3.log" 2>&1 &
	_PIDS+=($!)
	wait_port "$S3RVER_PORT" 10 && S3OK=1
fi
if [ -n "$S3OK" ]; then
	S3A=(--ca-file "$T/ca.pem" --s3-endpoint "https://127.0.0.1:$S3RVER_PORT")
	check "s3: sealed and uploaded to s3://bkt/run/ (SigV4)" 0 \
		env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER "$SL" run "${RUN[@]}" --tcti "$TCTI_A" \
		"${S3A[@]}" --output "model=s3://bkt/run/" -- "$PY" "$T/train.py" 20 10 0 "$RMARK" "$T/prog_s3"
	check "s3: resumed from s3://bkt/run/ on TPM B" 0 \
		env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER "$SL" run "${RUN[@]}" --tcti "$TCTI_B" \
		"${S3A[@]}" --resume "model=s3://bkt/run/" --output "model=s3://bkt/run/" -- \
		"$PY" -c "import json, seclaunch_data as sd; assert json.load(open(sd.output_dir('model') + '/state.json'))['step'] == 20"
	check_err "s3: an unknown access key id is refused (exit 5)" 5 "403|refused|denied" \
		env AWS_ACCESS_KEY_ID=NOBODY AWS_SECRET_ACCESS_KEY=x "$SL" run "${RUN[@]}" --tcti "$TCTI_A" \
		"${S3A[@]}" --output "model=s3://bkt/run2/" -- "$PY" "$T/train.py" 10 10 0 "$RMARK" "$T/prog_s3b"
else
	skip "s3 cases" "no s3rver (S3RVER_BIN or the test library's start_s3rver)"
fi

# ---- an upload failing mid-way: retried, then never presented as complete -----
echo "2 manifest.sldm" >"$T/fail"
check "two 503s on the manifest are retried" 0 \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --ca-file "$T/ca.pem" --output "model=$STORE/ok/run2/" -- \
	"$PY" "$T/train.py" 10 10 0 "$RMARK" "$T/prog_r2"
assert "retried upload completed" grep -qx 2 "$T/store/ok/run2/LATEST"
echo "100 manifest.sldm" >"$T/fail"
check_err "an upload that keeps failing: exit 5" 5 "manifest.sldm" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --ca-file "$T/ca.pem" --output "model=$STORE/ok/run3/" -- \
	"$PY" "$T/train.py" 10 10 0 "$RMARK" "$T/prog_r3"
rm -f "$T/fail"
assert "failed upload: no LATEST, so no checkpoint is presented as complete" test ! -e "$T/store/ok/run3/LATEST"
assert "failed upload audited" ev_has run.output '"error":"SL_E_REMOTE_UNREACHABLE"'

# ---- a long upload to a slow store is not a stall ----------------------------------
# 36 MiB read at about 3 MiB/s takes 12 s, past a 4 s stall timeout: the
# bytes going up count as progress (they once did not, and the PUT was cut
# off). 4 s leaves room for the socket buffers' tail, which the store drains
# after the last byte has left seclaunch.
touch "$T/fail.slow"
cat >"$T/bigrand.py" <<'EOP'
import os, seclaunch_data as sd
with open(sd.output_dir("model") + "/weights.bin", "wb") as f:
    f.write(os.urandom(36 << 20))
EOP
check "a 36 MiB upload to a slow store outlives a 4 s stall timeout (progress is bytes sent)" 0 \
	env SECLAUNCH_REMOTE_STALL_S=4 "$SL" run "${RUN[@]}" --tcti "$TCTI_A" --ca-file "$T/ca.pem" \
	--output "model=$STORE/ok/slow/" -- "$PY" "$T/bigrand.py"
rm -f "$T/fail.slow"
assert "the slow upload completed" grep -qx 1 "$T/store/ok/slow/LATEST"

# ---- tampered checkpoints -------------------------------------------------------
N=$(cat "$T/dest/LATEST")
CK=$(printf 'ckpt-%08d' "$N")
cp -r "$T/dest" "$T/dest_flip"
F="$T/dest_flip/$CK/shard-00000.sld"
flip "$F" "$F.x" $(($(stat -c %s "$F") - 20)) 0x01 && mv "$F.x" "$F"
check_err "a flipped bit in the newest checkpoint: exit 6" 6 "shard|integrity|header" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_flip" --output "model=$T/dest_flip" -- true
assert "flipped bit audited" ev_has run.resume '"decision":"error"'
cp -r "$T/dest" "$T/dest_swap"
cp "$T/dest_full/ckpt-00000001/shard-00000.sld" "$T/dest_swap/$CK/shard-00000.sld"
check_err "a shard from another run: exit 6" 6 "shard" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_swap" --output "model=$T/dest_swap" -- true
cp -r "$T/dest" "$T/dest_old"
PREV=$(printf 'ckpt-%08d' $((N - 1)))
rm -rf "$T/dest_old/$CK"
cp -r "$T/dest_old/$PREV" "$T/dest_old/$CK"
check_err "an older checkpoint presented as the newest: exit 6" 6 "older checkpoint" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_old" --output "model=$T/dest_old" -- true
cp "$T/dest/LATEST" "$T/latest.save"
echo $((N - 1)) >"$T/dest/LATEST"
check_err "LATEST rolled back below what the audit log recorded: exit 6" 6 "rollback" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest" --output "model=$T/dest" -- true
cp "$T/latest.save" "$T/dest/LATEST"

# ---- without a private mount namespace: a folder in /dev/shm, said so -------------
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	check_err "no namespace: the output folder is in the shared tmpfs, and seclaunch says so" 0 \
		"shared tmpfs /dev/shm" \
		env SECLAUNCH_OUTPUT_NO_NAMESPACE=1 "$SL" run "${RUN[@]}" --tcti "$TCTI_A" \
		--output "model=$T/dest_shm" -- "$PY" "$T/train.py" 10 10 0 "$RMARK" "$T/prog_shm"
	SHMDIR=$(sed -n 's|^seclaunch run: outputs in \(/[^ ]*\) .*|\1|p' "$T/err")
	assert "no namespace: sealed all the same" grep -qx 2 "$T/dest_shm/LATEST"
	assert "no namespace: the folder was in /dev/shm" test "${SHMDIR#/dev/shm/seclaunch-out.}" != "$SHMDIR"
	assert "no namespace: the folder is gone afterwards" test ! -e "$SHMDIR"
	assert "no namespace: audited" ev_has run.output 'shared tmpfs /dev/shm'
else
	skip "no namespace" "/dev/shm is not a tmpfs here"
fi

# ---- over --output-limit ------------------------------------------------------------
check_err "a job over --output-limit: exit 2, nothing sealed" 2 "output-limit" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output-limit 1M --output "big=$T/dest_big" -- \
	"$PY" "$T/big.py" "$RMARK"
assert "over the limit: no checkpoint" test ! -e "$T/dest_big/LATEST"
assert "over the limit audited" ev_has run.output '"error":"SL_E_TOO_LARGE"'

# ---- PyTorch (Debian's python3-torch): preempted, resumed on TPM B, bit-identical ----
TORCHPY=
for cand in /usr/bin/python3 "$PY"; do
	if "$cand" -c "import torch" 2>/dev/null; then TORCHPY=$cand; break; fi
done
if [ -z "$TORCHPY" ]; then
	skip "pytorch end to end" "no python3 with torch (Debian: python3-torch)"
else
	cat >"$T/torch_train.py" <<'EOF'
import hashlib, os, signal, sys
import torch
import seclaunch_data as sd
steps, every, marker, prog = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3][::-1], sys.argv[4]
torch.manual_seed(7)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
out = sd.output_dir("model")
ck = os.path.join(out, "ckpt.pt")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
step = 0
if os.path.exists(ck):
    st = torch.load(ck)
    model.load_state_dict(st["model"]); opt.load_state_dict(st["opt"]); step = st["step"]
stop = []
signal.signal(signal.SIGUSR1, lambda *a: stop.append(1))
w_true = torch.linspace(-1, 1, 16).unsqueeze(1)
def save():
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "note": marker}, ck + ".tmp")
    os.rename(ck + ".tmp", ck)
    sd.checkpoint()
    with open(prog, "a") as f:
        f.write("%d\n" % step)
while step < steps:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(64, 16, generator=g)
    y = torch.sin(x @ w_true)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    step += 1
    if step % every == 0 or stop:
        save()
        if stop:
            sys.exit(0)
torch.save({"model": model.state_dict(), "note": marker}, os.path.join(out, "final.pt"))
EOF
	cat >"$T/torch_digest.py" <<'EOF'
import hashlib, sys
import torch
import seclaunch_data as sd
st = torch.load(sd.output_dir("model") + "/final.pt")["model"]
h = hashlib.sha256()
for k in sorted(st):
    h.update(k.encode()); h.update(st[k].contiguous().numpy().tobytes())
open(sys.argv[1], "w").write(h.hexdigest() + "\n")
EOF
	TRUN=(--env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1)
	check "pytorch: uninterrupted run, 300 steps, a checkpoint every 50" 0 \
		"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_torch_full" "$T/in.sld" -- \
		"$TORCHPY" "$T/torch_train.py" 300 50 "$RMARK" "$T/tprog_full"
	check "pytorch: read the uninterrupted weights back" 0 \
		"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_torch_full" --output "model=$T/dest_torch_full" -- \
		"$TORCHPY" "$T/torch_digest.py" "$T/thash_full"
	rm -f "$T/flip" "$T/tprog_pre"
	"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --output "model=$T/dest_torch" --preempt-signal USR1 \
		--preempt-watch "gce=http://127.0.0.1:$META_PORT" "$T/in.sld" -- \
		"$TORCHPY" "$T/torch_train.py" 100000 50 "$RMARK" "$T/tprog_pre" >"$T/tpre.out" 2>"$T/tpre.err" &
	RUNPID=$!
	for ((i = 0; i < 1200; i++)); do
		[ "$(wc -l 2>/dev/null <"$T/tprog_pre")" -ge 1 ] 2>/dev/null && break
		sleep 0.05
	done
	touch "$T/flip"
	wait "$RUNPID"
	rc=$?
	rm -f "$T/flip"
	if [ "$rc" -eq 143 ]; then _pass "pytorch: preempted (SIGUSR1 to the job), saved, exit 143"; else
		_fail "pytorch: preempted run exit $rc (want 143)"; sed 's/^/    /' "$T/tpre.err" | tail -5; fi
	# the preempted run stopped somewhere; finish the same 300 steps from there
	check "pytorch: resume on TPM B and finish" 0 \
		"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --resume "model=$T/dest_torch" --output "model=$T/dest_torch" "$T/in.sld" -- \
		"$TORCHPY" "$T/torch_train.py" 300 50 "$RMARK" "$T/tprog_res"
	check "pytorch: read the resumed weights back" 0 \
		"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --resume "model=$T/dest_torch" --output "model=$T/dest_torch" -- \
		"$TORCHPY" "$T/torch_digest.py" "$T/thash_res"
	assert "pytorch: preempted before step 300" test "$(tail -n1 "$T/tprog_pre")" -lt 300
	assert "pytorch: final weights bit-identical to the uninterrupted run's" cmp -s "$T/thash_full" "$T/thash_res"
fi

# ---- no plaintext on disk -----------------------------------------------------------
assert "no output plaintext (marker) in any file under the test folder or /tmp" no_marker_anywhere
check "the audit log verifies" 0 "$SL" audit verify --pubkey "$T/audit.pub" "$AUDIT"
finish
