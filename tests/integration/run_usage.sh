#!/usr/bin/env bash
# seclaunch run without services: usage errors (exit 1, naming the flag),
# --help names every option the parser knows, and dataset input errors
# (exit 2) caught before anything is asked of a KMS: missing file, not an
# SLD file, a dataset under a local key file.
. "$(dirname "$0")/lib.sh"

if ! "$SL" run --help >/dev/null 2>&1; then
	skip run_usage "seclaunch run not built"
	finish
fi

check "--help exits 0" 0 "$SL" run --help
cp "$T/out" "$T/help"
missing= n=0
# run's own table, the launch options it shares with serve (run_int.h), the region identity options it shares with decrypt (not
# the hidden deprecated aliases) and the shared flags it accepts
own=$(sed -n 's/^[[:space:]]*{"\([a-z-]*\)", [a-z_]*, [A-Z_]*, NULL}.*/\1/p' \
	"$SL_ROOT/launcher/cmd/cmd_run.c" "$SL_ROOT/launcher/run/run_int.h" "$SL_ROOT/launcher/cli/region_id.h")
for opt in $own kms kms-ca kms-pin tcti audit-log json quiet; do
	n=$((n + 1))
	grep -q -- "--$opt" "$T/help" || missing="$missing --$opt"
done
assert "the option table was read ($n options)" test "$n" -ge 20
assert "--help names every option of the parser${missing:+ (missing:$missing)}" test -z "$missing"

B=(--policy p.json --policy-pubkey p.pub --kms https://127.0.0.1:1 --audit-log "$T/audit.log")
check_err "no options" 1 "--policy, --policy-pubkey and --kms are required" "$SL" run
check_err "no command" 1 "no command given" "$SL" run "${B[@]}" a.sld
check_err "no command after --" 1 "no command given" "$SL" run "${B[@]}" a.sld --
check_err "no dataset" 1 "no dataset given" "$SL" run "${B[@]}" -- true
check_err "unknown option" 1 "unknown option '--bogus'" "$SL" run --bogus
assert "one line per mistake" test "$(grep -c "unknown option" "$T/err")" -eq 1
check_err "bad --stage" 1 "--stage: 'disk'" "$SL" run "${B[@]}" --stage disk a.sld -- true
check_err "bad --timeout" 1 "--timeout: 'soon'" "$SL" run "${B[@]}" --timeout soon a.sld -- true
check_err "bad --kill-grace" 1 "--kill-grace: 'soon'" "$SL" run "${B[@]}" --kill-grace soon a.sld -- true
check_err "--user with an empty group" 1 "--user 'root:': want USER\[:GROUP\]" \
	"$SL" run "${B[@]}" --user root: a.sld -- true
check_err "-- a command that does not exist: 127 before any KMS is asked" 127 \
	"cannot execute '/nonexistent/cmd'" "$SL" run "${B[@]}" a.sld -- /nonexistent/cmd
assert "... audited with exit code 127" grep -q '"run.error".*"exit_code":127' "$T/audit.log"
check_err "zero --threads" 1 "--threads: '0'" "$SL" run "${B[@]}" --threads 0 a.sld -- true
check_err "--env without =" 1 "--env 'NOVALUE'" "$SL" run "${B[@]}" --env NOVALUE a.sld -- true
check_err "--env SECLAUNCH_DATA" 1 "set by seclaunch only" \
	"$SL" run "${B[@]}" --env SECLAUNCH_DATA=x a.sld -- true
check_err "--cloud-identity with --region" 1 "exclude each other" \
	"$SL" run "${B[@]}" --cloud-identity f --region gcp:x a.sld -- true

check_err "missing dataset file" 2 "nonexistent.sld: cannot open" \
	"$SL" run "${B[@]}" "$T/nonexistent.sld" -- true
printf 'not an sld file at all, just text\n' >"$T/text.sld"
check_err "not an SLD file" 2 "text.sld" "$SL" run "${B[@]}" "$T/text.sld" -- true
check "keygen" 0 "$SL" keygen -o "$T/k"
printf 'a,b\n' >"$T/plain"
check "encrypt with a key file" 0 "$SL" encrypt --key-file "$T/k" --dataset-id local-ds -q "$T/plain" -o "$T/local.sld"
check_err "dataset under a local key file" 2 "local key file" "$SL" run "${B[@]}" "$T/local.sld" -- true
assert "the audit log records the refused run" grep -q '"run.error"' "$T/audit.log"
assert "and its wipe" grep -q '"run.wipe"' "$T/audit.log"
finish
