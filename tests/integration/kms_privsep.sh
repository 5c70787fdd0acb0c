#!/usr/bin/env bash
# Privilege separation: after a burst of key releases, the memory of
# seclaunchd's network-facing process (read through /proc/PID/mem, as root)
# holds no byte string of the KEK, of the master key or of the released
# DEK; the key process, read the same way, does hold the KEK and the master
# key (the scan finds what is there).
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "# SKIP: reading another process's memory (/proc/PID/mem of a non-dumpable process) needs root"
	exit 77
fi
if [ -n "${ASAN_OPTIONS:-}" ]; then
	# AddressSanitizer's shadow and allocator regions span terabytes of mappings
	echo "# SKIP: memory scan of an AddressSanitizer build"
	exit 77
fi
if ! python3 -c 'import cryptography' 2>/dev/null; then
	echo "# SKIP: needs python3-cryptography"
	exit 77
fi
cd "$T" || exit 1
start_swtpm tpm
S=$T/kms
start_kms "$S" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" -q
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id k
head -c 20000 /dev/urandom >plain
check "encrypt" 0 "$SL" encrypt "${K[@]}" --admin-token-file "$KMS_TOKEN" --key-id k --dataset-id ds plain -o a.sld
# the wrap carried the DEK through the network process: start afresh for the burst
stop_kms
start_kms "$S" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
ok=0
for i in $(seq 40); do "$SL" decrypt "${K[@]}" a.sld -o "d$i" -q 2>/dev/null && ok=$((ok + 1)); done
assert "a burst of 40 releases (got $ok)" test "$ok" = 40
assert "the released DEK decrypted the data" cmp -s plain d40
# the key process is forked by its monitor (seclaunchd-kmon), a child of seclaunchd
KPID=$(for c in $(cat /proc/"$KMS_PID"/task/*/children 2>/dev/null); do
	for g in $(cat /proc/"$c"/task/*/children 2>/dev/null); do
		[ "$(cat /proc/"$g"/comm 2>/dev/null)" = seclaunchd-kek ] && echo "$g"
	done
done | head -n1)
assert "the key process runs under its monitor (seclaunchd-kek)" test -n "$KPID"
"$SL" inspect a.sld >hdr.json

check "network process: no KEK, no DEK, no master key in its memory" 0 python3 "$SL_ROOT/tests/integration/kms_memscan.py" "$S" hdr.json "$KMS_PID" none
cat "$T/out"
check "key process: the scan finds its KEK and master key (the scan works)" 0 python3 "$SL_ROOT/tests/integration/kms_memscan.py" "$S" hdr.json "$KPID" some
cat "$T/out"
finish
