#!/usr/bin/env bash
# seclaunchd migrate and a key id the store holds already: the same KEK is
# "already there" (exit 0); another KEK under that id stops the import
# (exit 2 naming the key), since the datasets wrapped under the file's KEK
# would never open again.
. "$(dirname "$0")/lib.sh"
if ! python3 -c 'import cryptography' 2>/dev/null; then
	echo "# SKIP: needs python3-cryptography (scripts/install-deps)"
	exit 77
fi
cd "$T" || exit 1
S=$T/k
start_kms "$S" || exit 1
A=(--kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN")
check "key create k" 0 "$SL" key create "${A[@]}" --id k
check "key create k2" 0 "$SL" key create "${A[@]}" --id k2
stop_kms
# the earlier keystore format, from what the store holds (the KEKs opened
# with the master key)
cat >legacy.py <<'EOP'
import os, sqlite3, struct, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
d = sys.argv[1]
master = open(f"{d}/master.key", "rb").read()
db = sqlite3.connect(f"{d}/state.db")
keks = []
# the keys an operator made (not the --dev service's own output key, which
# every --dev store makes for itself)
for kid, w in db.execute("select key_id, wrapped from kek_versions where version = 1 "
                         "and key_id != 'dev-outputs' order by key_id"):
    aad = b"seclaunch-kek-v1" + bytes([len(kid)]) + kid.encode() + struct.pack(">I", 1)
    keks.append((kid, AESGCM(master).decrypt(w[:12], w[12:], aad)))
pt = struct.pack(">I", len(keks)) + b"".join(bytes([len(k)]) + k.encode() + v for k, v in keks)
iv = os.urandom(12)
hdr = b"SLKS" + bytes([1, 0, 0, 0]) + iv + struct.pack(">I", len(pt))
open(f"{d}/keystore", "wb").write(hdr + AESGCM(master).encrypt(iv, pt, hdr))
EOP
check "legacy keystore written" 0 python3 legacy.py "$S"
check_err "migrate into the store that holds the same KEKs: all already there (0)" 0 "" \
	"$SLD" migrate --from-state "$S"
assert "... says 2 already there" grep -q "0 keys imported (2 already there)" "$T/err" "$T/out"
rm -f "$S/state.db" "$S/state.db-wal" "$S/state.db-shm"
start_kms "$S" || exit 1
A=(--kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN")
check "a new store: another key k (another KEK)" 0 "$SL" key create "${A[@]}" --id k
stop_kms
check_err "migrate: k is in the store under another KEK: refused (2), naming it" 2 \
	"key 'k' is in the store already under another KEK" "$SLD" migrate --from-state "$S"
assert "... and the message says not to lose the old data" grep -q "would not open" "$T/err"
finish
