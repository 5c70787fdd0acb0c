#!/usr/bin/env bash
# Sealed outputs: (1) sealing throughput of `seclaunch encrypt` (the code a
# checkpoint goes through: sharded, AEAD chunks, parallel) of 1 GiB into a
# tmpfs against openssl speed -evp aes-256-gcm (one core x threads, and all
# cores at once), and into a folder on disk against dd conv=fsync of the same
# size; (2) preemption: GCE notice -> job signalled -> a 1 GiB checkpoint
# sealed and PUT to a local HTTPS store -> seclaunch exits, in seconds and as
# a fraction of GCE's 30 s. Prints figures; asserts nothing.
# SL_BENCH_OUT_MB overrides the 1024 MiB size.
set -uo pipefail
ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SL_BIN:-$ROOT/bin}
SL=$BIN/seclaunch
SLD=$BIN/seclaunchd
SL_ROOT=$ROOT SL_BIN=$BIN
. "$ROOT/tests/integration/lib.sh"
W=$T
MB=${SL_BENCH_OUT_MB:-1024}
THREADS=$(nproc)
die() {
	echo "70-outputs: $*" >&2
	exit 1
}
for t in swtpm openssl python3 minisign; do
	command -v "$t" >/dev/null || die "$t not installed"
done
SHM=/dev/shm
[ "$(stat -f -c %T "$SHM" 2>/dev/null)" = tmpfs ] || die "/dev/shm is not a tmpfs"
DISK=$(mktemp -d "${SL_BENCH_TMP:-/var/tmp}/sl-bench-out.XXXXXX")
S=$(mktemp -d "$SHM/sl-bench-out.XXXXXX")
_cleanup_more() { rm -rf "$DISK" "$S"; }
trap '_cleanup_more; _cleanup' EXIT
now() { date +%s%N; }

# ---- (1) sealing throughput ------------------------------------------------
mkdir -p "$S/in"
head -c $((MB << 20)) /dev/urandom >"$S/in/ckpt.bin"
bytes=$((MB << 20))
"$SL" keygen -q -o "$S/key"
t0=$(now)
"$SL" encrypt -q --key-file "$S/key" --dataset-id model:bench "$S/in" -o "$S/sealed" || die "encrypt to tmpfs"
t1=$(now)
rm -rf "$S/sealed"
t2=$(now)
"$SL" encrypt -q --key-file "$S/key" --dataset-id model:bench "$S/in" -o "$DISK/sealed" || die "encrypt to disk"
sync -f "$DISK" 2>/dev/null
t3=$(now)
rm -rf "$DISK/sealed"
t4=$(now)
dd if="$S/in/ckpt.bin" of="$DISK/dd.bin" bs=4M conv=fsync status=none
t5=$(now)
rm -f "$DISK/dd.bin"
# the tmpfs's own ceiling: a plain copy into it (page allocation + copy)
t6=$(now)
dd if="$S/in/ckpt.bin" of="$S/dd.bin" bs=4M status=none
t7=$(now)
rm -f "$S/dd.bin"
openssl speed -evp aes-256-gcm -bytes 16384 -seconds 3 2>/dev/null >"$W/speed1"
openssl speed -evp aes-256-gcm -bytes 16384 -seconds 3 -multi "$THREADS" 2>/dev/null >"$W/speedN"
python3 - "$bytes" "$THREADS" "$((t1 - t0))" "$((t3 - t2))" "$((t5 - t4))" "$W/speed1" "$W/speedN" "$(stat -f -c %T "$DISK")" "$((t7 - t6))" <<'PY'
import re, sys
n, th, tmpfs_ns, disk_ns, dd_ns = (int(x) for x in sys.argv[1:6])
ddshm_ns = int(sys.argv[9])
def rate(path):  # bytes/s of the 16384-byte column
    for line in open(path):
        if line.lower().startswith("aes-256-gcm"):
            return float(re.findall(r"([\d.]+)k", line)[-1]) * 1000
    return float("nan")
one, multi = rate(sys.argv[6]), rate(sys.argv[7])
g = lambda ns: n / (ns / 1e9) / 1e9
print("seal to tmpfs : %.3f GB/s   (%.2f s for %d MiB)" % (g(tmpfs_ns), tmpfs_ns / 1e9, n >> 20))
print("openssl 1 core: %.3f GB/s; x %d threads = %.3f GB/s; all cores at once %.3f GB/s"
      % (one / 1e9, th, one * th / 1e9, multi / 1e9))
print("  ratio tmpfs / (1 core x threads) = %.2f (goal >= 0.8); / all cores at once = %.2f"
      % (g(tmpfs_ns) * 1e9 / (one * th), g(tmpfs_ns) * 1e9 / multi))
print("dd into tmpfs : %.3f GB/s (the tmpfs's own ceiling); ratio seal / dd = %.2f"
      % (g(ddshm_ns), g(tmpfs_ns) / g(ddshm_ns)))
print("seal to disk  : %.3f GB/s (%s; includes the fsyncs of the atomic write)" % (g(disk_ns), sys.argv[8]))
print("dd conv=fsync : %.3f GB/s" % g(dd_ns))
print("  ratio disk / dd = %.2f (goal >= 0.8)" % (g(disk_ns) / g(dd_ns)))
PY
rm -rf "$S/in"

# ---- (2) preemption notice -> exit, 1 GiB to a local HTTPS store -------------
start_swtpm tpm || die "swtpm did not start"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$W/srv.key" -out "$W/srv.pem" >/dev/null 2>&1 ||
	die "test certificate"
cat >"$W/store.py" <<'EOF'
import http.server, os, ssl, sys
root, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_PUT(self):
        n, p = int(self.headers["Content-Length"]), os.path.join(root, self.path.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            while n > 0:
                b = self.rfile.read(min(n, 1 << 20)); f.write(b); n -= len(b)
        self.send_response(201); self.send_header("Content-Length", "0"); self.end_headers()
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
cat >"$W/meta.py" <<'EOF'
import http.server, os, sys, time
port, flip = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if "wait_for_change" in self.path:
            end = time.time() + 5
            while time.time() < end and not os.path.exists(flip): time.sleep(0.01)
        body = b"TRUE" if os.path.exists(flip) else b"FALSE"
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
SP=$(free_port)
MP=$(free_port)
mkdir -p "$DISK/store"
python3 "$W/store.py" "$DISK/store" "$SP" "$W/srv.pem" "$W/srv.key" &
_PIDS+=($!)
python3 "$W/meta.py" "$MP" "$W/flip" &
_PIDS+=($!)
wait_port "$SP" 10 && wait_port "$MP" 10 || die "store or metadata server"
minisign -G -W -p "$W/p.pub" -s "$W/p.key" >/dev/null 2>&1
cat >"$W/policy.json" <<EOF
{"version": 1, "allow_unverified_region": true, "keys": {"ckpt": ["model:*"]},
 "datasets": [{"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "output_destinations": [{"url": "https://127.0.0.1:$SP/*", "region": "gcp:europe-west4"}]}]}
EOF
minisign -S -s "$W/p.key" -m "$W/policy.json" >/dev/null 2>&1
start_kms "$W/kms" --policy "$W/policy.json" --policy-pubkey "$W/p.pub" || die "seclaunchd"
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${K[@]}" >/dev/null 2>&1 || die "enroll"
"$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id ckpt >/dev/null 2>&1 || die "key create"
# the job writes MB MiB into its output folder, says so, and exits on SIGTERM
cat >"$W/job.py" <<'EOF'
import os, signal, sys, time
out = os.environ["SECLAUNCH_OUTPUT_DIR"] + "/model"
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
with open(out + "/ckpt.bin", "wb") as f:
    chunk = os.urandom(1 << 20)
    for _ in range(int(sys.argv[1])):
        f.write(chunk)
open(sys.argv[2], "w").close()
while True:
    time.sleep(1)
EOF
rm -f "$W/flip" "$W/ready"
"$SL" run --policy "$W/policy.json" --policy-pubkey "$W/p.pub" "${K[@]}" --stage host \
	--region gcp:europe-west4 --audit-log "$W/audit.log" -q --ca-file "$W/srv.pem" \
	--output "model=https://127.0.0.1:$SP/run/" --preempt-watch "gce=http://127.0.0.1:$MP" -- \
	python3 "$W/job.py" "$MB" "$W/ready" &
RP=$!
for ((i = 0; i < 6000; i++)); do [ -e "$W/ready" ] && break; sleep 0.05; done
[ -e "$W/ready" ] || die "the job did not write its checkpoint"
t0=$(now)
touch "$W/flip"
wait "$RP"
rc=$?
t1=$(now)
python3 - "$((t1 - t0))" "$rc" "$MB" <<'PY'
import sys
ns, rc, mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print("preemption: notice -> job signalled -> %d MiB sealed and PUT over TLS -> exit %d: %.2f s"
      " (%.0f%% of GCE's 30 s)" % (mb, rc, ns / 1e9, ns / 1e9 / 30 * 100))
PY
grep -o '"notice_to_sealed_s":[0-9.]*' "$W/audit.log" | tail -1
