#!/usr/bin/env bash
# The measured-boot event log end to end on a swtpm: the test writes a
# crypto-agile log (a firmware blob into PCR 1, the SecureBoot variable into
# PCR 7, SHA-1 and SHA-256 digests), extends the same digests into the swtpm,
# and `seclaunch attest --eventlog` carries the log into the evidence, which
# `seclaunch verify` replays against the quoted PCRs.
. "$(dirname "$0")/lib.sh"

N=c0ffee0000000000000000000000000000000000000000000000000000c0ffee
start_swtpm tpm || exit 1

# mklog OUT SB: writes the log (SecureBoot = SB) and prints the tpm2_pcrextend
# arguments for its events
mklog() {
	python3 - "$1" "$2" <<'EOF'
import hashlib, struct, sys
out, sb = sys.argv[1], int(sys.argv[2])
algs = [(0x0004, hashlib.sha1), (0x000b, hashlib.sha256)]
spec = b"Spec ID Event03\0" + struct.pack("<IBBBBI", 0, 0, 2, 0, 2, len(algs))
spec += b"".join(struct.pack("<HH", a, h().digest_size) for a, h in algs) + b"\0"
log = struct.pack("<II", 0, 3) + bytes(20) + struct.pack("<I", len(spec)) + spec
ext = []
def event(pcr, typ, data):
    global log
    log += struct.pack("<III", pcr, typ, len(algs))
    for a, h in algs:
        log += struct.pack("<H", a) + h(data).digest()
    log += struct.pack("<I", len(data)) + data
    ext.append(f"{pcr}:sha1={hashlib.sha1(data).hexdigest()},sha256={hashlib.sha256(data).hexdigest()}")
event(1, 0x80000008, b"firmware volume")
name = "SecureBoot".encode("utf-16-le")
var = bytes.fromhex("61dfe48bca93d211aa0d00e098032b8c") + struct.pack("<QQ", 10, 1) + name + bytes([sb])
event(7, 0x80000001, var)
event(7, 0x00000004, bytes(4))  # EV_SEPARATOR
open(out, "wb").write(log)
print(" ".join(ext))
EOF
}
ext=$(mklog "$T/log.bin" 1)
for e in $ext; do tpm2_pcrextend "$e"; done
P=sha256:1,7+sha1:1,7,8
check "attest --eventlog carries the log" 0 "$SL" attest --tee tpm2 --nonce $N --pcrs $P --eventlog "$T/log.bin" --export-ak "$T/ak.pem" -o "$T/ev.json"
assert "the evidence has event_log" test "$(python3 -c 'import json,sys; print("event_log" in json.load(open(sys.argv[1])))' "$T/ev.json")" = True
check "verify replays the log" 0 "$SL" verify "$T/ev.json" --nonce $N --ak-pin "$T/ak.pem" --json
assert "claims: replayed PCRs 1 and 7, secure boot enabled" \
	test "$(claim "$T/out" tpm.eventlog)/$(claim "$T/out" tpm.eventlog.pcrs)/$(claim "$T/out" tpm.secure_boot)" = "replayed/1,7/enabled"
check "SECLAUNCH_EVENTLOG works as --eventlog" 0 env SECLAUNCH_EVENTLOG="$T/log.bin" "$SL" attest -q --tee tpm2 --nonce $N --pcrs $P -o "$T/ev2.json"
check "  ... and verifies" 0 "$SL" verify "$T/ev2.json" --nonce $N --ak-pin "$T/ak.pem"

# a quote without PCR 7: the log cannot vouch for the SecureBoot variable
check "attest without PCR 7" 0 "$SL" attest --tee tpm2 --nonce $N --pcrs sha256:1 --eventlog "$T/log.bin" -o "$T/ev3.json"
check "verify without PCR 7" 0 "$SL" verify "$T/ev3.json" --nonce $N --ak-pin "$T/ak.pem" --json
assert "claims: secure boot unknown when PCR 7 is not quoted" test "$(claim "$T/out" tpm.secure_boot)/$(claim "$T/out" tpm.eventlog.pcrs)" = "unknown/1"

# a log that claims secure boot is off, offered with the same quote: its
# SecureBoot event no longer replays to the quoted PCR 7
mklog "$T/off.bin" 0 >/dev/null
ev_edit "$T/ev.json" "$T/t.json" event_log replace "$(b64 "$T/off.bin")"
check_err "a log claiming secure boot off does not replay" 3 "replay of PCR sha(1|256)\.7" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
# an event added that the TPM never saw
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d + d[-(12+2+20+2+32+4+4):])' "$T/log.bin" "$T/extra.bin"
ev_edit "$T/ev.json" "$T/t.json" event_log replace "$(b64 "$T/extra.bin")"
check_err "an extra event does not replay" 3 "replay of PCR sha(1|256)\.7" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
# an event taken out
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d[:-(12+2+20+2+32+4+4)])' "$T/log.bin" "$T/less.bin"
ev_edit "$T/ev.json" "$T/t.json" event_log replace "$(b64 "$T/less.bin")"
check_err "a missing event does not replay" 3 "replay of PCR sha(1|256)\.7" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
ev_edit "$T/ev.json" "$T/t.json" event_log replace '"AAAA"'
check_err "a log that is not a crypto-agile log" 3 "event log" "$SL" verify "$T/t.json" --nonce $N --ak-pin "$T/ak.pem"
check_err "attest --eventlog with a missing file leaves it out" 0 "." sh -c "'$SL' attest --tee tpm2 --nonce $N --eventlog '$T/none' -o '$T/ev4.json' && ! grep -q event_log '$T/ev4.json' && echo ok >&2"

finish
