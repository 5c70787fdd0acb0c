#!/usr/bin/env bash
# The SPANK plugin on a real single-host Slurm cluster (Debian's munged,
# slurmctld and slurmd started as children, slurm_lib.bash), a real swtpm and
# seclaunchd: `srun -n 2 --seclaunch-…` attests the node once for the step
# (one seclaunch serve, one release), both tasks read their halves of a
# sharded dataset through the data service, and at the step's end serve
# wipes and writes run.wipe with the Slurm job, step and node. A node whose
# TPM is not enrolled fails the step with seclaunch's message and exit 3; a
# policy denial fails it with exit 4 and the reasons; scancel mid-step still
# wipes and audits; a step without --seclaunch-* runs as before.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"
. "$(dirname "$0")/slurm_lib.bash"

SO=${SL_BUILD:-$SL_ROOT/build}/slurm/spank_seclaunch.so
PY=/usr/bin/python3
if missing=$(slurm_missing); then
	skip slurm_spank "$missing is not installed (slurmd, slurmctld, slurm-client, munge)"
	finish
fi
if [ ! -e "$SO" ]; then
	skip slurm_spank "$SO was not built (no /usr/include/slurm/spank.h: libslurm-dev)"
	finish
fi
for tool in swtpm minisign; do
	command -v "$tool" >/dev/null || {
		skip slurm_spank "$tool not installed"
		finish
	}
done
cd "$T" || exit 1
chmod 0755 "$T"

start_tpm tpm || exit 1
mkdir src
for i in $(seq 0 9); do head -c $((30000 + i * 1000)) /dev/urandom >"src/part-$i.bin"; done
serve_setup slurm_spank step /usr/bin/true --ok
TCTI_OK=$SWTPM_TCTI
start_swtpm tpm-stranger || exit 1
TCTI_STRANGER=$SWTPM_TCTI

plugstack() { # TCTI
	# a workload log per TPM: each replays to its own PCR 15
	printf 'required %s seclaunch=%s tcti=%s audit_log=%s workload_log=%s timeout=120 required=1\n' \
		"$SO" "$SL" "$1" "$T/serve-audit.log" "$T/wl-$(printf %s "$1" | md5sum | cut -c1-8).log" \
		>"$SLURM_DIR/plugstack.conf"
}
start_slurm "" || exit 1
plugstack "$TCTI_OK"
check "srun --help lists the plugin's options" 0 srun --help
assert "... --seclaunch-policy among them" grep -q -- "--seclaunch-policy" "$T/out"

cat >job.py <<'EOF2'
import hashlib, json, os, sys, time
import seclaunch_data as sd
rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
ds = sd.get("step-1")
mine = [p for i, p in enumerate(ds.files()) if i % world == rank]
out = {"rank": rank, "sums": {p: hashlib.sha256(bytes(ds.view(p))).hexdigest() for p in mine},
       "socket": os.environ.get("SECLAUNCH_DATA_SOCKET"),
       "token": bool(os.environ.get("SECLAUNCH_DATA_TOKEN")),
       "job": os.environ.get("SLURM_JOB_ID"), "step": os.environ.get("SLURM_STEP_ID")}
json.dump(out, open(os.path.join(sys.argv[1], "rank%d.json" % rank), "w"))
if len(sys.argv) > 2:
    open(os.path.join(sys.argv[1], "started%d" % rank), "w").close()
    time.sleep(float(sys.argv[2]))
EOF2
SA=(--seclaunch-policy="$T/policy.json" --seclaunch-pubkey="$T/policy.pub"
	--seclaunch-kms="$KMS_URL" --seclaunch-kms-ca="$KMS_CA" --seclaunch-data="$T/ds"
	--seclaunch-stage=host --seclaunch-region=gcp:europe-west4)
JOBENV=("--export=ALL,PYTHONPATH=$SL_ROOT/jobside/python,PYTHONDONTWRITEBYTECODE=1")
releases() { grep '"event":"kms.release"' "$KMS_STATE/audit.log" | grep -c '"decision":"allow"'; }
attestations() { grep -c '"event":"kms.release"' "$KMS_STATE/audit.log"; }

# ---- one step, two tasks, one attestation ------------------------------------
mkdir r1
rel0=$(releases)
at0=$(attestations)
check "srun -n 2 --seclaunch-… python3 job.py: exit 0" 0 \
	srun -n 2 "${JOBENV[@]}" "${SA[@]}" "$PY" job.py "$T/r1"
[ -s r1/rank0.json ] || sed 's/^/    /' "$T/err" | tail -n 10
"$PY" - r1 want.sums >r1.check <<'EOF2'
import json, sys
r = [json.load(open("%s/rank%d.json" % (sys.argv[1], i))) for i in (0, 1)]
want = dict(reversed(l.split()) for l in open(sys.argv[2]))
got = {}
for x in r:
    got.update(x["sums"])
print("halves", "ok" if got == want and len(r[0]["sums"]) == len(r[1]["sums"]) == 5 else "bad")
print("token", all(x["token"] for x in r))
print("socket", r[0]["socket"] == r[1]["socket"] and r[0]["socket"] or "differ")
print("job", r[0]["job"], r[0]["step"])
EOF2
assert "both tasks read their halves exactly (5 + 5 files)" grep -q "^halves ok$" r1.check
assert "both tasks got the token and the same socket (one serve for the node)" \
	bash -c "grep -q '^token True$' r1.check && ! grep -q '^socket differ$' r1.check"
read -r _ jobid stepid < <(grep '^job ' r1.check)
assert "one release for the step in seclaunchd's audit log" test "$(releases)" = $((rel0 + 1))
assert "one attestation (release request) for the step, not one per task" test "$(attestations)" = $((at0 + 1))
wipe_of() { # JOB STEP -> "after all_zeroed node"
	"$PY" - "$T/serve-audit.log" "$1" "$2" <<'EOF2'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = (r.get("details") or {}).get("context") or {}
    if r["event"] == "run.wipe" and c.get("slurm_job_id") == sys.argv[2] and c.get("slurm_step_id") == sys.argv[3]:
        print(r["details"]["after"], r["details"]["all_zeroed"], c.get("node"))
EOF2
}
# srun returns when the tasks have exited; slurmstepd ends the step (and
# the plugin stops serve) right after
for _ in $(seq 100); do [ -n "$(wipe_of "$jobid" "$stepid")" ] && break; sleep 0.1; done
w1=$(wipe_of "$jobid" "$stepid")
sock=$(sed -n 's/^socket //p' r1.check)
assert "after the step the data service socket is gone" test -n "$sock" -a ! -e "$sock"

assert "after the step: run.wipe for job $jobid step $stepid on $SLURM_NODE, all zeroed ($w1)" \
	test "$w1" = "signal 15 True $SLURM_NODE"
no_serve() { ! ps -eo args= | grep -q "^$SL serve"; } # a pattern on the whole command line: pgrep -f would match this shell
for _ in $(seq 50); do no_serve && break; sleep 0.1; done # it closes its audit log last
assert "no seclaunch serve is left running" no_serve
assert "the KMS's release record names the Slurm job" grep -q "\"slurm_job_id\":\"$jobid\"" "$KMS_STATE/audit.log"

# ---- sbatch: the batch step gets its serve, an srun in it inherits the options
cat >batch.sh <<'EOF2'
#!/bin/bash
echo "batch $SLURM_JOB_ID ${SECLAUNCH_DATA_SOCKET:-none}"
srun -n 1 bash -c 'echo "step $SLURM_STEP_ID ${SECLAUNCH_DATA_SOCKET:-none}"'
EOF2
chmod 0755 batch.sh
check "sbatch --seclaunch-… batch.sh: submitted" 0 sbatch -o "$T/batch.out" "${SA[@]}" batch.sh
for _ in $(seq 300); do grep -q '^step ' batch.out 2>/dev/null && break; sleep 0.1; done
read -r _ bjob bsock < <(grep '^batch ' batch.out)
read -r _ bstep ssock < <(grep '^step ' batch.out)
assert "the batch script reads through a serve of its own" test -n "$bsock" -a "$bsock" != none
assert "an srun inside inherits the options: its step has another serve" \
	test -n "$ssock" -a "$ssock" != none -a "$ssock" != "$bsock"
for _ in $(seq 100); do [ -n "$(wipe_of "$bjob" batch)" ] && [ -n "$(wipe_of "$bjob" "$bstep")" ] && break; sleep 0.1; done
assert "both wiped with their step ids (batch, $bstep)" \
	test -n "$(wipe_of "$bjob" batch)" -a -n "$(wipe_of "$bjob" "$bstep")"

# ---- a step without seclaunch on a cluster that requires it -----------------------
check_err "a step without --seclaunch-policy where required=1: refused (exit 4)" 4 \
	"seclaunch: this cluster runs every step under seclaunch" srun -n 1 true

# ---- failures: the step fails on the node with seclaunch's message ---------------
rel0=$(releases)
plugstack "$TCTI_STRANGER"
mkdir r2
check_err "a node whose TPM is not enrolled: the step fails with exit 3 and the message" 3 \
	"not enrolled" srun -n 2 "${JOBENV[@]}" "${SA[@]}" "$PY" job.py "$T/r2"
assert "... no task ran, nothing was released" test ! -e r2/rank0.json -a "$(releases)" = "$rel0"
plugstack "$TCTI_OK"
check_err "a policy denial (region): the step fails with exit 4 and the reasons" 4 \
	"policy denies dataset step-1" srun -n 2 "${JOBENV[@]}" "${SA[@]}" \
	--seclaunch-region=aws:us-east-1 "$PY" job.py "$T/r2"
assert "... no task ran, nothing was released" test ! -e r2/rank0.json -a "$(releases)" = "$rel0"
check_err "no --seclaunch-pubkey: exit 1 naming it" 1 "seclaunch-pubkey" \
	srun -n 1 --seclaunch-policy="$T/policy.json" --seclaunch-kms="$KMS_URL" \
	--seclaunch-data="$T/ds" true


# ---- --seclaunch-output: the tasks write, serve seals at the step's end ------------
head -c 50000 /dev/urandom >weights.bin
check "srun --seclaunch-output=model=DEST: a task writes \$SECLAUNCH_OUTPUT_DIR/model/, exit 0" 0 \
	srun -n 1 "${SA[@]}" --seclaunch-output="model=$T/dest" \
	sh -c 'test -d "$SECLAUNCH_OUTPUT_DIR/model" && cp weights.bin "$SECLAUNCH_OUTPUT_DIR/model/"'
for _ in $(seq 100); do [ -s "$T/dest/LATEST" ] && break; sleep 0.1; done
assert "... sealed at DEST when the step ended (LATEST 1, a sharded dataset)" \
	test "$(cat "$T/dest/LATEST" 2>/dev/null)" = 1 -a -f "$T/dest/ckpt-00000001/manifest.sldm"
# a later step (a requeued job's) resumes: its tasks find the sealed file in
# $SECLAUNCH_OUTPUT_DIR/model/, and the step's end seals it again
check "srun --seclaunch-resume=model=DEST: the task finds the sealed file back, byte for byte" 0 \
	srun -n 1 "${SA[@]}" --seclaunch-output="model=$T/dest" --seclaunch-resume="model=$T/dest" \
	sh -c 'cmp weights.bin "$SECLAUNCH_OUTPUT_DIR/model/weights.bin" && echo more >>"$SECLAUNCH_OUTPUT_DIR/model/weights.bin"'
for _ in $(seq 100); do [ "$(cat "$T/dest/LATEST" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
assert "... the resumed step's end sealed checkpoint 2" \
	test "$(cat "$T/dest/LATEST" 2>/dev/null)" = 2 -a -f "$T/dest/ckpt-00000002/manifest.sldm"
assert "... the resume was audited (checkpoint 1) by the serve whose run.wipe names the Slurm job" \
	"$PY" -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
res = [r["job_id"] for r in recs if r["event"] == "run.resume" and r["details"]["sequence"] == 1]
slurm = [r["job_id"] for r in recs if r["event"] == "run.wipe" and "slurm_job_id" in r["details"].get("context", {})]
sys.exit(not (res and res[-1] in slurm))' "$T/serve-audit.log"
check_err "--seclaunch-resume of a name no --seclaunch-output declares: exit 1 naming it" 1 \
	"resume.*model" srun -n 1 "${SA[@]}" --seclaunch-resume="model=$T/dest" true
rel1=$(releases)
check_err "--seclaunch-output to a destination the policy does not allow: exit 4" 4 \
	"denies output model" srun -n 1 "${SA[@]}" --seclaunch-output="model=$T/elsewhere" true
assert "... nothing released, nothing written" test "$(releases)" = "$rel1" -a ! -e "$T/elsewhere"
# ---- the step's command is measured; a workloads rule allows or refuses the step -------
head -c 3000 /dev/urandom >wl.bin
check "encrypt a dataset whose rule names its workload" 0 "$SL" encrypt "${KMSA[@]}" --key-id ds-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id step-wl -q wl.bin -o wl.sld
SAW=(--seclaunch-policy="$T/policy.json" --seclaunch-pubkey="$T/policy.pub"
	--seclaunch-kms="$KMS_URL" --seclaunch-kms-ca="$KMS_CA" --seclaunch-data="$T/wl.sld"
	--seclaunch-stage=host --seclaunch-region=gcp:europe-west4)
check "a step running the command the rule allows: exit 0" 0 \
	srun -n 1 "${SAW[@]}" /usr/bin/true --ok
assert "... serve measured the step's argv (run.measure)" \
	grep -q '"event":"run.measure".*"argv":\["/usr/bin/true","--ok"\]' "$T/serve-audit.log"
rel2=$(releases)
check_err "a step running another command: refused on the node, exit 4, the rule named" 4 \
	"workloads" srun -n 1 "${SAW[@]}" /usr/bin/echo --ok
assert "... nothing released" test "$(releases)" = "$rel2"
# ---- scancel mid-step ---------------------------------------------------------------
mkdir r3
srun -n 2 "${JOBENV[@]}" "${SA[@]}" "$PY" job.py "$T/r3" 300 >srun3.out 2>&1 &
srp=$!
_PIDS+=("$srp")
for _ in $(seq 300); do [ -e r3/started0 ] && [ -e r3/started1 ] && break; sleep 0.1; done
assert "the long step started and read its data" test -e r3/started0 -a -e r3/started1
jid3=$("$PY" -c "import json; print(json.load(open('r3/rank0.json'))['job'])")
sid3=$("$PY" -c "import json; print(json.load(open('r3/rank0.json'))['step'])")
scancel "$jid3"
for _ in $(seq 300); do [ -n "$(wipe_of "$jid3" "$sid3")" ] && break; sleep 0.1; done
wait "$srp" 2>/dev/null
assert "scancel mid-step: serve wiped and audited (run.wipe for job $jid3, all zeroed)" \
	test "$(wipe_of "$jid3" "$sid3" | cut -d' ' -f3)" = True
assert "every serve of this test wrote its wipe record" \
	test "$(grep -c '"event":"run.wipe"' "$T/serve-audit.log")" -ge 2
finish
