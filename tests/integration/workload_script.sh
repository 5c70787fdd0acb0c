#!/usr/bin/env bash
# The script an interpreter reads, as `seclaunch measure --predict` names
# it: an option that takes a separate argument does not hide the script
# (`python3 --check-hash-based-pycs always evil.py` measured ./always,
# `bash -o posix evil.sh` measured ./posix, each a copy of the allowed
# script); where the script cannot be told (-c, -m, stdin, an unknown
# option, PYTHONPATH) it is "unknown", and a policy entry that pins
# script_sha256 denies it (policy explain, the same rule seclaunchd uses).
. "$(dirname "$0")/lib.sh"

for tool in python3 bash; do
	if ! command -v "$tool" >/dev/null; then
		skip workload_script "$tool not installed"
		finish
	fi
done
cd "$T" || exit 1
PY=$(python3 -c "import sys; print(sys.executable)") # the binary, not a #! shim
BASH_BIN=$(command -v bash)
printf 'print("good")\n' >good.py
printf 'print("evil")\n' >evil.py
cp good.py always # the allowed script under the option's value's name
printf 'echo good\n' >good.sh
printf 'echo evil\n' >evil.sh
cp good.sh posix
sha() { sha256sum "$1" | cut -d' ' -f1; }
PYSHA=$(sha "$(readlink -f "$PY")")
BASHSHA=$(sha "$(readlink -f "$BASH_BIN")")
cat >p.json <<EOF
{"version": 1, "allow_unverified_region": true, "keys": {"k": ["d-*"]},
 "datasets": [
  {"id": "d-py", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "workloads": [{"exe_sha256": ["$PYSHA"], "script_sha256": ["$(sha good.py)"]}]},
  {"id": "d-sh", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "workloads": [{"exe_sha256": ["$BASHSHA"], "script_sha256": ["$(sha good.sh)"]}]}]}
EOF
"$SL" policy keygen --secret-key pk --public-key pk.pub -W >/dev/null 2>&1
"$SL" policy sign --secret-key pk --policy p.json >/dev/null 2>&1

# predict CMD...: the event's script as "SHA PATH", or "unknown", or "none"
predict() {
	"$SL" measure --predict --policy p.json --json -- "$@" >pred.json 2>pred.err || return 1
	python3 -c '
import json, sys
s = json.load(open("pred.json"))["event"]["script"]
print("%s %s" % (s["sha256"], s["path"]) if isinstance(s, dict) else s or "none")' >pred.out
}
is_script() { # WANT CMD...: the measured script is WANT (a file) or unknown/none
	local want=$1
	shift
	predict "$@" || return 1
	case $want in
	unknown | none) [ "$(cat pred.out)" = "$want" ] ;;
	*) [ "$(cat pred.out)" = "$(sha "$want") $want" ] ;;
	esac || {
		echo "    measured: $(cat pred.out)" >&2
		return 1
	}
}
check "python3 --check-hash-based-pycs always evil.py: evil.py is the script" 0 \
	is_script evil.py "$PY" --check-hash-based-pycs always evil.py
check "python3 -X importtime -W ignore evil.py: evil.py" 0 \
	is_script evil.py "$PY" -X importtime -W ignore evil.py
check "bash -o posix evil.sh: evil.sh is the script" 0 is_script evil.sh "$BASH_BIN" -o posix evil.sh
check "bash -eo pipefail -O globstar evil.sh: evil.sh" 0 \
	is_script evil.sh "$BASH_BIN" -eo pipefail -O globstar evil.sh
check "python3 good.py: good.py" 0 is_script good.py "$PY" good.py
check "python3 -c CODE good.py: unknown" 0 is_script unknown "$PY" -c 'print(1)' good.py
check "python3 -m MODULE: unknown" 0 is_script unknown "$PY" -m json.tool good.py
check "python3 - (stdin): unknown" 0 is_script unknown "$PY" - good.py
check "python3 --an-option-not-known good.py: unknown" 0 is_script unknown "$PY" --frob good.py
check "bash -s good.sh (stdin): unknown" 0 is_script unknown "$BASH_BIN" -s good.sh
check "a script that is not there: unknown" 0 is_script unknown "$PY" missing.py
check_err "--env PYTHONPATH=...: predicted (exit 0)" 0 "" \
	"$SL" measure --predict --policy p.json --env PYTHONPATH=/tmp -- "$PY" good.py
assert "... the text names the variable and says a script pin denies it" \
	grep -q "^script *unknown: python: the environment sets PYTHONPATH.*pins script_sha256 denies" "$T/out"
check "/usr/bin/true: no script (none)" 0 is_script none "$(command -v true)" a
check_err "measure --predict text: the script line names evil.py" 0 "" \
	"$SL" measure --predict --policy p.json -- "$PY" --check-hash-based-pycs always evil.py
assert "... with its SHA-256" grep -q "^script *$(sha evil.py)  evil.py" "$T/out"

# policy explain: the measured claims against the rule that pins good.py
explain() { # DATASET CMD...: exit of explain, reasons in $T/out
	local d=$1
	shift
	"$SL" measure --predict --policy p.json --json -- "$@" >claims.json || return 9
	"$SL" policy explain --policy p.json --policy-pubkey pk.pub --claims claims.json \
		--dataset "$d" --key k
}
check_err "explain: python3 --check-hash-based-pycs always evil.py is denied (exit 4)" 4 "" \
	explain d-py "$PY" --check-hash-based-pycs always evil.py
assert "... because the script differs" grep -q "workloads\[0\]: script differs" "$T/out"
check_err "explain: bash -o posix evil.sh is denied (exit 4)" 4 "" \
	explain d-sh "$BASH_BIN" -o posix evil.sh
assert "... because the script differs" grep -q "workloads\[0\]: script differs" "$T/out"
check_err "explain: python3 -c CODE is denied (exit 4)" 4 "" explain d-py "$PY" -c 'print(1)'
assert "... the script is unknown, and the entry pins it" \
	grep -q "workloads\[0\]: script unknown: seclaunch could not tell" "$T/out"
explain d-py "$PY" good.py >/dev/null 2>&1
"$SL" policy explain --policy p.json --policy-pubkey pk.pub --claims claims.json \
	--dataset d-py --key k >"$T/out" 2>&1
assert "explain: python3 good.py satisfies the workloads rule" \
	grep -q 'workloads\[0\]: workload .* is allowed' "$T/out"

# seclaunch's own PYTHONPATH (a source build's jobside/python, so that the
# job imports seclaunch_data): in the measured environment, and known, so
# the script is still the file; any other PYTHONPATH is the user's: unknown
HELPER=$(cd "$SL_ROOT/jobside/python" && pwd -P)
predict "$PY" good.py
assert "a source build's job gets PYTHONPATH=$HELPER, in the measured env" python3 -c '
import json, sys
env = json.load(open("pred.json"))["event"]["env"]
sys.exit(0 if "PYTHONPATH=" + sys.argv[1] in env else "env: %s" % env)' "$HELPER"
assert "... and the script is still good.py (not unknown)" \
	test "$(cat pred.out)" = "$(sha good.py) good.py"
"$SL" measure --predict --policy p.json --json --env "PYTHONPATH=$HELPER:$T" -- "$PY" good.py >pred.json
assert "PYTHONPATH naming more than the helper folder: unknown" \
	python3 -c 'import json; assert json.load(open("pred.json"))["event"]["script"] == "unknown"'
finish
