#!/usr/bin/env bash
# A sharded dataset of 10,000 small files through `seclaunch run` (real swtpm,
# real seclaunchd over TLS). Listing every file in SECLAUNCH_DATA would pass
# the kernel's 128 KiB limit on one environment string (exec fails with
# E2BIG): the entry then carries no file list, says so ("files_from":
# "service") and the helper pages the list from the data service. Staged
# whole and streamed; read by the job, by a subprocess started with
# close_fds and by spawned workers, each file's bytes checked (streamed: a
# read() of a file whose shard iter_files holds leaves the view intact);
# the paged request's bad inputs answered bad-request.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

job_prologue run_manyfiles swtpm python3
NF=${SL_TEST_MANY_FILES:-10000}

"$PY" - src "$NF" <<'EOF'
import hashlib, os, sys
d, n = sys.argv[1], int(sys.argv[2])
with open("want.sums", "w") as sums:
    for i in range(n):
        p = "dir-%03d/sample-%05d.bin" % (i // 100, i)
        os.makedirs(os.path.join(d, os.path.dirname(p)), exist_ok=True)
        b = os.urandom(1 + (i * 7919) % 300)
        with open(os.path.join(d, p), "wb") as f:
            f.write(b)
        sums.write("%s %s\n" % (hashlib.sha256(b).hexdigest(), p))
EOF

start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
kms_enrolled
check "encrypt $NF small files as a sharded dataset (3 shards)" 0 \
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id many-1 --shard-size 600K -q src -o ds

cat >job.py <<'EOF'
import hashlib, json, multiprocessing, os, subprocess, sys
import seclaunch_data as sd


def sums_of(paths):
    import seclaunch_data as sd2
    ds = sd2.get("many-1")
    if ds.kind == "stream":
        # in order, each shard held while its files are read; a read() of
        # a file whose shard iter_files holds must not give that shard
        # back under the view in hand
        out = {}
        for k, (p, v) in enumerate(ds.iter_files(paths)):
            if k == 0 and len(paths) > 1:
                ds.read(paths[1])
            out[p] = hashlib.sha256(v).hexdigest()
        return out
    return {p: hashlib.sha256(ds.read(p)).hexdigest() for p in paths}


def main():
    out = sys.argv[1]
    raw = os.environ["SECLAUNCH_DATA"]
    entry = json.loads(raw)["many-1"]
    paths = sd.files("many-1")
    sums = sums_of(paths)
    # a process started with close_fds: no inherited descriptor, and it
    # pages the file list from the data service too
    sub = subprocess.run([sys.executable, "-c",
        "import hashlib, json, seclaunch_data as s\n"
        "ds = s.get('many-1')\n"
        "ps = ds.files()\n"
        "print(json.dumps([len(ps), hashlib.sha256(ds.read(ps[-1])).hexdigest(), ps[-1]]))"],
        capture_output=True, text=True, close_fds=True)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        parts = pool.map(sums_of, [paths[0::2], paths[1::2]])
    spawned = {}
    for p in parts:
        spawned.update(p)
    json.dump({"env_len": len(raw), "files_from": entry.get("files_from"),
               "file_count": entry.get("file_count"), "in_env": "files" in entry,
               "kind": entry.get("kind"), "n": len(paths), "sums": sums,
               "sub": sub.stdout.strip(), "sub_err": sub.stderr[-400:],
               "spawned": spawned}, open(out, "w"))


if __name__ == "__main__":
    main()
EOF
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --env "PYTHONPATH=$SL_ROOT/jobside/python"
	--env PYTHONDONTWRITEBYTECODE=1 --audit-log "$T/audit.log")
"$PY" - want.sums >last.want <<'EOF'
import sys
l = open(sys.argv[1]).read().split("\n")[-2].split()
print(l[0], l[1])
EOF
read -r last_sum last_path <last.want

verify() { # stage result.json
	local st=$1 r=$2
	ok() { "$PY" -c "import json,sys; r=json.load(open('$r')); sys.exit(0 if ($1) else 1)"; }
	assert "$st: SECLAUNCH_DATA stays small ($(ok_len "$r") bytes < 64 KiB)" \
		ok "r['env_len'] < 65536"
	assert "$st: the entry says the file list comes from the data service" \
		ok "r['files_from'] == 'service' and not r['in_env'] and r['file_count'] == $NF"
	assert "$st: the helper lists all $NF files, in the manifest's order" \
		ok "r['n'] == $NF"
	"$PY" - "$r" want.sums >"$r.check" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
want = dict(reversed(l.split()) for l in open(sys.argv[2]))
print("job" if r["sums"] == want else "job-bad", "spawned" if r["spawned"] == want else "spawned-bad")
EOF
	assert "$st: the job read every file exactly" grep -q '^job ' "$r.check"
	assert "$st: two spawned workers read every file exactly" grep -q ' spawned$' "$r.check"
	assert "$st: a close_fds subprocess listed $NF files and read the last one exactly" \
		ok "r['sub'] == json.dumps([$NF, '$last_sum', '$last_path'])"
}
ok_len() { "$PY" -c "import json,sys; print(json.load(open('$1'))['env_len'])" 2>/dev/null; }

check "run --stage host over $NF files: exit 0 (no E2BIG)" 0 \
	"$SL" run "${RUNA[@]}" --stage host -q ds -- "$PY" job.py "$T/h.json"
[ -s "$T/h.json" ] && verify host "$T/h.json"
check "run --stage stream over $NF files: exit 0" 0 \
	"$SL" run "${RUNA[@]}" --stage stream --window 2M -q ds -- "$PY" job.py "$T/s.json"
[ -s "$T/s.json" ] && verify stream "$T/s.json"

# streamed, read() file by file: read() keeps the file's shard for the next
# read and gives it back when it moves to another shard (or a quarter of a
# second after its last read), so each of the 3 shards is decrypted once,
# with room for only two. A shard given back lingers at seclaunch
# (--linger): a read after a pause takes it back without decrypting it
# again; with --linger 0 it is decrypted again. A child forked after a
# read() does not use the parent's hold (the parent giving the shard back
# would zero the pages under it).
cat >readjob.py <<'EOF'
import hashlib, json, multiprocessing, sys, time
import seclaunch_data as sd
sha = lambda b: hashlib.sha256(b).hexdigest()
ds = sd.get("many-1")
mode, n = sys.argv[2], int(sys.argv[3])
ps = ds.files()[:n]
out = {}
if mode == "pause":
    out[ps[0]] = sha(ds.read(ps[0]))
    time.sleep(0.8)  # past read()'s hold: given back, lingering at seclaunch
    ps = ps[1:]
elif mode == "fork":
    out[ps[0]] = sha(ds.read(ps[0]))
    def child(q):
        time.sleep(2.5)  # the parent gave the shard back; --linger 1 ended
        q.put(sha(ds.read(ps[1])))
    q = multiprocessing.get_context("fork").Queue()
    pr = multiprocessing.get_context("fork").Process(target=child, args=(q,))
    pr.start()
    out[ps[1]] = q.get(timeout=60)
    pr.join()
    ps = []
for p in ps:
    out[p] = sha(ds.read(p))
json.dump(out, open(sys.argv[1], "w"))
EOF
stream_rec() { # audit-log: shards_staged shards_reused of the stream's run.wipe
	"$PY" - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "run.wipe":
        for d in r["details"]["staged"]:
            if d.get("method") == "stream":
                print(d["shards_staged"], d["shards_reused"])
EOF
}
same_bytes() { # result.json: every file in it read with its bytes
	"$PY" -c "
import json, sys
want = dict(reversed(l.split()) for l in open('want.sums'))
got = json.load(open(sys.argv[1]))
sys.exit(not got or any(want[p] != s for p, s in got.items()))" "$1"
}
readrun() { # name window linger mode n
	"$SL" run "${RUNA[@]/$T\/audit.log/$T/$1.log}" --stage stream --window "$2" --linger "$3" -q \
		ds -- "$PY" readjob.py "$T/$1.json" "$4" "$5"
}
check "streamed, read() file by file over $NF files: exit 0" 0 readrun rd 1300K 30 all "$NF"
assert "read() file by file: every file's bytes" same_bytes "$T/rd.json"
read -r nst nre < <(stream_rec "$T/rd.log")
assert "read() file by file: each of the 3 shards decrypted once (staged $nst)" test "${nst:-0}" = 3
check "streamed, read() with a pause: exit 0" 0 readrun rdp 2M 30 pause 200
assert "read() with a pause: every file's bytes" same_bytes "$T/rdp.json"
read -r nst nre < <(stream_rec "$T/rdp.log")
assert "read() after a pause takes the lingering shard back (staged $nst, taken back $nre)" \
	test "${nst:-0}" = 3 -a "${nre:-0}" -ge 1
check "streamed with --linger 0, read() with a pause: exit 0" 0 readrun rd0 2M 0 pause 200
assert "--linger 0: every file's bytes" same_bytes "$T/rd0.json"
read -r nst0 nre0 < <(stream_rec "$T/rd0.log")
assert "--linger 0: the shard given back is wiped and decrypted again after the pause (staged $nst0)" \
	test "${nst0:-0}" -ge 4 -a "${nre0:-1}" = 0
check "streamed, a child forked after a read(): exit 0" 0 readrun rdf 2M 1 fork 2
assert "the forked child reads its own copy of the shard, not the parent's wiped one" same_bytes "$T/rdf.json"
check_err "--linger over 600: usage error" 1 "--linger: '601' is not 0..600" \
	"$SL" run "${RUNA[@]}" --stage stream --linger 601 ds -- true

# seclaunch serve: the ready line's data (the tasks' SECLAUNCH_DATA) stays
# small too, and a task that is not serve's child, given the data, or only
# the socket and the token, pages the list with the token
"$SL" serve --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" \
	"${KMSA[@]}" --tcti "$SWTPM_TCTI" --stage host --audit-log "$T/serve-audit.log" \
	--socket "$T/data.sock" --ready-file "$T/ready.json" -q ds 2>"$T/serve.err" &
sp=$!
_PIDS+=("$sp")
for _ in $(seq 600); do [ -s "$T/ready.json" ] && break; sleep 0.05; done
assert "serve over $NF files writes its ready line" test -s "$T/ready.json"
"$PY" - "$T/ready.json" >serve.env <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(r.get("token", ""))
print(json.dumps(r.get("data", {})))
EOF
{
	read -r stok
	read -r sdata
} <serve.env
assert "serve: the ready line's data stays under 64 KiB and says files_from" \
	"$PY" -c "import json,sys; d=sys.argv[1]; sys.exit(not (len(d) < 65536 and json.loads(d)['many-1']['files_from'] == 'service'))" "$sdata"
cat >task.py <<'EOF'
import hashlib, json
import seclaunch_data as sd
ds = sd.get("many-1")
ps = ds.files()
print(json.dumps([len(ps), hashlib.sha256(ds.read(ps[-1])).hexdigest(), ps[-1]]))
EOF
task() { # OUT [env...]
	local out=$1
	shift
	env -i PATH=/usr/bin:/bin PYTHONPATH="$SL_ROOT/jobside/python" PYTHONDONTWRITEBYTECODE=1 \
		SECLAUNCH_DATA_SOCKET="$T/data.sock" SECLAUNCH_DATA_TOKEN="$stok" "$@" "$PY" task.py \
		>"$out" 2>"$out.err"
}
want_task="[$NF, \"$last_sum\", \"$last_path\"]"
task t1.json SECLAUNCH_DATA="$sdata"
assert "serve: a task with the ready line's SECLAUNCH_DATA lists $NF files and reads the last" \
	test "$(cat t1.json)" = "$want_task"
task t2.json
assert "serve: a task with only the socket and the token does the same" \
	test "$(cat t2.json)" = "$want_task"
stop_pid "$sp"

# the paged request's bad inputs, asked from inside a job
cat >bad.py <<'EOF'
import json, socket, os, sys
out = {}
def ask(req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(os.environ["SECLAUNCH_DATA_SOCKET"])
    s.send(req if isinstance(req, bytes) else json.dumps(req).encode())
    a = json.loads(s.recv(1 << 20))
    s.close()
    return a
out["neg"] = ask({"op": "files", "dataset": "many-1", "start": -1}).get("error")
out["past"] = ask({"op": "files", "dataset": "many-1", "start": 10 ** 9})
out["noid"] = ask({"op": "files"}).get("error")
out["unknown"] = ask({"op": "files", "dataset": "nope", "start": 0}).get("error")
out["extra"] = ask({"op": "files", "dataset": "many-1", "start": 0, "x": 1}).get("error")
out["type"] = ask({"op": "files", "dataset": "many-1", "start": "0"}).get("error")
p = ask({"op": "files", "dataset": "many-1", "start": 0})
out["page"] = [p.get("ok"), p.get("total"), len(p.get("files", [])), p.get("next")]
lst = ask({"op": "list"})
out["list"] = [lst.get("ok"), "files" in lst["datasets"]["many-1"],
               lst["datasets"]["many-1"].get("file_count")]
json.dump(out, open(sys.argv[1], "w"))
EOF
check "a job asks the data service bad paged requests: exit 0" 0 \
	"$SL" run "${RUNA[@]}" --stage host -q ds -- "$PY" bad.py "$T/b.json"
okb() { "$PY" -c "import json,sys; r=json.load(open('$T/b.json')); sys.exit(0 if ($1) else 1)"; }
assert "files with a negative start: bad-request" okb "r['neg'] == 'bad-request'"
assert "files past the end: ok, no files, no next" \
	okb "r['past']['ok'] and r['past']['files'] == [] and r['past'].get('next') is None"
assert "files without a dataset: bad-request" okb "r['noid'] == 'bad-request'"
assert "files of an unknown dataset: unknown-dataset" okb "r['unknown'] == 'unknown-dataset'"
assert "files with an unknown field: bad-request" okb "r['extra'] == 'bad-request'"
assert "files with a string start: bad-request" okb "r['type'] == 'bad-request'"
assert "a page is part of the list and names where the next starts" \
	okb "r['page'][0] and r['page'][1] == $NF and 0 < r['page'][2] < $NF and r['page'][3] == r['page'][2]"
assert "list gives the entry without its file list, with the count" \
	okb "r['list'] == [True, False, $NF]"
finish
