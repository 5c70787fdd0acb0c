#!/usr/bin/env bash
# Signals to seclaunch run BEFORE the job starts: SIGTERM (and SIGINT) while
# a 512 MiB dataset is being decrypted into staging memory (sent the moment
# the audit log records the key release; single decryption thread). Then:
# no job, status 128+n, the interruption and the wipe of the partly staged
# dataset recorded in the audit log.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip run_signal "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip run_signal "seclaunch run or seclaunchd not built"
	finish
fi

start_swtpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'EOF'
{"version": 1, "description": "run_signal", "allow_unverified_region": true,
 "keys": {"sk": ["sig-ds"]},
 "datasets": [{"id": "sig-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]}]}
EOF
minisign -S -s "$T/p.key" -m "$T/policy.json" -t sig >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id sk
head -c $((512 * 1024 * 1024)) /dev/zero >"$T/plain"
check "encrypt 512 MiB" 0 "$SL" encrypt "${K[@]}" --key-id sk --admin-token-file "$KMS_TOKEN" \
	--dataset-id sig-ds -q "$T/plain" -o "$T/big.sld"
rm -f "$T/plain"

# signal_during_staging SIG LOG: runs seclaunch, sends SIG once LOG shows the
# release; prints seclaunch's exit status.
signal_during_staging() {
	python3 - "$1" "$2" "$SL" run --policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" \
		--tcti "$SWTPM_TCTI" --region gcp:europe-west4 --stage host --threads 1 \
		--audit-log "$2" "$T/big.sld" -- sh -c 'touch "$0"' "$T/ran" <<'EOF'
import os, signal, subprocess, sys, time
sig, log, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
deadline = time.time() + 60
while time.time() < deadline and p.poll() is None:
    try:
        if b'"run.release"' in open(log, "rb").read():
            time.sleep(0.05)  # staging (512 MiB, one thread) is under way by now
            p.send_signal(sig)
            break
    except FileNotFoundError:
        pass
    time.sleep(0.002)
print(p.wait())
EOF
}

rc=$(signal_during_staging 15 "$T/term.log")
assert "SIGTERM while staging: exit 143 (got $rc)" test "$rc" = 143
assert "SIGTERM while staging: no job" test ! -e "$T/ran"
assert "SIGTERM while staging: interruption recorded" grep -q 'interrupted by signal 15' "$T/term.log"
assert "SIGTERM while staging: wipe of the partly staged dataset recorded" \
	grep -q '"run.wipe".*"after":"signal".*"partly_staged_wiped":"sig-ds"' "$T/term.log"

rc=$(signal_during_staging 2 "$T/int.log")
assert "SIGINT while staging: exit 130 (got $rc)" test "$rc" = 130
assert "SIGINT while staging: no job" test ! -e "$T/ran"
assert "SIGINT while staging: wipe recorded" grep -q '"run.wipe".*"after":"signal"' "$T/int.log"
finish
