#!/usr/bin/env bash
# The bash completion scripts/docgen generates: every verb of each command's
# verb table (`seclaunch key <TAB>` offers rotate, disable, enable, delete
# too) and the words of the options that take one of a few (--stage,
# --format, --preempt-watch, --tee, --aead), driven through the completion
# function itself (COMP_WORDS, COMP_CWORD, COMPREPLY).
. "$(dirname "$0")/lib.sh"

SL=$SL_BIN/seclaunch
C=$T/seclaunch.bash
check "docgen completion generates the script" 0 \
	sh -c "python3 '$SL_ROOT/scripts/docgen' completion '$SL' '$SL_BIN/seclaunchd' >'$C'"
complete_line() { # WORDS...: what bash completes for the last word (sorted)
	bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_${COMP_WORDS[0]}; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$C" "$@"
}
want() { # WANT WORDS...: the completion of WORDS is exactly WANT
	local w=$1 got
	shift
	got=$(complete_line "$@")
	assert "$* <TAB> -> $w (got '$got')" test "$got" = "$w "
}

want "create delete disable enable list retire rotate show" seclaunch key ""
want "retire rotate" seclaunch key r
want "disable" seclaunch key di
want "list readmit revoke" seclaunch enroll ""
want "append export keygen verify" seclaunch audit ""
want "import" seclaunch evidence ""
want "auto gpu gpu-ipc host stream" seclaunch run --stage ""
want "gpu gpu-ipc" seclaunch run --policy p --stage g
want "auto gpu gpu-ipc host stream" seclaunch serve --stage ""
want "aws gce sigterm" seclaunch run --preempt-watch ""
want "auto aws-nitro nvidia-gpu sev-snp tdx tpm2" seclaunch run --tee ""
want "auto aws-nitro nvidia-gpu sev-snp tdx tpm2" seclaunch attest --tee ""
want "aes-256-gcm xchacha20-poly1305" seclaunch encrypt --aead ""
want "cef csv jsonl ocsf" seclaunch audit export --format ""
want "ocsf" seclaunch audit export --format o
want "cef csv" seclaunch audit export --format = c
want "--policy --policy-pubkey --policy-sig" seclaunch run --policy
# a flag value is only offered after its own option
want "" seclaunch audit verify --format ""

# every verb of every verb table (the program's own `--complete` list)
missing=
for c in $("$SL" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
	got=$(complete_line seclaunch "$c" "")
	for v in $("$SL" "$c" --complete | sed -n 's/^verb //p'); do
		case " $got " in *" $v "*) ;; *) missing="$missing $c:$v" ;; esac
	done
done
assert "every verb of every command completes${missing:+ (missing:$missing)}" test -z "$missing"
assert "key has all eight verbs in its table" \
	test "$("$SL" key --complete | grep -c '^verb ')" -eq 8

check_err "a word not in --stage's list is refused" 1 "--stage: 'disk' is not one of auto, host" \
	"$SL" run --stage disk --policy p --policy-pubkey k --kms https://x a.sld -- true
check_err "a word not in --format's list is refused" 1 "--format: 'xml' is not one of jsonl" \
	"$SL" audit export --format xml log
finish
