#!/usr/bin/env bash
# The OCSF validator (tests/integration/ocsf_validate.py) against the vendored
# OCSF 1.3.0 schema: it accepts a correct event of each class the audit export
# maps to, and refuses each hand-made defect, naming the record and the
# attribute path — so the export tests that rely on it cannot pass by accident.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
V=(python3 "$SL_ROOT/tests/integration/ocsf_validate.py" --schema "$SL_VECTORS/ocsf")

# good.jsonl: one valid event per class; cases.tsv: name, the 1-based line of
# good.jsonl it breaks, the violation the validator must print, and a Python
# statement editing that event `e`.
python3 - <<'PY'
import json
md = {"version": "1.3.0", "uid": "1", "product": {"name": "seclaunch", "vendor_name": "seclaunch", "version": "0"}}
actor = {"user": {"name": "tester"}, "app_name": "seclaunch"}
dev = {"hostname": "node-1", "type_id": 0}
def ev(cls, act, act_name, cls_name, **kw):
    e = {"class_uid": cls, "class_name": cls_name, "category_uid": cls // 1000, "activity_id": act,
         "activity_name": act_name, "type_uid": cls * 100 + act, "time": 1767225600000,
         "severity_id": 1, "severity": "Informational", "status_id": 1, "status": "Success",
         "metadata": json.loads(json.dumps(md)), "unmapped": {"anything": [1, {"goes": None}]}}
    e.update(kw)
    return e
good = [
    ev(0, 99, "run.stage", "Base Event"),
    ev(6003, 2, "Read", "API Activity", actor=actor, api={"operation": "kms.release"},
       src_endpoint={"ip": "127.0.0.1", "hostname": "node-1"}),
    ev(6002, 3, "Start", "Application Lifecycle", app={"name": "seclaunch", "vendor_name": "seclaunch"},
       actor=actor, device=dev),
    ev(3004, 1, "Create", "Entity Management", entity={"uid": "kek-1", "type": "KEK"}, actor=actor, device=dev),
    ev(1007, 1, "Launch", "Process Activity", actor=actor, device=dev, process={"pid": 4242}),
]
for e in good[2:4]:
    e["metadata"]["profiles"] = ["host"]
open("good.jsonl", "w").write("".join(json.dumps(e) + "\n" for e in good))
cases = [
    ("missing required attribute", 1, r"severity_id: required by class base_event", "del e['severity_id']"),
    ("missing required attribute in an object", 2, r"metadata\.product\.vendor_name: required by object product",
     "del e['metadata']['product']['vendor_name']"),
    ("missing required object of the class", 2, r"actor: required by class api_activity", "del e['actor']"),
    ("unknown attribute", 1, r"tee_kinds: not an attribute of class base_event", "e['tee_kinds'] = ['tpm2']"),
    ("unknown attribute in an object", 2, r"actor\.src_ip: not an attribute of object actor",
     "e['actor']['src_ip'] = '127.0.0.1'"),
    ("attribute the class does not take, even with its profile", 2, r"device: not an attribute of class api_activity",
     "e['device'] = {'hostname': 'node-1', 'type_id': 0}; e['metadata']['profiles'] = ['host']"),
    ("wrong enum value", 2, r"activity_id: 7 is not one of", "e['activity_id'] = 7; e['type_uid'] = 600307"),
    ("wrong enum value in an object", 3, r"device\.type_id: 42 is not one of", "e['device']['type_id'] = 42"),
    ("caption sibling that does not match its enum", 2, r"activity_name: is 'Update', the caption of activity_id 2 is 'Read'",
     "e['activity_name'] = 'Update'"),
    ("severity caption that does not match", 1, r"severity: is 'High', the caption of severity_id 1",
     "e['severity'] = 'High'"),
    ("class caption that does not match", 4, r"class_name: is 'Entity Change'", "e['class_name'] = 'Entity Change'"),
    ("undeclared profile attribute", 3, r"device: comes from the host profile, which metadata.profiles does not declare",
     "del e['metadata']['profiles']"),
    ("unknown profile", 3, r"metadata\.profiles\[1\]: no OCSF profile is named 'hots'",
     "e['metadata']['profiles'].append('hots')"),
    ("wrong type", 1, r"time: '2026-01-01T00:00:00Z' is not a timestamp_t", "e['time'] = '2026-01-01T00:00:00Z'"),
    ("wrong type: an IP that is not one", 2, r"src_endpoint\.ip: '127\.0\.0\.1\.5' does not match ip_t",
     "e['src_endpoint']['ip'] = '127.0.0.1.5'"),
    ("an array where one value belongs", 5, r"process\.pid: \[4242\] is not a integer_t", "e['process']['pid'] = [4242]"),
    ("object constraint", 2, r"src_endpoint: object network_endpoint needs at least one of",
     "e['src_endpoint'] = {'port': 443}"),
    ("type_uid inconsistent", 5, r"type_uid: is 100702, class_uid × 100 \+ activity_id is 100701", "e['type_uid'] = 100702"),
    ("category_uid inconsistent", 4, r"category_uid: is 6, class 3004 is in category 3", "e['category_uid'] = 6"),
    ("metadata.version not 1.3.0", 1, r"metadata\.version: is '1\.2\.0', the schema is '1\.3\.0'",
     "e['metadata']['version'] = '1.2.0'"),
    ("unknown class", 1, r"class_uid: no OCSF 1\.3\.0 class has uid 9999", "e['class_uid'] = 9999"),
]
with open("cases.tsv", "w") as f:
    for i, (name, line, pat, code) in enumerate(cases):
        e = json.loads(json.dumps(good[line - 1]))
        exec(code)
        lines = [json.dumps(x) for x in good]
        lines[line - 1] = json.dumps(e)
        open(f"case{i}.jsonl", "w").write("".join(l + "\n" for l in lines))
        f.write(f"{name}\t{i}\t{line}\t{pat}\n")
PY

check "accepts a correct event of each mapped class" 0 "${V[@]}" good.jsonl
assert "...and says it checked all 5" grep -q "5 record(s), 0 invalid, against OCSF 1.3.0" "$T/err"

while IFS=$'\t' read -r name i line pat; do
	"${V[@]}" "case$i.jsonl" >"case$i.out" 2>&1
	rc=$?
	# the violation names the record (file:line) and the attribute path, and
	# only the broken record is reported
	if [ "$rc" = 1 ] && grep -Eq -- "^case$i\.jsonl:$line: .*$pat" "case$i.out" &&
		! grep -Ev "^case$i\.jsonl:$line: |^ocsf_validate: " "case$i.out" | grep -q .; then
		_pass "refuses: $name"
	else
		_fail "refuses: $name (exit $rc, want 1 and /$pat/ at line $line)"
		sed 's/^/    /' "case$i.out" | head -n 5
	fi
done <cases.tsv
assert "every case ran" test "$(wc -l <cases.tsv)" -eq 21

check_err "a schema folder that is not there: exit 2" 2 "schema" \
	python3 "$SL_ROOT/tests/integration/ocsf_validate.py" --schema "$T/none" good.jsonl
finish
