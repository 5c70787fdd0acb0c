#!/usr/bin/env bash
# Sealed outputs: (1) sealing throughput of `seclaunch encrypt` (the code a
# checkpoint goes through: sharded, AEAD chunks, parallel) of 1 GiB to
# /dev/null and into a tmpfs against openssl speed -evp aes-256-gcm (one core
# x threads, and all cores at once) and against dd into the same tmpfs, and
# into a folder on disk against dd conv=fsync of the same size, with the
# CPU split (user: the AEAD; system: the kernel's copies and page
# allocation) that says where the time goes; (2) preemption: GCE notice ->
# job signalled -> a 1 GiB checkpoint sealed and PUT to the local
# S3-compatible server (s3rver; a Python HTTPS store when s3rver cannot be
# installed) -> seclaunch exits, in seconds and as a fraction of GCE's 30 s,
# and against one curl PUT of as many bytes, timed before the run and
# after it (goal <= 1.0x); (3) with s3rver,
# one 256 MiB object (a checkpoint shard) put by sl_remote_put as a
# multipart upload (32 MiB parts 4 at once, 64 MiB parts 2 at once), as one
# PUT (what sl_remote_put does below SECLAUNCH_REMOTE_MULTIPART_MIN), and by
# curl, one PUT and the same multipart upload made of parallel curl part
# PUTs (the server's own cost of parts, apart from ours), each with
# s3rver's CPU seconds. Prints figures; asserts nothing.
# SL_BENCH_OUT_MB overrides the 1024 MiB size; SL_BENCH_OUT_PARTS picks
# parts (default "seal preempt upload").
set -uo pipefail
. "$(dirname "$0")/lib.bash"
MB=${SL_BENCH_OUT_MB:-1024}
THREADS=$(nproc)
need_tools swtpm openssl python3 minisign
SHM=/dev/shm
[ "$(stat -f -c %T "$SHM" 2>/dev/null)" = tmpfs ] || die "/dev/shm is not a tmpfs"
DISK=$(mktemp -d "${SL_BENCH_TMP:-/var/tmp}/sl-bench-out.XXXXXX")
S=$(mktemp -d "$SHM/sl-bench-out.XXXXXX")
_cleanup_more() { rm -rf "$DISK" "$S"; }
trap '_cleanup_more; _cleanup' EXIT
now() { date +%s%N; }

parts=" ${SL_BENCH_OUT_PARTS:-seal preempt upload} "
want() { [[ $parts == *" $1 "* ]]; }

# ---- (1) sealing throughput ------------------------------------------------
if want seal; then
mkdir -p "$S/in"
head -c $((MB << 20)) /dev/urandom >"$S/in/ckpt.bin"
bytes=$((MB << 20))
"$SL" keygen -q -o "$S/key"
# cpu CMD...: runs CMD; prints "WALL_NS USER_S SYS_S" (the CPU time of CMD
# and its children, from the subshell's `times`)
cpu() {
	local a b t
	a=$(now)
	t=$( (
		"$@" >&2 || exit 1
		times
	) | sed -n 2p) || return 1
	b=$(now)
	python3 -c 'import re, sys
m = [int(x) * 60 + float(y) for x, y in re.findall(r"(\d+)m([\d.]+)s", sys.argv[2])]
print(sys.argv[1], m[0], m[1])' "$((b - a))" "$t"
}
E=(encrypt -q --key-file "$S/key" --dataset-id model:bench)
to_null() { "$SL" "${E[@]}" "$S/in/ckpt.bin" -o - >/dev/null; }
to_disk() { "$SL" "${E[@]}" "$S/in" -o "$DISK/sealed" && sync -f "$DISK"; }
read -r null_ns null_u null_s < <(cpu to_null)
[ -n "${null_ns:-}" ] || die "encrypt to /dev/null"
read -r tmpfs_ns tmpfs_u tmpfs_s < <(cpu "$SL" "${E[@]}" "$S/in" -o "$S/sealed")
[ -n "${tmpfs_ns:-}" ] || die "encrypt to tmpfs"
rm -rf "$S/sealed"
sync
read -r disk_ns disk_u disk_s < <(cpu to_disk)
[ -n "${disk_ns:-}" ] || die "encrypt to disk"
rm -rf "$DISK/sealed"
sync
read -r dd_ns _ < <(cpu dd if="$S/in/ckpt.bin" of="$DISK/dd.bin" bs=4M conv=fsync status=none)
rm -f "$DISK/dd.bin"
# the tmpfs's own ceiling: a plain copy into it (page allocation + copy)
read -r ddshm_ns ddshm_u ddshm_s < <(cpu dd if="$S/in/ckpt.bin" of="$S/dd.bin" bs=4M status=none)
rm -f "$S/dd.bin"
openssl speed -evp aes-256-gcm -bytes 16384 -seconds 3 2>/dev/null >"$W/speed1"
openssl speed -evp aes-256-gcm -bytes 16384 -seconds 3 -multi "$THREADS" 2>/dev/null >"$W/speedN"
python3 - "$bytes" "$THREADS" "$W/speed1" "$W/speedN" "$(stat -f -c %T "$DISK")" \
	"$null_ns $null_u $null_s" "$tmpfs_ns $tmpfs_u $tmpfs_s" "$disk_ns $disk_u $disk_s" \
	"$dd_ns" "$ddshm_ns $ddshm_u $ddshm_s" <<'PY'
import re, sys
n, th = int(sys.argv[1]), int(sys.argv[2])
def rate(path):  # bytes/s of the 16384-byte column
    for line in open(path):
        if line.lower().startswith("aes-256-gcm"):
            return float(re.findall(r"([\d.]+)k", line)[-1]) * 1000
    return float("nan")
one, multi = rate(sys.argv[3]), rate(sys.argv[4])
fs = sys.argv[5]
null, tmpfs, disk, ddshm = ([float(x) for x in sys.argv[i].split()] for i in (6, 7, 8, 10))
dd_ns = float(sys.argv[9])
g = lambda ns: n / (ns / 1e9) / 1e9
lim = one * th
print("openssl 1 core: %.3f GB/s; x %d threads = %.3f GB/s; all cores at once %.3f GB/s"
      % (one / 1e9, th, lim / 1e9, multi / 1e9))
def line(what, v):
    ns, u, s = v
    print("%-14s: %.3f GB/s (%.2f s for %d MiB; CPU user %.2f s, system %.2f s)"
          % (what, g(ns), ns / 1e9, n >> 20, u, s))
line("seal to null", null)
print("  ratio /dev/null / (1 core x threads) = %.2f (goal >= 0.8); / all cores at once = %.2f"
      % (g(null[0]) * 1e9 / lim, g(null[0]) * 1e9 / multi))
line("seal to tmpfs", tmpfs)
print("  ratio tmpfs / (1 core x threads) = %.2f (goal >= 0.8); / all cores at once = %.2f"
      % (g(tmpfs[0]) * 1e9 / lim, g(tmpfs[0]) * 1e9 / multi))
line("dd into tmpfs", ddshm)
print("  (the tmpfs's own ceiling); ratio seal / dd = %.2f" % (g(tmpfs[0]) / g(ddshm[0])))
line("seal to disk", disk)
print("  (%s; each chunk written behind, one fsync per shard at the end)" % fs)
print("dd conv=fsync : %.3f GB/s" % g(dd_ns))
print("  ratio disk / dd = %.2f (goal >= 0.8)" % (g(disk[0]) / g(dd_ns)))
# where the time goes: the AEAD is the user time (libcrypto); the system
# time is the kernel reading the input (one copy) and, into a tmpfs, the
# copy and page allocation of the write, which dd pays as well
aead_s = n / one
print("CPU efficiency (AEAD CPU needed / CPU used, independent of other load): "
      "/dev/null %.2f, tmpfs %.2f, disk %.2f" % (aead_s / (null[1] + null[2]),
      aead_s / (tmpfs[1] + tmpfs[2]), aead_s / (disk[1] + disk[2])))
print("where the time goes (CPU seconds over all threads): the AEAD alone needs %.2f s "
      "(1 core at openssl's rate);" % aead_s)
print("  to /dev/null: user %.2f s (AEAD), system %.2f s (reading the input: one copy)"
      % (null[1], null[2]))
print("  to tmpfs:     user %.2f s, system %.2f s (read copy + write copy + tmpfs page "
      "allocation; dd alone: %.2f s)" % (tmpfs[1], tmpfs[2], ddshm[1] + ddshm[2]))
PY
rm -rf "$S/in"
fi

# ---- (2) preemption notice -> exit, 1 GiB to the local S3-compatible server ----
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
MP=$(free_port)
python3 "$W/meta.py" "$MP" "$W/flip" &
_PIDS+=($!)
# s3rver (SigV4 PUTs, as to S3), else the Python HTTPS store
if start_s3rver "$DISK/s3data" "$W" bkt 2>/dev/null; then
	STORE="s3rver"
	DEST="s3://bkt/run/"
	POLICY_URL="s3://bkt/*"
	STORE_ARGS=(--s3-endpoint "https://127.0.0.1:$S3RVER_PORT")
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
else
	echo "70-outputs: s3rver unavailable (${S3RVER_SKIP:-it did not start}); a Python HTTPS store instead" >&2
	SP=$(free_port)
	mkdir -p "$DISK/store"
	python3 "$W/store.py" "$DISK/store" "$SP" "$W/srv.pem" "$W/srv.key" &
	_PIDS+=($!)
	wait_port "$SP" 10 || die "store"
	STORE="a Python HTTPS store"
	DEST="https://127.0.0.1:$SP/run/"
	POLICY_URL="https://127.0.0.1:$SP/*"
	STORE_ARGS=()
fi
wait_port "$MP" 10 || die "metadata server"
minisign -G -W -p "$W/p.pub" -s "$W/p.key" >/dev/null 2>&1
cat >"$W/policy.json" <<EOF
{"version": 1, "allow_unverified_region": true, "keys": {"ckpt": ["model:*"]},
 "datasets": [{"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "output_destinations": [{"url": "$POLICY_URL", "region": "gcp:europe-west4"}]}]}
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
if want preempt; then
# the store's own ceiling: one curl PUT of as many bytes, nothing sealed;
# timed before the run and again after it (the run's upload follows the
# job's write of the checkpoint, with its writeback, so either alone is
# biased one way)
head -c $((MB << 20)) /dev/urandom >"$DISK/put.bin"
CURL=(curl -sf --cacert "$W/srv.pem" -T "$DISK/put.bin" -o /dev/null)
if [ "$STORE" = s3rver ]; then
	CURL+=(--aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'
		"https://127.0.0.1:$S3RVER_PORT/bkt/put.bin")
else
	CURL+=("https://127.0.0.1:$SP/put.bin")
fi
ref_put() {
	local a b
	a=$(now)
	"${CURL[@]}" || echo "70-outputs: the reference PUT failed" >&2
	b=$(now)
	echo $((b - a))
}
put_before=$(ref_put)
rm -f "$W/flip" "$W/ready"
"$SL" run --policy "$W/policy.json" --policy-pubkey "$W/p.pub" "${K[@]}" --stage host \
	--region gcp:europe-west4 --audit-log "$W/audit.log" -q --ca-file "$W/srv.pem" \
	"${STORE_ARGS[@]}" --output "model=$DEST" --preempt-watch "gce=http://127.0.0.1:$MP" -- \
	python3 "$W/job.py" "$MB" "$W/ready" &
RP=$!
for ((i = 0; i < 6000; i++)); do [ -e "$W/ready" ] && break; sleep 0.05; done
[ -e "$W/ready" ] || die "the job did not write its checkpoint"
t0=$(now)
touch "$W/flip"
wait "$RP"
rc=$?
t1=$(now)
sealed=$(grep -o '"notice_to_sealed_s":[0-9.]*' "$W/audit.log" | tail -1 | cut -d: -f2)
put_after=$(ref_put)
rm -f "$DISK/put.bin"
python3 - "$((t1 - t0))" "$rc" "$MB" "$STORE" "${sealed:-nan}" "$put_before" "$put_after" <<'PY'
import sys
ns, rc, mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
before, after = int(sys.argv[6]), int(sys.argv[7])
print("preemption: notice -> job signalled -> %d MiB sealed and PUT over TLS to %s -> exit %d:"
      " %.2f s (%.0f%% of GCE's 30 s); seclaunch's own notice -> sealed and uploaded: %s s"
      % (mb, sys.argv[4], rc, ns / 1e9, ns / 1e9 / 30 * 100, sys.argv[5]))
print("  where it goes: one curl PUT of %d MiB to the same store takes %.2f s before the run,"
      " %.2f s after it; the rest is the job's exit, sealing and the manifest/LATEST requests"
      % (mb, before / 1e9, after / 1e9))
print("  ratio notice -> exit / one curl PUT: %.2fx against the PUT before, %.2fx against the"
      " PUT after (goal <= 1.0x)" % (ns / before, ns / after))
PY
fi

# ---- (3) one 256 MiB object (a checkpoint shard) up to the same S3 store:
# sl_remote_put as a multipart upload (forced: the default sends it in one
# PUT), as one PUT, curl's one PUT, and the same multipart upload made by
# curl (parallel part PUTs): s3rver's CPU seconds beside each say what the
# server spends, apart from our side
if [ "$STORE" = s3rver ] && want upload; then
	pkgs=$(sl_make print-pkgs)
	# shellcheck disable=SC2046,SC2086
	if cc -std=c11 -D_GNU_SOURCE -O2 -I"$ROOT/include" -I"$ROOT/launcher" $(pkg-config --cflags $pkgs) \
		"$ROOT/tests/integration/remote_put_probe.c" "${SL_BUILD:-$ROOT/build}/libseclaunch.a" \
		$(pkg-config --libs $pkgs) -lpthread -ldl -lm -o "$W/put_probe" 2>"$W/cc-put.err"; then
		head -c $((256 << 20)) /dev/urandom >"$DISK/shard.bin"
		split -b $((32 << 20)) -d "$DISK/shard.bin" "$DISK/part."
		export SECLAUNCH_TEST_CA=$W/srv.pem SECLAUNCH_TEST_S3_ENDPOINT=https://127.0.0.1:$S3RVER_PORT
		EP=https://127.0.0.1:$S3RVER_PORT
		C=(curl -sf --cacert "$W/srv.pem" --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
		# the same multipart upload by curl: create, 8 part PUTs 4 at once, complete
		cat >"$W/curl_mpu.sh" <<'EOS'
set -e
E=$1 CA=$2 D=$3 obj=$4
C=(curl -sf --cacert "$CA" --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
id=$("${C[@]}" -X POST "$E/bkt/up/$obj?uploads=" | sed -n 's:.*<UploadId>\(.*\)</UploadId>.*:\1:p')
ls "$D"/part.* | awk '{ print NR, $0 }' | xargs -P 4 -n 2 sh -c \
	"curl -sf --cacert '$CA' --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T \"\$1\" -D \"\$1.h\" -o /dev/null '$E/bkt/up/$obj?partNumber='\$0'&uploadId=$id'"
body="<CompleteMultipartUpload>"
n=0
for p in $(ls "$D"/part.* | grep -v '\.h$'); do
	n=$((n + 1))
	body+="<Part><PartNumber>$n</PartNumber><ETag>$(grep -i '^etag:' "$p.h" | tr -d '\r' | cut -d' ' -f2)</ETag></Part>"
done
"${C[@]}" -X POST --data-binary "$body</CompleteMultipartUpload>" "$E/bkt/up/$obj?uploadId=$id" -o /dev/null
rm -f "$D"/part.*.h
EOS
		scpu() { awk '{ print $14 + $15 }' "/proc/$S3RVER_PID/stat"; }
		# LABEL CMD...: median wall of 3 and s3rver's CPU seconds over the 3 runs / 3
		up_one() {
			local l=$1 c0 c1 t
			shift
			c0=$(scpu)
			t=$(median_of 3 "$@") || die "$l"
			c1=$(scpu)
			echo "$l|$t|$(python3 -c "import sys; print('%.2f' % ((float(sys.argv[2]) - float(sys.argv[1])) / 300))" "$c0" "$c1")"
		}
		{
			up_one "sl_remote_put, multipart (32 MiB parts, 4 at once)" env SECLAUNCH_REMOTE_MULTIPART_MIN=$((5 << 20)) \
				"$W/put_probe" s3://bkt/up/ mpu.bin "$DISK/shard.bin" 4
			up_one "sl_remote_put, multipart (64 MiB parts, 2 at once)" env SECLAUNCH_REMOTE_MULTIPART_MIN=$((5 << 20)) \
				SECLAUNCH_REMOTE_PART_SIZE=$((64 << 20)) "$W/put_probe" s3://bkt/up/ mpu2.bin "$DISK/shard.bin" 2
			up_one "curl, the same multipart upload (32 MiB, 4 at once)" bash "$W/curl_mpu.sh" "$EP" "$W/srv.pem" "$DISK" cmpu.bin
			up_one "sl_remote_put, default (one PUT)" "$W/put_probe" s3://bkt/up/ one.bin "$DISK/shard.bin"
			up_one "curl -T, one PUT" "${C[@]}" -T "$DISK/shard.bin" "$EP/bkt/up/curl.bin" -o /dev/null
		} >"$W/up.txt"
		rm -f "$DISK/shard.bin" "$DISK"/part.*
		python3 - "$W/up.txt" <<'PY'
import sys
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1])]
print("one 256 MiB object to s3rver over TLS (median of 3; s3rver's CPU seconds per upload):")
for name, t, cpu in rows:
    print("  %-54s %6.2f s %5.0f MiB/s  s3rver CPU %5.2f s" % (name, float(t), 256 / float(t), float(cpu)))
t = {r[0]: float(r[1]) for r in rows}
c = t["curl -T, one PUT"]
print("  ratio sl_remote_put default / curl PUT: %.2fx; multipart (32 MiB x 4) / curl PUT: %.2fx;"
      " curl's multipart / curl PUT: %.2fx (the store's own cost of parts)"
      % (t["sl_remote_put, default (one PUT)"] / c,
         t["sl_remote_put, multipart (32 MiB parts, 4 at once)"] / c,
         t["curl, the same multipart upload (32 MiB, 4 at once)"] / c))
PY
	else
		echo "upload comparison: skipped (cannot build the probe: $(head -3 "$W/cc-put.err"))"
	fi
fi
