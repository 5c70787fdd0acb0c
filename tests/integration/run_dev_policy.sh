#!/usr/bin/env bash
# seclaunch run against a bare `seclaunchd --dev` (no --policy): the service
# writes its development policy, signed, and the public key into its state
# directory, so `run --policy STATE/policy.json --policy-pubkey
# STATE/policy.pub` works out of the box (real swtpm, TLS, enrollment, a
# dataset under a KMS key). A restart keeps the same key; a policy file
# changed after signing is refused by run (exit 4), and the service replaces
# it with a freshly signed one at its next start. Outside --dev, seclaunchd
# refuses the development policy even with a valid signature.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash" # start_tpm

for tool in swtpm python3; do
	if ! command -v "$tool" >/dev/null; then
		skip run_dev_policy "$tool not installed"
		finish
	fi
done
cd "$T" || exit 1
PY=$(python3 -c "import sys; print(sys.executable)")

start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
start_kms "$T/kms" || exit 1
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
assert "the service says at start where its signed development policy is" \
	grep -q "seclaunch run --policy $KMS_STATE/policy.json --policy-pubkey $KMS_STATE/policy.pub" \
	"$KMS_STATE/log"
for f in policy.json policy.json.minisig policy.pub; do
	assert "--dev wrote $f into the state directory" test -s "$KMS_STATE/$f"
done
assert "no secret key of the development policy is left in the state directory" \
	bash -c "! grep -rlE 'minisign (un)?encrypted secret key' '$KMS_STATE'"
check "seclaunch policy verify accepts the development policy under STATE/policy.pub" 0 \
	"$SL" policy verify --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub"
digest=$(curl -s --cacert "$KMS_CA" "$KMS_URL/v1/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["policy_digest"])')
assert "its digest is the one the service enforces" \
	test "$(sha256sum <"$KMS_STATE/policy.json" | cut -d' ' -f1)" = "$digest"

check "enroll the TPM" 0 "$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI"
check "create a key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id dev-key
head -c 70000 /dev/urandom >plain
want=$(sha256sum <plain | cut -d' ' -f1)
check "encrypt a dataset under the KMS key" 0 "$SL" encrypt "${KMSA[@]}" --key-id dev-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id dev-data -q plain -o d.sld
rm -f plain

cat >job.py <<'EOF'
import hashlib, sys
import seclaunch_data as sd
ds = sd.datasets()["dev-data"]
open(sys.argv[1], "w").write(hashlib.sha256(ds.memoryview()).hexdigest() + "\n")
EOF
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --stage host --env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1)
check "run against a bare --dev service: exit 0" 0 \
	"$SL" run "${RUNA[@]}" d.sld -- "$PY" job.py "$T/got1"
assert "the job read exactly the plaintext" test "$(cat got1 2>/dev/null)" = "$want"

# outputs: the development policy names a key for every output (dev-outputs,
# made by the service at start), to any destination; a run with --output
# against the bare service seals, and a resumed run reads it back
assert "the service says at start which key seals outputs" \
	grep -q "outputs .* sealed under key 'dev-outputs'" "$KMS_STATE/log"
cat >save.py <<'EOF2'
import os, seclaunch_data as sd
open(os.path.join(sd.output_dir("model"), "weights.bin"), "w").write("dev weights\n")
EOF2
check "run --output model=file://DIR/ against a bare --dev service: exit 0" 0 \
	"$SL" run "${RUNA[@]}" --output "model=file://$T/dest/" d.sld -- "$PY" save.py
assert "... a sealed checkpoint is left in the destination" \
	bash -c "ls '$T/dest' | grep -q ."
assert "... and no plaintext in it" bash -c "! grep -rq 'dev weights' '$T/dest'"
check "run --resume reads the sealed checkpoint back" 0 \
	"$SL" run "${RUNA[@]}" --resume "model=$T/dest" --output "model=$T/dest" -- "$PY" -c \
	"import os, sys, seclaunch_data as sd; d = open(os.path.join(sd.output_dir('model'), 'weights.bin')).read(); sys.exit(d != 'dev weights\\n')"

# a restart keeps the files (and so the client's copy of the public key)
cp "$KMS_STATE/policy.pub" pub.before
stop_pid "$KMS_PID"
start_kms "$KMS_STATE" || exit 1
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
RUNA=(--policy "$KMS_STATE/policy.json" --policy-pubkey "$T/pub.before" "${KMSA[@]}"
	--tcti "$SWTPM_TCTI" --stage host --env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1)
assert "after a restart: the same development policy key" cmp -s pub.before "$KMS_STATE/policy.pub"
check "after a restart: run with the key copied before succeeds" 0 \
	"$SL" run "${RUNA[@]}" d.sld -- "$PY" job.py "$T/got2"
assert "after a restart: the job read exactly the plaintext" test "$(cat got2 2>/dev/null)" = "$want"

# a policy edited after signing: run refuses it, nothing released
sed -i 's/any region/every region/' "$KMS_STATE/policy.json"
check_err "run refuses a development policy changed after signing (exit 4)" 4 "signature" \
	"$SL" run "${RUNA[@]}" d.sld -- "$PY" job.py "$T/got3"
assert "... and no job ran" test ! -e got3
stop_pid "$KMS_PID"
start_kms "$KMS_STATE" || exit 1
check "the next start writes a freshly signed policy that verifies again" 0 \
	"$SL" policy verify --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub"
assert "... under a new key" bash -c "! cmp -s pub.before '$KMS_STATE/policy.pub'"
stop_pid "$KMS_PID"

# outside --dev the development policy is refused even when its signature verifies
D=$KMS_STATE
cat >prod.json <<EOF
{"listen": "127.0.0.1:0", "tls_cert": "$D/server.pem", "tls_key": "$D/server.key",
 "admin_token_file": "$D/admin.token", "store": "$T/prod-state.db",
 "registry_key_file": "$D/registry.key", "audit_log": "$T/prod-audit.log",
 "keystore": "$D/keystore", "master_key_file": "$D/master.key",
 "accept_ek_without_cert": true, "policy": "$D/policy.json", "policy_pubkey": "$D/policy.pub"}
EOF
check_err "seclaunchd --config refuses the development policy (exit 2, naming it)" 2 \
	"$D/policy.json: the built-in development policy.*only seclaunchd --dev" \
	timeout 20 "$SLD" --config "$T/prod.json"

finish
