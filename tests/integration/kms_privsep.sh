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
KPID=$(for c in $(cat /proc/"$KMS_PID"/task/*/children 2>/dev/null); do
	[ "$(cat /proc/"$c"/comm 2>/dev/null)" = seclaunchd-kek ] && echo "$c"
done | head -n1)
assert "the key process runs as a child (seclaunchd-kek)" test -n "$KPID"
"$SL" inspect a.sld >hdr.json

cat >scan.py <<'EOP'
import base64, json, re, sqlite3, struct, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
state, hdr, pid, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
master = open(f"{state}/master.key", "rb").read()
w = sqlite3.connect(f"{state}/state.db").execute(
    "select wrapped from kek_versions where key_id='k' and version=1").fetchone()[0]
kek = AESGCM(master).decrypt(w[:12], w[12:], b"seclaunch-kek-v1" + bytes([1]) + b"k" + struct.pack(">I", 1))
h = json.load(open(hdr))
wd = base64.b64decode(h["key"]["wrapped_dek"])
ds = h["dataset_id"].encode()
aad = struct.pack(">H", 1) + b"k" + struct.pack(">H", len(ds)) + ds
dek = AESGCM(kek).decrypt(wd[1:13], wd[13:], aad)
found = {"kek": 0, "dek": 0, "master": 0}
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        lo, hi, perm = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
        if perm[0] != "r" or "[vvar]" in line or "[vsyscall]" in line:
            continue
        try:
            mem.seek(lo)
            buf = mem.read(hi - lo)
        except OSError:
            continue
        for name, val in (("kek", kek), ("dek", dek), ("master", master)):
            found[name] += buf.count(val)
print(json.dumps(found))
if what == "none":
    sys.exit(0 if found == {"kek": 0, "dek": 0, "master": 0} else 1)
sys.exit(0 if found["kek"] > 0 and found["master"] > 0 else 1)
EOP
check "network process: no KEK, no DEK, no master key in its memory" 0 python3 scan.py "$S" hdr.json "$KMS_PID" none
cat "$T/out"
check "key process: the scan finds its KEK and master key (the scan works)" 0 python3 scan.py "$S" hdr.json "$KPID" some
cat "$T/out"
finish
