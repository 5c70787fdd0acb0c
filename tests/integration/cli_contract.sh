#!/usr/bin/env bash
# One CLI contract (docs/exit-codes.md), asserted across every command:
#   - each refusal class exits with the same code from every command that can
#     meet it: usage 1, input 2 (missing file, output exists), attestation
#     refused by the KMS 3 (the same [ak_not_enrolled] from run and decrypt),
#     policy denial 4, KMS unreachable / TLS refused 5, integrity failure 6;
#   - under --json a failure is exactly one {"error":{"code","exit","message"}}
#     object on stdout, for every command and verb;
#   - `seclaunch help CMD` prints what `CMD --help` prints;
#   - a mistake is one error line; a command that writes a file keeps an
#     existing one unless --force;
#   - the shared flags and their environment fallbacks reach every command
#     (SECLAUNCH_KMS_CA for run, --tcti for decrypt --kms);
#   - decrypt --kms sends region identity like run: --region under a policy
#     with allow_unverified_region releases for the allowed region, and a wrong
#     region is denied with exit 4.
# Real swtpm and seclaunchd --dev on loopback.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash" # start_tpm

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip cli_contract "$tool not installed"
		finish
	fi
done
if [ ! -x "$SL" ] || [ ! -x "$SLD" ]; then
	skip cli_contract "seclaunch or seclaunchd not built"
	finish
fi
cd "$T" || exit 1
unset SECLAUNCH_KMS_CA SECLAUNCH_AUDIT_LOG SECLAUNCH_TCTI

# json_error WANT_EXIT: $T/out is exactly one error object with that exit code
json_error() {
	python3 - "$1" "$T/out" <<'EOF'
import json, sys
want, path = int(sys.argv[1]), sys.argv[2]
d = json.load(open(path))  # the whole of stdout: one object, nothing else
e = d["error"]
assert set(d) == {"error"} and set(e) == {"code", "exit", "message"}, d
assert e["exit"] == want and isinstance(e["code"], str) and e["message"], d
EOF
}

# with_json CMD...: CMD with --json among its options (before a "--" that
# starts run's job)
with_json() {
	local a seen=
	JCMD=()
	# run and serve read options only before the first dataset
	if [ "${2:-}" = run ] || [ "${2:-}" = serve ]; then
		JCMD=("$1" "$2" --json "${@:3}")
		return
	fi
	for a in "$@"; do
		if [ -z "$seen" ] && [ "$a" = "--" ]; then
			JCMD+=(--json)
			seen=1
		fi
		JCMD+=("$a")
	done
	[ -n "$seen" ] || JCMD+=(--json)
}

# same NAME WANT CMD...: exit WANT, and the same again under --json with one
# error object on stdout carrying that exit code
same() {
	local name=$1 want=$2
	shift 2
	check "$name: exit $want" "$want" "$@"
	with_json "$@"
	check "$name --json: exit $want" "$want" "${JCMD[@]}"
	assert "$name --json: one error object with exit $want" json_error "$want"
}

# ---- services --------------------------------------------------------------
start_tpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
unset SECLAUNCH_TCTI TPM2TOOLS_TCTI # each command is given --tcti, or the case says otherwise
minisign -G -W -p p.pub -s p.key >/dev/null 2>&1
cat >policy.json <<'EOF'
{"version": 1, "description": "cli_contract",
 "allow_unverified_region": true,
 "keys": {"ck": ["ok-ds", "deny-ds"]},
 "datasets": [{"id": "ok-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]},
              {"id": "deny-ds", "allowed_regions": ["aws:us-east-1"], "tee_kinds": ["tpm2"]}]}
EOF
minisign -S -s p.key -m policy.json -t contract >/dev/null 2>&1
start_kms "$T/kms" --policy policy.json --policy-pubkey p.pub || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
DEAD=https://127.0.0.1:$(free_port)
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id ck
head -c 200000 /dev/urandom >plain
for ds in ok-ds deny-ds; do
	check "encrypt $ds" 0 "$SL" encrypt "${K[@]}" --key-id ck --admin-token-file "$KMS_TOKEN" \
		--dataset-id "$ds" -q plain -o "$ds.sld"
done
"$SL" keygen -q -o local.key
"$SL" encrypt --key-file local.key --dataset-id local-ds -q plain -o local.sld
RUN=(--policy policy.json --policy-pubkey p.pub "${K[@]}" --tcti "$SWTPM_TCTI" --stage host
	--audit-log "$T/run.audit")
JOB=(-- sh -c 'touch "$0"' "$T/ran")

# ---- usage (1): every command and verb, one line per mistake ---------------
CMDS=("version" "run" "keygen" "encrypt" "decrypt" "inspect" "attest" "verify" "enroll"
	"key create" "evidence import" "policy keygen" "policy sign" "policy verify" "policy check"
	"policy explain" "policy identity-verify" "policy identity-collect" "audit verify"
	"audit export" "audit append" "audit keygen")
for c in "${CMDS[@]}"; do
	read -ra cv <<<"$c"
	same "$c --bogus" 1 "$SL" "${cv[@]}" --bogus
	"$SL" "${cv[@]}" --bogus >/dev/null 2>"$T/err"
	assert "$c --bogus: one error line naming it" \
		test "$(grep -c "unknown option '--bogus'" "$T/err")" -eq 1 -a "$(grep -c error "$T/err")" -eq 0
	"$SL" help "${cv[@]}" >"$T/h1" 2>&1
	h1=$?
	"$SL" "${cv[@]}" --help >"$T/h2" 2>&1
	assert "help $c is $c --help" test "$h1" -eq 0 -a -s "$T/h1"
	assert "help $c prints what $c --help prints" cmp -s "$T/h1" "$T/h2"
done
"$SL" decrypt -o >/dev/null 2>"$T/err"
assert "a missing argument is one line" test "$(grep -c "option '-o' needs an argument" "$T/err")" -eq 1
same "unknown subcommand (policy)" 1 "$SL" policy frobnicate
same "unknown subcommand (audit)" 1 "$SL" audit frobnicate
check_err "deprecated --aws-certs still works and warns" 0 "aws-certs is deprecated; use --aws-trust" \
	"$SL" run --aws-certs x --help
check_err "policy explain's destination is --destination" 1 "unknown option '--output'" \
	"$SL" policy explain --output s3://x

# ---- input (2): a missing input file ------------------------------------
same "decrypt: missing input" 2 "$SL" decrypt --key-file local.key missing.sld -o x.out
same "encrypt: missing input" 2 "$SL" encrypt --key-file local.key --dataset-id d missing -o x.sld
same "inspect: missing input" 2 "$SL" inspect missing.sld
same "verify: missing input" 2 "$SL" verify missing.json --no-binding
same "policy check: missing input" 2 "$SL" policy check --policy missing.json
same "audit verify: missing input" 2 "$SL" audit verify --chain-only missing.log
same "evidence import: missing input" 2 "$SL" evidence import --kind sev-snp --report missing -o ev.json
same "run: missing dataset" 2 "$SL" run "${RUN[@]}" missing.sld "${JOB[@]}"

# ---- input (2): an existing output is kept unless --force -----------------
echo keep >exists
keep() { [ "$(cat exists)" = keep ]; }
same "keygen: output exists" 2 "$SL" keygen -o exists
assert "keygen kept it" keep
same "encrypt: output exists" 2 "$SL" encrypt --key-file local.key --dataset-id d plain -o exists
same "decrypt: output exists" 2 "$SL" decrypt --key-file local.key local.sld -o exists
same "attest: output exists" 2 "$SL" attest --tcti "$SWTPM_TCTI" --nonce 00 -o exists
assert "attest kept it" keep
same "attest --export-ak exists" 2 "$SL" attest --tcti "$SWTPM_TCTI" --nonce 00 -o new.json --export-ak exists
assert "attest wrote nothing when an export exists" test ! -e new.json
same "evidence import: output exists" 2 "$SL" evidence import --kind sev-snp --report plain -o exists
same "policy keygen: output exists" 2 "$SL" policy keygen -W --secret-key exists --public-key n.pub
cp policy.json.minisig sig.keep
same "policy sign: signature exists" 2 "$SL" policy sign --secret-key p.key --policy policy.json
assert "policy sign kept the signature" cmp -s sig.keep policy.json.minisig
same "audit keygen: output exists" 2 "$SL" audit keygen --secret-key exists --public-key a.pub
"$SL" audit keygen -q --secret-key ak.key --public-key ak.pub
echo '{"event":"t.one"}' | "$SL" audit append -q --audit-log a.log --checkpoint-key ak.key
same "audit export: output exists" 2 "$SL" audit export --pubkey ak.pub -o exists a.log
assert "every refusal kept the file" keep
check "keygen --force replaces" 0 "$SL" keygen -q --force -o exists
assert "the key replaced it" test "$(stat -c %s exists)" -eq 32
check "attest --force replaces" 0 "$SL" attest -q --tcti "$SWTPM_TCTI" --nonce 00 --force -o exists
assert "the evidence replaced it" grep -q '"kind"' exists
check "policy sign --force replaces" 0 "$SL" policy sign -q --force --secret-key p.key --policy policy.json
check "audit export --force replaces" 0 "$SL" audit export -q --pubkey ak.pub --force -o exists a.log
check "attest --json" 0 "$SL" attest --tcti "$SWTPM_TCTI" --nonce 00 --json -o ev2.json
assert "attest --json prints its result" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"]=="tpm2" and d["output"]=="ev2.json"' "$T/out"
check "--json with -o - is refused" 1 "$SL" decrypt --key-file local.key local.sld -o - --json
assert "--json with -o -: one error object" json_error 1

# ---- attestation refused by the KMS (3): the AK is not enrolled yet --------
same "run: AK not enrolled" 3 "$SL" run "${RUN[@]}" --region gcp:europe-west4 ok-ds.sld "${JOB[@]}"
"$SL" run "${RUN[@]}" --region gcp:europe-west4 ok-ds.sld "${JOB[@]}" >/dev/null 2>"$T/err"
assert "run names [ak_not_enrolled]" grep -q "ak_not_enrolled" "$T/err"
same "decrypt --kms: AK not enrolled" 3 "$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" \
	--region gcp:europe-west4 ok-ds.sld -o x.out
"$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" --region gcp:europe-west4 ok-ds.sld -o x.out 2>"$T/err"
assert "decrypt names [ak_not_enrolled]" grep -q "ak_not_enrolled" "$T/err"
assert "nothing decrypted" test ! -e x.out
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "enroll --json" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI" --json
assert "enroll --json prints its result" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["enrolled"]' "$T/out"

# ---- attestation failed locally (3) ---------------------------------------
"$SL" attest -q --tcti "$SWTPM_TCTI" --nonce 0102 --export-ak ak.pem -o bound.json
echo 'eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.c2ln' >bogus.jwt
same "verify: wrong nonce" 3 "$SL" verify bound.json --nonce 0304 --ak-pin ak.pem
same "run: malformed identity document" 3 "$SL" run "${RUN[@]}" --cloud-identity bogus.jwt ok-ds.sld "${JOB[@]}"
same "decrypt --kms: malformed identity document" 3 "$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" \
	--cloud-identity bogus.jwt ok-ds.sld -o x.out

# ---- decrypt --kms sends region identity (issue: it could not) -----------
check "decrypt --kms --region, allowed region: released" 0 "$SL" decrypt -q "${K[@]}" \
	--tcti "$SWTPM_TCTI" --region gcp:europe-west4 ok-ds.sld -o ok.out
assert "the plaintext is the original" cmp -s plain ok.out
same "decrypt --kms --region, wrong region: denied" 4 "$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" \
	--region gcp:us-central1 ok-ds.sld -o x.out
"$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" --region gcp:us-central1 ok-ds.sld -o x.out 2>"$T/err"
assert "the denial names the region" grep -q "us-central1" "$T/err"
same "decrypt --kms without region under a region policy: denied" 4 "$SL" decrypt "${K[@]}" \
	--tcti "$SWTPM_TCTI" ok-ds.sld -o x.out
same "decrypt: --region without --kms" 1 "$SL" decrypt --key-file local.key --region gcp:x local.sld -o x.out
same "decrypt: --region with --cloud-identity" 1 "$SL" decrypt "${K[@]}" --region gcp:x \
	--cloud-identity plain ok-ds.sld -o x.out
SECLAUNCH_TCTI=$SWTPM_TCTI check "decrypt --kms takes \$SECLAUNCH_TCTI" 0 "$SL" decrypt -q \
	"${K[@]}" --region gcp:europe-west4 ok-ds.sld -o ok2.out
check "decrypt --json" 0 "$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" --region gcp:europe-west4 \
	--json ok-ds.sld -o ok3.out
assert "decrypt --json prints its result" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset_id"]=="ok-ds" and d["bytes"]==200000' "$T/out"

# ---- policy denial (4): by the KMS, and by run's own pre-flight -----------
same "decrypt --kms: policy denies the dataset here" 4 "$SL" decrypt "${K[@]}" --tcti "$SWTPM_TCTI" \
	--region gcp:europe-west4 deny-ds.sld -o x.out
same "run: policy denies the dataset here" 4 "$SL" run "${RUN[@]}" --region gcp:europe-west4 \
	deny-ds.sld "${JOB[@]}"
assert "no job for a denial" test ! -e ran
cat >claims.json <<'EOF'
{"binding": "verified", "tee.kind": "tpm2", "cloud.provider": "aws", "cloud.region": "eu-west-1",
 "cloud.region_verified": "true"}
EOF
check "policy explain: denial exits 4" 4 "$SL" policy explain --policy policy.json --policy-pubkey p.pub \
	--claims claims.json --dataset ok-ds --json
assert "policy explain --json: the decision is the result" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["decision"] == "deny"' "$T/out"

# ---- KMS unreachable or refused (5) ----------------------------------------
export SECLAUNCH_KMS_TIMEOUT=2
same "run: KMS unreachable" 5 "$SL" run "${RUN[@]}" --kms "$DEAD" --region gcp:europe-west4 \
	ok-ds.sld "${JOB[@]}"
same "decrypt: KMS unreachable" 5 "$SL" decrypt --kms "$DEAD" --kms-ca "$KMS_CA" ok-ds.sld -o x.out
same "encrypt: KMS unreachable" 5 "$SL" encrypt --kms "$DEAD" --kms-ca "$KMS_CA" --key-id ck \
	--admin-token-file "$KMS_TOKEN" --dataset-id d plain -o x.sld
same "enroll: KMS unreachable" 5 "$SL" enroll --kms "$DEAD" --tcti "$SWTPM_TCTI"
same "key create: KMS unreachable" 5 "$SL" key create --kms "$DEAD" --admin-token-file "$KMS_TOKEN" --id z
# TLS refused: the system store does not know the dev CA
same "run: TLS refused" 5 "$SL" run "${RUN[@]}" --kms-ca /dev/null --region gcp:europe-west4 \
	ok-ds.sld "${JOB[@]}"
same "decrypt: TLS refused" 5 "$SL" decrypt --kms "$KMS_URL" --kms-ca /dev/null ok-ds.sld -o x.out
same "key create: refused (id taken)" 5 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id ck
same "key create: wrong pin" 5 "$SL" key create "${K[@]}" --kms-pin "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" \
	--admin-token-file "$KMS_TOKEN" --id z2
unset SECLAUNCH_KMS_TIMEOUT
# $SECLAUNCH_KMS_CA reaches run (it did not) and every other KMS command
RUN_NOCA=(--policy policy.json --policy-pubkey p.pub --kms "$KMS_URL" --tcti "$SWTPM_TCTI"
	--stage host --audit-log "$T/run.audit")
SECLAUNCH_KMS_CA=$KMS_CA check "run takes \$SECLAUNCH_KMS_CA" 0 "$SL" run -q "${RUN_NOCA[@]}" \
	--region gcp:europe-west4 ok-ds.sld "${JOB[@]}"
assert "the job ran" test -e ran
rm -f ran
SECLAUNCH_KMS_CA=$KMS_CA check "decrypt takes \$SECLAUNCH_KMS_CA" 0 "$SL" decrypt -q --kms "$KMS_URL" \
	--tcti "$SWTPM_TCTI" --region gcp:europe-west4 ok-ds.sld -o ok4.out
SECLAUNCH_KMS_CA=$KMS_CA check "key create takes \$SECLAUNCH_KMS_CA" 0 "$SL" key create -q \
	--kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id ck2

# ---- integrity failure (6) -------------------------------------------------
cp local.sld bad-local.sld
cp ok-ds.sld bad-kms.sld
for f in bad-local.sld bad-kms.sld; do
	python3 - "$f" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-40] ^= 1  # a byte inside the last chunk
open(p, "wb").write(bytes(b))
EOF
done
same "decrypt --key-file: tampered chunk" 6 "$SL" decrypt -q --key-file local.key bad-local.sld -o x.out
same "decrypt --kms: tampered chunk" 6 "$SL" decrypt -q "${K[@]}" --tcti "$SWTPM_TCTI" \
	--region gcp:europe-west4 bad-kms.sld -o x.out
assert "nothing left behind" test ! -e x.out
same "run: tampered chunk" 6 "$SL" run -q "${RUN[@]}" --region gcp:europe-west4 bad-kms.sld "${JOB[@]}"
assert "no job for a tampered dataset" test ! -e ran
"$SL" keygen -q -o other.key
same "decrypt: wrong key" 6 "$SL" decrypt -q --key-file other.key local.sld -o x.out
sed 's/t.one/t.two/' a.log >edited.log
same "audit verify: edited record" 6 "$SL" audit verify --pubkey ak.pub edited.log
same "audit export: edited record" 6 "$SL" audit export --pubkey ak.pub -o x.jsonl edited.log

finish
