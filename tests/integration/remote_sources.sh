#!/usr/bin/env bash
# Sharded datasets read from object storage by `seclaunch decrypt` and
# `inspect`: HTTPS from nginx (TLS under a test CA), a misbehaving store
# (remote_fake.py: lies in Content-Range, short bodies, stalls, redirects,
# a shard of another dataset, 429/503 then success, 403/404, Range ignored,
# connections closed mid-body), S3 path-style against s3rver over TLS and
# against the fake store's SigV4 check (credentials from the environment,
# the shared credentials file and IMDSv2), GCS with a bearer token from the
# environment and from the metadata server; the next shard fetched while
# one is decrypted (decrypt, run --stage host and stream): its failure is
# the error, and a shard that fails to decrypt stops it at once. Every
# failure: its exit code (5 the store, 6 integrity), an error naming what
# failed, no output folder and no plaintext.
. "$(dirname "$0")/lib.sh"

for tool in python3 openssl curl; do
	if ! command -v "$tool" >/dev/null; then
		skip remote_sources "$tool not installed"
		finish
	fi
done
cd "$T" || exit 1
export SECLAUNCH_REMOTE_STALL_S=2 # the stall timeout, short for the test
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE GOOGLE_OAUTH_ACCESS_TOKEN
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials HOME=$T
MARK=PLAINTEXT-MARK-$RANDOM$RANDOM

"$SL" keygen -o key -q
# a tree over several 256 KiB shards; src2 has the same sizes, other bytes
mkdir -p src/a/b src2/a/b
for f in a/one.bin a/b/two.bin three.bin; do
	head -c 300000 /dev/urandom >"src/$f"
	head -c 300000 /dev/urandom >"src2/$f"
done
printf '%s\n' "$MARK" >src/a/mark.txt
printf '%s\n' "$MARK" | tr '[:upper:]' '[:lower:]' >src2/a/mark.txt
"$SL" encrypt --key-file key --dataset-id remote-ds --shard-size 256K -q src -o ds
"$SL" encrypt --key-file key --dataset-id remote-ds --shard-size 256K -q src2 -o ds2
mkdir -p www && cp -a ds www/ds && chmod -R a+rX www
nshards=$(find ds -name "shard-*.sld" | wc -l)
assert "the dataset has several shards ($nshards)" test "$nshards" -ge 4
make_tls_ca tls || {
	echo "not ok - no test CA"
	exit 1
}

# dec URL [VAR=VALUE...]: decrypt URL into o/out (o/ starts empty) with
# those variables and the options in DEC_OPTS
DEC_OPTS=()
dec() {
	local url=$1
	shift
	rm -rf o && mkdir o
	env "$@" "$SL" decrypt --key-file key --ca-file tls/ca.pem "${DEC_OPTS[@]}" "$url" -o o/out
}
# gone: no output folder nor temporary left in o/, no plaintext on stdout
# or stderr
gone() {
	[ -z "$(ls -A o)" ] && ! grep -qi "$MARK" "$T/out" "$T/err"
}
same() { diff -r src o/out >/dev/null; }

# ---- nginx ------------------------------------------------------------------
if start_nginx "$T/www" "$T/tls"; then
	U=https://127.0.0.1:$NGINX_PORT/ds/
	check "decrypt from nginx over HTTPS (HTTP/2, ranges)" 0 dec "$U"
	assert "... the tree byte for byte" same
	check "... with 64 KiB ranges on 3 connections" 0 \
		dec "$U" SECLAUNCH_REMOTE_RANGE=65536
	assert "... the tree byte for byte" same
	assert "... and the shards came as ranges (206)" grep -q '"GET /ds/shard-00001.sld HTTP/2.0" 206' "$NGINX_LOG"
	check_err "inspect from nginx shows the manifest" 0 "" \
		"$SL" inspect --ca-file tls/ca.pem "$U"
	assert "... naming the dataset" grep -q remote-ds "$T/out"
	rm -rf o && mkdir o
	check_err "without the test CA: refused (exit 5), no output" 5 "certificate|SSL" \
		"$SL" decrypt --key-file key "$U" -o o/out
	assert "... nothing left" gone
	check_err "--connections 0 is a usage error" 1 "connections" \
		"$SL" decrypt --key-file key --connections 0 "$U" -o o/out
	stop_pid "$NGINX_PID"
else
	skip "nginx cases" "${NGINX_SKIP:-nginx did not start}"
fi

# ---- a misbehaving store ----------------------------------------------------
start_remote_fake "$T/www" "$T/fake.log" --tls tls/srv.pem tls/srv.key --swap "$T/ds2" \
	--secret AKIDTEST:right-secret --token tok-$RANDOM || exit 1
F=https://127.0.0.1:$FAKE_PORT
TOKEN=$(tr ' ' '\n' </proc/$FAKE_PID/cmdline 2>/dev/null | tr '\0' '\n' | grep '^tok-')
# requests to one object: nreq MODE OBJECT [STATUS]
nreq() { grep -c "^GET /$1/ds/$2 .*-> ${3:-}" "$T/fake.log"; }

check "the fake store serves the good case" 0 dec "$F/good/ds/"
assert "... byte for byte" same

# bad NAME RC PATTERN MODE [env...]
bad() {
	local name=$1 rc=$2 pat=$3 mode=$4
	shift 4
	check_err "$name (exit $rc)" "$rc" "$pat" dec "$F/$mode/ds/" "$@"
	assert "... no output folder, no plaintext" gone
}
bad "a Content-Range that names another range" 5 'Content-Range "bytes 1-.*" is not bytes 0-' lie
assert "... not retried" test "$(nreq lie shard-00000.sld)" -eq 1
bad "short bodies" 5 "shard-00000.sld bytes 0-[0-9]+: [0-9]+ of [0-9]+ bytes arrived" short
assert "... retried, then given up" test "$(nreq short shard-00000.sld)" -eq 5
bad "bodies longer than their range" 5 "shard-00000.sld bytes 0-[0-9]+: the server sent more than the range asked for" long
assert "... not retried" test "$(nreq long shard-00000.sld)" -eq 1
t0=$(date +%s)
bad "a stalled body" 5 "shard-00000.sld bytes 0-[0-9]+: stalled \(no data for 1 s\)" stall \
	SECLAUNCH_REMOTE_STALL_S=1
assert "... given up within the stall timeout's 5 tries (< 15 s)" test $(($(date +%s) - t0)) -lt 15
# the next shard is fetched while the one before is decrypted: a fetch
# that fails there is the run's error, naming its shard, and a shard that
# fails to decrypt stops the fetch ahead instead of waiting for its end
bad "a later shard stalls (fetched ahead): its error, naming it" 5 \
	"stalllate/ds/shard-00001.sld bytes 0-[0-9]+: stalled \(no data for 1 s\)" stalllate \
	SECLAUNCH_REMOTE_STALL_S=1 SECLAUNCH_REMOTE_RETRIES=1
t0=$(date +%s)
bad "a tampered first shard while the next one stalls: exit 6, naming the first" 6 \
	"shard-00000.sld.*(authentication|integrity|tag)" tamperstall SECLAUNCH_REMOTE_STALL_S=30
assert "... at once, not after the fetch ahead's 30 s stall ($(($(date +%s) - t0)) s)" \
	test $(($(date +%s) - t0)) -lt 10
# a store that drips about 1.4 bytes a second: never a second-long stall,
# so only the rate rule (or the deadline) ends it; retried, then given up,
# naming the URL and the rule
t0=$(date +%s)
DEC_OPTS=(--remote-rate-window 1)
bad "a slow-drip body: slower than the minimum rate" 5 \
	"drip/ds/shard-00000.sld bytes 0-[0-9]+: slower than 65536 B/s over 1 s" drip \
	SECLAUNCH_REMOTE_RETRIES=1
assert "... retried once, then given up" test "$(nreq drip shard-00000.sld)" -eq 2
assert "... within seconds, not the stall timeout's ($(($(date +%s) - t0)) s)" test $(($(date +%s) - t0)) -lt 10
t0=$(date +%s)
DEC_OPTS=(--remote-min-rate 0 --remote-deadline 2)
bad "the same store, no rate rule: the request deadline ends it" 5 \
	"drip/ds/shard-00000.sld bytes 0-[0-9]+: not done within its deadline of 2 s" drip \
	SECLAUNCH_REMOTE_RETRIES=1
assert "... within seconds ($(($(date +%s) - t0)) s)" test $(($(date +%s) - t0)) -lt 10
DEC_OPTS=()
bad "SECLAUNCH_REMOTE_MIN_RATE and _RATE_WINDOW_S set the rule too" 5 \
	"slower than 100000 B/s over 1 s" drip SECLAUNCH_REMOTE_RETRIES=1 \
	SECLAUNCH_REMOTE_MIN_RATE=100000 SECLAUNCH_REMOTE_RATE_WINDOW_S=1
DEC_OPTS=(--remote-rate-window 1)
check "a good store is not stopped by a strict rule (1 s window)" 0 dec "$F/good/ds/"
assert "... byte for byte" same
DEC_OPTS=()
check_err "--remote-rate-window 0 is a usage error" 1 "remote-rate-window 0: must be 1\.\." \
	"$SL" decrypt --key-file key --remote-rate-window 0 "$F/good/ds/" -o o/out
bad "a redirect to another host is not followed" 5 "HTTP 302 \(redirects are not followed\)" redirect
assert "... one request, not retried" test "$(grep -c '^GET /redirect/' "$T/fake.log")" -eq 1
bad "a shard of another dataset" 6 "shard 0 \(shard-00000.sld\)" swap
bad "403: refused" 5 "manifest.sldm.*HTTP 403" deny403
assert "... one request, not retried" test "$(nreq deny403 manifest.sldm)" -eq 1
bad "404 for a shard" 5 "shard-00000.sld.*HTTP 404" miss404
assert "... one request, not retried" test "$(nreq miss404 shard-00000.sld)" -eq 1
bad "200 with the whole object for a partial range" 5 "ignored the Range header" norange \
	SECLAUNCH_REMOTE_RANGE=65536
bad "the connection closed mid-body every time" 5 "shard-00000.sld bytes 0-" close
assert "... retried, then given up" test "$(nreq close shard-00000.sld)" -eq 5
for m in flaky429 flaky503; do
	check "$m: answered ${m#flaky} twice per range, then served" 0 dec "$F/$m/ds/"
	assert "... byte for byte" same
	assert "... two refusals and one success for shard 0" \
		test "$(nreq $m shard-00000.sld "${m#flaky}")" -eq 2 -a "$(nreq $m shard-00000.sld 206)" -eq 1
done
check "a connection closed mid-body once per range: retried, served" 0 dec "$F/closeonce/ds/"
assert "... byte for byte" same
check_err "inspect through a store that answers 403: exit 5" 5 "HTTP 403" \
	"$SL" inspect --ca-file tls/ca.pem "$F/deny403/ds/"

# ---- run --stage stream from the store: every file through the job -----------
# (the next shard fetched while the current one is decrypted); a later
# shard swapped in from another dataset fails the run naming it; a store
# that stalls on a later shard does not hold the run's end past the job
if command -v swtpm >/dev/null; then
	start_swtpm tpm || exit 1
	start_kms "$T/kms" || exit 1
	KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
	"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q
	"$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q
	mkdir -p ksrc/d
	for i in $(seq 10 29); do head -c 50000 /dev/urandom >"ksrc/d/f$i.bin"; done
	check "encrypt 20 files under a KMS key (256 KiB shards: 5 files each)" 0 "$SL" encrypt \
		"${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" --dataset-id remote-kds \
		--shard-size 256K -q ksrc -o www/kds
	# the same tree sealed again (another salt, another key): its shard 1 is
	# the same size as ours, and put in place of ours
	"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
		--dataset-id remote-kds --shard-size 256K -q ksrc -o kds-other
	cp -a www/kds www/kdsx && cp kds-other/shard-00001.sld www/kdsx/
	chmod -R a+rX www
	(cd ksrc && sha256sum d/*.bin) | awk '{print $1, $2}' >want.sums
	same_sums() { sort -k2 "$1" | cmp -s - want.sums; }
	cat >sjob.py <<'EOF'
import hashlib, sys
import seclaunch_data as sd
ds = sd.get("remote-kds")
with open(sys.argv[1], "w") as out:
    try:
        for p, v in ds.iter_files():
            out.write("%s %s\n" % (hashlib.sha256(v).hexdigest(), p))
            if sys.argv[2] == "first":
                break
    except sd.SeclaunchDataError as e:
        print("job:", e, file=sys.stderr)  # seclaunch fails the run
EOF
	srun() { # MODE OUT WHICH [FOLDER [env...]]
		local mode=$1 out=$2 which=$3 ds=${4:-kds}
		shift 3
		shift || true
		env "$@" "$SL" run --policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" \
			"${KMSA[@]}" --tcti "$SWTPM_TCTI" --ca-file tls/ca.pem --stage stream --window 600K \
			--env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1 -q \
			"$F/$mode/$ds/" -- python3 sjob.py "$out" "$which"
	}
	check "run --stage stream from the store: exit 0" 0 srun good "$T/s.sums" all
	assert "... every file through the job, byte for byte" same_sums "$T/s.sums"
	check_err "a later shard of another copy of the dataset: exit 6 naming it" 6 \
		"shard 1 \(shard-00001.sld\)" srun good "$T/w.sums" all kdsx
	# the stream fetches straight into its mapped ciphertext buffers: the
	# store's lies are refused there as they are for a descriptor, and a
	# body longer than its range never lands past the range (the last
	# range of the largest shard ends where the buffer ends)
	check_err "stream: bodies longer than their range: exit 5, refused" 5 \
		"shard-0000[0-9].sld bytes [0-9]+-[0-9]+: the server sent more than the range asked for" \
		srun long "$T/l.sums" all
	check_err "stream: a Content-Range naming another range: exit 5" 5 \
		'Content-Range "bytes [0-9]+-.*" is not bytes' srun lie "$T/l.sums" all
	check_err "stream: short bodies: exit 5 after the retries" 5 \
		"bytes [0-9]+-[0-9]+: [0-9]+ of [0-9]+ bytes arrived" srun short "$T/l.sums" all
	check_err "stream: 200 with the whole object for a partial range: exit 5" 5 \
		"ignored the Range header" srun norange "$T/l.sums" all kds SECLAUNCH_REMOTE_RANGE=65536
	t0=$(date +%s)
	check "a store stalling on later shards, a job that reads one file: exit 0" 0 \
		srun stalllate "$T/f.sums" first kds SECLAUNCH_REMOTE_STALL_S=30
	assert "... the run ends with the job, not after the 30 s stall timeout ($(($(date +%s) - t0)) s)" \
		test $(($(date +%s) - t0)) -lt 15
	assert "... the job read its file" test "$(wc -l <"$T/f.sums")" = 1
	# a shard that fails to decrypt stops the fetch of the next one (the
	# store stalls on it) at once: host staging (sl_shards) and the stream
	# (its own prefetch; the job asks for every file) alike
	t0=$(date +%s)
	check_err "run --stage host: a tampered first shard, the next one stalling: exit 6" 6 \
		"shard-00000.sld" env SECLAUNCH_REMOTE_STALL_S=30 "$SL" run \
		--policy "$KMS_STATE/policy.json" --policy-pubkey "$KMS_STATE/policy.pub" \
		"${KMSA[@]}" --tcti "$SWTPM_TCTI" --ca-file tls/ca.pem --stage host -q \
		"$F/tamperstall/kds/" -- true
	assert "... at once, not after the fetch ahead's 30 s stall ($(($(date +%s) - t0)) s)" \
		test $(($(date +%s) - t0)) -lt 10
	t0=$(date +%s)
	check_err "run --stage stream: the same store: exit 6" 6 "shard-00000.sld" \
		srun tamperstall "$T/t.sums" all kds SECLAUNCH_REMOTE_STALL_S=30
	assert "... at once, not after the prefetch's 30 s stall ($(($(date +%s) - t0)) s)" \
		test $(($(date +%s) - t0)) -lt 10
	stop_kms
else
	skip "run --stage stream from the store" "swtpm not installed"
fi

# ---- S3 SigV4 and GCS bearer tokens against the fake store ------------------
DEC_OPTS=(--s3-endpoint "$F")
KEYS=(AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=right-secret)
check "S3 SigV4 against a store that checks signatures: the right secret" 0 \
	dec s3://sigv4/ds/ "${KEYS[@]}"
assert "... byte for byte" same
check_err "... a wrong secret: refused by the store (exit 5, the bucket, HTTP 403)" 5 \
	"s3://sigv4/ds/.*HTTP 403" dec s3://sigv4/ds/ AWS_ACCESS_KEY_ID=AKIDTEST \
	AWS_SECRET_ACCESS_KEY=wrong-secret
assert "... no output folder, no plaintext" gone
check_err "... a wrong access key id: refused (exit 5)" 5 "s3://sigv4/ds/.*HTTP 403" \
	dec s3://sigv4/ds/ AWS_ACCESS_KEY_ID=AKIDOTHER AWS_SECRET_ACCESS_KEY=right-secret
printf '[default]\naws_access_key_id = nobody\n[ds-reader]\naws_access_key_id = AKIDTEST\naws_secret_access_key = right-secret\n' >creds
# the shared credentials file follows the key-file rule: owner only
chmod 644 creds
n0=$(grep -c '^GET /sigv4/' "$T/fake.log")
check_err "... a world-readable shared credentials file (0644): refused, exit 2, naming it and the mode" 2 \
	"AWS shared credentials file: .*creds: mode 0644 lets group or others" \
	dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds" AWS_PROFILE=ds-reader
assert "... no output folder, no plaintext" gone
assert "... and nothing was asked of the store" test "$(grep -c '^GET /sigv4/' "$T/fake.log")" -eq "$n0"
chmod 640 creds
check_err "... group-readable (0640): refused, exit 2" 2 "mode 0640 lets group or others" \
	dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds" AWS_PROFILE=ds-reader
chmod 600 creds
check "... credentials from the shared file (0600, AWS_SHARED_CREDENTIALS_FILE + AWS_PROFILE)" 0 \
	dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds" AWS_PROFILE=ds-reader
assert "... byte for byte" same
if [ "$(id -u)" = 0 ]; then
	cp creds creds-other && chown 65534 creds-other && chmod 600 creds-other
	check_err "... owner-only but owned by another user: refused, exit 2" 2 \
		"creds-other: key file owned by uid 65534, not by this user" \
		dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds-other" AWS_PROFILE=ds-reader
fi
ln -s creds creds-link
check_err "... a shared credentials file that is a symbolic link: refused, exit 2" 2 \
	"AWS shared credentials file: .*creds-link: a symbolic link" \
	dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds-link" AWS_PROFILE=ds-reader
check_err "... that file's default profile has no secret: no credentials (exit 5)" 5 \
	"no AWS credentials" dec s3://sigv4/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds" \
	SECLAUNCH_AWS_METADATA_URL=http://127.0.0.1:1
# the metadata services: the same script over plain HTTP
start_remote_fake "$T/www" "$T/md.log" --secret AKIDTEST:right-secret --token "$TOKEN" || exit 1
MD=http://127.0.0.1:$FAKE_PORT
check "... credentials and session token from IMDSv2 (token by PUT first)" 0 \
	dec s3://sigv4t/ds/ SECLAUNCH_AWS_METADATA_URL="$MD"
assert "... byte for byte" same
assert "... the token was fetched by PUT and used" \
	grep -q '^PUT /latest/api/token - -> 200' "$T/md.log"
assert "... no metadata request went without it" bash -c "! grep -q -- '-> 401' '$T/md.log'"
check_err "... the session token is required by that store (without it: 403)" 5 "HTTP 403" \
	dec s3://sigv4t/ds/ "${KEYS[@]}"
DEC_OPTS=()
G=(SECLAUNCH_GCS_ENDPOINT="$F")
check "GCS with GOOGLE_OAUTH_ACCESS_TOKEN (bearer checked by the store)" 0 \
	dec gs://gcsauth/ds/ "${G[@]}" GOOGLE_OAUTH_ACCESS_TOKEN="$TOKEN"
assert "... byte for byte" same
check_err "... a wrong token: refused (exit 5, HTTP 401)" 5 "gs://gcsauth/ds/.*HTTP 401" \
	dec gs://gcsauth/ds/ "${G[@]}" GOOGLE_OAUTH_ACCESS_TOKEN=wrong
assert "... no output folder, no plaintext" gone
check "... a token from the metadata server (Metadata-Flavor: Google)" 0 \
	dec gs://gcsauth/ds/ "${G[@]}" SECLAUNCH_GCP_METADATA_URL="$MD"
assert "... byte for byte" same

# ---- s3rver (npm), S3 path-style over TLS -----------------------------------
if start_s3rver "$T/s3data" "$T/tls" bkt; then
	S=https://127.0.0.1:$S3RVER_PORT
	for f in ds/*; do
		s3_put tls/ca.pem "$S/bkt/$f" "$f" || echo "upload of $f failed" >&2
	done
	DEC_OPTS=(--s3-endpoint "$S")
	check "s3rver: path-style through --s3-endpoint, credentials from the environment" 0 \
		dec s3://bkt/ds/ AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	assert "... byte for byte" same
	printf '[s3rver]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' >creds2
	chmod 600 creds2
	check "... credentials from the shared file" 0 \
		dec s3://bkt/ds/ AWS_SHARED_CREDENTIALS_FILE="$T/creds2" AWS_PROFILE=s3rver
	assert "... byte for byte" same
	check_err "... a wrong access key id: exit 5 naming the bucket and the HTTP status" 5 \
		"s3://bkt/ds/.*HTTP 403" dec s3://bkt/ds/ AWS_ACCESS_KEY_ID=NOTME \
		AWS_SECRET_ACCESS_KEY=S3RVER
	assert "... no output folder, no plaintext" gone
	check_err "... a prefix the bucket does not hold: exit 5, HTTP 404" 5 "HTTP 404" \
		dec s3://bkt/nope/ AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	check_err "inspect s3://bkt/ds/" 0 "" env AWS_ACCESS_KEY_ID=S3RVER \
		AWS_SECRET_ACCESS_KEY=S3RVER "$SL" inspect --ca-file tls/ca.pem "${DEC_OPTS[@]}" s3://bkt/ds/
	assert "... naming the dataset" grep -q remote-ds "$T/out"
	DEC_OPTS=()
else
	skip "s3rver cases" "${S3RVER_SKIP:-s3rver did not start}"
fi
finish
