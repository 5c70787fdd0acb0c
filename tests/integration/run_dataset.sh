#!/usr/bin/env bash
# Sharded datasets through `seclaunch run` (real swtpm, real seclaunchd over
# TLS): a folder encrypted under a KMS key, staged whole, read by the job and
# by processes the job starts the usual ways (subprocess with close_fds,
# multiprocessing spawn) through the data service; a .npy file through its
# header; distributed-training variables passed by default and dropped by
# --clean-env; a process outside the job refused and audited; a dataset too
# large for memory refused before any key is released; the same dataset from
# an HTTPS server (nginx) when nginx is installed; tampering refused naming
# the shard.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

job_prologue run_dataset swtpm python3

start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
kms_enrolled

# a tree: nested folders, an empty file, a file larger than a shard, a .npy
mkdir -p src/img/cats src/tables
head -c 300000 /dev/urandom >src/img/big.bin
head -c 1000 /dev/urandom >src/img/cats/001.jpg
: >src/img/cats/002.jpg
printf 'id,value\n1,2\n' >src/tables/t.csv
"$PY" - src/tables/m.npy <<'EOF'
import struct, sys
# a 3x4 little-endian float64 array written by hand (format 1.0)
hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }"
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
data = b"".join(struct.pack("<d", i * 0.5) for i in range(12))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + data)
EOF
(cd src && find . -type f | sort | xargs sha256sum) >want.sums
check "encrypt the folder as a sharded dataset under the KMS key" 0 \
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id img-1 --shard-size 128K -q src -o ds
assert "several shards were written" test -e ds/shard-00002.sld

cat >job.py <<'EOF'
import hashlib, json, multiprocessing, os, subprocess, sys
import seclaunch_data as sd


def child_hash(p):
    import seclaunch_data as sd2
    return hashlib.sha256(sd2.open("img-1", p).read()).hexdigest()


def main():
    out = sys.argv[1]
    ds = sd.get("img-1")
    sums = {p: hashlib.sha256(bytes(ds.view(p))).hexdigest() for p in ds.files()}
    # a process started with close_fds (the default): it has no inherited
    # descriptor and asks the data service
    sub = subprocess.run([sys.executable, "-c",
        "import hashlib, seclaunch_data as s; "
        "print(hashlib.sha256(s.open('img-1', 'img/big.bin').read()).hexdigest())"],
        capture_output=True, text=True, close_fds=True)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        spawned = dict(zip(ds.files(), pool.map(child_hash, ds.files())))
    arr = sd.load_npy("img-1", "tables/m.npy") if "numpy_ok" in sys.argv else None
    res = {
        "sums": sums, "sub": sub.stdout.strip(), "sub_err": sub.stderr[-400:],
        "spawned": spawned,
        "npy": None if arr is None else [list(arr.shape), float(arr[2, 3])],
        "env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                               "SLURM_JOB_ID", "NCCL_DEBUG", "SECLAUNCH_TCTI")},
        "socket": os.environ.get("SECLAUNCH_DATA_SOCKET"),
        "root": ds.entry.get("root"),
    }
    json.dump(res, open(out, "w"))
    if "wait" in sys.argv:
        # let the test poke the data service from outside the job
        open(out + ".ready", "w").close()
        import time
        for _ in range(200):
            if os.path.exists(out + ".done"):
                break
            time.sleep(0.05)


if __name__ == "__main__":
    main()
EOF
numpy_ok=$("$PY" -c 'import numpy' 2>/dev/null && echo numpy_ok || echo no_numpy)
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --stage host --env "PYTHONPATH=$SL_ROOT/jobside/python"
	--env PYTHONDONTWRITEBYTECODE=1 --audit-log "$T/audit.log")
RANK=3 WORLD_SIZE=8 MASTER_ADDR=10.1.2.3 SLURM_JOB_ID=42 NCCL_DEBUG=INFO SECLAUNCH_TCTI=$SWTPM_TCTI \
	check "run a job over the sharded dataset: exit 0" 0 \
	"$SL" run "${RUNA[@]}" --env-pass 'NCCL_*' ds -- "$PY" job.py "$T/r1.json" "$numpy_ok"
ok_json() { "$PY" -c "import json,sys; r=json.load(open('$T/r1.json')); sys.exit(0 if ($1) else 1)"; }
while read -r sum path; do
	p=${path#./}
	assert "the job read $p exactly" ok_json "r['sums'].get('$p') == '$sum'"
	assert "a spawned worker read $p exactly" ok_json "r['spawned'].get('$p') == '$sum'"
done <want.sums
big=$(grep ' ./img/big.bin$' want.sums | cut -d' ' -f1)
assert "a subprocess started with close_fds read img/big.bin through the data service" \
	ok_json "r['sub'] == '$big'"
if [ "$numpy_ok" = numpy_ok ]; then
	assert "load_npy reads the .npy header: shape (3, 4), last value 5.5" \
		ok_json "r['npy'] == [[3, 4], 5.5]"
else
	skip "load_npy" "numpy is not installed for $PY"
fi
assert "RANK, WORLD_SIZE, MASTER_ADDR, SLURM_* pass by default" \
	ok_json "r['env']['RANK'] == '3' and r['env']['WORLD_SIZE'] == '8' and r['env']['MASTER_ADDR'] == '10.1.2.3' and r['env']['SLURM_JOB_ID'] == '42'"
assert "--env-pass 'NCCL_*' passes NCCL_DEBUG" ok_json "r['env']['NCCL_DEBUG'] == 'INFO'"
assert "seclaunch's own SECLAUNCH_TCTI never reaches the job" ok_json "r['env']['SECLAUNCH_TCTI'] is None"
root=$("$SL" inspect --json ds | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["root"])')
assert "the job sees the dataset root of the manifest" ok_json "r['root'] == '$root'"
assert "the socket is gone after the run" ok_json "not __import__('os').path.exists(r['socket'])"
assert "the audit log records the root with the staging" \
	grep -q "\"event\":\"run.stage\".*\"root\":\"$root\"" "$T/audit.log"

RANK=3 check "--clean-env drops the distributed-training variables" 0 \
	"$SL" run "${RUNA[@]}" --clean-env -q ds -- "$PY" job.py "$T/r1.json" "$numpy_ok"
assert "... RANK is not passed then" ok_json "r['env']['RANK'] is None"

# PyTorch: a DataLoader with two workers started by spawn, over the map-style
# and the iterable dataset: every file exactly once, with the right bytes
if "$PY" -c 'import torch' 2>/dev/null; then
	cat >torchjob.py <<'EOF'
import hashlib, json, sys
import torch
import seclaunch_data as sd


def digest(b):
    return hashlib.sha256(b).hexdigest()


def main():
    paths = sd.files("img-1")
    m = sd.TorchFiles("img-1", transform=digest)
    dl = torch.utils.data.DataLoader(m, batch_size=None, num_workers=2,
                                     multiprocessing_context="spawn")
    seen_map = list(dl)
    it = sd.TorchIterableFiles("img-1")
    dl2 = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2,
                                      multiprocessing_context="spawn")
    seen_it = [(p, hashlib.sha256(b).hexdigest()) for p, b in dl2]
    json.dump({"paths": paths, "map": seen_map, "iter": seen_it}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
EOF
	check "a PyTorch DataLoader (2 spawned workers) over the sharded dataset: exit 0" 0 \
		"$SL" run "${RUNA[@]}" -q ds -- "$PY" torchjob.py "$T/t1.json"
	"$PY" - "$T/t1.json" want.sums >torch.check <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
want = {l.split()[1][2:]: l.split()[0] for l in open(sys.argv[2])}
ok_map = r["map"] == [want[p] for p in r["paths"]]
ok_it = sorted(map(tuple, r["iter"])) == sorted(want.items()) and len(r["iter"]) == len(want)
print("map" if ok_map else "map-bad", "iter" if ok_it else "iter-bad")
EOF
	assert "map-style: every file once, in order, with its bytes" grep -q '^map ' torch.check
	assert "iterable: every file exactly once across the workers, with its bytes" \
		grep -q ' iter$' torch.check
else
	skip "PyTorch DataLoader" "python3-torch is not installed for $PY"
fi

# stream staging: shard by shard through the data service, at most --window
# staged at once, each shard wiped once released
cat >streamjob.py <<'EOF'
import hashlib, json, subprocess, sys
import seclaunch_data as sd


def main():
    ds = sd.get("img-1")
    sums = {p: hashlib.sha256(bytes(v)).hexdigest() for p, v in ds.iter_files()}
    sub = subprocess.run([sys.executable, "-c",
        "import hashlib, seclaunch_data as s; "
        "print(hashlib.sha256(s.get('img-1').read('img/big.bin')).hexdigest())"],
        capture_output=True, text=True, close_fds=True)
    json.dump({"kind": ds.kind, "sums": sums, "sub": sub.stdout.strip(),
               "sub_err": sub.stderr[-300:]}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
EOF
SAUD=$T/stream-audit.log
check "run --stage stream --window 300K over a 3+-shard dataset: exit 0" 0 \
	"$SL" run "${RUNA[@]/$T\/audit.log/$SAUD}" --stage stream --window 300K -q ds -- \
	"$PY" streamjob.py "$T/s1.json"
oks() { "$PY" -c "import json,sys; r=json.load(open('$T/s1.json')); sys.exit(0 if ($1) else 1)"; }
assert "the job sees a stream dataset" oks "r['kind'] == 'stream'"
while read -r sum path; do
	p=${path#./}
	assert "streamed: the job read $p exactly" oks "r['sums'].get('$p') == '$sum'"
done <want.sums
assert "streamed: a close_fds subprocess read img/big.bin (spread over shards) exactly" \
	oks "r['sub'] == '$big'"
"$PY" - "$SAUD" >stream.rec <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "run.wipe":
        for d in r["details"]["staged"]:
            if d.get("method") == "stream":
                print(d["peak_staged"], d["window"], d["shards_staged"], d["zeroed"])
EOF
read -r peak win nst zeroed <stream.rec
assert "the audit log says how much was staged at most: $peak <= window $win" \
	test "${peak:-999999999}" -le "${win:-0}"
assert "every shard was staged ($nst) and the stream zeroed ($zeroed)" \
	test "${nst:-0}" -ge 3 -a "$zeroed" = "True"
mkdir bigsrc
head -c 3000000 /dev/urandom >bigsrc/x
"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id big-shards --shard-size 2M -q bigsrc -o ds-bigshards
before=$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")
check_err "a --window smaller than the largest shard is refused first (exit 1)" 1 "largest shard" \
	"$SL" run "${RUNA[@]}" --stage stream --window 1M ds-bigshards -- true
assert "... and the KMS released nothing" \
	test "$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")" = "$before"

# a process outside the job asks the data service: refused and audited
AUD=$T/audit2.log
"$SL" run "${RUNA[@]/$T\/audit.log/$AUD}" -q ds -- "$PY" job.py "$T/r2.json" wait &
rp=$!
for _ in $(seq 100); do [ -e "$T/r2.json.ready" ] && break; sleep 0.1; done
sock=$("$PY" -c "import json; print(json.load(open('$T/r2.json'))['socket'])")
"$PY" - "$sock" >outside.txt <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
try:
    s.send(json.dumps({"op": "open", "dataset": "img-1"}).encode())
except OSError:
    pass
msg, fds, _, _ = socket.recv_fds(s, 4096, 1)
print(json.loads(msg).get("error"), len(fds))
EOF
touch "$T/r2.json.done"
wait "$rp"
assert "a process outside the job gets no descriptor: refused" test "$(cat outside.txt)" = "refused 0"
assert "the refusal is in the audit log" grep -q '"event":"run.data.refused"' "$AUD"

# tampering: a shard swapped in from another position is refused by name
cp -a ds tampered
mv tampered/shard-00000.sld x.sld
mv tampered/shard-00001.sld tampered/shard-00000.sld
mv x.sld tampered/shard-00001.sld
check_err "a swapped shard fails the run (exit 6) naming the shard" 6 "shard 0 .shard-00000.sld." \
	"$SL" run "${RUNA[@]}" tampered -- "$PY" job.py "$T/r3.json"
assert "... and the job never ran" test ! -e r3.json

# a dataset that cannot fit in memory: refused before anything is released
cp -a ds huge
"$PY" - huge/manifest.sldm <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
# the first shard entry follows the fixed body fields; its plaintext_len and
# file_size become 2^45 (the MAC breaks, which only the DEK could check)
body = 14
off = body + 1 + 1 + 2 + 4 + 32 + 8 + 8
idlen = b[off]
off += 1 + idlen + 4 + 4
off += 4
nl = b[off]
off += 1 + nl
struct.pack_into(">QQ", b, off, 1 << 45, (1 << 45) + 4096)
open(p, "wb").write(b)
EOF
before=$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")
check_err "a dataset larger than memory is refused first (exit 7) naming the sizes" 7 "MemAvailable" \
	"$SL" run "${RUNA[@]}" huge -- "$PY" job.py "$T/r4.json"
assert "... and the KMS released nothing" \
	test "$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")" = "$before"

# the same dataset from an HTTPS server
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
	NGX=$(command -v nginx || echo /usr/sbin/nginx)
	mkdir -p www ngx/tmp
	cp -a ds www/ds
	chmod -R a+rX www
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ngx/ca.key \
		-out ngx/ca.pem -days 2 -subj /CN=run-dataset-ca 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ngx/srv.key \
		-out ngx/srv.csr -subj /CN=127.0.0.1 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\n' >ngx/ext
	openssl x509 -req -in ngx/srv.csr -CA ngx/ca.pem -CAkey ngx/ca.key -CAcreateserial \
		-out ngx/srv.pem -days 2 -extfile ngx/ext 2>/dev/null
	port=$(free_port)
	cat >ngx/nginx.conf <<EOF
user root; daemon off; pid $T/ngx/nginx.pid; error_log $T/ngx/error.log; worker_processes 1;
events {}
http { access_log off; client_body_temp_path $T/ngx/tmp; proxy_temp_path $T/ngx/tmp;
  fastcgi_temp_path $T/ngx/tmp; uwsgi_temp_path $T/ngx/tmp; scgi_temp_path $T/ngx/tmp;
  server { listen 127.0.0.1:$port ssl http2; ssl_certificate $T/ngx/srv.pem;
    ssl_certificate_key $T/ngx/srv.key; root $T/www; } }
EOF
	"$NGX" -c "$T/ngx/nginx.conf" -p "$T/ngx" &
	ngx_pid=$!
	_PIDS+=("$ngx_pid")
	for _ in $(seq 50); do curl -s --cacert ngx/ca.pem "https://127.0.0.1:$port/ds/manifest.sldm" -o /dev/null && break; sleep 0.1; done
	check "run stages the dataset from https:// (ranges, ciphertext only)" 0 \
		"$SL" run "${RUNA[@]}" --ca-file ngx/ca.pem -q "https://127.0.0.1:$port/ds/" -- \
		"$PY" job.py "$T/r5.json" "$numpy_ok"
	ok5() { "$PY" -c "import json,sys; r=json.load(open('$T/r5.json')); sys.exit(0 if ($1) else 1)"; }
	assert "... and the job read img/big.bin exactly" ok5 "r['sums'].get('img/big.bin') == '$big'"
	check_err "without the server's CA the run stops before any release (exit 5)" 5 "127.0.0.1" \
		"$SL" run "${RUNA[@]}" -q "https://127.0.0.1:$port/ds/" -- "$PY" job.py "$T/r6.json"
	check_err "a folder the server does not have: exit 5 naming it" 5 "HTTP 404" \
		"$SL" run "${RUNA[@]}" --ca-file ngx/ca.pem -q "https://127.0.0.1:$port/nope/" -- \
		"$PY" job.py "$T/r6.json"
	stop_pid "$ngx_pid"
else
	skip "run from https://" "nginx is not installed"
fi
finish
