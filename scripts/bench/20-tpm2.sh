#!/usr/bin/env bash
# TPM 2.0 attestation against its peer, in one run, on one swtpm:
#   - pair: `seclaunch attest` + `seclaunch verify` vs `tpm2_quote` +
#     `tpm2_checkquote` (same PCRs sha256:0-7, same key type: a persistent
#     RSA-2048 RSASSA-SHA256 AK, same nonce size); wall time per pair, the
#     mean over SL_BENCH_PAIRS (default 20) pairs each, and the ratio;
#   - the verifier alone: verifications/s of `seclaunch verify --repeat N`
#     (one process, N verifications) for the swtpm quote (pinned AK) and for
#     the GCE vTPM quote with its AK certificate chain and a 44-event log,
#     and tpm2_checkquote runs/s (a process per verification) for reference.
# Prints the figures; asserts nothing.
set -euo pipefail
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
SL=$SL_BIN/seclaunch
SL_VECTORS=${SL_VECTORS:-$SL_ROOT/tests/vectors}
PAIRS=${SL_BENCH_PAIRS:-20}
REPEAT=${SL_BENCH_REPEAT:-2000}
for tool in swtpm tpm2_quote tpm2_checkquote tpm2_createek tpm2_createak python3; do
	command -v "$tool" >/dev/null || { echo "20-tpm2: $tool is not installed"; exit 1; }
done
[ -x "$SL" ] || { echo "20-tpm2: $SL not built"; exit 1; }

# swtpm on a free loopback port pair, a private temp dir $T, both stopped
# and removed at exit (the integration tests' library)
. "$SL_ROOT/tests/integration/lib.sh"
set -e
D=$T
cd "$D"
start_swtpm tpm || { echo "20-tpm2: swtpm did not start"; exit 1; }

N=$(python3 -c 'import os; print(os.urandom(32).hex())')
PCRS=sha256:0,1,2,3,4,5,6,7
# both AKs exist before timing starts (seclaunch creates its own on first use)
"$SL" attest -q --tee tpm2 --nonce "$N" --pcrs $PCRS --export-ak ak.pem -o ev.json
tpm2_createek -c ek.ctx -G rsa -u ek.pub >/dev/null && tpm2_flushcontext -t
tpm2_createak -C ek.ctx -c tak.ctx -G rsa -g sha256 -s rsassa -u tak.pub >/dev/null
tpm2_flushcontext -t && tpm2_flushcontext -s
tpm2_evictcontrol -C o -c tak.ctx 0x81010040 >/dev/null && tpm2_flushcontext -t
tpm2_readpublic -c 0x81010040 -f pem -o tak.pem >/dev/null

ns() { date +%s%N; }
# pairs alternate (seclaunch, tpm2-tools, seclaunch, ...) so that load from
# other work on a shared machine falls on both alike
sl_ns=0 tt_ns=0
for _ in $(seq "$PAIRS"); do
	a=$(ns)
	"$SL" attest -q --force --tee tpm2 --nonce "$N" --pcrs $PCRS -o ev.json
	"$SL" verify -q ev.json --nonce "$N" --ak-pin ak.pem
	b=$(ns)
	tpm2_quote -c 0x81010040 -l $PCRS -q "$N" -m q.msg -s q.sig -o q.pcrs -g sha256 >/dev/null
	tpm2_checkquote -u tak.pem -m q.msg -s q.sig -f q.pcrs -q "$N" -g sha256 >/dev/null
	c=$(ns)
	sl_ns=$((sl_ns + b - a)) tt_ns=$((tt_ns + c - b))
done
t0=0 t1=$sl_ns t2=$((sl_ns + tt_ns))

# the verifier alone
t3=$(ns)
"$SL" verify -q --repeat "$REPEAT" ev.json --nonce "$N" --ak-pin ak.pem
t4=$(ns)
G=$SL_VECTORS/tpm2/gce-cos85
GREPEAT=$((REPEAT / 4))
python3 - "$G" gce.json <<'PY'
import base64, json, sys
d, out = sys.argv[1:3]
rd = lambda p: open(f"{d}/{p}", "rb").read()
b64 = lambda b: base64.b64encode(b).decode()
t = rd("gce-cos-85.ak_pub.tpmt_public")
pcrs = dict(l.split() for l in open(f"{d}/gce-cos-85-nonce9009.pcrs_sha256.txt"))
json.dump({"kind": "tpm2", "version": 1,
           "tpms_attest": b64(rd("gce-cos-85-nonce9009.quote_sha256.tpms_attest")),
           "signature": b64(rd("gce-cos-85-nonce9009.quote_sha256.tpmt_signature")),
           "ak_public": b64(len(t).to_bytes(2, "big") + t),
           "ak_cert": b64(rd("gce-cos-85.ak_cert.der")),
           "event_log": b64(rd("gce-cos-85.event_log.bin")),
           "pcrs": {"sha256": pcrs}}, open(out, "w"))
PY
t5=$(ns)
"$SL" verify -q --repeat "$GREPEAT" gce.json --nonce 9009 --trust "$SL_VECTORS/tpm2/ca" --at 2024-01-01T00:00:00Z
t6=$(ns)
CQ=$PAIRS
t7=$(ns)
for _ in $(seq "$CQ"); do
	tpm2_checkquote -u tak.pem -m q.msg -s q.sig -f q.pcrs -q "$N" -g sha256 >/dev/null
done
t8=$(ns)
# process start alone (dynamic linking, library init): part of every pair;
# alternating too
ps_ns=0 pt_ns=0
for _ in $(seq "$CQ"); do
	a=$(ns)
	"$SL" version >/dev/null
	b=$(ns)
	tpm2_checkquote -v >/dev/null
	c=$(ns)
	ps_ns=$((ps_ns + b - a)) pt_ns=$((pt_ns + c - b))
done
t9=$((t8 + ps_ns)) t10=$((t8 + ps_ns + pt_ns))

python3 - "$PAIRS" "$REPEAT" "$GREPEAT" "$CQ" $t0 $t1 $t2 $t3 $t4 $t5 $t6 $t7 $t8 $t9 $t10 <<'PY'
import sys
pairs, rep, grep_, cq = map(int, sys.argv[1:5])
t = list(map(int, sys.argv[5:]))
sl = (t[1] - t[0]) / pairs / 1e6
tt = (t[2] - t[1]) / pairs / 1e6
v = rep / ((t[4] - t[3]) / 1e9)
g = grep_ / ((t[6] - t[5]) / 1e9)
c = cq / ((t[8] - t[7]) / 1e9)
print(f"attest+verify pair (swtpm, RSA-2048 AK, sha256:0-7), mean of {pairs}:")
print(f"  seclaunch attest + verify        {sl:8.1f} ms/pair")
print(f"  tpm2_quote + tpm2_checkquote     {tt:8.1f} ms/pair")
print(f"  ratio seclaunch / tpm2-tools     {sl / tt:8.2f}  (< 1: seclaunch faster)")
print("verifier alone:")
print(f"  seclaunch verify, pinned AK      {v:8.0f} verifications/s ({rep} in one process)")
print(f"  seclaunch verify, GCE: AK chain + 44-event log replay  {g:8.0f} verifications/s ({grep_})")
print(f"  tpm2_checkquote                  {c:8.1f} runs/s (one process each, {cq} runs)")
ps = (t[9] - t[8]) / cq / 1e6
pt = (t[10] - t[9]) / cq / 1e6
print("process start alone (no TPM, no verification):")
print(f"  seclaunch version                {ps:8.1f} ms   (two per pair)")
print(f"  tpm2_checkquote -v               {pt:8.1f} ms")
PY
