#!/usr/bin/env bash
# The defaults documented for seclaunchd's settings are the daemon's own:
# `seclaunchd --print-defaults` (kms/daemon/config.c) against the packaged
# configuration docs/man/seclaunchd.conf (its "Default X." text and the value
# of an active setting), the seclaunchd.conf(5) page scripts/docgen makes from
# it, and the table of docs/seclaunchd.md. Also: no page still describes the
# files the state store replaced, nor a flag's history before this version.
. "$(dirname "$0")/lib.sh"

CONF=$SL_ROOT/docs/man/seclaunchd.conf
check "seclaunchd --print-defaults" 0 sh -c "'$SLD' --print-defaults >'$T/defaults.json'"
check "docgen conf makes seclaunchd.conf(5)" 0 \
	sh -c "python3 '$SL_ROOT/scripts/docgen' conf '$CONF' 0 >'$T/conf.5'"
cat >"$T/cmp.py" <<'PY'
import json, re, sys
defaults = json.load(open(sys.argv[1]))
conf = open(sys.argv[2]).read().split("\n")
man = open(sys.argv[3]).read()
md = open(sys.argv[4]).read()
bad = []
def spell(v):
    return json.dumps(v)
assert len(defaults) >= 10, defaults
for key, v in sorted(defaults.items()):
    # the packaged file: the comment paragraph above the key's line
    line = next((i for i, l in enumerate(conf) if re.match(r'^\s*(#\s*)?"%s"\s*:' % key, l)), None)
    if line is None:
        bad.append("%s: not in seclaunchd.conf" % key)
        continue
    m = re.match(r'^\s*(#\s*)?"%s"\s*:\s*(.*?),?\s*$' % key, conf[line])
    if json.loads(m.group(2)) != v:
        bad.append("%s: seclaunchd.conf sets %s, the daemon's default is %s" % (key, m.group(2), spell(v)))
    i, para = line - 1, []
    while i >= 0 and conf[i].lstrip().startswith("#") and conf[i].strip() != "#":
        para.insert(0, conf[i].lstrip("# ").strip())
        i -= 1
    text = " ".join(para)
    said = re.findall(r'[Dd]efault:? ("?[a-z0-9_-]+"?)', text)
    if said != [spell(v)] and said != [str(v).lower()]:
        bad.append("%s: seclaunchd.conf says default %s, the daemon's is %s" % (key, said, spell(v)))
    # the man page made from it carries the same text
    ent = re.search(r'\\fB%s\\fR: ([^\n]*)\n((?:[^.\n][^\n]*\n)*)' % re.escape(key.replace("_", "_")), man)
    if ent is None or not re.search(r'[Dd]efault:? %s' % re.escape(spell(v).replace("-", "\\-")), ent.group(2)):
        bad.append("%s: seclaunchd.conf(5) does not say default %s" % (key, spell(v)))
    # docs/seclaunchd.md's table
    row = re.search(r'^\| `%s` \|.*$' % key, md, re.M)
    cells = re.split(r'(?<!\\)\|', row.group(0)) if row else []
    cell = cells[3].strip().strip("`") if len(cells) > 3 else None
    if cell not in (spell(v), str(v).lower()):
        bad.append("%s: docs/seclaunchd.md says default %s, the daemon's is %s" % (key, cell, spell(v)))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
drift=$(python3 "$T/cmp.py" "$T/defaults.json" "$CONF" "$T/conf.5" "$SL_ROOT/docs/seclaunchd.md" 2>&1 ||
	echo "(the comparison failed)")
assert "every default in seclaunchd.conf, seclaunchd.conf(5) and docs/seclaunchd.md is the daemon's${drift:+: $drift}" \
	test -z "$drift"

# what the state store replaced is not described as what is there
stale=$(grep -nE 'keystore file|allocated at start|registry and the local keystore|local keystore' \
	"$CONF" "$SL_ROOT/docs/man/seclaunchd.h2m" "$T/conf.5" <("$SLD" --help) | head -n 3)
assert "no page describes a keystore file, a registry or a preallocated challenge table${stale:+ ($stale)}" \
	test -z "$stale"
hist=$("$SL_BIN/seclaunch" policy explain --help | grep -E 'before [0-9]+\.[0-9]' | head -n 1)
assert "policy explain --help tells no history of an older version${hist:+ ($hist)}" test -z "$hist"
finish
