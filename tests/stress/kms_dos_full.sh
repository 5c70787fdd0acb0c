#!/usr/bin/env bash
# seclaunchd against connection exhaustion at full scale (make stress): the
# default table of 512 connections filled past its limit with silent
# sockets held past idle_timeout_s, then with a mix of slowloris, TLS-idle and
# TCP-idle connections. While they are held the server's CPU
# (/proc/PID/stat utime+stime) stays near idle; once they go, /v1/health
# answers within a second.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/../integration/kms_lib.bash"
. "$(dirname "$0")/../integration/kms_dos_lib.bash"

cd "$T" || exit 1
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 1200 ]; then
	skip "connection exhaustion at full scale" "needs 1200 open files, the limit is $(ulimit -n)"
	finish
fi

# 515 silent sockets held 6 s past an idle timeout of 2 s, then closed
echo '{"idle_timeout_s": 2}' >short.json
start_kms "$T/kms" --config "$T/short.json" || exit 1
hold_conns idle.out --idle 515 --hold 6
assert "515 silent sockets connected" test "$(kv opened_idle idle.out)" = 515
assert_hold "515 silent sockets past a limit of 512 and past the idle timeout" idle.out 1.0
check "health again" 0 curl -sf --max-time 2 --cacert "$KMS_CA" "$KMS_URL/v1/health"
if command -v ss >/dev/null; then
	assert "no socket left in CLOSE-WAIT" \
		sh -c "! ss -Htan state close-wait '( sport = :${KMS_URL##*:} )' | grep -q ."
else
	skip "no socket left in CLOSE-WAIT" "ss (iproute2) is not installed"
fi
stop_pid "$KMS_PID"

# slowloris + TLS-idle + TCP-idle: 560 against the default limit of 512 and
# the default idle timeout of 30 s (the slow ones are never idle)
start_kms "$T/kms2" || exit 1
hold_conns mix.out --slow 200 --tls-idle 160 --idle 200 --hold 8
assert "200 slowloris + 160 TLS-idle connections opened" \
	test "$(kv opened_slow mix.out)" = 200 -a "$(kv opened_tls_idle mix.out)" = 160
assert_hold "200 slowloris + 160 TLS-idle + 200 TCP-idle against 512" mix.out 1.0
check "health again" 0 curl -sf --max-time 2 --cacert "$KMS_CA" "$KMS_URL/v1/health"
stop_pid "$KMS_PID"
finish
