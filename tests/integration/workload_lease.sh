#!/usr/bin/env bash
# Workload identity and key leases end to end: real swtpm, seclaunchd --dev
# with signed policies. Predicted identity == measured (a binary, a python
# script, a #! script, env and argv variations: each allowed by its
# predicted identity digest); component denials name what differed and
# stage nothing; an edited, reordered or truncated workload log, or a PCR 15
# extended behind the log, is exit 3; leases: KMS stopped mid-job, AK revoked
# mid-job, policy reloaded (SIGHUP) to a denying one mid-job, and a job
# across several renewals.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3 tpm2_pcrextend; do
	if ! command -v "$tool" >/dev/null; then
		skip workload_lease "$tool not installed"
		finish
	fi
done
if ! "$SL" measure --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip workload_lease "seclaunch measure or seclaunchd not built"
	finish
fi

PY=$(python3 -c "import sys; print(sys.executable)")
AUDIT=$T/audit.log
export SECLAUNCH_WORKLOAD_LOG=$T/workload.json
start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/policy.pub" -s "$T/policy.key" >/dev/null 2>&1

# policy FILE DATASET-RULES-JSON: a signed policy over the datasets wl-*
policy() {
	cat >"$1" <<EOF
{"version": 1, "allow_unverified_region": true,
 "keys": {"wl-key": ["wl-*"]},
 "datasets": $2}
EOF
	minisign -S -s "$T/policy.key" -m "$1" -t wl >/dev/null 2>&1
}
rule() { # id [extra members...]
	local id=$1
	shift
	local extra=""
	[ $# -gt 0 ] && extra=", $*"
	echo "{\"id\": \"$id\", \"allowed_regions\": [\"gcp:europe-west4\"], \"tee_kinds\": [\"tpm2\"]$extra}"
}
DS="wl-bin wl-py wl-sh wl-env wl-comp wl-lease wl-plain wl-shard"
plain_rules() {
	local r="" d
	for d in $DS; do r="$r${r:+, }$(rule "$d" "$@")"; done
	echo "[$r]"
}
policy "$T/p0.json" "$(plain_rules)"
start_kms "$T/kms" --policy "$T/p0.json" --policy-pubkey "$T/policy.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
KMS_PORT=${KMS_URL##*:}
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" --json >"$T/enroll.json" 2>"$T/err"
AK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ak_name"])' "$T/enroll.json")
assert "enrolled the TPM" test -n "$AK"
check "create a key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id wl-key
# a sharded dataset (a folder: its root is the manifest's)
mkdir -p "$T/shard-in"
for f in a b c; do head -c 40000 /dev/urandom >"$T/shard-in/$f"; done
check "encrypt wl-shard (sharded)" 0 "$SL" encrypt "${KMSA[@]}" --key-id wl-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id wl-shard --shard-size 64K -q "$T/shard-in" -o "$T/wl-shard"
rm -rf "$T/shard-in"
for d in ${DS% wl-shard}; do
	head -c 3000 /dev/urandom >"$T/$d.plain"
	check "encrypt $d" 0 "$SL" encrypt "${KMSA[@]}" --key-id wl-key --admin-token-file "$KMS_TOKEN" \
		--dataset-id "$d" -q "$T/$d.plain" -o "$T/$d.sld"
	rm -f "$T/$d.plain"
done

# ---- the jobs ---------------------------------------------------------------
cp "$(type -P true)" "$T/jobbin"
cat >"$T/job.py" <<'EOF'
import os, signal, sys, time
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if len(sys.argv) > 1 and sys.argv[1].startswith("--sleep="):
    open(os.environ.get("WL_MARK", "/dev/null"), "w").write(str(os.getpid()))
    time.sleep(float(sys.argv[1].split("=")[1]))
EOF
printf '#!/bin/sh -e\nexit 0\n' >"$T/job.sh"
chmod +x "$T/job.sh"
cd "$T" || exit 1

ENVA=(--env PYTHONDONTWRITEBYTECODE=1)
id_of() { # DATASET -- CMD...: the predicted identity
	local d=$1
	shift
	"$SL" measure --predict --policy "$T/p0.json" --json "${ENVA[@]}" "$T/$d.sld" "$@" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])'
}
ID_BIN=$(id_of wl-bin -- "$T/jobbin" a b)
ID_PY=$(id_of wl-py -- "$PY" job.py --epochs=3)
ID_SH=$(id_of wl-sh -- ./job.sh x)
ID_SHARD=$("$SL" measure --predict --policy "$T/p0.json" --json "${ENVA[@]}" "$T/wl-shard" -- "$T/jobbin" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])')
ID_ENV=$("$SL" measure --predict --policy "$T/p0.json" --json "${ENVA[@]}" --env MODE=train \
	"$T/wl-env.sld" -- "$PY" job.py | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])')
assert "predict: four distinct identities" \
	test "$(printf '%s\n' "$ID_BIN" "$ID_PY" "$ID_SH" "$ID_ENV" | sort -u | grep -c .)" -eq 4
"$SL" measure --predict --policy "$T/p0.json" "${ENVA[@]}" "$T/wl-py.sld" -- "$PY" job.py --epochs=3 >"$T/pred.txt"
assert "predict: text names the identity, the event and the fresh PCR value" \
	bash -c "grep -q '^identity *$ID_PY' '$T/pred.txt' && grep -q '^pcr15 fresh' '$T/pred.txt' && grep -q 'seclaunch.workload' '$T/pred.txt'"
check_err "predict without a command: usage" 1 "no command" "$SL" measure --predict --policy "$T/p0.json"
# the output destinations are part of the identity (a model sent elsewhere is another job)
out_id() {
	"$SL" measure --predict --policy "$T/p0.json" --json "${ENVA[@]}" "$@" "$T/wl-bin.sld" -- "$T/jobbin" a b |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["identity"], json.dumps(d["event"]["outputs"]))'
}
O1=$(out_id --output model=s3://ckpt-eu/run-7)
O2=$(out_id --output model=s3://ckpt-us/run-7)
O3=$(out_id --output model=outdir)
assert "predict: --output destinations change the identity" \
	test "${O1%% *}" != "${O2%% *}" -a "${O1%% *}" != "$ID_BIN" -a "${O3%% *}" != "$ID_BIN"
assert "predict: outputs named as the policy matches them (URL with /, file:///ABS/)" \
	test "${O1#* }" = '["model=s3://ckpt-eu/run-7/"]' -a "${O3#* }" = "[\"model=file://$T/outdir/\"]"
check_err "predict: --output without NAME= is usage" 1 "NAME=DEST" "$SL" measure --predict --policy "$T/p0.json" --output nodest "$T/wl-bin.sld" -- "$T/jobbin"

PYSHA=$(sha256sum "$(readlink -f "$PY")" | cut -d' ' -f1)
SCRIPTSHA=$(sha256sum job.py | cut -d' ' -f1)
COMP="\"workloads\": [{\"exe_sha256\": [\"$PYSHA\"], \"script_sha256\": [\"$SCRIPTSHA\"], \"argv\": [\"$PY\", \"job.py\", \"--epochs=*\"], \"env\": [\"PATH=*\", \"HOME=*\", \"LANG=*\", \"LC_*\", \"TERM=*\", \"TZ=*\", \"CUDA_*\", \"NVIDIA_*\", \"PYTHONDONTWRITEBYTECODE=1\", \"PYTHONPATH=$SL_ROOT/jobside/python\", \"MODE=train\"]}]"
policy "$T/p1.json" "[$(rule wl-bin "\"workloads\": [{\"identity\": [\"$ID_BIN\"]}]"),
 $(rule wl-py "\"workloads\": [{\"identity\": [\"$ID_PY\"]}]"),
 $(rule wl-sh "\"workloads\": [{\"identity\": [\"$ID_SH\"]}]"),
 $(rule wl-env "\"workloads\": [{\"identity\": [\"$ID_ENV\"]}]"),
 $(rule wl-comp "$COMP"),
 $(rule wl-shard "\"workloads\": [{\"identity\": [\"$ID_SHARD\"]}]"),
 $(rule wl-lease "\"key_ttl\": 3"), $(rule wl-plain)]"
check "policy with workloads passes policy check" 0 "$SL" policy check --policy "$T/p1.json"
stop_kms
# seclaunchd enforces a copy, so a SIGHUP can later reload another policy
cp "$T/p1.json" "$T/kms-policy.json"
cp "$T/p1.json.minisig" "$T/kms-policy.json.minisig"
start_kms "$T/kms" --listen "127.0.0.1:$KMS_PORT" --policy "$T/kms-policy.json" --policy-pubkey "$T/policy.pub" || exit 1

RUNA=(--policy "$T/p1.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --audit-log "$AUDIT" --stage host "${ENVA[@]}")
# the challenge is asked for while the job is measured: a failure on either
# side is reported as before (the thread's own message), and nothing runs
SKEWA=("${RUNA[@]}")
SKEWA[1]=$T/p0.json # --policy: not the one seclaunchd enforces
check_err "measured while the challenge is out: policy skew named (exit 5)" 5 \
	"policy skew: .*p0.json has sha256 .* enforces sha256" \
	"$SL" run "${SKEWA[@]}" "$T/wl-plain.sld" -- touch "$T/skew.ran"
check_err "challenge out while the measurement fails: argv not UTF-8 (exit 2)" 2 \
	"argv\\[2\\]: not valid UTF-8" \
	"$SL" run "${RUNA[@]}" "$T/wl-plain.sld" -- touch "$T/skew.ran" $'\xff'
assert "neither failure started the job" test ! -e "$T/skew.ran"

# ---- predicted == measured: allowed by the predicted identity alone ------
check "binary: the predicted identity is the measured one (released, exit 0)" 0 \
	"$SL" run "${RUNA[@]}" "$T/wl-bin.sld" -- "$T/jobbin" a b
assert "binary: the audit's run.measure names the predicted identity" grep -q "\"identity\":\"$ID_BIN\"" "$AUDIT"
check "python script: predicted == measured" 0 "$SL" run "${RUNA[@]}" "$T/wl-py.sld" -- "$PY" job.py --epochs=3
check "#! script: predicted == measured (interpreter + script)" 0 "$SL" run "${RUNA[@]}" "$T/wl-sh.sld" -- ./job.sh x
check "sharded dataset: predicted == measured (the manifest root in the identity)" 0 \
	"$SL" run "${RUNA[@]}" "$T/wl-shard" -- "$T/jobbin"
check "env variation: predicted == measured" 0 "$SL" run "${RUNA[@]}" --env MODE=train "$T/wl-env.sld" -- "$PY" job.py
check_err "binary: another argument -> a different identity, denied" 4 "workloads\[0\]: identity differs" \
	"$SL" run "${RUNA[@]}" "$T/wl-bin.sld" -- "$T/jobbin" a b c
check_err "env: another value -> a different identity, denied" 4 "identity differs" \
	"$SL" run "${RUNA[@]}" --env MODE=eval "$T/wl-env.sld" -- "$PY" job.py

# ---- component rules: a denial names what differed, stages nothing -------
# (a source build's job has PYTHONPATH set to seclaunch's own helper folder:
# measured like every variable, so an env list names it)
check "components: the allowed job runs" 0 \
	"$SL" run "${RUNA[@]}" --env MODE=train "$T/wl-comp.sld" -- "$PY" job.py --epochs=5
staged_before=$(grep -c '"run.stage"' "$AUDIT")
cp job.py job.py.orig
printf '#' >>job.py
check_err "one byte more in the script: denied naming the script" 4 "script differs" \
	"$SL" run "${RUNA[@]}" --env MODE=train "$T/wl-comp.sld" -- "$PY" job.py --epochs=5
cp job.py.orig job.py
check_err "an extra argument: denied naming argv" 4 "argv differs" \
	"$SL" run "${RUNA[@]}" --env MODE=train "$T/wl-comp.sld" -- "$PY" job.py --epochs=5 --evil
check_err "another env value: denied naming the variable" 4 "env differs: MODE" \
	"$SL" run "${RUNA[@]}" --env MODE=eval "$T/wl-comp.sld" -- "$PY" job.py --epochs=5
assert "denials: nothing was staged" test "$(grep -c '"run.stage"' "$AUDIT")" -eq "$staged_before"
assert "denials: nothing was fetched from the KMS" grep -q "nothing was fetched" "$T/err"
"$SL" measure --predict --policy "$T/p1.json" --json "${ENVA[@]}" --env MODE=train "$T/wl-comp.sld" -- \
	"$PY" job.py --epochs=5 --evil >"$T/evil.json"
check "policy explain: the same rule denies" 4 \
	"$SL" policy explain --policy "$T/p1.json" --policy-pubkey "$T/policy.pub" --claims "$T/evil.json" \
	--dataset wl-comp --key wl-key
assert "policy explain: names the same component" grep -q "argv differs" "$T/out"

# ---- replay: the workload log in evidence --------------------------------
NONCE=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
check "attest with the workload log" 0 "$SL" attest --tcti "$SWTPM_TCTI" --nonce "$NONCE" \
	--pcrs sha256:0,1,2,3,4,5,6,7,15 --workload-log "$SECLAUNCH_WORKLOAD_LOG" \
	--export-ak "$T/ak.pem" -o "$T/ev.json"
check "measure --verify: the log replays to the quoted PCR 15" 0 \
	"$SL" measure --verify "$T/ev.json" --nonce "$NONCE" --ak-pin "$T/ak.pem"
assert "measure --verify prints every event" test "$(grep -c '^\[' "$T/out")" -ge 6
evedit() { # OUT PYTHON-EXPR-ON-events
	python3 - "$T/ev.json" "$1" "$2" <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))
events = ev["workload_log"]["events"]
exec(sys.argv[3])
ev["workload_log"]["events"] = events
json.dump(ev, open(sys.argv[2], "w"))
EOF
}
evedit "$T/ev-edit.json" 'events[0]["argv"].append("x")'
evedit "$T/ev-order.json" 'events[0], events[1] = events[1], events[0]'
evedit "$T/ev-trunc.json" 'events.pop()'
for k in edit order trunc; do
	check_err "workload log $k: exit 3" 3 "workload_log" \
		"$SL" measure --verify "$T/ev-$k.json" --nonce "$NONCE" --ak-pin "$T/ak.pem"
done
check_err "verify: an edited log fails the generic verifier too" 3 "workload_log" \
	"$SL" verify "$T/ev-edit.json" --nonce "$NONCE" --ak-pin "$T/ak.pem"
# seclaunchd replays the log itself: the same evidence with an edited log
build_probe || { echo "not ok - kms_probe did not build"; exit 1; }
W_PLAIN=$(wrapped_of "$T/wl-plain.sld")
PROBE_ID='[{"kind": "unsigned", "region": "gcp:europe-west4"}]'
check "KMS: a release carrying the true workload log" 0 env KMS_PROBE_IDENTITY="$PROBE_ID" KMS_PROBE_WORKLOAD_LOG="$SECLAUNCH_WORKLOAD_LOG" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release wl-key wl-plain "$W_PLAIN"
python3 - "$SECLAUNCH_WORKLOAD_LOG" "$T/wl-edited.json" <<'EOF'
import json, sys
l = json.load(open(sys.argv[1]))
l["events"][-1]["argv"].append("--evil")
json.dump(l, open(sys.argv[2], "w"))
EOF
check_err "KMS: an edited workload log is refused as evidence (exit 3)" 3 "evidence_invalid.*workload_log" \
	env KMS_PROBE_IDENTITY="$PROBE_ID" KMS_PROBE_WORKLOAD_LOG="$T/wl-edited.json" "$PROBE" "$KMS_URL" "$KMS_CA" release wl-key wl-plain "$W_PLAIN"
# PCR 15 extended behind the log's back
tpm2_pcrextend 15:sha256=$(printf '%064d' 7) >/dev/null 2>&1
check "attest after an out-of-band extension" 0 "$SL" attest --tcti "$SWTPM_TCTI" --nonce "$NONCE" \
	--pcrs sha256:0,1,2,3,4,5,6,7,15 --workload-log "$SECLAUNCH_WORKLOAD_LOG" -o "$T/ev2.json"
check_err "quote whose PCR 15 does not match the log: exit 3" 3 "does not|replay" \
	"$SL" measure --verify "$T/ev2.json" --nonce "$NONCE" --ak-pin "$T/ak.pem"
check_err "run on a register the log no longer matches: exit 3, no job" 3 "PCR 15" \
	"$SL" run "${RUNA[@]}" "$T/wl-plain.sld" -- true
# a fresh log for what follows (the register keeps its value until reboot)
export SECLAUNCH_WORKLOAD_LOG=$T/workload2.json
RUNA+=(--workload-pcr 14)

# ---- leases ---------------------------------------------------------------
LEASEA=("${RUNA[@]}" --kill-grace 1 --lease-grace 2)
check "lease: a job across several renewals completes" 0 \
	"$SL" run "${LEASEA[@]}" "$T/wl-lease.sld" -- "$PY" job.py --sleep=7.5
renewed=$(grep -c '"run.lease_renewed"' "$AUDIT")
assert "lease: the audit log shows each renewal (>= 3, got $renewed)" test "$renewed" -ge 3
assert "lease: seclaunchd recorded the renewals" bash -c "grep -c '\"kms.renew\"' '$KMS_STATE/audit.log' | grep -qv '^0$'"
assert "lease: the kms.release record names the lease granted (key_ttl 3)" \
	bash -c "grep '\"event\":\"kms.release\".*\"dataset_id\":\"wl-lease\"' '$KMS_STATE/audit.log' | grep '\"decision\":\"allow\"' | grep -q '\"lease\":{\"key_ttl\":3}'"

lease_job() { # NAME [JOB ARGS]: starts a long job in the background
	local name=$1
	shift
	rm -f "$T/$name.mark"
	WL_MARK=$T/$name.mark "$SL" run "${LEASEA[@]}" --env-pass WL_MARK "$T/wl-lease.sld" -- \
		"$PY" job.py --sleep=60 "$@" >"$T/$name.out" 2>&1 &
	LPID=$!
	for _ in $(seq 200); do [ -s "$T/$name.mark" ] && break; sleep 0.05; done
	JOBPID=$(cat "$T/$name.mark" 2>/dev/null || echo 0)
}
wait_lease() { # seconds: the run's exit status (124: still running)
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		kill -0 "$LPID" 2>/dev/null || { wait "$LPID"; return $?; }
		sleep 0.1
	done
	kill "$LPID"; wait "$LPID"; return 124
}

lease_job kmsdown
assert "KMS stopped: the job started" test "$JOBPID" -gt 0
t0=$(date +%s.%N)
stop_kms
wait_lease 12
rc=$?
dt=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
echo "# KMS stopped -> job stopped after $dt s (ttl 3 + grace 2 + kill-grace 1)"
assert "KMS stopped: exit 5 (KMS unreachable) within expiry + grace (rc $rc)" test "$rc" -eq 5
assert "KMS stopped: the job is gone" bash -c "! kill -0 $JOBPID 2>/dev/null"
assert "KMS stopped: run.lease_ended names the reason, then the wipe" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'no renewal succeeded' && tail -n 1 '$AUDIT' | grep -q '\"run.wipe\".*\"all_zeroed\":true'"

start_kms "$T/kms" --listen "127.0.0.1:$KMS_PORT" --policy "$T/kms-policy.json" --policy-pubkey "$T/policy.pub" || exit 1

# serve holds its keys under the same lease as run: renewed while it serves
# (each renewal recorded on both sides), and a KMS that stops answering
# stops it within expiry + grace, wiped
SERVEA=(--policy "$T/p1.json" --policy-pubkey "$T/policy.pub" "${KMSA[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --stage host --lease-grace 2)
serve_lease() { # NAME: serve wl-lease in the background until $T/NAME.ready
	rm -f "$T/$1.ready"
	"$SL" serve "${SERVEA[@]}" --audit-log "$T/$1.audit" --ready-file "$T/$1.ready" \
		"$T/wl-lease.sld" >"$T/$1.out" 2>&1 &
	LPID=$!
	for _ in $(seq 300); do [ -s "$T/$1.ready" ] && break; sleep 0.05; done
}
kms_renews() { grep -c '"kms.renew"' "$KMS_STATE/audit.log"; }
serve_lease serve-renew
assert "serve under key_ttl: ready" test -s "$T/serve-renew.ready"
assert "serve under key_ttl: says its lease" grep -q "lease: 3 s, renewed every 1 s" "$T/serve-renew.out"
krenew0=$(kms_renews)
sleep 4.5
assert "serve under key_ttl: still serving across renewals" kill -0 "$LPID"
srenewed=$(grep -c '"run.lease_renewed"' "$T/serve-renew.audit")
assert "serve under key_ttl: its audit log shows each renewal (>= 2, got $srenewed)" test "$srenewed" -ge 2
assert "serve under key_ttl: seclaunchd recorded them" test "$(kms_renews)" -gt "$krenew0"
t0=$(date +%s.%N)
stop_kms
wait_lease 12
rc=$?
dt=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
echo "# KMS stopped -> serve stopped after $dt s (ttl 3 + grace 2)"
assert "serve, KMS stopped: exit 5 (KMS unreachable) within expiry + grace (rc $rc)" test "$rc" -eq 5
assert "serve, KMS stopped: run.lease_ended names the reason, then the wipe" \
	bash -c "grep '\"run.lease_ended\"' '$T/serve-renew.audit' | tail -1 | grep -q 'no renewal succeeded' && tail -n 1 '$T/serve-renew.audit' | grep -q '\"run.wipe\".*\"all_zeroed\":true'"
start_kms "$T/kms" --listen "127.0.0.1:$KMS_PORT" --policy "$T/kms-policy.json" --policy-pubkey "$T/policy.pub" || exit 1
# hup: SIGHUP to seclaunchd, then waits for the reload's outcome in its log
hup() {
	local n i
	n=$(grep -Ec 'reload: policy .* in force|reload refused' "$KMS_STATE/log")
	kill -HUP "$KMS_PID"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -Ec 'reload: policy .* in force|reload refused' "$KMS_STATE/log")" -gt "$n" ] && return 0
		sleep 0.05
	done
	return 1
}
# the policy reloaded (SIGHUP) to one that denies this dataset here
lease_job reload
assert "policy reload: the job started" test "$JOBPID" -gt 0
policy "$T/p2.json" '[{"id": "wl-lease", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["sev-snp"], "key_ttl": 3}]'
cp "$T/p2.json" "$T/kms-policy.json"
cp "$T/p2.json.minisig" "$T/kms-policy.json.minisig"
assert "policy reload: seclaunchd reloaded on SIGHUP" hup
assert "policy reload: the denying policy is in force" grep -q "reload: policy .* in force" "$KMS_STATE/log"
wait_lease 12
rc=$?
assert "policy now denies: stopped at the next renewal, exit 4 (rc $rc)" test "$rc" -eq 4
assert "policy now denies: the reason names the rule" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'sev-snp'"
cp "$T/p1.json" "$T/kms-policy.json"
cp "$T/p1.json.minisig" "$T/kms-policy.json.minisig"
assert "policy reload: back to the allowing policy" hup

# the key disabled while the job runs, and a job that ignores SIGTERM: the
# renewal is refused naming the key, the job gets SIGTERM, then SIGKILL after
# --kill-grace 1, its data is wiped
lease_job disable --ignore-term
assert "key disabled: the job started" test "$JOBPID" -gt 0
check "key disable" 0 "$SL" key disable "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id wl-key
wait_lease 12
rc=$?
assert "key disabled: stopped at the next renewal, exit 4 (rc $rc)" test "$rc" -eq 4
assert "key disabled: the reason names the disabled key" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'key_disabled'"
assert "key disabled: the job ignoring SIGTERM was killed after --kill-grace" \
	bash -c "! kill -0 $JOBPID 2>/dev/null && grep '\"run.job.exit\"' '$AUDIT' | tail -1 | grep -q '\"killed\":true.*\"signal\":9\|\"signal\":9.*\"killed\":true'"
assert "key disabled: then the wipe" \
	bash -c "tail -n 1 '$AUDIT' | grep -q '\"run.wipe\".*\"all_zeroed\":true'"
check "key enable" 0 "$SL" key enable "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id wl-key

# AK revoked while the job runs (last: the AK stays revoked)
check "enroll list shows the AK" 0 "$SL" enroll list "${KMSA[@]}" --admin-token-file "$KMS_TOKEN"
assert "enroll list: the AK, not revoked" bash -c "grep -q '$AK' '$T/out' && ! grep -q REVOKED '$T/out'"
(umask 077 && echo not-the-admin-token-0123 >"$T/wrong.token")
check_err "enroll revoke without the admin token: refused" 5 "401|admin" \
	"$SL" enroll revoke "${KMSA[@]}" --admin-token-file "$T/wrong.token" "$AK"
check_err "enroll revoke of an AK never enrolled: refused naming it" 5 "not enrolled" \
	"$SL" enroll revoke "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" 000b$(printf '%064d' 1)
lease_job revoke
assert "revocation: the job started" test "$JOBPID" -gt 0
t0=$(date +%s.%N)
check "enroll revoke" 0 "$SL" enroll revoke "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" "$AK"
wait_lease 12
rc=$?
dt=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
echo "# revoked -> job stopped after $dt s (renewal interval 1.5 s)"
assert "revocation: stopped at the next renewal, exit 3 (rc $rc)" test "$rc" -eq 3
assert "revocation: the reason names the revoked AK" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'ak_revoked'"
check_err "a revoked AK's release is refused by name" 3 "revoked" \
	"$SL" run "${RUNA[@]}" "$T/wl-plain.sld" -- true
stop_kms
start_kms "$T/kms" --listen "127.0.0.1:$KMS_PORT" --policy "$T/kms-policy.json" --policy-pubkey "$T/policy.pub" || exit 1
check_err "revocation survives a restart (the registry, under its MAC)" 3 "ak_revoked" \
	"$SL" run "${RUNA[@]}" "$T/wl-plain.sld" -- true
# its machine is revoked with it: enrolling again is refused (naming the EK)
check_err "enrolling the revoked AK again does not lift it: refused, its machine is revoked" 5 \
	"ek_revoked" "$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q
check_err "... and its runs stay refused" 3 "ak_revoked" \
	"$SL" run "${RUNA[@]}" "$T/wl-plain.sld" -- true
check "enroll list --json marks it revoked" 0 "$SL" enroll list "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --json
assert "enroll list: revoked" grep -q '"revoked"' "$T/out"
check "the audit log of all these runs verifies" 0 "$SL" audit verify --chain-only "$AUDIT"
finish
