#!/usr/bin/env bash
# The SLD tamper matrix over a real encrypted file (64 KiB chunks, 5
# chunks): a flipped bit in every header field (and in every header byte),
# in each chunk's data and tag; truncation by 1 byte, a tag, a whole chunk,
# to the header alone; an appended byte and chunk; swapped and duplicated
# chunks; a header from another file; the wrong key. Each must exit 6 (2
# for a non-SLD file: magic, version), name what failed, and leave no
# output file. Then the same through `-o -`: only authenticated chunks.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
CS=65536
PLEN=$((4 * CS + 1000)) # 5 chunks, the last 1000 bytes
STRIDE=$((CS + 16))
DSID=tamper-ds
head -c "$PLEN" /dev/urandom >plain
"$SL" keygen -q -o k
"$SL" keygen -q -o k2
"$SL" encrypt -q --key-file k --dataset-id "$DSID" --chunk-size 64K plain -o good.sld || exit 1
HL=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["header_len"])' < <("$SL" inspect good.sld))
SIZE=$(stat -c %s good.sld)
assert "fixture: 5 chunks of 64 KiB" [ "$SIZE" = $((HL + PLEN + 5 * 16)) ]
check "fixture decrypts" 0 "$SL" decrypt -q --key-file k good.sld -o good.out
assert "fixture round trip" cmp -s plain good.out
rm -f good.out
mkdir res

# Offsets of the header fields (docs/format-sld.md section 2).
N=${#DSID}
declare -A OFF=(
	[magic]=0 [version]=9 [header_len]=13 [aead]=14 [flags]=15 [chunk_size]=18
	[plaintext_len]=27 [chunk_count]=35 [salt]=40 [dataset_id_len]=68 [dataset_id]=70
	[kms_url_len]=$((69 + N + 1)) [key_id_len]=$((69 + N + 2)) [wrapped_dek_len]=$((69 + N + 4))
	[extensions_len]=$((69 + N + 8)) [key_check]=$((HL - 60)) [header_mac]=$((HL - 20))
)
assert "fixture: header length matches the field table" [ "$HL" = $((69 + N + 9 + 64)) ]

# mutate SRC DST PYTHON-EXPR-ON-b (b: bytearray of SRC)
mutate() {
	python3 - "$1" "$2" "$3" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
exec(sys.argv[3])
open(sys.argv[2], "wb").write(b)
PY
}

# expect NAME RC REGEX FILE [KEY]: decrypt fails as told and leaves nothing.
expect() {
	check_err "$1" "$2" "$3" "$SL" decrypt -q --key-file "${5:-k}" "$4" -o res/plain
	assert "$1: no output left" [ -z "$(ls -A res)" ]
}

# ---- one bit in every header field ----------------------------------------
declare -A WANT=(
	[magic]="2 not an SLD file"
	[version]="2 header.version: SLD version 0 is not supported"
	[header_len]="6 SLD header damaged or altered"
	[aead]="6 header.aead: unknown AEAD id 0"
	[flags]="6 header.flags"
	[chunk_size]="6 header.chunk_size: 65792 is not a power of two"
	[plaintext_len]="6 header authentication failed"
	[chunk_count]="6 header.chunk_count"
	[salt]="6 wrong key.*header.salt"
	[dataset_id_len]="6 SLD header damaged or altered"
	[dataset_id]="6 header authentication failed"
	[kms_url_len]="6 SLD header damaged or altered"
	[key_id_len]="6 SLD header damaged or altered"
	[wrapped_dek_len]="6 SLD header damaged or altered"
	[extensions_len]="6 SLD header damaged or altered"
	[key_check]="6 wrong key.*header.key_check"
	[header_mac]="6 header authentication failed.*header_mac"
)
for f in magic version header_len aead flags chunk_size plaintext_len chunk_count salt \
	dataset_id_len dataset_id kms_url_len key_id_len wrapped_dek_len extensions_len \
	key_check header_mac; do
	mutate good.sld "h-$f.sld" "b[${OFF[$f]}] ^= 1"
	read -r rc re <<<"${WANT[$f]}"
	expect "header.$f bit flipped" "$rc" "$re" "h-$f.sld"
done
mutate good.sld h-header_len-hi.sld "b[10] ^= 0x80"
expect "header.header_len high bit flipped" 6 "header.header_len: .* is outside" h-header_len-hi.sld

# ---- one bit in every header byte (the exhaustive sweep) -------------------
python3 - good.sld "$HL" <<'PY'
import sys
src, hl = sys.argv[1], int(sys.argv[2])
b = open(src, "rb").read()
for off in range(hl):
    for bit in (0, 7):
        m = bytearray(b)
        m[off] ^= 1 << bit
        open(f"sweep-{off}-{bit}.sld", "wb").write(m)
PY
bad=0
for ((off = 0; off < HL; off++)); do
	for bit in 0 7; do
		"$SL" decrypt -q --key-file k "sweep-$off-$bit.sld" -o res/plain >/dev/null 2>sweep.err
		rc=$?
		if [ "$off" -lt 10 ]; then want=2; else want=6; fi
		if [ "$rc" != "$want" ] || [ ! -s sweep.err ] || [ -n "$(ls -A res)" ]; then
			echo "    header byte $off bit $bit: exit $rc (want $want): $(cat sweep.err)"
			bad=$((bad + 1))
			rm -f res/*
		fi
		rm -f "sweep-$off-$bit.sld"
	done
done
assert "every header byte ($HL bytes x 2 bits): exit 2/6 with a message, no output" [ "$bad" = 0 ]

# ---- chunk data and every tag ------------------------------------------------
for i in 0 1 2 3 4; do
	clen=$CS
	[ "$i" = 4 ] && clen=1000
	start=$((HL + i * STRIDE))
	mutate good.sld "c$i-data.sld" "b[$((start + clen / 2))] ^= 0x04"
	expect "chunk $i data bit flipped" 6 "chunk $i of 5: authentication failed" "c$i-data.sld"
	mutate good.sld "c$i-tag.sld" "b[$((start + clen + 15))] ^= 0x01"
	expect "chunk $i tag bit flipped" 6 "chunk $i of 5: authentication failed" "c$i-tag.sld"
done
mutate good.sld c0-tag0.sld "b[$((HL + CS))] ^= 0x80"
expect "chunk 0 first tag byte flipped" 6 "chunk 0 of 5" c0-tag0.sld

# ---- truncation ---------------------------------------------------------------
head -c $((SIZE - 1)) good.sld >t-1.sld
expect "truncated by 1 byte" 6 "truncated.*chunk 4 of 5" t-1.sld
head -c $((SIZE - 16)) good.sld >t-tag.sld
expect "truncated by a tag" 6 "truncated.*chunk 4 of 5" t-tag.sld
head -c $((SIZE - 1016)) good.sld >t-chunk.sld
expect "truncated by the whole last chunk" 6 "truncated.*chunk 4 of 5 is incomplete or missing" t-chunk.sld
head -c $((SIZE - 1016 - STRIDE)) good.sld >t-2chunks.sld
expect "truncated by two chunks" 6 "truncated.*chunk 3 of 5" t-2chunks.sld
head -c "$HL" good.sld >t-header.sld
expect "truncated to the header alone" 6 "truncated.*chunk 0 of 5" t-header.sld
head -c 100 good.sld >t-inheader.sld
expect "truncated inside the header" 6 "truncated" t-inheader.sld

# ---- extension ---------------------------------------------------------------------
cp good.sld e-byte.sld && printf '\0' >>e-byte.sld
expect "an appended byte" 6 "extended: 1 unexpected bytes" e-byte.sld
cp good.sld e-chunk.sld && tail -c +$((HL + 1)) good.sld | head -c "$STRIDE" >>e-chunk.sld
expect "an appended chunk" 6 "extended: $STRIDE unexpected bytes" e-chunk.sld

# ---- reordering and duplication ----------------------------------------------------
mutate good.sld swap.sld "
a, s = $HL + 1 * $STRIDE, $STRIDE
c1, c2 = b[a:a + s], b[a + s:a + 2 * s]
b[a:a + s], b[a + s:a + 2 * s] = c2, c1"
expect "chunks 1 and 2 swapped" 6 "chunk 1 of 5: authentication failed" swap.sld
mutate good.sld dup-over.sld "b[$HL + $STRIDE:$HL + 2 * $STRIDE] = b[$HL:$HL + $STRIDE]"
expect "chunk 0 duplicated over chunk 1" 6 "chunk 1 of 5: authentication failed" dup-over.sld
mutate good.sld dup-insert.sld "b[$HL + $STRIDE:$HL + $STRIDE] = b[$HL + $STRIDE:$HL + 2 * $STRIDE]"
expect "chunk 1 duplicated (inserted)" 6 "extended" dup-insert.sld
mutate good.sld last-moved.sld "
a = $HL + 3 * $STRIDE
b[a:] = b[a + $STRIDE:] + b[a:a + $STRIDE]"
expect "the last chunk moved before a full one" 6 "chunk 3 of 5" last-moved.sld

# ---- a header from another file -------------------------------------------------
head -c "$PLEN" /dev/urandom >plain2
"$SL" encrypt -q --key-file k --dataset-id "$DSID" --chunk-size 64K plain2 -o other.sld
python3 -c "
import sys
a = open('good.sld','rb').read(); o = open('other.sld','rb').read()
open('splice.sld','wb').write(o[:$HL] + a[$HL:])"
expect "header from another file (same key)" 6 "chunk 0 of 5: authentication failed" splice.sld
"$SL" encrypt -q --key-file k2 --dataset-id "$DSID" --chunk-size 64K plain2 -o other2.sld
python3 -c "
a = open('good.sld','rb').read(); o = open('other2.sld','rb').read()
open('splice2.sld','wb').write(o[:$HL] + a[$HL:])"
expect "header from another file (another key)" 6 "wrong key" splice2.sld

# ---- wrong key and non-SLD input --------------------------------------------------
expect "the wrong key" 6 "good.sld: wrong key" good.sld k2
expect "a non-SLD file" 2 "not an SLD file" plain

# ---- streaming: only authenticated chunks reach stdout -----------------------------
"$SL" decrypt -q --key-file k c3-data.sld -o - >stream.out 2>stream.err
rc=$?
assert "stream: exit 6 at the first bad chunk" [ "$rc" = 6 ]
assert "stream: names chunk 3" grep -q "chunk 3 of 5" stream.err
assert "stream: exactly chunks 0-2 were written" [ "$(stat -c %s stream.out)" = $((3 * CS)) ]
assert "stream: and they are the plaintext" cmp -s stream.out <(head -c $((3 * CS)) plain)
"$SL" decrypt -q --key-file k --threads 1 c0-tag.sld -o - >stream0.out 2>/dev/null
assert "stream: nothing written when chunk 0 fails" [ ! -s stream0.out ]
"$SL" decrypt -q --key-file k t-1.sld -o - >stream-t.out 2>/dev/null
assert "stream: a truncated file writes nothing" [ ! -s stream-t.out ]

finish
