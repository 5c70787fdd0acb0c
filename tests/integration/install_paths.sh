#!/usr/bin/env bash
# `make install` and `make uninstall` into a DESTDIR: the Python helper lands
# in the directory the system python3 imports from (not share/seclaunch/python,
# where no python3 looks), the man pages and the bash completion where man and
# bash-completion look; the completion, generated from --help, completes
# every command, subcommand and flag (seclaunch enc<TAB> -> encrypt).
# Uses the normal build (bin/, build/), whatever BUILD/BIN the suite runs with.
. "$(dirname "$0")/lib.sh"

if ! command -v help2man >/dev/null; then
	skip install_paths "help2man is not installed (scripts/install-deps installs it)"
	finish
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
M=(env -u BUILD -u BIN -u SAN make -C "$SL_ROOT" --no-print-directory BUILD=build BIN=bin PYTHON="$PY")

for prefix in /usr/local /usr; do
	D=$T/inst${prefix//\//_}
	check "make install PREFIX=$prefix DESTDIR=..." 0 "${M[@]}" -j2 install PREFIX="$prefix" DESTDIR="$D"
	site=$("$PY" "$SL_ROOT/scripts/pysite" "$prefix" 2>/dev/null)
	assert "$PY's site directory under $prefix is known ($site)" test -n "$site"
	assert "seclaunch_data.py is installed in $site" test -f "$D$site/seclaunch_data.py"
	assert "... which $PY imports from (no PYTHONPATH needed)" \
		"$PY" -c "import sys; sys.exit('$site' not in sys.path)"
	assert "... and not in share/seclaunch/python" test ! -e "$D$prefix/share/seclaunch/python"
	check "python3 imports it from there" 0 env PYTHONPATH="$D$site" "$PY" -c 'import seclaunch_data'
	for f in bin/seclaunch bin/seclaunchd share/man/man1/seclaunch.1 share/man/man5/seclaunchd.conf.5 \
		share/man/man8/seclaunchd.8 share/bash-completion/completions/seclaunch \
		share/bash-completion/completions/seclaunchd lib/seclaunch/libseclaunch_data.so \
		include/seclaunch_data.h share/doc/seclaunch/exit-codes.md share/doc/seclaunch/README.md; do
		assert "$prefix/$f installed" test -e "$D$prefix/$f"
	done
	check "make uninstall" 0 "${M[@]}" uninstall PREFIX="$prefix" DESTDIR="$D"
	left=$(find "$D" -type f -o -type l | head -n 3)
	assert "uninstall leaves no file behind${left:+ (left: $left)}" test -z "$left"
done

# --- completion ----------------------------------------------------------------
C=$SL_ROOT/build/completion/seclaunch
complete_line() { # WORDS...: what bash completes for the last word
	bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_${COMP_WORDS[0]}; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$C" "$@"
}
assert "the completion loads in bash and registers both programs" \
	bash --norc --noprofile -c ". '$C' && complete -p seclaunch && complete -p seclaunchd" >/dev/null
got=$(complete_line seclaunch enc)
assert "seclaunch enc<TAB> -> encrypt (got '$got')" test "$got" = "encrypt "
got=$(complete_line seclaunch help dec)
assert "seclaunch help dec<TAB> -> decrypt (got '$got')" test "$got" = "decrypt "
got=$(complete_line seclaunch policy s)
assert "seclaunch policy s<TAB> -> sign (got '$got')" test "$got" = "sign "
got=$(complete_line seclaunch audit "")
assert "seclaunch audit <TAB> -> its subcommands (got '$got')" test "$got" = "append export keygen verify "
got=$(complete_line seclaunch run --policy-)
assert "seclaunch run --policy-<TAB> -> --policy-pubkey --policy-sig (got '$got')" \
	test "$got" = "--policy-pubkey --policy-sig "
got=$(complete_line seclaunchd --con)
assert "seclaunchd --con<TAB> -> --config (got '$got')" test "$got" = "--config "
missing=
for c in $("$SL_ROOT/bin/seclaunch" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
	want=$("$SL_ROOT/bin/seclaunch" "$c" --help 2>&1 | grep -oE -- '(^|[ [(,])--[a-z0-9][a-z0-9-]*' |
		sed 's/^[ [(,]//' | sort -u)
	got=$(complete_line seclaunch "$c" --)
	for f in $want; do
		case " $got " in *" $f "*) ;; *) missing="$missing $c:$f" ;; esac
	done
done
assert "every --flag each command's --help names completes${missing:+ (missing:$missing)}" test -z "$missing"
finish
