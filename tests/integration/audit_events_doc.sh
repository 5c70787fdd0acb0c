#!/usr/bin/env bash
# Every audit event the code writes is in docs/audit.md's event table: the
# SL_AUDIT_EV_* names of include/seclaunch/audit.h and every "kms.*" /
# "run.*" / "audit.*" string literal of the C sources (file names aside),
# and for a name built with %s (kms.key.%s), at least one row of that prefix.
# The table names nothing the code never writes either.
. "$(dirname "$0")/lib.sh"
cat >"$T/events.py" <<'PY'
import glob, re, sys
root = sys.argv[1]
md = open(root + "/docs/audit.md").read()
start = md.index("| event | written by | meaning |")
table = md[start:md.index("\n\n", start)].split("\n")[2:]
doc = set()
for row in table:
    doc |= set(re.findall(r"`([a-z0-9._-]+)`", row.split("|")[1]))
code, prefixes = set(), set()
srcs = [f for d in ("kms", "launcher", "audit", "core", "include/seclaunch")
        for f in glob.glob("%s/%s/**/*.[ch]" % (root, d), recursive=True)]
for f in srcs:
    text = open(f, encoding="utf-8").read()
    code |= set(re.findall(r'#define SL_AUDIT_EV_[A-Z0-9_]+ "([a-z0-9._-]+)"', text))
    for lit in re.findall(r'"((?:kms|run|audit)\.[a-z0-9._%-]+)"', text):
        if "%s" in lit:
            prefixes.add(lit.split("%s")[0])
        elif not re.search(r"\.(key|log|pub|json|db|lock|anchor|pem)$", lit):
            code.add(lit)
assert len(code) >= 30, sorted(code)
bad = ["written but not in docs/audit.md: " + e for e in sorted(code - doc)]
bad += ["built as %s%%s but no row starts with it" % p for p in sorted(prefixes)
        if not any(d.startswith(p) for d in doc)]
built = {d for d in doc if any(d.startswith(p) for p in prefixes)}
bad += ["in docs/audit.md but never written: " + e for e in sorted(doc - code - built)]
print("; ".join(bad))
PY
out=$(python3 "$T/events.py" "$SL_ROOT" 2>&1 || echo "(the comparison failed)")
assert "docs/audit.md's event table is every event the code writes${out:+: $out}" test -z "$out"
finish
