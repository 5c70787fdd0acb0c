#!/usr/bin/env bash
# Eight GPUs end to end: the NVML stand-in (tests/fakecuda/fakenvml.c)
# presents FAKENVML_GPUS GPUs, each with its own five-certificate chain up to
# a test root (tests/fakecuda/mkgpus.sh) and its own signed report around the
# nonce the collector asks; `seclaunch attest` gathers all of them into one
# item; `seclaunch run --stage gpu` against seclaunchd --dev with a signed
# policy `gpu: {"count": 8, "mode": "cc"}` is released the key, and is
# refused, each with its reason and before any key is released, for seven
# GPUs, one GPU presenting another's identity, a GPU answering another
# nonce, one GPU not in CC mode, a report with a flipped bit. A set spliced
# from two collections (mixed nonces) is refused by `verify`. The programs
# under test are the test copies that pin the test root beside NVIDIA's
# (build/tests/nvgpu-testroot/); bin/seclaunch refuses the same evidence.
# A policy asking `mode: "ppcie"` is refused: no NVSwitch attestation.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign openssl python3; do
	if ! command -v "$tool" >/dev/null; then
		skip gpu_set "$tool not installed"
		finish
	fi
done
TB=$SL_BUILD/tests/nvgpu-testroot
FAKE=$SL_BUILD/tests/fakecuda/libcuda.so.1
FAKENVML=$SL_BUILD/tests/fakecuda/libnvidia-ml.so.1
JLIB=$SL_BUILD/jobside/libseclaunch_data.so
for f in "$TB/seclaunch" "$TB/seclaunchd" "$FAKE" "$FAKENVML" "$JLIB"; do
	if [ ! -e "$f" ]; then
		skip gpu_set "$f not built (make build-tests)"
		finish
	fi
done
PROD=$SL
SL=$TB/seclaunch
SLD=$TB/seclaunchd

"$SL_ROOT/tests/fakecuda/mkgpus.sh" "$T/g" 8
echo on >"$T/cc"
export LD_LIBRARY_PATH=$(dirname "$FAKENVML") FAKENVML_DIR=$T/g FAKENVML_CC=$T/cc \
	FAKENVML_GPUS=8 SECLAUNCH_TEST_NVGPU_ROOT_SHA256=$(cat "$T/g/root.sha256") \
	SECLAUNCH_LIBCUDA=$FAKE SECLAUNCH_DATA_LIB=$JLIB FAKECUDA_REPORT=$T/run.report

# --- collection and verification by the CLI --------------------------------
N1=$(openssl rand -hex 32)
N2=$(openssl rand -hex 32)
check "attest: eight GPUs collected" 0 "$SL" attest --tee nvidia-gpu --nonce "$N1" -o "$T/ev1.json"
assert "attest: one item with eight GPUs' reports" [ "$(python3 -c 'import json,sys
print(len(json.load(open(sys.argv[1]))["gpus"]))' "$T/ev1.json")" = 8 ]
check "verify: the eight-GPU set verifies" 0 "$SL" verify "$T/ev1.json" --nonce "$N1"
assert "verify: gpu.count=8, every GPU in CC mode (multi-GPU passthrough)" \
	[ "$(claim gpu.count)/$(claim gpu.cc)/$(claim gpu.mode)" = 8/on/cc-multi-gpu ]
assert "verify: each GPU its own device id (gpu.7.ueid), the set's is mixed" \
	[ "$(claim gpu.7.ueid)/$(claim gpu.0.ueid)/$(claim gpu.ueid)" = 48b02d28458fdd07/48b02d28458fdd00/mixed ]
assert "verify: every report bound to the nonce" [ "$(claim gpu.binding)/$(claim gpu.3.nonce)" = "verified/$N1" ]
check_err "bin/seclaunch (NVIDIA's root only) refuses the test root" 3 \
	'evidence.gpus\[0\]: GPU certificate chain: no certificate is the pinned NVIDIA Device Identity CA' \
	"$PROD" verify "$T/ev1.json" --nonce "$N1"
check "attest again, another nonce" 0 "$SL" attest --tee nvidia-gpu --nonce "$N2" -o "$T/ev2.json"
python3 -c 'import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
a["gpus"][3]=b["gpus"][3]; json.dump(a,open(sys.argv[3],"w"))' "$T/ev1.json" "$T/ev2.json" "$T/mix.json"
check_err "verify: GPU 3 from another collection (mixed nonces) refused" 3 \
	"GPU 3's report is bound to nonce ${N2:0:16}\.\.\., GPU 0's to ${N1:0:16}\.\.\." \
	"$SL" verify "$T/mix.json" --no-binding
check_err "verify: the spliced set with the binding checked: GPU 3 refused" 3 \
	'evidence.gpus\[3\]: GPU report: request.nonce does not equal the expected binding' \
	"$SL" verify "$T/mix.json" --nonce "$N1"
python3 -c 'import json,sys
a=json.load(open(sys.argv[1])); a["gpus"][6]=a["gpus"][1]; json.dump(a,open(sys.argv[2],"w"))' \
	"$T/ev1.json" "$T/dup.json"
check_err "verify: the same GPU's report twice refused" 3 \
	'GPU 6 is GPU 1 again \(device id 48b02d28458fdd01\): each GPU counts once' \
	"$SL" verify "$T/dup.json" --nonce "$N1"

# --- a policy that needs NVSwitch attestation -------------------------------
cat >"$T/ppcie.json" <<'JSON'
{"version": 1, "keys": {"k": ["d"]},
 "datasets": [{"id": "d", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "gpu": {"count": 8, "mode": "ppcie"}}]}
JSON
check_err "policy gpu.mode ppcie refused: NVSwitches cannot be attested" 2 \
	'gpu.mode: "ppcie" is not supported: .*NVSwitch attestation \(NSCQ\)' \
	"$SL" policy check --policy "$T/ppcie.json"

# --- seclaunch run against seclaunchd --dev ---------------------------------
start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'JSON'
{"version": 1, "description": "gpu_set test policy", "allow_unverified_region": true,
 "keys": {"set-key": ["eight"]},
 "datasets": [{"id": "eight", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "gpu": {"count": 8, "mode": "cc"}}]}
JSON
minisign -S -s "$T/p.key" -m "$T/policy.json" -t gpu >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id set-key
head -c 100000 /dev/urandom >"$T/plain"
check "encrypt" 0 "$SL" encrypt "${K[@]}" --key-id set-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id eight -q "$T/plain" -o "$T/eight.sld"
RUNA=(--policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --audit-log "$T/audit.log" --stage gpu "$T/eight.sld" -- true)
released() { grep -q '"run.release"' "$T/audit.log"; }

check "run: eight GPUs in CC mode, the policy's gpu rule met: released" 0 "$SL" run "${RUNA[@]}"
assert "run: the GPUs attested before staging" grep -q "GPU attested" "$T/err"
assert "run: the key released (audit)" released
# seclaunchd's own verification: its release record carries the set's claims
kms_claim() { # KEY: the claim KEY of seclaunchd's last allowed kms.release record
	python3 -c 'import json,sys
def find(o, k):
    if isinstance(o, dict):
        if k in o and isinstance(o[k], str): return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None: return r
    return None
v = None
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "kms.release" and r.get("decision") == "allow": v = find(r, sys.argv[2])
print(v)' "$KMS_STATE/audit.log" "$1"
}
assert "seclaunchd verified the eight-GPU set: its release names gpu.count=8, gpu.cc=on" \
	[ "$(kms_claim gpu.count)/$(kms_claim gpu.cc)" = 8/on ]
assert "seclaunchd: GPU 7 in the set with its own device id" \
	[ "$(kms_claim gpu.7.ueid)" = 48b02d28458fdd07 ]

refused() { # NAME WANT_RC PATTERN ENV...
	local name=$1 want=$2 pat=$3
	shift 3
	: >"$T/audit.log"
	check_err "run refused: $name" "$want" "$pat" env "$@" "$SL" run "${RUNA[@]}"
	assert "run refused ($name): no key released" bash -c "! grep -q '\"run.release\"' '$T/audit.log'"
}
refused "seven GPUs (policy)" 4 'gpu.count: not the GPUs attested as one set \(gpu.count=7\), the rule asks 8' \
	FAKENVML_GPUS=7
refused "GPU 5 presents GPU 2's identity" 3 'GPU 5 is GPU 2 again \(device id 48b02d28458fdd02\)' \
	FAKENVML_REPEAT=5:2
refused "GPU 3 answers another nonce" 7 "GPU 3: the driver's report carries another nonce" \
	FAKENVML_NONCE=3
refused "GPU 4 not in CC mode" 3 'GPU 4 has gpu.cc=off, GPU 0 gpu.cc=on: a set does not mix' \
	FAKENVML_CC_OFF=4
refused "a flipped bit in GPU 6's report" 3 \
	'evidence.gpus\[6\]: GPU report: signature \(offset [0-9]+\) does not verify' FAKENVML_FLIP=6
finish
