#!/usr/bin/env bash
# One attested launch, one lease for every key: real swtpm (two machines),
# seclaunchd --dev with a signed policy whose key_ttl is 4 s.
# - a run with --output holds its output key under the lease: renewals are
#   recorded (kms.renew, run.lease_renewed); its AK revoked mid-run stops it
#   (exit 3, as a plain run), a checkpoint asked for after the lease ended is
#   refused, the checkpoints sealed before stay intact (a second machine
#   restores the newest);
# - a run with --resume and --output attests once: one evidence verification
#   on the KMS, one kms.release naming the input, the resumed checkpoint and
#   the output;
# - output keys the KMS refuses (a disabled KEK), or a destination the
#   policy refuses: exit 4 before anything is staged (no run.stage).
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3 curl; do
	if ! command -v "$tool" >/dev/null; then
		skip run_launch_once "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help 2>/dev/null | grep -q -- --output || [ ! -x "$SLD" ]; then
	skip run_launch_once "seclaunch run --output or seclaunchd not built"
	finish
fi
PY=$(python3 -c "import sys; print(sys.executable)")
AUDIT=$T/audit.log
start_swtpm tpmA || { echo "not ok - no swtpm"; exit 1; }
TCTI_A=$SWTPM_TCTI
start_swtpm tpmB || { echo "not ok - no second swtpm"; exit 1; }
TCTI_B=$SWTPM_TCTI
unset SECLAUNCH_TCTI TPM2TOOLS_TCTI

minisign -G -W -p "$T/policy.pub" -s "$T/policy.key" >/dev/null 2>&1
DESTS="{\"url\": \"file://$T/dest*\", \"region\": \"gcp:europe-west4\"}"
cat >"$T/policy.json" <<EOF
{"version": 1, "allow_unverified_region": true,
 "keys": {"in-key": ["in-data"], "ckpt-key": ["model:*"], "off-key": ["off:*"]},
 "datasets": [
  {"id": "in-data", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "key_ttl": 4, "output_destinations": [$DESTS]},
  {"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "key_ttl": 4, "output_destinations": [$DESTS]},
  {"id": "off:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "output_destinations": [$DESTS]}
 ]}
EOF
minisign -S -s "$T/policy.key" -m "$T/policy.json" -t once >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/policy.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${KMSA[@]}" --tcti "$TCTI_A" --json >"$T/enrollA.json" 2>"$T/err"
AK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ak_name"])' "$T/enrollA.json")
assert "enrolled TPM A" test -n "$AK"
check "enroll TPM B" 0 "$SL" enroll "${KMSA[@]}" --tcti "$TCTI_B"
for k in in-key ckpt-key off-key; do
	check "create $k" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id "$k"
done
check "disable off-key" 0 "$SL" key disable "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id off-key
head -c 4096 /dev/urandom >"$T/in.bin"
check "encrypt the input" 0 "$SL" encrypt "${KMSA[@]}" --key-id in-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id in-data -q "$T/in.bin" -o "$T/in.sld"
rm -f "$T/in.bin"

# The job: writes its model, asks for a checkpoint every 0.4 s and logs each
# answer; on SIGTERM it asks for one more, logs the answer and exits.
cat >"$T/job.py" <<'EOF'
import os, signal, sys, time
log, secs = sys.argv[1], float(sys.argv[2])
out = os.environ["SECLAUNCH_OUTPUT_DIR"]
req, status = os.path.join(out, ".seclaunch-checkpoint-request"), os.path.join(out, ".seclaunch-checkpoint")
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
def ask(n):
    open(req, "w").write("x")
    end = time.time() + 5
    while time.time() < end:
        try:
            s = open(status).read().strip()
            if int(s.split()[0]) >= n:
                open(log, "a").write(s + "\n")
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    open(log, "a").write("%d timeout\n" % n)
n, t0 = 0, time.time()
while time.time() - t0 < secs:
    n += 1
    open(os.path.join(out, "model", "w.txt"), "w").write("step %d\n" % n)
    ask(n)
    if stop:
        break
    time.sleep(0.4)
if stop:
    n += 1
    ask(n)
EOF
RUN=(--policy "$T/policy.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --stage host
	--region gcp:europe-west4 --audit-log "$AUDIT" --checkpoint-min-interval 0)
metric() { # the KMS's evidence verifications so far
	curl -sf --cacert "$KMS_CA" -H "Authorization: Bearer $(cat "$KMS_TOKEN")" "$KMS_URL/metrics" |
		awk '$1 == "seclaunchd_evidence_verified_total" {print $2}'
}
kms_count() { grep -c "\"event\":\"$1\"" "$KMS_STATE/audit.log"; }

# ---- one lease for every key: AK revoked mid-run ---------------------------
"$SL" run "${RUN[@]}" --tcti "$TCTI_A" --kill-grace 3 --lease-grace 1 --output model="$T/dest" \
	"$T/in.sld" -- "$PY" "$T/job.py" "$T/job.log" 60 >"$T/lease.out" 2>&1 &
LPID=$!
for _ in $(seq 300); do
	n=$(grep -c '"run.lease_renewed"' "$AUDIT" 2>/dev/null)
	[ "${n:-0}" -ge 2 ] && break
	kill -0 "$LPID" 2>/dev/null || break
	sleep 0.05
done
assert "output run: the lease is announced" grep -q "lease: 4 s, renewed every 2 s" "$T/lease.out"
assert "output run: renewals in the run's audit log (run.lease_renewed)" \
	test "$(grep -c '"run.lease_renewed"' "$AUDIT")" -ge 2
assert "output run: seclaunchd recorded the renewals, naming the output (kms.renew)" \
	bash -c "grep '\"kms.renew\"' '$KMS_STATE/audit.log' | grep -q '\"outputs\":\[{\"output_id\":\"model:'"
assert "output run: checkpoints were sealed before the revocation" grep -q " ok$" "$T/job.log"
check "revoke TPM A's AK mid-run" 0 "$SL" enroll revoke "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" "$AK"
rc=124
for _ in $(seq 200); do
	kill -0 "$LPID" 2>/dev/null || { wait "$LPID"; rc=$?; break; }
	sleep 0.1
done
[ "$rc" -eq 124 ] && { kill "$LPID"; wait "$LPID"; }
assert "AK revoked: the run is stopped at the next renewal, exit 3 (rc $rc)" test "$rc" -eq 3
assert "AK revoked: run.lease_ended names the revoked AK" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'ak_revoked'"
assert "AK revoked: the checkpoint asked for after the lease ended is refused" \
	bash -c "tail -1 '$T/job.log' | grep -q 'error: .*lease ended'"
assert "AK revoked: the final seal is refused too (nothing sealed after the lease)" \
	bash -c "grep '\"run.output\"' '$AUDIT' | tail -1 | grep -q '\"deny\".*lease ended'"
assert "AK revoked: the output folder and keys are wiped" \
	bash -c "tail -n 1 '$AUDIT' | grep -q '\"run.wipe\".*\"all_zeroed\":true'"
LAST=$(tr -d '\n' <"$T/dest/LATEST")
OKS=$(grep -c " ok$" "$T/job.log")
assert "AK revoked: LATEST names the last checkpoint sealed under the lease ($LAST = $OKS)" \
	test "$LAST" -eq "$OKS"

# ---- resume + output: one attested launch ---------------------------------
V0=$(metric)
R0=$(kms_count kms.release)
O0=$(kms_count kms.output)
N0=$(kms_count kms.renew)
check "resume + output on TPM B: exit 0" 0 "$SL" run "${RUN[@]}" --tcti "$TCTI_B" \
	--resume model="$T/dest" --output model="$T/dest2" "$T/in.sld" -- "$PY" "$T/job.py" "$T/job2.log" 0.5
V1=$(metric)
# each renewal verifies fresh evidence too: the launch's own is the rest
RN=$(($(kms_count kms.renew) - N0))
assert "resume + output: the restored checkpoint is the newest sealed one" \
	bash -c "grep '\"run.resume\"' '$AUDIT' | tail -1 | grep -q '\"sequence\":$LAST'"
assert "resume + output: one evidence verification for the launch ($V0 -> $V1, $RN renewals)" \
	test "$((V1 - V0 - RN))" -eq 1
assert "resume + output: one kms.release, no kms.output" \
	test "$(($(kms_count kms.release) - R0))" -eq 1 -a "$(kms_count kms.output)" -eq "$O0"
RID=$(grep '"run.resume"' "$AUDIT" | tail -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["dataset_id"])')
assert "resume + output: kms.release names the input, the resumed checkpoint ($RID) and the output" \
	bash -c "grep '\"kms.release\"' '$KMS_STATE/audit.log' | tail -1 | grep -F '\"in-data\"' | grep -F '\"$RID\"' | grep -q '\"outputs\":\[{\"output_id\":\"model:'"

# ---- refusals before anything is staged -------------------------------------
S0=$(grep -c '"run.stage"' "$AUDIT")
check_err "output key the KMS refuses (disabled KEK): exit 4" 4 "off-key|key_disabled" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --output off="$T/dest3" "$T/in.sld" -- true
assert "KMS refusal: nothing was staged (no run.stage)" test "$(grep -c '"run.stage"' "$AUDIT")" -eq "$S0"
V2=$(metric)
check_err "an output destination the policy refuses: exit 4" 4 "denies output" \
	"$SL" run "${RUN[@]}" --tcti "$TCTI_B" --output model="$T/elsewhere" "$T/in.sld" -- true
assert "destination refusal: nothing was staged (no run.stage)" test "$(grep -c '"run.stage"' "$AUDIT")" -eq "$S0"
assert "destination refusal: no evidence went to the KMS" test "$(metric)" -eq "$V2"
check "the audit log of these runs verifies" 0 "$SL" audit verify --chain-only "$AUDIT"
finish
