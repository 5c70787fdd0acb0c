#!/usr/bin/env bash
# seclaunchd against cheap denial of service, small scale (tests/stress/ has
# the full-scale runs): idle and slowloris connections up to and past the
# connection limit must leave the server near idle and answering once they
# go; SIGTERM during requests always stops cleanly with a closing audit
# checkpoint; only AEAD TLS suites are offered.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kms_lib.bash"
. "$(dirname "$0")/kms_dos_lib.bash"

cd "$T" || exit 1

# --- one idle connection must not pin a connection thread ----------------
# (libmicrohttpd 0.9.75's MHD_USE_TURBO with epoll + TLS spun at 100 % CPU
# per idle connection)
start_kms "$T/kms" || exit 1
hold_conns idle1.out --idle 1 --tls-idle 1 --hold 3
assert_hold "one TCP-idle and one TLS-idle connection for 3 s" idle1.out 0.5
stop_pid "$KMS_PID"

# --- the small reproduction of the wedged table ---------------------------
# max_connections 8, idle_timeout_s 2: 10 silent sockets held 5 s, then closed
echo '{"max_connections": 8, "idle_timeout_s": 2}' >small.json
start_kms "$T/kms-small" --config "$T/small.json" || exit 1
hold_conns small.out --idle 10 --hold 5
assert "10 silent sockets were connected" test "$(kv opened_idle small.out)" = 10
assert_hold "10 silent sockets past a limit of 8 and past the idle timeout" small.out 0.5
check "health again on a second connection" 0 curl -sf --max-time 2 --cacert "$KMS_CA" "$KMS_URL/v1/health"
if command -v ss >/dev/null; then
	assert "no socket left in CLOSE-WAIT" \
		sh -c "! ss -Htan state close-wait '( sport = :${KMS_URL##*:} )' | grep -q ."
else
	skip "no socket left in CLOSE-WAIT" "ss (iproute2) is not installed"
fi

# --- slowloris and TLS-idle up to and past the limit ------------------------
hold_conns slow.out --slow 4 --tls-idle 4 --idle 4 --hold 3
assert_hold "4 slowloris + 4 TLS-idle + 4 TCP-idle against a limit of 8" slow.out 0.5
stop_pid "$KMS_PID"

# --- SIGTERM during requests --------------------------------------------------
# MHD_quiesce_daemon (0.9.75, thread pool + epoll) removes the listening socket
# from each connection thread's epoll set while a busy thread may be doing the
# same: the loser aborts the process. The stop must not use it at all.
assert "seclaunchd does not call MHD_quiesce_daemon" \
	sh -c "! nm -D --undefined-only '$SLD' | grep -qw MHD_quiesce_daemon"
n=0
for ((i = 1; i <= 5; i++)); do
	sigterm_during_load "SIGTERM #$i" && n=$((n + 1))
done
assert "5 SIGTERMs during requests: $n exited 0 with kms.stop and a closing checkpoint" test "$n" -eq 5

# --- TLS: AEAD suites only ------------------------------------------------------
if ! command -v openssl >/dev/null; then
	skip "TLS suites" "openssl is not installed"
else
	start_kms "$T/kms-tls" || exit 1
	suite() { # CIPHER -> the negotiated suite, or (NONE)
		echo | timeout 10 openssl s_client -connect "${KMS_URL#https://}" -tls1_2 -cipher "$1" \
			-CAfile "$KMS_CA" 2>/dev/null | sed -n 's/.*Cipher is \(.*\)$/\1/p' | head -n1
	}
	for c in ECDHE-ECDSA-AES128-SHA ECDHE-ECDSA-AES256-SHA ECDHE-ECDSA-AES128-SHA256 \
		ECDHE-ECDSA-AES256-SHA384; do
		assert "TLS 1.2 CBC suite $c refused" test "$(suite "$c")" = "(NONE)"
	done
	for c in ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 \
		ECDHE-ECDSA-CHACHA20-POLY1305; do
		assert "TLS 1.2 AEAD suite $c accepted" test "$(suite "$c")" = "$c"
	done
	check "curl over TLS 1.2 with an AEAD suite" 0 curl -sf --tlsv1.2 --tls-max 1.2 \
		--ciphers ECDHE-ECDSA-AES256-GCM-SHA384 --cacert "$KMS_CA" "$KMS_URL/v1/health"
	check "curl over TLS 1.2 with only a CBC suite: handshake refused (35)" 35 curl -s --tlsv1.2 \
		--tls-max 1.2 --ciphers ECDHE-ECDSA-AES128-SHA --cacert "$KMS_CA" "$KMS_URL/v1/health"
	check "TLS 1.3 (AEAD by definition)" 0 curl -sf --tlsv1.3 --cacert "$KMS_CA" "$KMS_URL/v1/health"
	stop_pid "$KMS_PID"
fi
finish
