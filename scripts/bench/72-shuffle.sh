#!/usr/bin/env bash
# Shuffled against unshuffled reading of a streamed dataset (--stage
# stream) 4 times larger than --window, through the Python helper in a
# DataLoader with 2 workers: samples/s of an epoch (the second, measured
# in the job, the launch left out) in the manifest's order
# (TorchIterableFiles) and in the shard-aware shuffle (TorchFiles(shuffle=
# True)), the ratio against the goal (>= 0.8), the run.wipe counters of
# each, and for reference a map-style DataLoader(shuffle=True) over the
# same streamed dataset (for SL_BENCH_SHUF_MAP_S seconds, default 20) and
# over the dataset staged whole (--stage host). SL_BENCH_SHUF_FILES
# (default 20000 files of 4-16 KiB, about 200 MiB, 4 MiB shards).
set -uo pipefail
. "$(dirname "$0")/lib.bash"
. "$ROOT/tests/integration/run_lib.bash"
need_tools python3 swtpm
cd "$W" || die "no temp dir"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
"$PY" -c 'import torch.utils.data' 2>/dev/null || {
	echo "shuffle: skipped (python3-torch not installed for $PY)"
	exit 0
}
nf=${SL_BENCH_SHUF_FILES:-20000}
"$PY" - "$W/src" "$nf" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "%03d" % (i // 1000))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "%06d.bin" % i), "wb") as f:
        f.write(os.urandom(4096 + (i * 7919) % 12288))
EOF
total=$(du -sb "$W/src" | cut -f1)
window=$((total / 4))
start_tpm tpm || die "swtpm did not start"
start_kms "$W/kms" || die "seclaunchd did not start"
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q || die enroll
"$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q || die "key create"
"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" --dataset-id shuf \
	--shard-size 4M -q "$W/src" -o "$W/ds" || die encrypt
cat >"$W/epoch.py" <<'EOF'
# epoch.py OUT MODE: 2 epochs through a DataLoader (2 workers, batches of
# 32); the second one timed (map modes: at most MAP_S seconds)
import json, os, sys, time
import torch.utils.data as tud
import seclaunch_data as sd
out, mode = sys.argv[1], sys.argv[2]
limit = float(os.environ.get("MAP_S", "20"))
col = lambda b: len(b)
if mode == "order":
    data = sd.TorchIterableFiles("shuf")
    mk = lambda: tud.DataLoader(data, batch_size=32, num_workers=2, collate_fn=col)
elif mode == "shuffle":
    data = sd.TorchFiles("shuf", shuffle=True, seed=1)
    mk = lambda: tud.DataLoader(data, batch_size=32, num_workers=2, collate_fn=col)
else:
    data = sd.TorchFiles("shuf")
    mk = lambda: tud.DataLoader(data, batch_size=32, num_workers=2, shuffle=True, collate_fn=col)
r = {}
for e in range(1 if mode.startswith("map") else 2):
    if hasattr(data, "set_epoch"):
        data.set_epoch(e)
    n, t0 = 0, time.perf_counter()
    for b in mk():
        n += b
        if mode.startswith("map") and time.perf_counter() - t0 > limit:
            break
    r = {"n": n, "s": time.perf_counter() - t0}
json.dump(r, open(out, "w"))
EOF
for mode in order shuffle map map-host; do
	stage=stream
	[ "$mode" = map-host ] && stage=host
	"$SL" run --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}" \
		--tcti "$SWTPM_TCTI" --stage "$stage" --window "$window" --audit-log "$W/$mode.log" \
		--env "PYTHONPATH=$ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1 \
		--env "MAP_S=${SL_BENCH_SHUF_MAP_S:-20}" --env OMP_NUM_THREADS=1 -q "$W/ds" -- \
		"$PY" "$W/epoch.py" "$W/$mode.json" "$mode" 2>"$W/$mode.err" ||
		die "run --stage $stage ($mode) failed: $(tail -3 "$W/$mode.err")"
done
"$PY" - "$W" "$nf" "$total" "$window" "$(find "$W/ds" -name 'shard-*.sld' | wc -l)" <<'EOF'
import json, sys
w, nf, total, window, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def rec(mode):
    r = json.load(open("%s/%s.json" % (w, mode)))
    wipe = {}
    for line in open("%s/%s.log" % (w, mode)):
        j = json.loads(line)
        if j.get("event") == "run.wipe":
            wipe = next((d for d in j["details"]["staged"] if d.get("method") == "stream"), {})
    return r["n"] / r["s"], r["n"], wipe
print("shuffle: %d files (%.0f MiB, %s shards of 4 MiB), --window %.0f MiB, DataLoader with 2 workers:"
      % (nf, total / 2**20, ns, window / 2**20))
res = {}
names = {"order": "streamed, in order (TorchIterableFiles), epoch 2",
         "shuffle": "streamed, TorchFiles(shuffle=True), epoch 2",
         "map": "streamed, map-style DataLoader(shuffle=True)",
         "map-host": "staged whole, map-style DataLoader(shuffle=True)"}
for m in ("order", "shuffle", "map", "map-host"):
    rate, n, wipe = rec(m)
    res[m] = rate
    extra = ""
    if wipe:
        extra = "  (run: shards staged %d, decrypted again %d)" % (wipe["shards_staged"],
                                                                   wipe["shards_refetched"])
    print("  %-52s %8.0f samples/s%s" % (names[m] + ":", rate, extra))
print("  ratio shuffled / unshuffled: %.2fx (goal >= 0.8x)" % (res["shuffle"] / res["order"]))
print("  ratio shuffled streamed / map-style staged whole: %.2fx" % (res["shuffle"] / res["map-host"]))
EOF
