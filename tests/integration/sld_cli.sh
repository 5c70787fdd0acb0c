#!/usr/bin/env bash
# seclaunch keygen / encrypt / decrypt / inspect end to end: round trips,
# refusals (overwrite, key file permissions, bad options), --force, stdout
# streaming, inspect's JSON, --help completeness.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
head -c $((3 * 65536 + 4321)) /dev/urandom >plain
: >empty

# ---- keygen ----------------------------------------------------------------
check "keygen writes a key" 0 "$SL" keygen -o k
assert "keygen: 32 bytes" [ "$(stat -c %s k)" = 32 ]
assert "keygen: mode 0600" [ "$(stat -c %a k)" = 600 ]
cp k k.orig
check_err "keygen refuses to overwrite" 2 "already exists" "$SL" keygen -o k
assert "keygen: existing key untouched" cmp -s k k.orig
check_err "keygen without -o" 1 "-o KEYFILE is required" "$SL" keygen
"$SL" keygen -q -o k2
assert "keygen: two keys differ" bash -c '! cmp -s k k2'

# ---- round trips ------------------------------------------------------------
check "encrypt default options" 0 "$SL" encrypt -q --key-file k --dataset-id cli:default plain -o a.sld
check "decrypt to a file" 0 "$SL" decrypt -q --key-file k a.sld -o a.out
assert "round trip (default chunk size)" cmp -s plain a.out
assert "decrypted file is mode 0600" [ "$(stat -c %a a.out)" = 600 ]
for aead in aes-256-gcm xchacha20-poly1305; do
	for t in 1 4; do
		check "encrypt $aead 64K threads=$t" 0 "$SL" encrypt -q --key-file k --dataset-id "cli:$aead" \
			--chunk-size 64K --aead "$aead" --threads "$t" plain -o "$aead-$t.sld"
		check "decrypt $aead threads=$t" 0 "$SL" decrypt -q --key-file k --threads "$t" "$aead-$t.sld" -o "$aead-$t.out"
		assert "round trip $aead threads=$t" cmp -s plain "$aead-$t.out"
	done
done
check "encrypt an empty file" 0 "$SL" encrypt -q --key-file k --dataset-id cli:empty empty -o empty.sld
check "decrypt an empty file" 0 "$SL" decrypt -q --key-file k empty.sld -o empty.out
assert "empty round trip" [ -f empty.out ] && assert "empty output is empty" [ ! -s empty.out ]
for cs in 65536 128K 1M 4MiB 64M; do
	check "--chunk-size $cs accepted" 0 "$SL" encrypt -q --key-file k --dataset-id cli:cs --chunk-size "$cs" plain -o "cs-$cs.sld"
done
assert "--chunk-size 1M recorded" [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["chunk_size"])' < <("$SL" inspect cs-1M.sld))" = 1048576 ]

# ---- stdout streaming -------------------------------------------------------
"$SL" encrypt -q --key-file k --dataset-id cli:stdout --chunk-size 64K plain -o - >piped.sld
assert "encrypt -o - writes the SLD file to stdout" [ "$(head -c 4 piped.sld | od -An -c | tr -d ' ')" = '211SLD' ]
check "decrypt what encrypt -o - wrote" 0 "$SL" decrypt -q --key-file k piped.sld -o piped.out
assert "stdout round trip" cmp -s plain piped.out
"$SL" decrypt -q --key-file k a.sld -o - >stream.out 2>stream.err
rc=$?
assert "decrypt -o - exits 0" [ "$rc" = 0 ]
assert "decrypt -o - streams the plaintext" cmp -s plain stream.out
assert "decrypt -o - keeps stderr quiet" [ ! -s stream.err ]

check "decrypt -o /dev/null (a device is a stream)" 0 "$SL" decrypt -q --key-file k a.sld -o /dev/null
mkfifo fifo
cat fifo >fifo.out &
catpid=$!
check "decrypt -o FIFO" 0 "$SL" decrypt -q --key-file k a.sld -o fifo
wait "$catpid"
assert "the FIFO reader got the plaintext" cmp -s plain fifo.out

# ---- overwrite and --force ---------------------------------------------------
echo old >exists.out
check_err "decrypt refuses an existing output" 2 "exists.out: already exists" \
	"$SL" decrypt -q --key-file k a.sld -o exists.out
assert "existing output untouched" [ "$(cat exists.out)" = old ]
check "decrypt --force replaces" 0 "$SL" decrypt -q --force --key-file k a.sld -o exists.out
assert "--force output is the plaintext" cmp -s plain exists.out
check_err "encrypt refuses an existing output" 2 "a.sld: already exists" \
	"$SL" encrypt -q --key-file k --dataset-id x plain -o a.sld
check "encrypt --force replaces" 0 "$SL" encrypt -q --force --key-file k --dataset-id x plain -o a.sld
check "decrypt the replaced file" 0 "$SL" decrypt -q --force --key-file k a.sld -o a.out
assert "replaced file round trip" cmp -s plain a.out
assert "no temporary files left behind" [ -z "$(ls -A | grep -E '^\.seclaunch|tmp')" ]

# ---- key files ---------------------------------------------------------------
cp k k644 && chmod 644 k644
check_err "key file 0644 refused (decrypt)" 2 "k644: mode 0644.*chmod 600" \
	"$SL" decrypt -q --key-file k644 a.sld -o perm.out
assert "no output after a refused key" [ ! -e perm.out ]
cp k k640 && chmod 640 k640
check_err "key file 0640 refused (encrypt)" 2 "k640: mode 0640" \
	"$SL" encrypt -q --key-file k640 --dataset-id x plain -o perm.sld
assert "no output after a refused key (encrypt)" [ ! -e perm.sld ]
head -c 31 /dev/urandom >short.key && chmod 600 short.key
check_err "31-byte key file refused" 2 "short.key: 31 bytes.*exactly 32" \
	"$SL" encrypt -q --key-file short.key --dataset-id x plain -o short.sld
check_err "missing key file" 2 "nokey: cannot open" "$SL" decrypt -q --key-file nokey a.sld -o x.out
check_err "wrong key" 6 "wrong key" "$SL" decrypt -q --key-file k2 a.sld -o wk.out
assert "no output after a wrong key" [ ! -e wk.out ]

# ---- usage errors -------------------------------------------------------------
for cs in 3M 32K 128M 0 abc 64Q -4M; do
	check_err "--chunk-size $cs refused" 1 "chunk-size" \
		"$SL" encrypt --key-file k --dataset-id x --chunk-size "$cs" plain -o bad.sld
done
check_err "--aead unknown" 1 "aes-128-gcm" "$SL" encrypt --key-file k --dataset-id x --aead aes-128-gcm plain -o bad.sld
check_err "--threads 0" 1 "threads" "$SL" decrypt --key-file k --threads 0 a.sld -o bad.out
check_err "encrypt without --dataset-id" 1 "dataset-id" "$SL" encrypt --key-file k plain -o bad.sld
check_err "encrypt without a key" 1 "key-file" "$SL" encrypt --dataset-id x plain -o bad.sld
check_err "encrypt with both key sources" 1 "exactly one" "$SL" encrypt --key-file k --kms https://127.0.0.1:1 --dataset-id x plain -o bad.sld
check_err "encrypt --kms without an admin token" 1 "admin-token-file" \
	"$SL" encrypt --kms https://127.0.0.1:1 --key-id a --dataset-id x plain -o bad.sld
check_err "decrypt --kms of a key-file SLD" 2 "key reference" \
	"$SL" decrypt --kms https://127.0.0.1:1 a.sld -o bad.out
check_err "decrypt without -o" 1 "-o OUT" "$SL" decrypt --key-file k a.sld
mkdir -p adir && cp plain adir/
check "encrypt a directory: a sharded dataset" 0 "$SL" encrypt -q --key-file k --dataset-id x adir -o dir.sld
assert "... with its manifest" test -s dir.sld/manifest.sldm
check_err "encrypt a missing file" 2 "nothere: cannot open" "$SL" encrypt -q --key-file k --dataset-id x nothere -o m.sld
check_err "dataset id too long" 1 "dataset id longer than 128" "$SL" encrypt -q --key-file k --dataset-id "$(printf 'x%.0s' {1..256})" plain -o long.sld
assert "no output after usage errors" [ ! -e bad.sld ] && assert "no output after usage errors (decrypt)" [ ! -e bad.out ]

# ---- not SLD files --------------------------------------------------------------
check_err "decrypt a non-SLD file" 2 "not an SLD file" "$SL" decrypt -q --key-file k plain -o ns.out
check_err "inspect a non-SLD file" 2 "not an SLD file" "$SL" inspect plain
check_err "inspect an empty file" 2 "not an SLD file" "$SL" inspect empty
assert "no output for a non-SLD file" [ ! -e ns.out ]

# ---- inspect ------------------------------------------------------------------------
check "inspect" 0 "$SL" inspect aes-256-gcm-4.sld
cp "$T/out" inspect.json
size=$(stat -c %s aes-256-gcm-4.sld)
check "inspect JSON fields" 0 python3 - inspect.json "$size" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
size = int(sys.argv[2])
want = {"format": "SLD", "version": 1, "aead": "aes-256-gcm", "chunk_size": 65536,
        "plaintext_len": 3 * 65536 + 4321, "chunk_count": 4, "dataset_id": "cli:aes-256-gcm",
        "file_size": size, "authenticated": False, "extensions": []}
for k, v in want.items():
    assert j[k] == v, (k, j[k], v)
assert j["key"] == {"source": "key-file"}, j["key"]
for k in ("salt", "key_check", "header_mac", "header_sha256"):
    assert len(j[k]) == 64 and int(j[k], 16) >= 0, k
assert j["header_len"] == size - j["plaintext_len"] - 16 * j["chunk_count"]
PY
"$SL" inspect xchacha20-poly1305-1.sld >x.json
assert "inspect names xchacha20-poly1305" python3 -c 'import json,sys; assert json.load(open("x.json"))["aead"]=="xchacha20-poly1305"'

# ---- help and quiet ----------------------------------------------------------------
for cmd in keygen encrypt decrypt inspect; do
	check "$cmd --help" 0 "$SL" "$cmd" --help
	cp "$T/out" "help-$cmd"
done
for f in --key-file --kms --key-id --admin-token-file --kms-ca --dataset-id --chunk-size --aead --threads --output --force --quiet; do
	assert "encrypt --help lists $f" grep -q -- "$f" help-encrypt
done
for f in --key-file --kms --kms-ca --threads --output --force --quiet; do
	assert "decrypt --help lists $f" grep -q -- "$f" help-decrypt
done
assert "seclaunch --help lists the commands" bash -c '"$0" --help | grep -q "encrypt" && "$0" --help | grep -q "inspect"' "$SL"
"$SL" encrypt --key-file k --dataset-id x --chunk-size 64K plain -o noisy.sld 2>noisy.err
assert "no progress line when stderr is not a terminal" bash -c '! grep -q $'"'"'\r'"'"' noisy.err'
assert "a summary line without -q" grep -q "noisy.sld" noisy.err

# ---- terminals (script(1) gives the command a pseudo-terminal) --------------
if command -v script >/dev/null; then
	script -qec "$SL decrypt --key-file k a.sld -o -" /dev/null >tty.txt
	rc=$?
	assert "decrypt -o - to a terminal: exit 1" [ "$rc" = 1 ]
	assert "decrypt -o - to a terminal: says why" grep -q "refusing to write plaintext to a terminal" tty.txt
	assert "decrypt -o - to a terminal: no plaintext on it" [ "$(stat -c %s tty.txt)" -lt 300 ]
	script -qec "$SL decrypt --key-file k a.sld -o $T/tty.out" /dev/null >tty2.txt
	assert "progress line on a terminal" grep -q "decrypt .* (100%) .*ETA" tty2.txt
	assert "the decrypted file is still right" cmp -s plain tty.out
	script -qec "$SL decrypt -q --key-file k a.sld -o $T/tty3.out" /dev/null >tty3.txt
	assert "-q: no progress line on a terminal" [ ! -s tty3.txt ]
else
	skip "terminal checks" "script(1) is not installed"
fi

finish
