#!/usr/bin/env bash
# TorchFiles(shuffle=True), the shard-aware shuffle of jobside/python/
# seclaunch_data.py, without `seclaunch run`: its plan on its own (every
# file exactly once per epoch across 2 ranks x 2 DataLoader workers, the
# order a function of seed and epoch), then read through a stand-in data
# service (fake_dsvc.py): 2 ranks x 2 workers get every file once with its
# bytes, each process opening each shard once per epoch; and the warning a
# map-style DataLoader(shuffle=True) over a streamed dataset gets.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch.utils.data' 2>/dev/null; then
	skip pyhelper_shuffle "python3-torch is not installed for /usr/bin/python3"
	finish
fi
export PYTHONPATH=$SL_ROOT/jobside/python:$SL_ROOT/tests/integration PYTHONDONTWRITEBYTECODE=1
cd "$T" || exit 1

py() { # name code
	check "$1" 0 "$PY" -c "$2"
}

py "plan: 2 ranks x 2 workers read every file exactly once per epoch, each its own share" '
import seclaunch_data as sd
home = [i // 25 for i in range(400)]  # 16 shards of 25 files
for epoch in range(3):
    parts = [sd.shuffle_plan(400, home, 16, 3, 5, epoch, r, 2, w, 2) for r in (0, 1) for w in (0, 1)]
    allf = sorted(f for p in parts for f in p)
    assert allf == list(range(400)), "epoch %d: not every file once" % epoch
    assert sorted(len(p) for p in parts) == [100] * 4, [len(p) for p in parts]
# nodes (LOCAL_WORLD_SIZE 2 of WORLD_SIZE 4): still every file once, each
# node reading only its own shards
parts = [sd.shuffle_plan(400, home, 16, 3, 5, 0, r, 4, w, 2, 2) for r in range(4) for w in (0, 1)]
assert sorted(f for p in parts for f in p) == list(range(400))
node = [set(home[f] for p in parts[k * 4:k * 4 + 4] for f in p) for k in (0, 1)]
assert not node[0] & node[1] and len(node[0] | node[1]) == 16, node
print("ok")
'

py "plan: the order differs between epochs and between seeds; the same seed and epoch give the same" '
import seclaunch_data as sd
home = [i // 25 for i in range(400)]
p = lambda seed, epoch: sd.shuffle_plan(400, home, 16, 3, seed, epoch)
assert p(1, 0) == p(1, 0), "same seed, same epoch: another order"
assert p(1, 0) != p(1, 1), "epochs 0 and 1: the same order"
assert p(1, 0) != p(2, 0), "seeds 1 and 2: the same order"
assert p(1, 0) != sorted(p(1, 0)), "not shuffled"
first = lambda o: [home[f] for f in o[:5]]
assert [home[f] for f in p(1, 0)] != sorted(home), "shards in their order"
print("ok")
'

py "plan: at most RESIDENT shards are open at any point of the sequence (files drawn among them)" '
import seclaunch_data as sd
home = [i // 25 for i in range(400)]
o = sd.shuffle_plan(400, home, 16, 3, 9, 0)
last = {home[f]: t for t, f in enumerate(o)}
first = {}
for t, f in enumerate(o):
    first.setdefault(home[f], t)
most = max(sum(1 for s in first if first[s] <= t <= last[s]) for t in range(400))
assert most <= 3, most
# within the buffer files of different shards are mixed
switches = sum(1 for a, b in zip(o, o[1:]) if home[a] != home[b])
assert switches > 100, switches
print("ok")
'

# a streamed dataset through the stand-in service: 8 shards of 4000 bytes,
# files of 90..310 bytes back to back (some spanning two shards)
cat >mk.py <<'EOF'
import hashlib, json, sys
import fake_dsvc
def layout():
    sizes = [4000] * 8
    files, off, i = [], 0, 0
    while off < sum(sizes):
        n = min(90 + (i * 37) % 220, sum(sizes) - off)
        files.append({"path": "f%04d" % i, "offset": off, "size": n, "mode": 420})
        off, i = off + n, i + 1
    return sizes, files
EOF
cat >rank.py <<'EOF'
import hashlib, json, os, sys, warnings
import torch.utils.data as tud
import seclaunch_data as sd
out, workers = sys.argv[1], int(sys.argv[2])
warnings.simplefilter("error")  # the shuffle itself must not warn
ds = sd.TorchFiles("ds", shuffle=True, seed=11, with_path=True)
assert isinstance(ds, tud.IterableDataset), type(ds)
seen = {}
for epoch in range(2):
    ds.set_epoch(epoch)
    loader = tud.DataLoader(ds, batch_size=4, num_workers=workers, collate_fn=lambda b: b)
    seen[epoch] = [(p, hashlib.sha256(b).hexdigest()) for batch in loader for p, b in batch]
json.dump({"seen": seen, "len": len(ds)}, open(out, "w"))
EOF
py "2 ranks x 2 DataLoader workers, TorchFiles(shuffle=True) over the stand-in service: every file once per epoch, exact bytes, each process opening a shard once (twice for a file spanning into it)" '
import hashlib, json, os, subprocess, sys, tempfile
sys.path.insert(0, ".")
import mk, fake_dsvc
sizes, files = mk.layout()
svc = fake_dsvc.FakeService(tempfile.mkdtemp(), sizes, linger0=True)
plain = svc.plaintext()
want = {f["path"]: hashlib.sha256(plain[f["offset"]:f["offset"] + f["size"]]).hexdigest() for f in files}
assert any(f["offset"] // 4000 != (f["offset"] + f["size"] - 1) // 4000 for f in files), "no spanning file"
procs = []
for r in (0, 1):
    env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", **svc.env("ds", files))
    procs.append(subprocess.Popen([sys.executable, "rank.py", "r%d.json" % r, "2"], env=env))
assert all(p.wait(120) == 0 for p in procs), "a rank failed"
res = [json.load(open("r%d.json" % r)) for r in (0, 1)]
for e in ("0", "1"):
    got = [x for r in res for x in r["seen"][e]]
    assert sorted(p for p, _ in got) == sorted(want), "epoch %s: not every file exactly once" % e
    assert all(want[p] == s for p, s in got), "epoch %s: wrong bytes" % e
for r in res:
    assert [p for p, _ in r["seen"]["0"]] != [p for p, _ in r["seen"]["1"]], "same order in both epochs"
    assert abs(r["len"] - len(files) / 2) <= 1, r["len"]
per = {}
for conn, shard in svc.opened:
    per[(conn, shard)] = per.get((conn, shard), 0) + 1
# a spanning file reads its second shard beside the buffer: that one may
# be opened again; a home shard never
assert max(per.values()) <= 2, sorted(per.items(), key=lambda kv: -kv[1])[:5]
print("opened per process and shard: at most", max(per.values()), "decrypted", svc.decrypted)
'

cat >mapstyle.py <<'EOF'
import json, sys, warnings
import torch.utils.data as tud
import seclaunch_data as sd
mode = sys.argv[1]
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    if mode == "map":
        loader = tud.DataLoader(sd.TorchFiles("ds"), batch_size=8, shuffle=True,
                                collate_fn=lambda b: b,
                                generator=__import__("torch").Generator().manual_seed(1))
    else:
        loader = tud.DataLoader(sd.TorchFiles("ds", shuffle=True), batch_size=8,
                                collate_fn=lambda b: b)
    n = sum(len(b) for b in loader)
    # a second epoch repeats files: a new pass, nothing more said
    n += sum(len(b) for b in loader)
msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
print(json.dumps({"n": n, "warnings": msgs}))
EOF
py "map-style DataLoader(shuffle=True) over a streamed dataset: warned once, naming TorchFiles(shuffle=True); the shard-aware shuffle is not" '
import json, os, subprocess, sys, tempfile
sys.path.insert(0, ".")
import mk, fake_dsvc
sizes, files = mk.layout()
out = {}
for mode in ("map", "shuffle"):
    svc = fake_dsvc.FakeService(tempfile.mkdtemp(), sizes, linger0=True)
    env = dict(os.environ, **svc.env("ds", files))
    r = subprocess.run([sys.executable, "mapstyle.py", mode], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out[mode] = (json.loads(r.stdout), sum(svc.decrypted))
(m, md), (s, sdc) = out["map"], out["shuffle"]
assert m["n"] == s["n"] == 2 * len(files), (m["n"], s["n"])
assert len(m["warnings"]) == 1, m["warnings"]
assert "TorchFiles(%r, shuffle=True)" % "ds" in m["warnings"][0] and "decrypted again" in m["warnings"][0], m["warnings"]
assert s["warnings"] == [], s["warnings"]
# the map-style reads decrypt far more than the 8 shards per epoch
assert md > 4 * 16 and sdc <= 2 * 8 + 8, (md, sdc)
print("decrypted: map-style", md, "shard-aware", sdc)
'
finish
