#!/usr/bin/env bash
# TorchFiles(shuffle=True) through a real `seclaunch run --stage stream`
# (swtpm, seclaunchd over TLS) over a dataset 4 times larger than --window:
# 2 ranks (RANK/WORLD_SIZE, stepping together over gloo as under DDP) x 2
# DataLoader workers read every file exactly once per epoch with its exact
# bytes, in another order each epoch, and run.wipe says each shard was
# decrypted once per epoch (shards_staged, shards_refetched). A map-style DataLoader(shuffle=True) over the same
# dataset decrypts shards again and again: run.wipe counts it, and the job
# is warned once to use TorchFiles(shuffle=True).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

job_prologue run_shuffle swtpm
if ! "$PY" -c 'import torch.utils.data' 2>/dev/null; then
	skip run_shuffle "python3-torch is not installed for $PY"
	finish
fi
NF=${SL_TEST_SHUFFLE_FILES:-1200}

"$PY" - src "$NF" <<'EOF'
import hashlib, os, sys
d, n = sys.argv[1], int(sys.argv[2])
with open("want.sums", "w") as sums:
    for i in range(n):
        p = "d%02d/s%05d.bin" % (i // 100, i)
        os.makedirs(os.path.join(d, os.path.dirname(p)), exist_ok=True)
        b = os.urandom(1500 + (i * 7919) % 2500)
        open(os.path.join(d, p), "wb").write(b)
        sums.write("%s %s\n" % (hashlib.sha256(b).hexdigest(), p))
EOF
start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
kms_enrolled
check "encrypt $NF files (about 3 MiB) as a sharded dataset of 256 KiB shards" 0 \
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id shuf-1 --shard-size 256K -q src -o ds
NS=$(find ds -name 'shard-*.sld' | wc -l)
assert "the dataset has at least 8 shards ($NS)" test "$NS" -ge 8

cat >ranks.py <<'EOF'
# ranks.py OUT MODE EPOCHS [RANKS WORKERS]: RANKS ranks (RANK/WORLD_SIZE,
# gloo: one all-reduce per batch, as DistributedDataParallel does), each a
# DataLoader with WORKERS workers; MODE shuffle (TorchFiles(shuffle=True))
# or map (map-style TorchFiles with a shuffling DistributedSampler)
import hashlib, json, os, socket, subprocess, sys
out, mode, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
ranks, workers = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (2, 2)
if os.environ.get("RANK") is None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ps = [subprocess.Popen([sys.executable] + sys.argv,
                           env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks),
                                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
          for r in range(ranks)]
    sys.exit(max(p.wait() for p in ps))
import torch
import torch.distributed as dist
import torch.utils.data as tud
import seclaunch_data as sd
dist.init_process_group("gloo")
rank = dist.get_rank()
sha = lambda b: hashlib.sha256(b).hexdigest()
if mode == "shuffle":
    data = sd.TorchFiles("shuf-1", shuffle=True, seed=3, with_path=True, transform=sha)
    sampler = data
else:
    data = sd.TorchFiles("shuf-1", transform=sha)
    sampler = tud.distributed.DistributedSampler(data, seed=3)
loader = tud.DataLoader(data, batch_size=8, num_workers=workers,
                        sampler=None if mode == "shuffle" else sampler,
                        collate_fn=(lambda b: b) if mode == "shuffle" else
                        (lambda b: [(None, x) for x in b]))
seen = {}
for e in range(epochs):
    sampler.set_epoch(e)
    seen[e] = []
    more = torch.ones(1)
    it = iter(loader)
    while True:
        # the ranks step together, as under DistributedDataParallel (a rank
        # that ran out joins the reduce until all have)
        batch = next(it, None)
        more[0] = 0 if batch is None else 1
        dist.all_reduce(more)
        if batch is not None:
            seen[e] += batch
        if more[0] == 0:
            break
json.dump(seen, open("%s.%d" % (out, rank), "w"))
dist.destroy_process_group()
EOF
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --env "PYTHONPATH=$SL_ROOT/jobside/python"
	--env PYTHONDONTWRITEBYTECODE=1 --env OMP_NUM_THREADS=1)
wipe_rec() { # audit-log: shards_staged shards_refetched of the stream's run.wipe
	"$PY" - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "run.wipe":
        for d in r["details"]["staged"]:
            if d.get("method") == "stream":
                print(d["shards_staged"], d["shards_refetched"])
EOF
}
shufrun() { # name mode epochs [ranks workers]
	"$SL" run "${RUNA[@]}" --audit-log "$T/$1.log" --stage stream --window "${WINDOW:-768K}" -q \
		ds -- "$PY" ranks.py "$T/$1.json" "$2" "$3" "${@:4}" 2>"$T/$1.err"
}
verify() { # name epochs: every file once per epoch, exact bytes, orders differ
	"$PY" - "$T/$1.json" "$2" <<'EOF'
import json, sys
want = dict(reversed(l.split()) for l in open("want.sums"))
import glob
r = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + ".*"))]
orders = []
for e in range(int(sys.argv[2])):
    got = [x for k in r for x in k[str(e)]]
    if sorted(p for p, _ in got) != sorted(want) or any(want[p] != s for p, s in got):
        sys.exit("epoch %d: not every file once with its bytes" % e)
    orders.append([p for p, _ in r[0][str(e)]])
if len(orders) > 1 and orders[0] == orders[1]:
    sys.exit("the same order in both epochs")
EOF
}

check "TorchFiles(shuffle=True), 2 ranks x 2 workers, 1 epoch, --window 768K: exit 0" 0 \
	shufrun s1 shuffle 1
assert "1 epoch: every file exactly once across ranks and workers, exact bytes" verify s1 1
# seclaunch stages ahead in the manifest's order (before the job asks, and
# into room the readers leave): in the first epoch, shards it staged ahead
# that gave way to those the shuffle asked for are decrypted again when
# their turn comes; at most twice the window (3 shards of 256 KiB in
# 768 KiB). Every later epoch asks for every shard again, in its order, and
# stages ahead as the first did, so the margin is the first epoch's once
# per epoch: how many staged-ahead shards give way depends on how fast the
# readers go (7 in two epochs was seen on a loaded 2-CPU machine), while a
# reader that thrashes decrypts a shard again for most files (below)
read -r st1 re1 < <(wipe_rec "$T/s1.log")
assert "1 epoch: each of the $NS shards decrypted once, but for what was staged ahead (staged $st1, again $re1)" \
	test "$((${st1:-0} - ${re1:-0}))" = "$NS" -a "${re1:-99}" -le 6
check "TorchFiles(shuffle=True), 2 epochs: exit 0" 0 shufrun s2 shuffle 2
assert "2 epochs: every file once per epoch, exact bytes, another order in epoch 1" verify s2 2
read -r st2 re2 < <(wipe_rec "$T/s2.log")
assert "2 epochs: each shard decrypted once per epoch (staged $st2, again $re2)" \
	test "$((${st2:-0} - ${re2:-0}))" = "$NS" -a "${re2:-0}" -ge "$NS" -a "${re2:-99}" -le $((NS + 2 * 6))
assert "the shard-aware shuffle is not warned about" \
	bash -c "! grep -q 'TorchFiles' '$T/s2.err'"

check "map-style TorchFiles, DataLoader over a shuffling DistributedSampler, 1 epoch: exit 0" 0 \
	shufrun m1 map 1
read -r stm rem < <(wipe_rec "$T/m1.log")
assert "map-style random reads: shards decrypted again and again (staged $stm, again $rem)" \
	test "${rem:-0}" -gt $((2 * NS))
assert "map-style random reads: the job is warned once per process, naming TorchFiles(shuffle=True)" \
	test "$(grep -c "TorchFiles('shuf-1', shuffle=True)" "$T/m1.err")" -ge 1
finish
