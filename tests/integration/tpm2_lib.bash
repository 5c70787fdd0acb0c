# Helpers for the tpm2_*.sh tests (sourced after lib.sh; not a test itself).

# ev_edit IN OUT FIELD ACTION [ARG]: copies evidence IN to OUT with one edit.
#   FIELD is a base64 field (tpms_attest, signature, ak_public, ak_cert,
#   event_log) or "pcrs.BANK.N" or any top-level key.
#   ACTION: flip OFF (xor 0x01 at byte OFF; negative counts from the end),
#   set OFF HEX (overwrite bytes), truncate, append, replace VALUE (JSON
#   value), delete, copy-from FILE (take FIELD from another evidence file).
ev_edit() {
	python3 - "$@" <<'EOF'
import base64, json, sys
src, dst, field, action = sys.argv[1:5]
arg = sys.argv[5] if len(sys.argv) > 5 else None
ev = json.load(open(src))
if field.startswith("pcrs."):
    _, bank, n = field.split(".")
    v = bytearray(bytes.fromhex(ev["pcrs"][bank][n]))
    v[0] ^= 1
    ev["pcrs"][bank][n] = v.hex()
elif action == "replace":
    ev[field] = json.loads(arg)
elif action == "delete":
    del ev[field]
elif action == "copy-from":
    ev[field] = json.load(open(arg))[field]
else:
    b = bytearray(base64.b64decode(ev[field]))
    if action == "flip":
        b[int(arg)] ^= 1
    elif action == "set":
        off, hx = arg.split(":")
        v = bytes.fromhex(hx)
        off = int(off)
        b[off:off + len(v)] = v
    elif action == "truncate":
        b = b[:-1]
    elif action == "append":
        b += b"\x00"
    ev[field] = base64.b64encode(bytes(b)).decode()
json.dump(ev, open(dst, "w"), indent=1)
EOF
}

# ev_get FILE FIELD: prints a top-level string field.
ev_get() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# claim FILE KEY: prints one claim from `seclaunch verify --json` output.
claim() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "<absent>"))' "$1" "$2"
}

# gce_evidence TAG BANK OUT: builds a "tpm2" evidence object from the GCE
# vTPM vector files (the AK public there is a TPMT_PUBLIC without its size).
gce_evidence() {
	python3 - "$SL_VECTORS/tpm2/gce-cos85" "$@" <<'EOF'
import base64, json, sys
d, tag, bank, out = sys.argv[1:5]
rd = lambda p: open(f"{d}/{p}", "rb").read()
b64 = lambda b: base64.b64encode(b).decode()
tpmt = rd("gce-cos-85.ak_pub.tpmt_public")
pcrs = {}
for line in open(f"{d}/{tag}.pcrs_{bank}.txt"):
    i, v = line.split()
    pcrs[i] = v
ev = {
    "kind": "tpm2", "version": 1,
    "tpms_attest": b64(rd(f"{tag}.quote_{bank}.tpms_attest")),
    "signature": b64(rd(f"{tag}.quote_{bank}.tpmt_signature")),
    "ak_public": b64(len(tpmt).to_bytes(2, "big") + tpmt),
    "ak_cert": b64(rd("gce-cos-85.ak_cert.der")),
    "event_log": b64(rd("gce-cos-85.event_log.bin")),
    "pcrs": {bank: pcrs},
}
json.dump(ev, open(out, "w"), indent=1)
EOF
}

# swtpm_port_pair: prints P such that P and P + 1 are free on 127.0.0.1,
# taken below the ephemeral port range (busy test machines fill that range
# with TIME_WAIT connections, which block a listener).
swtpm_port_pair() {
	python3 -c '
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
# below the ephemeral range, where client connections leave no TIME_WAIT
for _ in range(2000):
    p = random.randrange(10000, 32000)
    if free(p) and free(p + 1):
        print(p); break'
}

# start_swtpm_tcti [NAME]: lib.sh's start_swtpm (control channel at the
# server port + 1, where the TSS "swtpm" TCTI looks for it).
start_swtpm_tcti() {
	start_swtpm "$@"
}
