#!/usr/bin/env bash
# seclaunchd SIGHUP: the config file and the signed policy are reloaded as a
# whole; a policy whose signature or content is bad leaves the old one in
# force and the daemon log and an audit record say why; the log file is
# reopened (logrotate); a restart-only key that changed is named in a
# warning; 20 HUPs under load never stop the service and the audit log still
# verifies with a closing checkpoint. Daemon log lines carry an RFC 3339 time
# and a level, or sd-daemon <N> prefixes under systemd.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tpm2_lib.bash"
. "$(dirname "$0")/kms_lib.bash"

cd "$T" || exit 1
build_probe || exit 1
start_swtpm_tcti tpm

# policy A lets k1 wrap new-* (the keys map) but has no rule that releases it
policy_a='{"version": 1, "allow_unverified_region": true,
 "datasets": [{"id": "ok-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"]}],
 "keys": {"k1": ["ok-*", "new-*"]}}'
policy_b='{"version": 1, "allow_unverified_region": true,
 "datasets": [{"id": "ok-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"]},
              {"id": "new-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"]}],
 "keys": {"k1": ["ok-*", "new-*"]}}'
"$SL" policy keygen --secret-key pol.key --public-key pol.pub -W >/dev/null
"$SL" policy keygen --secret-key other.key --public-key other.pub -W >/dev/null
# sign_as NAME TEXT KEY: NAME.json + NAME.json.minisig
sign_as() {
	printf '%s\n' "$2" >"$1.json"
	"$SL" policy sign --secret-key "$3" --policy "$1.json" >/dev/null
}
# install NAME: puts NAME.json (and its signature) in force at policy.json,
# each file replaced by a rename so a HUP never reads half a file
install() {
	cp "$1.json" .p.tmp && mv .p.tmp policy.json
	cp "$1.json.minisig" .s.tmp && mv .s.tmp policy.json.minisig
}
sign_as A "$policy_a" pol.key
sign_as B "$policy_b" pol.key
sign_as forged "$policy_b" other.key
# seclaunch refuses to sign an invalid policy; the stock minisign signs anything
have_minisign=false
if command -v minisign >/dev/null; then
	have_minisign=true
	printf '{"version": 1, "datasetz": [], "keys": {}}\n' >invalid.json
	minisign -S -s pol.key -m invalid.json -x invalid.json.minisig </dev/null >/dev/null
fi
install A

printf '{"log_file": "%s/kms.log", "policy": "%s/policy.json", "policy_pubkey": "%s/pol.pub"}\n' \
	"$T" "$T" "$T" >cfg.json
start_kms "$T/kms" --config "$T/cfg.json" || exit 1
# a signed policy that lets unverified regions count says so at start, as --dev does
assert "log: allow_unverified_region warned at start" \
	grep -q "warning seclaunchd: policy $T/policy.json sets allow_unverified_region" kms.log
assert "audit: kms.start says allow_unverified_region" \
	grep -q '"event":"kms.start".*"allow_unverified_region":true' "$KMS_STATE/audit.log"
export SECLAUNCH_KMS_CA=$KMS_CA KMS_PROBE_IDENTITY='[{"kind": "unsigned", "region": "aws:eu-west-1"}]'

# hup [N]: SIGHUP, then waits until the log shows the reload's outcome
nreload=0
hup() {
	local i
	nreload=$((nreload + 1))
	kill -HUP "$KMS_PID"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -Ec 'reload: policy .* in force|reload refused' kms.log 2>/dev/null)" -ge "$nreload" ] && return 0
		sleep 0.05
	done
	echo "no reload outcome in the log after HUP #$nreload" >&2
	return 1
}
challenge_digest() {
	curl -s --cacert "$KMS_CA" -d '{}' "$KMS_URL/v1/challenge" |
		python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["policy_digest"]).hex())'
}
release() { "$PROBE" "$KMS_URL" "$KMS_CA" release k1 "$1" "$(wrapped_of "$1.sld")"; }

check "enroll" 0 "$SL" enroll --kms "$KMS_URL" -q
check "key create" 0 "$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id k1
head -c 4096 /dev/urandom >plain
for ds in ok-1 new-1; do
	check "encrypt $ds" 0 "$SL" encrypt --kms "$KMS_URL" --key-id k1 --admin-token-file "$KMS_TOKEN" \
		--dataset-id $ds plain -o $ds.sld
done
dA=$(sha256sum A.json | cut -c1-64)
dB=$(sha256sum B.json | cut -c1-64)
assert "challenge names policy A" test "$(challenge_digest)" = "$dA"
check "policy A releases ok-1" 0 release ok-1
check_err "policy A denies new-1" 4 "\[policy_denied\]" release new-1

# --- a good new policy -----------------------------------------------------------
install B
assert "HUP with policy B" hup
assert "challenge's policy_digest is now B's" test "$(challenge_digest)" = "$dB"
check "a release now follows policy B (new-1 released)" 0 release new-1
assert "log: B in force, was A" grep -q "reload: policy $dB in force (was $dA)" kms.log
assert "audit: kms.reload applied under B, naming A" \
	grep -q "\"event\":\"kms.reload\".*\"policy_digest\":\"$dB\".*\"decision\":\"applied\".*\"previous_policy_digest\":\"$dA\"" \
	"$KMS_STATE/audit.log"

# --- a policy signed by another key ------------------------------------------------
install forged
assert "HUP with a policy signed by another key" hup
assert "log: refused, old stays, names the signature" \
	grep -Eq "error seclaunchd: reload refused, the previous configuration and policy stay in force: .*policy\.json\.minisig.*(signature|key)" kms.log
assert "audit: kms.reload refused naming the signature" \
	grep -Eq "\"event\":\"kms.reload\".*\"decision\":\"refused\".*\"error\":\"[^\"]*policy\.json\.minisig[^\"]*\".*\"policy_digest_in_force\":\"$dB\"" \
	"$KMS_STATE/audit.log"
assert "challenge still names policy B" test "$(challenge_digest)" = "$dB"
check "releases still follow policy B" 0 release new-1

# --- a well-signed but invalid policy ------------------------------------------------
if $have_minisign; then
	install invalid
	assert "HUP with an invalid policy" hup
	assert "log: refused naming the unknown field" grep -Eq "reload refused.*datasetz" kms.log
	assert "audit: kms.reload refused naming the unknown field" \
		grep -q '"event":"kms.reload".*"decision":"refused".*"error":"[^"]*datasetz' "$KMS_STATE/audit.log"
	assert "challenge still names policy B" test "$(challenge_digest)" = "$dB"
	check "releases still follow policy B" 0 release new-1
else
	skip "well-signed invalid policy" "the minisign tool (to sign it) is not installed"
fi

# --- a broken config file ------------------------------------------------------------
install B
cp cfg.json cfg.good
echo '{"log_file": ' >cfg.json
assert "HUP with a config that does not parse" hup
assert "log: refused naming the config file" grep -q "reload refused.*cfg.json" kms.log
cp cfg.good cfg.json

# --- limits reload; restart-only keys are named ------------------------------------
printf '{"log_file": "%s/kms.log", "policy": "%s/policy.json", "policy_pubkey": "%s/pol.pub", "max_body": 2048, "max_connections": 9, "threads": 3}\n' \
	"$T" "$T" "$T" >cfg.json
assert "HUP with max_body 2048 and changed restart-only keys" hup
assert "warning names max_connections" grep -q 'warning seclaunchd: reload: "max_connections" changed; it takes effect only after a restart (still 512)' kms.log
assert "warning names threads" grep -q 'warning seclaunchd: reload: "threads" changed; it takes effect only after a restart (still 2)' kms.log
head -c 3000 /dev/zero | tr '\0' ' ' >big.json
check "max_body took effect: a 3000-byte body is refused (413)" 0 \
	sh -c "curl -s -o /dev/null -w '%{http_code}' --cacert '$KMS_CA' --data-binary @big.json '$KMS_URL/v1/challenge' | grep -qx 413"
check "still listening where it started" 0 curl -sf --cacert "$KMS_CA" "$KMS_URL/v1/health"
cp cfg.good cfg.json
assert "HUP back to the first config" hup

# --- the log file is reopened (logrotate) --------------------------------------------
mv kms.log kms.log.1
nreload=0
assert "HUP after the log was moved away" hup
assert "a new log file is written" grep -q "reload: policy $dB in force" kms.log
assert "the moved log keeps what came before" grep -q "listening on" kms.log.1
re='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z (error|warning|notice|info) seclaunchd: '
assert "every log line: RFC 3339 UTC time, level, seclaunchd:" \
	sh -c "cat kms.log.1 kms.log | grep -Evq '$re' && exit 1; test \$(cat kms.log.1 kms.log | wc -l) -gt 10"

# --- 20 HUPs under load --------------------------------------------------------------
python3 "$SL_ROOT/tests/integration/kms_load.py" --port "${KMS_URL##*:}" --ca "$KMS_CA" --threads 4 \
	--seconds 60 --stop-file "$T/stop" >load.out 2>&1 &
load=$!
sleep 0.3
ok=0
for ((i = 1; i <= 20; i++)); do
	if ((i % 2)); then install A; else install B; fi
	hup && ok=$((ok + 1))
	kill -0 "$KMS_PID" 2>/dev/null || break
done
touch "$T/stop"
wait "$load"
assert "20 HUPs under load: all reloaded ($ok)" test "$ok" -eq 20
assert "still running after 20 HUPs" kill -0 "$KMS_PID"
assert "every request under the HUPs answered 200 ($(cat load.out))" \
	sh -c "grep -Eq '^ok=[1-9][0-9]* bad=0 errors=0$' load.out"
assert "challenge names the last policy (B)" test "$(challenge_digest)" = "$dB"
check "health" 0 curl -sf --cacert "$KMS_CA" "$KMS_URL/v1/health"
kill -TERM "$KMS_PID"
wait "$KMS_PID"
assert "SIGTERM after the HUPs: exit 0" test $? -eq 0
check "audit verify --require-final-checkpoint after kill -HUP" 0 \
	"$SL" audit verify --pubkey "$KMS_STATE/audit.pub" --require-final-checkpoint "$KMS_STATE/audit.log"
assert "$((20 + nreload + 5)) or more kms.reload records" \
	test "$(grep -c '"event":"kms.reload"' "$KMS_STATE/audit.log")" -ge 25

# --- a log file that cannot be opened -----------------------------------------------
check_err "--log-file in a missing directory: refused at start, naming it" 2 \
	"log_file $T/no/such/dir/x.log: cannot open" \
	timeout 20 "$SLD" --dev --state "$T/kms-nolog" --listen 127.0.0.1:0 --log-file "$T/no/such/dir/x.log"

# --- stderr format, and the journal's <N> prefixes under systemd ---------------------
start_kms "$T/kms2" || exit 1
kill -HUP "$KMS_PID"
sleep 0.3
stop_pid "$KMS_PID"
assert "stderr lines: RFC 3339 UTC time, level, seclaunchd:" \
	sh -c "grep -Evq '$re' '$T/kms2/log' && exit 1; grep -q 'notice seclaunchd: reload: policy' '$T/kms2/log'"
mkdir -p kms3
: >kms3/journal
(
	exec 2>>kms3/journal
	JOURNAL_STREAM=$(stat -c '%d:%i' kms3/journal) exec "$SLD" --dev --state "$T/kms3" --listen 127.0.0.1:0
) &
jp=$!
_PIDS+=("$jp")
for ((i = 0; i < 200; i++)); do [ -s kms3/url ] && break; sleep 0.05; done
kill -HUP "$jp"
sleep 0.3
stop_pid "$jp"
assert "under systemd (JOURNAL_STREAM is stderr): <N> priority prefixes" \
	sh -c "grep -Evq '^<[0-7]>seclaunchd: ' kms3/journal && exit 1; grep -q '^<5>seclaunchd: listening on' kms3/journal && grep -q '^<4>seclaunchd: development policy' kms3/journal"
finish
