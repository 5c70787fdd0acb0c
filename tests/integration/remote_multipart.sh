#!/usr/bin/env bash
# S3 multipart uploads of sealed outputs (launcher/outputs/remote_upload.c) against
# moto_server behind an HTTPS front (s3_proxy.py: logs requests, counts the
# parts under way at once, injects faults): an object larger than a part
# goes up as CreateMultipartUpload, parts in parallel (at most
# --connections at once), CompleteMultipartUpload, and reads back through
# `seclaunch decrypt s3://…`; a part refused, or a completion that fails in
# its body, aborts the upload: no object, no pending upload left. Skips (77)
# when moto_server (moto 5) is not installed.
. "$(dirname "$0")/lib.sh"

if ! command -v moto_server >/dev/null; then
	echo "SKIP: remote_multipart: moto_server (moto 5) is not installed"
	exit 77
fi
for tool in python3 openssl curl cc; do
	command -v "$tool" >/dev/null || {
		echo "SKIP: remote_multipart: $tool is not installed"
		exit 77
	}
done
cd "$T" || exit 1
unset AWS_SESSION_TOKEN AWS_PROFILE
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials HOME=$T
export SECLAUNCH_REMOTE_PART_SIZE=$((5 << 20)) # S3's smallest part
# parts from the smallest object up (the default sends objects up to 1 GiB in one PUT)
export SECLAUNCH_REMOTE_MULTIPART_MIN=$((5 << 20))

build=${SL_BUILD:-$SL_ROOT/build}
pkgs=$(sl_make print-pkgs)
san=
nm "$build/libseclaunch.a" 2>/dev/null | grep -q __asan_init && san="-fsanitize=address,undefined"
# shellcheck disable=SC2046,SC2086
cc -std=c11 -D_GNU_SOURCE -O2 $san -I"$SL_ROOT/include" -I"$SL_ROOT/launcher" \
	$(pkg-config --cflags $pkgs) "$SL_ROOT/tests/integration/remote_put_probe.c" \
	"$build/libseclaunch.a" $(pkg-config --libs $pkgs) -lpthread -ldl -lm -o put_probe ||
	{ echo "not ok - remote_put_probe did not build"; exit 1; }

make_tls_ca tls || { echo "not ok - test CA"; exit 1; }
MP=$(free_port)
moto_server -H 127.0.0.1 -p "$MP" >moto.log 2>&1 &
_PIDS+=($!)
wait_port "$MP" 20 || { echo "not ok - moto_server did not start"; cat moto.log; exit 1; }
curl -sf -X PUT "http://127.0.0.1:$MP/bkt" -o /dev/null || { echo "not ok - bucket"; exit 1; }
python3 "$SL_ROOT/tests/integration/s3_proxy.py" "$T/pp" "$MP" tls/srv.pem tls/srv.key "$T/px.log" \
	--hold 0.3 &
_PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s "$T/pp" ] && break; sleep 0.1; done
PP=$(cat "$T/pp")
wait_port "$PP" 10 || { echo "not ok - proxy"; exit 1; }
export SECLAUNCH_TEST_CA=$T/tls/ca.pem SECLAUNCH_TEST_S3_ENDPOINT=https://127.0.0.1:$PP
S3A=(--ca-file "$T/tls/ca.pem" --s3-endpoint "https://127.0.0.1:$PP")

# what moto holds, straight from it (no signature checked there)
status_of() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MP/bkt/$1"; }
no_pending() { ! curl -sf "http://127.0.0.1:$MP/bkt?uploads" | grep -q "<Upload>"; }
parts_in_log() { grep -c "^PUT /bkt/$1?partNumber=.* -> 200" "$T/px.log"; }

# ---- a sealed dataset, uploaded part by part, read back by decrypt ---------
"$SL" keygen -q -o key
mkdir -p src/sub
head -c $((13 << 20)) /dev/urandom >src/big.bin
head -c 1000 /dev/urandom >src/sub/small.bin
"$SL" encrypt -q --key-file key --dataset-id mpu-ds --shard-size 16M src -o ds
shard=$(cd ds && ls shard-*.sld | head -1)
assert "the shard is bigger than two parts ($(stat -c %s "ds/$shard") bytes)" \
	test "$(stat -c %s "ds/$shard")" -gt $((10 << 20))
: >"$T/px.log"
ok=1
for f in $(cd ds && ls); do
	./put_probe s3://bkt/ds/ "$f" "ds/$f" || ok=
done
assert "the dataset's objects went up" test -n "$ok"
assert "the shard went up as a multipart upload (CreateMultipartUpload)" \
	grep -q "^POST /bkt/ds/$shard?uploads= -> 200" "$T/px.log"
assert "in 3 parts of 5 MiB" test "$(parts_in_log "ds/$shard")" -eq 3
assert "completed (CompleteMultipartUpload)" grep -q "^POST /bkt/ds/$shard?uploadId=.* -> 200" "$T/px.log"
assert "the manifest, smaller than a part, in one PUT" grep -q "^PUT /bkt/ds/manifest.sldm -> 200" "$T/px.log"
assert "parts were under way at once" grep -qx "inflight [2-9]" "$T/px.log"
check "decrypt reads the uploaded dataset back" 0 "$SL" decrypt -q --key-file key "${S3A[@]}" \
	s3://bkt/ds/ -o back
assert "byte for byte" diff -r src back
assert "no upload left pending" no_pending

# ---- at or below the multipart threshold: one PUT, no upload created ------
: >"$T/px.log"
check "a 13 MiB shard under a 16 MiB threshold" 0 env SECLAUNCH_REMOTE_MULTIPART_MIN=$((16 << 20)) \
	./put_probe s3://bkt/one/ "$shard" "ds/$shard"
assert "went up in one PUT" grep -q "^PUT /bkt/one/$shard -> 200" "$T/px.log"
assert "no multipart upload was created" test "$(grep -c "^POST /bkt/one/" "$T/px.log")" -eq 0
# (moto answers an anonymous GET of a PUT object 403: read through the proxy, signed)
assert "the object is the file" cmp -s "ds/$shard" <(curl -sf --cacert tls/ca.pem \
	--aws-sigv4 aws:amz:us-east-1:s3 --user testing:testing "https://127.0.0.1:$PP/bkt/one/$shard")
check_err "a threshold under S3's smallest part is refused" 1 "SECLAUNCH_REMOTE_MULTIPART_MIN=1000: must be" \
	env SECLAUNCH_REMOTE_MULTIPART_MIN=1000 ./put_probe s3://bkt/one/ x "ds/$shard"

# ---- bounded: --connections 2, 5 parts: never more than 2 at once ----------
head -c $((21 << 20)) /dev/urandom >five.bin
: >"$T/px.log"
check "5 parts over 2 connections" 0 ./put_probe s3://bkt/b/ five.bin five.bin 2
assert "5 parts" test "$(parts_in_log b/five.bin)" -eq 5
most_at_once() { awk '/^inflight/ && $2 > m { m = $2 } END { print m + 0 }' "$T/px.log"; }
assert "at most 2 parts at once, and 2 at once ($(most_at_once))" test "$(most_at_once)" -eq 2
assert "the object is the file" cmp -s five.bin <(curl -sf "http://127.0.0.1:$MP/bkt/b/five.bin")

# ---- a part answered 503 twice: retried, and the object is whole -----------
echo "503 2 2" >"$T/pp.fail"
: >"$T/px.log"
check "part 2 answered 503 twice: retried, completed" 0 ./put_probe s3://bkt/r/ five.bin five.bin
assert "part 2 was retried" test "$(grep -c "^PUT /bkt/r/five.bin?partNumber=2&.* -> 503" "$T/px.log")" -eq 2
assert "the retried object is the file" cmp -s five.bin <(curl -sf "http://127.0.0.1:$MP/bkt/r/five.bin")

# ---- a part refused: the upload is aborted, nothing is left -----------------
echo "403 2" >"$T/pp.fail"
: >"$T/px.log"
check_err "part 2 refused (403): exit 5, naming the part" 5 "part 2 of 5.*403" \
	./put_probe s3://bkt/f/ five.bin five.bin
assert "the upload was aborted (AbortMultipartUpload)" \
	grep -q "^DELETE /bkt/f/five.bin?uploadId=.* -> 204" "$T/px.log"
assert "never completed" test "$(grep -c "^POST /bkt/f/five.bin?uploadId=" "$T/px.log")" -eq 0
assert "no object" test "$(status_of f/five.bin)" = 404
assert "no upload left pending" no_pending

# ---- CompleteMultipartUpload answered 200 with an <Error>: a failure --------
echo "complete-error" >"$T/pp.fail"
: >"$T/px.log"
check_err "a completion that failed in its body: exit 5, naming the code" 5 \
	"CompleteMultipartUpload failed: InternalError" ./put_probe s3://bkt/c/ five.bin five.bin
assert "then aborted" grep -q "^DELETE /bkt/c/five.bin?uploadId=.* -> 204" "$T/px.log"
assert "no object" test "$(status_of c/five.bin)" = 404
assert "no upload left pending" no_pending
rm -f "$T/pp.fail"

finish
