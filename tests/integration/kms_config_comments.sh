#!/usr/bin/env bash
# seclaunchd's configuration file takes "#" comment lines (the packaged
# /etc/seclaunchd/seclaunchd.conf is a commented example): a line whose first
# non-blank character is "#" is ignored, error line numbers still count it, a
# "#" inside a string or after a value is not a comment.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

printf '# a comment\n  # an indented one\n{\n# "listen": "ignored",\n"threads": 2,\n\t# tab-indented\n"workers": x\n}\n' >bad-line.conf
check_err "a syntax error after comment lines names its real line (7)" 2 "bad-line.conf: line 7" \
	"$SLD" --dev --state "$T/s1" --config bad-line.conf
printf '# comment\n{"listen": "#not-an-address"}\n' >hash-in-string.conf
check_err "a # inside a string is part of the value" 2 "'#not-an-address' is not HOST:PORT" \
	"$SLD" --dev --state "$T/s2" --config hash-in-string.conf
printf '{"threads": 2 # trailing\n}\n' >trailing.conf
check_err "a # after a value is not a comment" 2 "trailing.conf: line 1" \
	"$SLD" --dev --state "$T/s3" --config trailing.conf
printf '# only comments\n#{"threads": 2}\n' >empty.conf
check_err "a file of comments only is not a configuration" 2 "empty.conf" \
	"$SLD" --dev --state "$T/s4" --config empty.conf
finish
