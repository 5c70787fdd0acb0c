#!/usr/bin/env bash
# Policy signature verification and evaluation against the stock minisign
# tool, in one run (hyperfine, process start included on both sides):
#   - `minisign -V` of a signed policy (the peer);
#   - `seclaunch policy verify` of the same policy and signature (minisign
#     check + parse + validation of every rule);
#   - `seclaunch policy explain` (verify + one full evaluation);
#   - `seclaunch version`: the binary's own start-up (libraries, hardening),
#     to tell it apart from the policy work.
# The policy has 200 dataset rules so validation and evaluation have work.
# Prints milliseconds per call and the ratios. Not a test.
set -euo pipefail
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
SL=$SL_BIN/seclaunch
for tool in minisign hyperfine python3; do
	command -v "$tool" >/dev/null || { echo "60-policy: $tool is not installed (scripts/install-deps)"; exit 1; }
done
[ -x "$SL" ] || { echo "60-policy: $SL not built"; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/sl-bench-policy.XXXXXX")
trap 'rm -rf "$D"' EXIT
cd "$D"

python3 - >policy.json <<'PY'
import json
ds = [{"id": f"set-{i}-*", "allowed_regions": ["eu", "gcp:europe-*"], "denied_regions": ["aws:eu-south-*"],
       "tee_kinds": ["sev-snp", "tdx"], "measurements": {"sev-snp": {"measurement": ["ab" * 48]}},
       "min_tcb": {"sev-snp": {"snp": 8, "microcode": 115}}, "require_gpu_cc": True} for i in range(200)]
print(json.dumps({"version": 1, "datasets": ds, "keys": {"k": ["set-*"]}}))
PY
printf '{"binding":"verified","tee.kind":"sev-snp","snp.measurement":"%s","snp.policy.debug":"false","snp.reported_tcb.snp":"9","snp.reported_tcb.microcode":"200","gpu.cc":"on","cloud.provider":"gcp","cloud.region":"europe-west4","cloud.region_verified":"true"}' \
	"$(python3 -c 'print("ab"*48)')" >claims.json
minisign -G -W -p p.pub -s p.key >/dev/null
minisign -S -s p.key -m policy.json >/dev/null
echo "policy: $(stat -c %s policy.json) bytes, 200 dataset rules"

hyperfine -N --warmup 3 --runs 50 --export-json h.json \
	-n minisign "minisign -V -q -p p.pub -m policy.json" \
	-n startup "$SL version" \
	-n verify "$SL policy verify -q --policy policy.json --policy-pubkey p.pub" \
	-n explain "$SL policy explain -q --policy policy.json --policy-pubkey p.pub --claims claims.json --dataset set-7-a --key k" \
	>/dev/null
python3 - <<'PY'
import json
r = {x["command"]: x["mean"] * 1000 for x in json.load(open("h.json"))["results"]}
for k in ("minisign", "startup", "verify", "explain"):
    print(f"{k:10s} {r[k]:7.2f} ms/call")
print(f"verify / minisign -V  = {r['verify'] / r['minisign']:.2f}x")
print(f"explain / minisign -V = {r['explain'] / r['minisign']:.2f}x")
print(f"verify beyond seclaunch's own start-up ({r['startup']:.2f} ms): {r['verify'] - r['startup']:.2f} ms")
PY
