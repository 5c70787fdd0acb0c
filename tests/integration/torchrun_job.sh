#!/usr/bin/env bash
# torchrun under `seclaunch run` (real swtpm, real seclaunchd, Debian's
# python3-torch on the CPU with gloo): `torchrun --standalone` starts two
# ranks that are not the job's first process; each reaches the sharded
# dataset through the data service, takes its DistributedSampler half, and
# trains a small DistributedDataParallel model. Every sample is seen exactly
# once across the ranks per epoch, with its exact bytes; RANK, WORLD_SIZE,
# LOCAL_RANK, MASTER_ADDR and MASTER_PORT are torchrun's; both ranks end
# with the same parameters; one key release serves the whole job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"

PY=/usr/bin/python3
if ! command -v swtpm >/dev/null; then
	skip torchrun_job "swtpm not installed"
	finish
fi
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch, torch.distributed' 2>/dev/null; then
	skip torchrun_job "python3-torch is not installed for /usr/bin/python3"
	finish
fi
TORCHRUN=$(command -v torchrun || true)
if [ -z "$TORCHRUN" ]; then
	skip torchrun_job "torchrun is not installed (python3-torch)"
	finish
fi
cd "$T" || exit 1

start_tpm tpm || exit 1
start_kms "$T/kms" || exit 1
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll the TPM" 0 "$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q
check "create a key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q
# 24 samples of 16 float32 features and a target, one file each
mkdir src
"$PY" - src <<'EOF2'
import os, random, struct, sys
r = random.Random(7)
for i in range(24):
    x = [r.uniform(-1, 1) for _ in range(16)]
    y = sum(x[:4]) - 0.5 * x[5]
    open(os.path.join(sys.argv[1], "sample-%02d.bin" % i), "wb").write(struct.pack("<17f", *x, y))
    # padding so that the dataset spans several shards
    open(os.path.join(sys.argv[1], "pad-%02d.raw" % i), "wb").write(os.urandom(20000))
EOF2
(cd src && sha256sum sample-*.bin) >want.sums
check "encrypt the samples as a sharded dataset" 0 "$SL" encrypt "${KMSA[@]}" --key-id ds-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id train-1 --shard-size 128K -q src -o ds
assert "several shards" test -e ds/shard-00002.sld

cat >train.py <<'EOF2'
import hashlib, json, os, struct, sys
import torch
import torch.distributed as dist
import seclaunch_data as sd


def sample(b):
    v = struct.unpack("<17f", b)
    return torch.tensor(v[:16]), torch.tensor([v[16]]), hashlib.sha256(b).hexdigest()


def collate(items):
    return (torch.stack([i[0] for i in items]), torch.stack([i[1] for i in items]),
            [i[2] for i in items])


def main():
    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    paths = [p for p in sd.files("train-1") if p.startswith("sample-")]
    data = sd.TorchFiles("train-1", paths, transform=sample)
    sampler = torch.utils.data.distributed.DistributedSampler(
        data, num_replicas=world, rank=rank, shuffle=True, seed=3)
    loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler,
                                         collate_fn=collate)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = {}
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen[epoch] = []
        for x, y, sums in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            seen[epoch] += [[None, s] for s in sums]
    params = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()
    env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                           "MASTER_ADDR", "MASTER_PORT")}
    json.dump({"rank": rank, "world": world, "seen": seen, "params": params, "env": env,
               "inherited_socket": os.environ.get("SECLAUNCH_DATA_SOCKET")},
              open(os.path.join(out, "rank%d.json" % rank), "w"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
EOF2
mkdir ranks
# Debian 12's torch 1.13 under Python 3.11 cannot parse torchrun's own
# default "--redirects 0 --tee 0" (an IntFlag change in 3.11 turns "0" into
# None); naming a stream other than none works around it
TRA=()
if "$PY" -c 'import sys
from torch.distributed.elastic.multiprocessing.api import Std
sys.exit(Std.from_str("0") is not None)'; then
	TRA=(--redirects 2 --tee 2)
fi
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --stage host --env "PYTHONPATH=$SL_ROOT/jobside/python"
	--env PYTHONDONTWRITEBYTECODE=1 --env OMP_NUM_THREADS=1 --audit-log "$T/audit.log")
before=$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")
check "seclaunch run -- torchrun --standalone --nproc_per_node 2 train.py: exit 0" 0 \
	"$SL" run "${RUNA[@]}" ds -- "$TORCHRUN" --standalone --nproc_per_node 2 "${TRA[@]}" train.py "$T/ranks"
[ -s ranks/rank0.json ] || grep -v "^ *File\|^ *\^" "$T/err" | tail -n 40
assert "one release for the whole job" \
	test "$(grep -c '"event":"kms.release"' "$KMS_STATE/audit.log")" = $((before + 1))
"$PY" - ranks want.sums >check.txt <<'EOF2'
import json, sys
r = [json.load(open("%s/rank%d.json" % (sys.argv[1], i))) for i in (0, 1)]
want = sorted(l.split()[0] for l in open(sys.argv[2]))
for epoch in ("0", "1"):
    a = [s for _, s in r[0]["seen"][epoch]]
    b = [s for _, s in r[1]["seen"][epoch]]
    print("epoch%s" % epoch, "once" if sorted(a + b) == want else "bad",
          "split" if len(a) == len(b) == len(want) // 2 and not set(a) & set(b) else "unsplit")
print("ranks", r[0]["rank"], r[1]["rank"], r[0]["world"])
for x in r:
    e = x["env"]
    print("env", e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_ADDR"] is not None,
          (e["MASTER_PORT"] or "").isdigit())
print("params", "same" if r[0]["params"] == r[1]["params"] else "differ")
print("socket", "set" if all(x["inherited_socket"] for x in r) else "unset")
EOF2
sed "s/^/    /" check.txt
assert "epoch 0: every sample seen exactly once across the ranks, with its bytes" grep -q "^epoch0 once" check.txt
assert "epoch 0: each rank got a disjoint half (DistributedSampler)" grep -q "^epoch0 once split" check.txt
assert "epoch 1 (reshuffled): every sample once again, split in halves" grep -q "^epoch1 once split" check.txt
assert "the ranks are 0 and 1 of a world of 2" grep -q "^ranks 0 1 2$" check.txt
assert "RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT reach each rank (torchrun's)" \
	test "$(grep -c -E '^env [01] 2 [01] True True$' check.txt)" = 2
assert "DDP kept the ranks' parameters equal (gloo all-reduce worked)" grep -q "^params same$" check.txt
assert "the ranks reached the data through the data service socket" grep -q "^socket set$" check.txt
assert "the run's wipe record says all zeroed" grep -q '"event":"run.wipe".*"all_zeroed":true' "$T/audit.log"
finish
