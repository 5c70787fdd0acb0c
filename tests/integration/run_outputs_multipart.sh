#!/usr/bin/env bash
# A sealed output to S3 through `seclaunch run --output model=s3://…` whose
# shard goes up as a multipart upload (moto_server behind the HTTPS front
# s3_proxy.py, parts of 5 MiB from the smallest object up): the good case
# leaves the object, the manifest and LATEST; a part refused midway (403,
# not retried) fails the run (exit 5, naming the part), aborts the upload
# (no object, no pending upload), uploads neither the manifest nor LATEST,
# and the audit log records the output as failed, never as sealed. An
# object at or under the threshold goes up in one PUT. Shards go up while
# the rest is sealed, several PUTs at once: the manifest only after every
# shard's PUT was answered, LATEST after it; one shard refused while others
# are under way fails the run naming it, with no manifest and no LATEST,
# every PUT begun answered before the run ends (no upload thread left),
# and the staging folder gone. Skips (77) without moto_server, swtpm or
# minisign.
. "$(dirname "$0")/lib.sh"

for tool in moto_server swtpm minisign python3 openssl curl; do
	command -v "$tool" >/dev/null || {
		echo "SKIP: run_outputs_multipart: $tool is not installed"
		exit 77
	}
done
cd "$T" || exit 1
unset AWS_SESSION_TOKEN AWS_PROFILE SECLAUNCH_TCTI TPM2TOOLS_TCTI
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials HOME=$T
export SECLAUNCH_REMOTE_PART_SIZE=$((5 << 20)) SECLAUNCH_REMOTE_MULTIPART_MIN=$((5 << 20))
PY=$(python3 -c "import sys; print(sys.executable)")
AUDIT=$T/audit.log

make_tls_ca tls || { echo "not ok - test CA"; exit 1; }
MP=$(free_port)
moto_server -H 127.0.0.1 -p "$MP" >moto.log 2>&1 &
_PIDS+=($!)
wait_port "$MP" 20 || { echo "not ok - moto_server did not start"; cat moto.log; exit 1; }
curl -sf -X PUT "http://127.0.0.1:$MP/bkt" -o /dev/null || { echo "not ok - bucket"; exit 1; }
"$PY" "$SL_ROOT/tests/integration/s3_proxy.py" "$T/pp" "$MP" tls/srv.pem tls/srv.key "$T/px.log" &
_PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s "$T/pp" ] && break; sleep 0.1; done
PP=$(cat "$T/pp")
wait_port "$PP" 10 || { echo "not ok - proxy"; exit 1; }
# an object, read through the proxy (moto answers an anonymous GET of a PUT object 403)
signed_get() {
	curl -sf --cacert tls/ca.pem --aws-sigv4 aws:amz:us-east-1:s3 --user testing:testing \
		"https://127.0.0.1:$PP/bkt/$1" -o "${2:-/dev/null}"
}
no_pending() { ! curl -sf "http://127.0.0.1:$MP/bkt?uploads" | grep -q "<Upload>"; }

start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p policy.pub -s policy.key >/dev/null 2>&1
cat >policy.json <<'EOF'
{"version": 1, "allow_unverified_region": true,
 "keys": {"ckpt-key": ["model:*"], "lease-key": ["lmodel:*"]},
 "datasets": [{"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "output_destinations": [{"url": "s3://bkt/*", "region": "gcp:europe-west4"}]},
  {"id": "lmodel:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"], "key_ttl": 3,
   "output_destinations": [{"url": "s3://bkt/lease/*", "region": "gcp:europe-west4"}]}]}
EOF
minisign -S -s policy.key -m policy.json -t "outputs" >/dev/null 2>&1
start_kms "$T/kms" --policy policy.json --policy-pubkey policy.pub || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q || { echo "not ok - enroll"; exit 1; }
for k in ckpt-key lease-key; do
	"$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id "$k" -q ||
		{ echo "not ok - key create $k"; exit 1; }
done

# the job writes 12 MiB (one shard of three 5 MiB parts) into its output and exits
cat >job.py <<'EOF'
import os, sys
with open(os.environ["SECLAUNCH_OUTPUT_DIR"] + "/model/ckpt.bin", "wb") as f:
    f.write(os.urandom(12 << 20))
EOF
srun() { # PREFIX
	"$SL" run --policy policy.json --policy-pubkey policy.pub "${KMSA[@]}" --tcti "$SWTPM_TCTI" \
		--stage host --region gcp:europe-west4 --audit-log "$AUDIT" -q --ca-file tls/ca.pem \
		--s3-endpoint "https://127.0.0.1:$PP" --output "model=s3://bkt/$1/" -- "$PY" job.py
}
shard_of() { grep -o "^PUT /bkt/$1/ckpt-[0-9]*/shard-[0-9]*\.sld?partNumber=1&" "$T/px.log" | head -1 |
	sed 's/^PUT \/bkt\///; s/?.*//'; }

sealed_count() { grep '"event":"run.output"' "$AUDIT" 2>/dev/null | grep -c '"root"'; }

# ---- the good case: parts, completed, then the manifest and LATEST -----------
: >"$T/px.log"
n0=$(sealed_count)
check "sealed and uploaded to s3://bkt/good/ (multipart)" 0 srun good
assert "the audit log records it sealed" test "$(sealed_count)" -eq $((n0 + 1))
shard=$(shard_of good)
assert "the shard went up in parts ($shard)" test -n "$shard"
assert "... completed" grep -q "^POST /bkt/$shard?uploadId=.* -> 200" "$T/px.log"
assert "the shard is in the store" signed_get "$shard"
assert "the manifest is in the store" signed_get "${shard%/*}/manifest.sldm"
assert "LATEST is in the store" signed_get good/LATEST
assert "no upload left pending" no_pending

# ---- a part refused midway: aborted, nothing reported as sealed --------------
echo "403 2" >"$T/pp.fail"
: >"$T/px.log"
n0=$(sealed_count)
check_err "part 2 refused (403): the run fails, exit 5, naming the part" 5 "part 2 of 3.*403" srun bad
rm -f "$T/pp.fail"
shard=$(shard_of bad)
assert "the shard had started in parts ($shard)" test -n "$shard"
assert "the upload was aborted (AbortMultipartUpload)" \
	grep -q "^DELETE /bkt/$shard?uploadId=.* -> 204" "$T/px.log"
assert "never completed" test "$(grep -c "^POST /bkt/$shard?uploadId=" "$T/px.log")" -eq 0
assert "no shard object" test "$(curl -s -o /dev/null -w '%{http_code}' \
	"http://127.0.0.1:$MP/bkt/$shard")" = 404
assert "no manifest sent" test "$(grep -c "^PUT /bkt/bad/.*manifest.sldm" "$T/px.log")" -eq 0
assert "no LATEST sent" test "$(grep -c "^PUT /bkt/bad/LATEST" "$T/px.log")" -eq 0
assert "no upload left pending" no_pending
assert "the audit log records the output as failed" \
	grep -q '"event":"run.output".*"error":"SL_E_REMOTE_REFUSED"' "$AUDIT"
assert "... and never as sealed" test "$(sealed_count)" -eq "$n0"

# ---- at or under the threshold: one PUT, no upload created -------------------
: >"$T/px.log"
export SECLAUNCH_REMOTE_MULTIPART_MIN=$((16 << 20))
check "with a 16 MiB threshold: sealed and uploaded to s3://bkt/one/" 0 srun one
assert "the shard went up in one PUT" grep -q "^PUT /bkt/one/ckpt-[0-9]*/shard-[0-9]*\.sld -> 200" "$T/px.log"
assert "no multipart upload created" test "$(grep -c "^POST /bkt/one/.*uploads=" "$T/px.log")" -eq 0
assert "LATEST is in the store" signed_get one/LATEST

# ---- shards sealed and uploaded side by side ---------------------------------
# 1 MiB shards (12), three PUTs at once, each shard's held 0.3 s by the proxy
export SECLAUNCH_REMOTE_MULTIPART_MIN=$((64 << 20)) SECLAUNCH_OUTPUT_SHARD_SIZE=$((1 << 20))
export SECLAUNCH_OUTPUT_UPLOADS=3
mkdir -p "$T/stage"
line_of() { grep -n -m1 -- "$1" "$T/px.log" | cut -d: -f1; }
last_of() { grep -n -- "$1" "$T/px.log" | tail -1 | cut -d: -f1; }
staged_left() { test -z "$(ls -A "$T/stage")"; }
echo "hold-put 0.3" >"$T/pp.fail"
: >"$T/px.log"
TMPDIR=$T/stage check "12 shards sealed and uploaded side by side to s3://bkt/par/" 0 srun par
rm -f "$T/pp.fail"
assert "every shard went up in one PUT" \
	test "$(grep -c "^PUT /bkt/par/ckpt-[0-9]*/shard-[0-9]*\.sld -> 200" "$T/px.log")" -eq 12
assert "shard PUTs were under way at once" grep -qx "putinflight [2-9]" "$T/px.log"
man_begin=$(line_of "^begin PUT /bkt/par/ckpt-[0-9]*/manifest.sldm")
assert "the manifest was sent after every shard's PUT was answered" \
	test "${man_begin:-0}" -gt "$(last_of "^PUT /bkt/par/ckpt-[0-9]*/shard-.* -> 200")"
assert "LATEST was sent after the manifest was stored" \
	test "$(line_of "^begin PUT /bkt/par/LATEST")" -gt \
	"$(line_of "^PUT /bkt/par/ckpt-[0-9]*/manifest.sldm -> 200")"
assert "the manifest is in the store" signed_get "par/ckpt-00000001/manifest.sldm"
assert "LATEST is in the store" signed_get par/LATEST
assert "the staging folder is gone" staged_left

# ---- one shard refused while others are sealed and uploaded ------------------
# staged in memory files (the default) and in files under $TMPDIR
for mem in 1 0; do
	echo "403-put shard-00001.sld 1" >"$T/pp.fail"
	: >"$T/px.log"
	n0=$(sealed_count)
	SECLAUNCH_OUTPUT_STAGE_MEMORY=$mem TMPDIR=$T/stage check_err \
		"staged in memory $mem: shard 1 refused (403) while others are under way: exit 5, naming it" \
		5 "shard-00001\.sld.*403" srun "pfail$mem"
	begun=$(grep -c "^begin PUT" "$T/px.log")
	answered=$(grep -c "^PUT .* -> " "$T/px.log")
	rm -f "$T/pp.fail"
	assert "every PUT begun was answered before the run ended (no upload left running)" \
		test "$begun" -eq "$answered"
	assert "other shards were under way when it was refused" grep -qx "putinflight [2-9]" "$T/px.log"
	assert "no shard PUT begun after the refusal (at most the three under way)" \
		test "$(grep -c "^begin PUT /bkt/pfail$mem/.*shard-" "$T/px.log")" -le 3
	assert "no manifest sent" \
		test "$(grep -c "^begin PUT /bkt/pfail$mem/.*manifest.sldm" "$T/px.log")" -eq 0
	assert "no LATEST sent" test "$(grep -c "^begin PUT /bkt/pfail$mem/LATEST" "$T/px.log")" -eq 0
	assert "the audit log records the output as failed" \
		grep -q "\"event\":\"run.output\".*\"error\":\"SL_E_REMOTE_REFUSED\".*pfail$mem.*shard-00001" "$AUDIT"
	assert "... and never as sealed" test "$(sealed_count)" -eq "$n0"
	assert "the staging folder is gone" staged_left
done
unset SECLAUNCH_OUTPUT_SHARD_SIZE SECLAUNCH_OUTPUT_UPLOADS

# ---- the lease ends while the shards are sealed and uploaded -----------------
# lmodel's key has a 3 s lease (renewed every second); the job writes 24
# shards of 1 MiB, one PUT at a time, each held 1 s by the proxy; the key is
# disabled once the first shard PUT begins: the next renewal is refused and
# no shard is sealed after that (the lease rule holds between shards)
export SECLAUNCH_OUTPUT_UPLOADS=1 SECLAUNCH_OUTPUT_SHARD_SIZE=$((1 << 20))
cat >job24.py <<'EOF'
import os
with open(os.environ["SECLAUNCH_OUTPUT_DIR"] + "/lmodel/ckpt.bin", "wb") as f:
    f.write(os.urandom(24 << 20))
EOF
echo "hold-put 1" >"$T/pp.fail"
: >"$T/px.log"
"$SL" run --policy policy.json --policy-pubkey policy.pub "${KMSA[@]}" --tcti "$SWTPM_TCTI" \
	--stage host --region gcp:europe-west4 --audit-log "$AUDIT" -q --ca-file tls/ca.pem \
	--s3-endpoint "https://127.0.0.1:$PP" --output "lmodel=s3://bkt/lease/" -- "$PY" job24.py \
	>lease.out 2>lease.err &
LRUN=$!
for ((i = 0; i < 300; i++)); do
	grep -q "^begin PUT /bkt/lease/ckpt-[0-9]*/shard-" "$T/px.log" && break
	kill -0 "$LRUN" 2>/dev/null || break
	sleep 0.1
done
assert "lease: the first shard PUT began while the run went on" kill -0 "$LRUN"
check "lease: key disabled during the upload" 0 \
	"$SL" key disable "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id lease-key
wait "$LRUN"
lrc=$?
rm -f "$T/pp.fail"
lput=$(grep -c "^begin PUT /bkt/lease/ckpt-[0-9]*/shard-" "$T/px.log")
assert "lease: the run failed (exit 4, rc $lrc)" test "$lrc" -eq 4
assert "lease: it says the lease ended and the output was not sealed" \
	grep -q "output lmodel: not sealed: the keys' lease ended" lease.err
assert "lease: no shard PUT after the lease ended ($lput of 24 begun)" test "$lput" -lt 12
assert "lease: no manifest sent" \
	test "$(grep -c "^begin PUT /bkt/lease/.*manifest.sldm" "$T/px.log")" -eq 0
assert "lease: no LATEST sent" test "$(grep -c "^begin PUT /bkt/lease/LATEST" "$T/px.log")" -eq 0
assert "lease: the audit log records the output as failed" \
	grep -q '"event":"run.output".*"error":"SL_E_ATTEST".*lmodel' "$AUDIT"
assert "lease: run.lease_ended names the disabled key" \
	bash -c "grep '\"run.lease_ended\"' '$AUDIT' | tail -1 | grep -q 'key_disabled'"
unset SECLAUNCH_OUTPUT_SHARD_SIZE SECLAUNCH_OUTPUT_UPLOADS

# ---- a bad setting is refused before the job runs ----------------------------
# (it is read at launch, not by the seal after the job: nothing is lost)
for bad in "SECLAUNCH_OUTPUT_UPLOADS=9:must be 1\.\.8" "SECLAUNCH_OUTPUT_UPLOADS=x:must be 1\.\.8" \
	"SECLAUNCH_OUTPUT_SHARD_SIZE=4096:must be 65536\.\." "SECLAUNCH_OUTPUT_STAGE_MEMORY=2:must be 0\.\.1"; do
	kv=${bad%%:*}
	rm -f "$T/ran"
	check_err "$kv: refused at launch (exit 1, naming it)" 1 "--output: $kv: ${bad#*:}" \
		env "$kv" "$SL" run --policy policy.json --policy-pubkey policy.pub "${KMSA[@]}" \
		--tcti "$SWTPM_TCTI" --stage host --region gcp:europe-west4 --audit-log "$AUDIT" -q \
		--ca-file tls/ca.pem --s3-endpoint "https://127.0.0.1:$PP" --output "model=s3://bkt/bad/" \
		-- sh -c ": >'$T/ran'"
	assert "$kv: the job never ran" test ! -e "$T/ran"
done

finish
