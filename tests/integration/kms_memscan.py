"""Scans a seclaunchd process's memory (/proc/PID/mem, as root) for the
KEK that wraps a dataset's DEK, for that DEK, and for the master key.

    kms_memscan.py STATE_DIR INSPECT_JSON PID none|some

STATE_DIR: seclaunchd --dev's state (master.key, state.db); INSPECT_JSON:
`seclaunch inspect` of an SLD file or a sharded dataset (its key reference
names the key id, and its wrapped DEK's first byte the KEK version).
none: exit 0 when none of the three is there; some: exit 0 when the KEK and
the master key are (the scan finds what is there)."""
import base64, json, re, sqlite3, struct, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

state, hdr, pid, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = json.load(open(hdr))
key_id = h["key"]["key_id"]
wd = base64.b64decode(h["key"]["wrapped_dek"])
version = wd[0]
master = open(f"{state}/master.key", "rb").read()
w = sqlite3.connect(f"{state}/state.db").execute(
    "select wrapped from kek_versions where key_id=? and version=?", (key_id, version)).fetchone()[0]
kid = key_id.encode()
kek = AESGCM(master).decrypt(w[:12], w[12:], b"seclaunch-kek-v1" + bytes([len(kid)]) + kid +
                             struct.pack(">I", version))
ds = h["dataset_id"].encode()
aad = struct.pack(">H", len(kid)) + kid + struct.pack(">H", len(ds)) + ds
dek = AESGCM(kek).decrypt(wd[1:13], wd[13:], aad)
found = {"kek": 0, "dek": 0, "master": 0}
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        lo, hi, perm = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
        if perm[0] != "r" or "[vvar]" in line or "[vsyscall]" in line:
            continue
        # in pieces that overlap by a secret's length less one byte
        step, keep = 16 << 20, b""
        for at in range(lo, hi, step):
            try:
                mem.seek(at)
                buf = keep + mem.read(min(step, hi - at))
            except OSError:
                keep = b""
                continue
            for name, val in (("kek", kek), ("dek", dek), ("master", master)):
                found[name] += buf.count(val)
            keep = buf[-31:]
print(json.dumps(found))
if what == "none":
    sys.exit(0 if found == {"kek": 0, "dek": 0, "master": 0} else 1)
sys.exit(0 if found["kek"] > 0 and found["master"] > 0 else 1)
