#!/usr/bin/env bash
# scripts/dev-env, the hardware-free walkthrough of docs/quickstart.md: it
# starts swtpm and seclaunchd --dev in a state folder, enrolls the TPM and
# prints exports only; with them a newcomer creates a key, encrypts a file of
# their own and runs a job on it (seclaunch_data importable from the source
# build, no --env); run again it reuses the running services; --stop stops
# both.
. "$(dirname "$0")/lib.sh"

for tool in swtpm python3; do
	if ! command -v "$tool" >/dev/null; then
		skip dev_env "$tool not installed"
		finish
	fi
done
D=$T/dev
DEV=("$SL_ROOT/scripts/dev-env")
check "scripts/dev-env DIR starts swtpm and seclaunchd" 0 env SL_BIN="$SL_BIN" "${DEV[@]}" "$D"
for p in swtpm seclaunchd; do # stopped at exit whatever happens below
	[ -s "$D/$p.pid" ] && _PIDS+=("$(cat "$D/$p.pid")")
done
cp "$T/out" "$T/exports"
assert "stdout is only export lines" bash -c "! grep -qv '^export [A-Z_]*=' '$T/exports'"
eval "$(cat "$T/exports")"
assert "SECLAUNCH_TCTI names the swtpm" test -n "${SECLAUNCH_TCTI:-}"
assert "PATH starts with this build's bin" test "$(command -v seclaunch)" = "$SL_BIN/seclaunch"

cd "$T" || exit 1
check "key create with the exports" 0 seclaunch key create --kms "$SL_KMS" \
	--admin-token-file "$SL_ADMIN_TOKEN" --id my-key
printf 'name,value\nalpha,1\nbeta,2\n' >mydata.csv
check "encrypt my own file" 0 seclaunch encrypt --kms "$SL_KMS" --key-id my-key \
	--admin-token-file "$SL_ADMIN_TOKEN" --dataset-id my-data mydata.csv -o mydata.sld
cat >job.py <<'PY'
import seclaunch_data as sd
print("rows:", sd.get("my-data").text().count("\n"))
PY
check "seclaunch run with the exports only (no --tcti, --kms-ca, --env)" 0 \
	seclaunch run --policy "$SL_POLICY" --policy-pubkey "$SL_POLICY_PUB" --kms "$SL_KMS" \
	--audit-key "$SL_AUDIT_KEY" mydata.sld -- python3 job.py
assert "the job read my data" grep -qx "rows: 3" "$T/out"
assert "the run was audited where the exports say" grep -q '"run.job.exit"' "$SECLAUNCH_AUDIT_LOG"

check "seclaunch audit verify of that log (docs/quickstart.md, step 5)" 0 \
	seclaunch audit verify --pubkey "$SL_AUDIT_PUB"
check "seclaunch audit export of it" 0 seclaunch audit export --format jsonl --pubkey "$SL_AUDIT_PUB"
assert "... holds the run's records" grep -q '"run.release"' "$T/out"

url=$SL_KMS
check "dev-env again: reuses what runs" 0 env SL_BIN="$SL_BIN" "${DEV[@]}" "$D"
assert "... the same service" grep -qF "export SL_KMS=$url" "$T/out"
pids=$(cat "$D/swtpm.pid" "$D/seclaunchd.pid")
check "scripts/dev-env --stop DIR" 0 "${DEV[@]}" --stop "$D"
gone=1
for p in $pids; do
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$p" 2>/dev/null && gone=0
done
assert "swtpm and seclaunchd are stopped" test $gone = 1
check_err "dev-env --bad: usage error" 1 "unknown option" "${DEV[@]}" --bad
finish
