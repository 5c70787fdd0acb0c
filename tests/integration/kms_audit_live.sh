#!/usr/bin/env bash
# A running seclaunchd's audit log verifies without waiting for a hundred
# records or the stop: SIGUSR1 seals its latest records with a signed
# checkpoint at once (audit_checkpoint_s does the same on a timer), and a
# log without new records gets none.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
start_kms "$T/kms" || exit 1
L=$KMS_STATE/audit.log
cps() { grep -c '"event":"checkpoint"' "$L"; }
check "key create (records past the last checkpoint)" 0 "$SL" key create --kms "$KMS_URL" \
	--kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id k -q
before=$(cps)
assert "the newest record is not sealed yet" sh -c "tail -n1 '$L' | grep -qv '\"event\":\"checkpoint\"'"
kill -USR1 "$KMS_PID"
for _ in $(seq 50); do [ "$(cps)" -gt "$before" ] && break; sleep 0.1; done
assert "SIGUSR1: a checkpoint is appended" test "$(cps)" = $((before + 1))
assert "... and it is the newest line" sh -c "tail -n1 '$L' | grep -q '\"event\":\"checkpoint\"'"
check "the live log verifies to its end with the public key" 0 \
	"$SL" audit verify --pubkey "$KMS_STATE/audit.pub" "$L"
assert "... the daemon log says so" grep -q "SIGUSR1: audit log checkpointed" "$KMS_STATE/log"
kill -USR1 "$KMS_PID"
sleep 1
assert "SIGUSR1 with nothing new: no second checkpoint" test "$(cps)" = $((before + 1))
assert "the service still answers" curl -fsS --cacert "$KMS_CA" "$KMS_URL/v1/health" -o /dev/null
check "SIGTERM stops it" 0 stop_kms

# audit_checkpoint_s: the same on a timer, with no signal
printf '{"audit_checkpoint_s": 1}' >"$T/cp.json"
start_kms "$T/kms2" --config "$T/cp.json" || exit 1
L=$KMS_STATE/audit.log
check "key create" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" \
	--admin-token-file "$KMS_TOKEN" --id k2 -q
for _ in $(seq 50); do tail -n1 "$L" | grep -q '"event":"checkpoint"' && break; sleep 0.1; done
assert "audit_checkpoint_s 1: within a few seconds the newest line is a checkpoint" \
	sh -c "tail -n1 '$L' | grep -q '\"event\":\"checkpoint\"'"
check "... and the live log verifies to its end" 0 "$SL" audit verify --pubkey "$KMS_STATE/audit.pub" "$L"
check "SIGTERM stops it" 0 stop_kms
finish
