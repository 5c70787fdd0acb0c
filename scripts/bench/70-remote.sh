#!/usr/bin/env bash
# Remote datasets and the data service. Prints figures beside their peers in
# the same run; asserts nothing.
# (1) HTTPS from a local nginx: a sharded dataset (SL_BENCH_REMOTE_MIB,
#     default 2048, 256 MiB shards) fetched by seclaunch's range reader into
#     memory files (what staging does) against `curl -s -o /dev/null` of the
#     same shards from the same server (goal >= 0.8), and `seclaunch decrypt
#     URL -o DIR` (DIR on /dev/shm) with its peak RSS (/usr/bin/time -v).
#     Then `seclaunch run --stage stream URL` itself (attested launch, the
#     KMS, a job that reads every byte with iter_files): the same bytes
#     (SL_BENCH_REMOTE_MIB of 1 MiB files) against curl, the launch of a
#     1-file dataset taken off, and seclaunch's peak RSS (VmHWM, read by the
#     job at its end; goal <= 64 MiB + the window); and the same job after
#     `--stage host` of the URL (the whole dataset staged before it starts).
# (2) S3 (s3rver from npm, TLS, path-style; SL_BENCH_S3_MIB, default 512)
#     against `curl --aws-sigv4`.
# (3) The data service: 4 processes of a job reading 10,000 small files
#     (SL_BENCH_DS_FILES) through the Python helper against the same
#     plaintext files read from the page cache, staged whole (host) and
#     streamed (in order, iter_files), and streamed read() file by file
#     (each read gives its shard back; the shard lingers for the next
#     read: --linger's default). SECLAUNCH_DATA then lists no files:
#     each process pages the list from the data service once, maps the
#     staged memory once, and opens each file as a view into it.
# (4) Stream staging alone (sl_stream over a local sharded dataset, a
#     reader touching every byte, scripts/bench/stream-probe.c): CPU per GiB
#     split into user and system time, beside `seclaunch decrypt` of it.
# SL_BENCH_REMOTE_PARTS picks parts (default "https s3 service stream");
# SL_BENCH_PYTHONPATH runs (3) with another copy of the helper.
set -uo pipefail
. "$(dirname "$0")/lib.bash"
. "$ROOT/tests/integration/run_lib.bash"
need_tools python3 curl openssl cc
cd "$W" || die "no temp dir"
parts=" ${SL_BENCH_REMOTE_PARTS:-https s3 service stream} "
want() { [[ $parts == *" $1 "* ]]; }
mibs() { python3 -c "import sys; print('%.0f' % (int(sys.argv[1]) / float(sys.argv[2]) / 2**20))" "$@"; }

# the range reader alone: every object of a dataset URL into memory files
cat >"$W/fetch.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "dataset/remote.h"
#include "seclaunch/secret.h"
sl_err sl_heap_wipe_install(void);
int main(int argc, char **argv) /* CA ENDPOINT|- URL OBJECT:SIZE... */
{
	sl_remote_opts o = {.ca_file = argv[1]};
	sl_remote *r;
	if (strcmp(argv[2], "-") != 0)
		o.s3_endpoint = argv[2];
	if (sl_heap_wipe_install() != SL_OK || sl_crypto_init() != SL_OK ||
	    sl_remote_open(argv[3], &o, &r) != SL_OK)
		return fprintf(stderr, "%s\n", sl_err_detail()), 5;
	for (int i = 4; i < argc; i++) {
		char *c = strrchr(argv[i], ':');
		*c = '\0';
		int fd = memfd_create("shard", MFD_CLOEXEC);
		if (sl_remote_fetch(r, argv[i], strtoull(c + 1, NULL, 10), fd) != SL_OK)
			return fprintf(stderr, "%s\n", sl_err_detail()), 5;
		close(fd);
	}
	sl_remote_free(r);
	return 0;
}
EOF
pkgs=$(sl_make print-pkgs)
# shellcheck disable=SC2046,SC2086
cc -std=c11 -D_GNU_SOURCE -O2 -I"$ROOT/include" -I"$ROOT/launcher" "$W/fetch.c" \
	"${SL_BUILD:-$ROOT/build}/libseclaunch.a" $(pkg-config --libs $pkgs) -lpthread -ldl -lm \
	-o "$W/fetch" || die "cannot build the fetch helper (make build first)"

make_tls_ca "$W/tls" || die "test CA"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
# swtpm and seclaunchd (--dev, its development policy), started once
kms_up() {
	[ -n "${KMSA:-}" ] && return 0
	command -v swtpm >/dev/null || return 1
	start_tpm tpm || die "swtpm did not start"
	start_kms "$W/kms" || die "seclaunchd did not start"
	KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
	"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q || die enroll
	"$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q || die "key create"
}
KMSA=()
"$SL" keygen -o "$W/key" -q || die keygen
mkds() { # MIB DIR
	mkdir -p "$W/plain"
	head -c $(($1 * 1024 * 1024)) /dev/urandom >"$W/plain/data.bin"
	"$SL" encrypt --key-file "$W/key" --dataset-id bench-remote --shard-size 256M --sharded \
		-q "$W/plain/data.bin" -o "$2" || die "encrypt"
	rm -rf "$W/plain"
}
objs() { # DIR: OBJECT:SIZE of every file
	local f
	for f in "$1"/*; do printf '%s:%s\n' "$(basename "$f")" "$(stat -c %s "$f")"; done
}

# `seclaunch run --stage stream` over HTTPS: MIB files of 1 MiB (sealed
# under the KMS key, 256 MiB shards) served from $W/www/sds; a job reads
# every byte with iter_files and reads seclaunch's VmHWM at its end.
stream_bench() { # URL-of-www/ds/ MIB
	local base=${1%ds/} n=$2
	mkdir -p "$W/files"
	"$PY" - "$W/files" "$n" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(os.urandom(1 << 20))
EOF
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" --dataset-id bench-stream \
		--shard-size 256M -q "$W/files" -o "$W/www/sds" || die "encrypt the stream dataset"
	head -c 1024 /dev/urandom >"$W/files/one.bin"
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" --dataset-id bench-one --sharded \
		-q "$W/files/one.bin" -o "$W/www/one" || die "encrypt the 1-file dataset"
	rm -rf "$W/files"
	cat "$W/www/sds"/* >/dev/null
	local sbytes
	sbytes=$(du -cb "$W/www/sds"/shard-* | tail -1 | cut -f1)
	cat >"$W/streamjob.py" <<'EOF'
import json, os, sys
import seclaunch_data as sd
ds = sd.get(sorted(sd.datasets())[0])
b = 0
for p, v in ds.iter_files():
    b += len(bytes(v))  # every byte read (copied once)
pid, hwm = os.getppid(), None
while pid > 1 and hwm is None:
    comm = open("/proc/%d/comm" % pid).read().strip()
    st = open("/proc/%d/status" % pid).read()
    if comm == "seclaunch":
        hwm = int(st.split("VmHWM:")[1].split()[0])
    pid = int(st.split("PPid:")[1].split()[0])
json.dump({"bytes": b, "hwm_kib": hwm}, open(sys.argv[1], "w"))
EOF
	local RS=(run --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
		--tcti "$SWTPM_TCTI" --ca-file "$W/tls/ca.pem" --audit-log "$W/audit.log"
		--env "PYTHONPATH=$ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1 -q)
	local RH=("${RS[@]}" --stage host)
	RS+=(--stage stream)
	local c_args=() o
	mapfile -t SO < <(objs "$W/www/sds")
	for o in "${SO[@]}"; do c_args+=("$base""sds/${o%%:*}" -o /dev/null); done
	local t_c t_s t_1 t_h
	t_c=$(median_of 3 curl -s --cacert "$W/tls/ca.pem" "${c_args[@]}") || die "curl sds"
	# the same job with the whole dataset staged in host memory first (the
	# next shard fetched while one is decrypted)
	t_h=$(median_of 3 "$SL" "${RH[@]}" "$base""sds/" -- "$PY" "$W/streamjob.py" "$W/host.json") ||
		die "run --stage host"
	t_s=$(median_of 3 "$SL" "${RS[@]}" "$base""sds/" -- "$PY" "$W/streamjob.py" "$W/stream.json") ||
		die "run --stage stream"
	t_1=$(median_of 3 "$SL" "${RS[@]}" "$base""one/" -- "$PY" "$W/streamjob.py" "$W/one.json") ||
		die "run, 1-file dataset"
	# CPU seconds (user + system) of each side once more: curl, and seclaunch
	# with its job (the server's own CPU is in neither)
	/usr/bin/time -f "%U %S" -o "$W/cpu-curl" curl -s --cacert "$W/tls/ca.pem" "${c_args[@]}" ||
		die "curl sds"
	/usr/bin/time -f "%U %S" -o "$W/cpu-run" "$SL" "${RS[@]}" "$base""sds/" -- "$PY" "$W/streamjob.py" \
		"$W/stream.json" || die "run --stage stream"
	"$PY" - "$sbytes" "$t_c" "$t_s" "$t_1" "$W/stream.json" "$n" "$W/cpu-curl" "$W/cpu-run" "$t_h" <<'EOF'
import json, sys
b, tc, ts, t1 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
th = float(sys.argv[9])
cpu = lambda f: sum(map(float, open(f).read().split()[-2:]))
r = json.load(open(sys.argv[5]))
if r["bytes"] != int(sys.argv[6]) << 20:
    sys.exit("  the job read %d bytes, want %d" % (r["bytes"], int(sys.argv[6]) << 20))
st = max(ts - t1, 1e-9)
mib = lambda t: b / t / 2**20
print("  seclaunch run --stage stream URL, a job reading every byte (iter_files), median of 3:")
print("    curl -s -o /dev/null, the same shards:   %.3f s  %.0f MiB/s" % (tc, mib(tc)))
print("    run in all:                             %.3f s (the launch with a 1-file dataset: %.3f s)" % (ts, t1))
print("    streaming part (run minus launch):      %.3f s  %.0f MiB/s" % (st, mib(st)))
print("    ratio stream / curl throughput: %.2fx (goal >= 0.8x)" % (tc / st))
sh = max(th - t1, 1e-9)
print("    the same job after --stage host (whole dataset staged first): %.3f s in all;"
      " staging and reading %.3f s, %.2fx curl" % (th, sh, tc / sh))
gib = b / 2**30
print("    CPU per GiB (user + system): curl %.2f s; seclaunch run and its job %.2f s (TLS,"
      " AES-GCM, memory files, the job's reads)" % (cpu(sys.argv[7]) / gib, cpu(sys.argv[8]) / gib))
w = 1 << 30
print("    seclaunch peak RSS (VmHWM): %.0f MiB with a %d MiB window (goal <= 64 MiB + window)"
      % (r["hwm_kib"] / 1024, w >> 20))
EOF
}

# ---- (1) HTTPS from nginx -------------------------------------------------
mib=${SL_BENCH_REMOTE_MIB:-2048}
mkdir -p "$W/www"
if want https; then
	mkds "$mib" "$W/www/ds"
	cat "$W/www/ds"/* >/dev/null
	bytes=$(du -cb "$W/www/ds"/shard-* | tail -1 | cut -f1)
fi
if ! want https; then
	:
elif start_nginx "$W/www" "$W/tls" 2; then
	U=https://127.0.0.1:$NGINX_PORT/ds/
	mapfile -t O < <(objs "$W/www/ds")
	curl_args=()
	for o in "${O[@]}"; do curl_args+=("$U${o%%:*}" -o /dev/null); done
	t_curl=$(median_of 3 curl -s --cacert "$W/tls/ca.pem" "${curl_args[@]}") || die "curl"
	t_fetch=$(median_of 3 "$W/fetch" "$W/tls/ca.pem" - "$U" "${O[@]}") || die "fetch"
	# a peer that also keeps the bytes in memory (tmpfs), as the reader does
	shm_args=()
	for o in "${O[@]}"; do shm_args+=("$U${o%%:*}" -o "/dev/shm/sl-bench-curl.$$.${o%%:*}"); done
	t_shm=$(median_of 3 curl -s --cacert "$W/tls/ca.pem" "${shm_args[@]}") || die "curl to tmpfs"
	rm -f /dev/shm/sl-bench-curl.$$.*
	/usr/bin/time -v -o "$W/time.txt" "$SL" decrypt --key-file "$W/key" --ca-file "$W/tls/ca.pem" \
		-q "$U" -o /dev/shm/sl-bench-remote.$$ >/dev/null 2>"$W/err" || die "decrypt: $(cat "$W/err")"
	rm -rf /dev/shm/sl-bench-remote.$$
	t_dec=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$W/time.txt" |
		awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/time.txt")
	t_loc=$(median_of 1 "$SL" decrypt --key-file "$W/key" -q "$W/www/ds" -o /dev/shm/sl-bench-local.$$)
	rm -rf /dev/shm/sl-bench-local.$$
	echo "HTTPS, nginx on 127.0.0.1, ${mib} MiB in $(find "$W/www/ds" -name "shard-*" | wc -l) shards (median of 3):"
	echo "  curl -s -o /dev/null, the same shards:        ${t_curl} s  $(mibs "$bytes" "$t_curl") MiB/s"
	echo "  seclaunch range reader into memory files:    ${t_fetch} s  $(mibs "$bytes" "$t_fetch") MiB/s"
	echo "  ratio reader / curl throughput: $(ratio "$t_curl" "$t_fetch")x (goal >= 0.8x)"
	echo "  curl -s -o /dev/shm/FILE (bytes kept in memory too): ${t_shm} s  $(mibs "$bytes" "$t_shm") MiB/s"
	echo "  ratio reader / curl into tmpfs: $(ratio "$t_shm" "$t_fetch")x"
	echo "  seclaunch decrypt URL -o /dev/shm/DIR:       ${t_dec} s  $(mibs "$bytes" "$t_dec") MiB/s, peak RSS $((rss / 1024)) MiB"
	echo "  seclaunch decrypt FOLDER -o /dev/shm/DIR:    ${t_loc} s  (the same without the network)"
	echo "  ratio decrypt URL / curl throughput: $(ratio "$t_curl" "$t_dec")x"
	if kms_up; then
		stream_bench "$U" "$mib"
	else
		echo "  seclaunch run --stage stream URL: skipped (swtpm not installed)"
	fi
	stop_pid "$NGINX_PID"
else
	echo "HTTPS: skipped (${NGINX_SKIP:-nginx did not start})"
fi
rm -rf "$W/www"

# ---- (2) S3 against s3rver -------------------------------------------------
mib=${SL_BENCH_S3_MIB:-512}
want s3 && mkds "$mib" "$W/s3ds"
if ! want s3; then
	:
elif start_s3rver "$W/s3data" "$W/tls" bkt; then
	S=https://127.0.0.1:$S3RVER_PORT
	for f in "$W/s3ds"/*; do
		s3_put "$W/tls/ca.pem" "$S/bkt/ds/$(basename "$f")" "$f" || die "upload $f"
	done
	bytes=$(du -cb "$W/s3ds"/shard-* | tail -1 | cut -f1)
	mapfile -t O < <(objs "$W/s3ds")
	curl_args=()
	for o in "${O[@]}"; do curl_args+=("$S/bkt/ds/${o%%:*}" -o /dev/null); done
	t_curl=$(median_of 3 curl -sf --cacert "$W/tls/ca.pem" --aws-sigv4 aws:amz:us-east-1:s3 \
		--user S3RVER:S3RVER -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "${curl_args[@]}") || die "curl s3"
	t_fetch=$(AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
		median_of 3 "$W/fetch" "$W/tls/ca.pem" "$S" s3://bkt/ds/ "${O[@]}") || die "fetch s3"
	echo "S3 (s3rver over TLS, path-style), ${mib} MiB (median of 3):"
	echo "  curl --aws-sigv4 -o /dev/null:               ${t_curl} s  $(mibs "$bytes" "$t_curl") MiB/s"
	echo "  seclaunch range reader (SigV4 by libcurl):   ${t_fetch} s  $(mibs "$bytes" "$t_fetch") MiB/s"
	echo "  ratio reader / curl throughput: $(ratio "$t_curl" "$t_fetch")x (goal >= 0.8x)"
	stop_pid "$S3RVER_PID"
else
	echo "S3: skipped (${S3RVER_SKIP:-s3rver did not start})"
fi
rm -rf "$W/s3ds" "$W/s3data"

# ---- (4) stream staging alone: where its CPU per GiB goes ---------------------
# sl_stream (what `run --stage stream` runs) over a local sharded dataset
# (SL_BENCH_STREAM_MIB, default 1024, 64 MiB shards, a 256 MiB window), a
# reader touching every byte, against `seclaunch decrypt` of the same
# plaintext as one SLD file to /dev/null: the same AEAD and reads, with no
# memory files and no reader.
# User time is the AEAD, the copy of each authenticated chunk into its
# buffer and the reader; system time the reads of the ciphertext and the
# buffers' pages (made once per buffer, not per shard; the decryption's
# chunk buffers likewise, kept and zeroed between shards).
if want stream; then
	smib=${SL_BENCH_STREAM_MIB:-1024}
	pkgs=$(sl_make print-pkgs)
	# shellcheck disable=SC2046,SC2086
	if cc -std=c11 -D_GNU_SOURCE -O2 -I"$ROOT/include" -I"$ROOT/launcher" $(pkg-config --cflags $pkgs) \
		"$ROOT/scripts/bench/stream-probe.c" "${SL_BUILD:-$ROOT/build}/libseclaunch.a" \
		$(pkg-config --libs $pkgs) -lpthread -ldl -lm -o "$W/stream-probe" 2>"$W/cc-stream.err"; then
		mkdir -p "$W/ssrc"
		head -c $((smib << 20)) /dev/urandom >"$W/ssrc/a.bin"
		"$SL" keygen -q -o "$W/skey"
		"$SL" encrypt -q --key-file "$W/skey" --dataset-id stream-alone --shard-size 64M "$W/ssrc" \
			-o "$W/sds-local" || die "encrypt the local stream dataset"
		"$SL" encrypt -q --key-file "$W/skey" --dataset-id stream-alone "$W/ssrc/a.bin" \
			-o "$W/sds-one.sld" || die "encrypt the peer's file"
		rm -rf "$W/ssrc"
		cat "$W/sds-local"/* "$W/sds-one.sld" >/dev/null
		: >"$W/stream-probe.txt"
		for _ in 1 2 3; do
			"$W/stream-probe" "$W/skey" "$W/sds-local" 256 >>"$W/stream-probe.txt" || die "stream probe"
		done
		for _ in 1 2 3; do
			/usr/bin/time -f "%e %U %S" -a -o "$W/stream-dec.txt" "$SL" decrypt -q --key-file "$W/skey" \
				"$W/sds-one.sld" -o /dev/null || die "decrypt the peer's file"
		done
		python3 - "$W/stream-probe.txt" "$W/stream-dec.txt" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
dec = [l.split() for l in open(sys.argv[2]) if l.strip() and l[0].isdigit()]
gib = int(rows[0][0]) / 2**30
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
print("stream staging alone (sl_stream, local %.0f MiB in 64 MiB shards, 256 MiB window, a reader"
      " touching every byte; median of 3; load %s):" % (gib * 1024, sys.argv[3]))
print("  sl_stream:                   wall %.3f s; CPU per GiB user %.2f s + system %.2f s = %.2f s;"
      " peak RSS %.0f MiB" % (med(rows, 1), med(rows, 2) / gib, med(rows, 3) / gib,
                              (med(rows, 2) + med(rows, 3)) / gib, med(rows, 4) / 1024))
print("  decrypt (one file) -o /dev/null: wall %.3f s; CPU per GiB user %.2f s + system %.2f s = %.2f s"
      % (med(dec, 0), med(dec, 1) / gib, med(dec, 2) / gib, (med(dec, 1) + med(dec, 2)) / gib))
print("  ratio stream staging / decrypt, CPU per GiB: %.2fx" %
      ((med(rows, 2) + med(rows, 3)) / (med(dec, 1) + med(dec, 2))))
PY
	else
		echo "stream staging alone: skipped (cannot build the probe: $(head -3 "$W/cc-stream.err"))"
	fi
fi

# ---- (3) the data service ---------------------------------------------------
nf=${SL_BENCH_DS_FILES:-10000}
want service || exit 0
command -v swtpm >/dev/null || {
	echo "data service: skipped (swtpm not installed)"
	exit 0
}
python3 - "$W/small" "$nf" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "%03d" % (i // 100))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "%05d.bin" % i), "wb") as f:
        f.write(os.urandom(1024 + (i * 7919) % 15360))
EOF
cat >"$W/readers.py" <<'EOF'
# readers.py OUT [DIR]: 4 spawned processes read every file (through the
# data service, or from DIR), each a quarter; prints files/s and MiB/s.
import json, multiprocessing as mp, os, sys, time

def work(args):
    i, base = args
    n = b = 0
    if base:
        names = sorted(os.path.relpath(os.path.join(r, f), base)
                       for r, _, fs in os.walk(base) for f in fs)
        for p in names[i::4]:
            with open(os.path.join(base, p), "rb") as f:
                b += len(f.read())
            n += 1
    else:
        import seclaunch_data as sd
        ds = sd.get(sorted(sd.datasets())[0])
        mine = sorted(ds.files())[i::4]
        if ds.kind == "stream" and os.environ.get("READ_MODE") == "read":
            for p in mine:
                b += len(ds.read(p))
                n += 1
        elif ds.kind == "stream":
            # in order: a shard is held while its files are read
            for p, v in ds.iter_files(mine):
                with sd.MemFile(v, p) as f:
                    b += len(f.read())
                n += 1
        else:
            for p in mine:
                with sd.open(ds.id, p) as f:
                    b += len(f.read())
                n += 1
    return n, b

if __name__ == "__main__":
    base = sys.argv[2] if len(sys.argv) > 2 else None
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(work, [(0, base)] * 4)  # start the workers and warm up
        t0 = time.perf_counter()
        r = pool.map(work, [(i, base) for i in range(4)])
        t = time.perf_counter() - t0
    n, b = sum(x[0] for x in r), sum(x[1] for x in r)
    json.dump({"files": n, "bytes": b, "s": t}, open(sys.argv[1], "w"))
EOF
kms_up || die "swtpm did not start"
"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" --dataset-id small-files \
	-q "$W/small" -o "$W/smallds" || die "encrypt small files"
for stage in ${SL_BENCH_DS_STAGES:-host stream stream-read}; do
	"$SL" run --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}" \
		--tcti "$SWTPM_TCTI" --stage "${stage%-read}" --env "READ_MODE=${stage##*-}" \
		--env "PYTHONPATH=${SL_BENCH_PYTHONPATH:-$ROOT/jobside/python}" \
		--env PYTHONDONTWRITEBYTECODE=1 --audit-log "$W/audit.log" -q "$W/smallds" -- \
		"$PY" "$W/readers.py" "$W/svc-$stage.json" 2>"$W/err" || {
		echo "data service: seclaunch run --stage $stage failed: $(tail -3 "$W/err")"
		exit 1
	}
done
find "$W/small" -type f -exec cat {} + >/dev/null
"$PY" "$W/readers.py" "$W/disk.json" "$W/small" || die "page-cache readers"
python3 - "$W/disk.json" "$W"/svc-*.json <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
f = lambda r: (r["files"] / r["s"], r["bytes"] / r["s"] / 2**20)
print("data service: 4 spawned processes reading %d small files (%.1f MiB):" % (d["files"], d["bytes"] / 2**20))
names = {"host": "staged whole (--stage host), open() per file:",
         "stream": "streamed (--stage stream), iter_files():",
         "stream-read": "streamed (--stage stream), read() per file:"}
for p in sys.argv[2:]:
    r = json.load(open(p))
    name = names[os.path.basename(p)[4:-5]]
    if r["files"] != d["files"] or r["bytes"] != d["bytes"]:
        sys.exit("  %s read %d files, %d bytes; want %d, %d" % (name, r["files"], r["bytes"], d["files"], d["bytes"]))
    print("  %-50s %8.0f files/s %7.1f MiB/s  ratio %.2fx" % ((name,) + f(r) + (f(r)[0] / f(d)[0],)))
print("  %-50s %8.0f files/s %7.1f MiB/s" % (("plain open/read from the page cache:",) + f(d)))
EOF

