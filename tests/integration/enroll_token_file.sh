#!/usr/bin/env bash
# `seclaunch enroll --issue-token -o FILE`: the single-use enrollment token
# goes to a new file of mode 0600 (nothing secret on stdout, --json names the
# file instead of the token); an existing file, a symlink (dangling or not)
# and -o without --issue-token are refused; the file's token enrolls a TPM.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
mkdir ekca
printf '{"ek_ca_dir": "%s/ekca", "accept_ek_without_cert": false}' "$T" >prod.json
start_kms "$T/kms" --config "$T/prod.json" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
I=(enroll "${K[@]}" --issue-token --admin-token-file "$KMS_TOKEN")
umask 022 # the file is 0600 whatever the caller's umask
check "--issue-token -o tok" 0 "$SL" "${I[@]}" -o tok
assert "tok is mode 0600" test "$(stat -c %a tok)" = 600
assert "tok holds the token (43 URL-safe characters)" grep -Eqx '[A-Za-z0-9_-]{43}' tok
assert "nothing of the token on stdout" sh -c "! grep -qF \"\$(cat tok)\" '$T/out'"
assert "stderr names the file" grep -q "written to tok" "$T/err"
cp tok tok.before
check_err "an existing file is refused" 2 "tok: File exists" "$SL" "${I[@]}" -o tok
assert "... and left as it was" cmp -s tok tok.before
ln -s "$T/elsewhere" dangling
check_err "a dangling symlink is refused" 2 "dangling: File exists" "$SL" "${I[@]}" -o dangling
assert "... nothing written through it" test ! -e "$T/elsewhere"
: >target
ln -s "$T/target" link
check_err "a symlink to a file is refused" 2 "link: File exists" "$SL" "${I[@]}" -o link
assert "... the target untouched" test ! -s target
check_err "-o without --issue-token is a usage error" 1 "-o goes with --issue-token" \
	"$SL" enroll "${K[@]}" -o x
check "--json -o tok2" 0 "$SL" "${I[@]}" --json -o tok2
assert "--json names the file, not the token" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
tok = open(sys.argv[2]).read().strip()
sys.exit(0 if r.get("token_file") == "tok2" and "token" not in r and tok not in json.dumps(r) else r)' "$T/out" tok2
start_swtpm tpm1
check "the file's token enrolls a TPM without an EK certificate" 0 \
	"$SL" enroll "${K[@]}" --enroll-token-file tok -q
finish
