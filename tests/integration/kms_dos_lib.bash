# Helpers for the seclaunchd denial-of-service and signal tests (kms_dos.sh,
# tests/stress/*.sh). Source after lib.sh and kms_lib.bash.

KMS_TESTS=$SL_ROOT/tests/integration

# hold_conns OUT [kms_hold.py options]: holds connections against the running
# seclaunchd ($KMS_URL, $KMS_PID), then times /v1/health; key=value lines in OUT.
hold_conns() {
	local out=$1
	shift
	python3 "$KMS_TESTS/kms_hold.py" --port "${KMS_URL##*:}" --ca "$KMS_CA" --pid "$KMS_PID" \
		"$@" >"$out" 2>&1
}

# forget_pid PID: a child already reaped is not killed again at exit (its
# pid may belong to another process by then).
forget_pid() {
	local p keep=()
	for p in "${_PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	_PIDS=("${keep[@]}")
}

# kv KEY FILE: the value of KEY=value in FILE.
kv() { sed -n "s/^$1=//p" "$2" | tail -n1; }

# lt A B: A < B (decimals).
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 < b + 0) }'; }

# assert_hold NAME OUT MAX_CPU_S: the server stayed near idle while the
# connections were held (at most MAX_CPU_S of CPU) and answered /v1/health
# within a second once they went.
assert_hold() {
	local name=$1 out=$2 max=$3
	assert "$name: CPU while held $(kv cpu_hold_s "$out") s in $(kv hold_s "$out") s (max $max s)" \
		lt "$(kv cpu_hold_s "$out")" "$max"
	assert "$name: /v1/health $(kv health_status "$out") in $(kv health_s "$out") s after they went" \
		sh -c "[ '$(kv health_status "$out")' = 200 ] && awk 'BEGIN { exit !($(kv health_s "$out") < 1.0) }'"
}

# sigterm_during_load NAME [seclaunchd args]: a fresh seclaunchd under a
# challenge load with idle connections held, SIGTERM at a random moment;
# passes when it exits 0, wrote kms.stop, and its log verifies with a
# closing checkpoint. Sets SIGTERM_RC.
sigterm_during_load() {
	local name=$1 dir
	shift
	dir=$(mktemp -d "$T/term.XXXXXX")
	start_kms "$dir" "$@" || {
		assert "$name: seclaunchd starts" false
		return 1
	}
	python3 "$KMS_TESTS/kms_load.py" --port "${KMS_URL##*:}" --ca "$KMS_CA" --threads 4 \
		--seconds 20 --stop-file "$dir/stop" >"$dir/load.out" 2>&1 &
	local load=$! fds=() fd i
	for ((i = 0; i < 4; i++)); do
		exec {fd}<>"/dev/tcp/127.0.0.1/${KMS_URL##*:}" && fds+=("$fd")
	done
	sleep "0.$((RANDOM % 6 + 2))"
	kill -TERM "$KMS_PID"
	wait "$KMS_PID"
	SIGTERM_RC=$?
	forget_pid "$KMS_PID"
	touch "$dir/stop"
	for fd in "${fds[@]}"; do exec {fd}>&-; done
	wait "$load"
	if [ "$SIGTERM_RC" -eq 0 ] && grep -q '"event":"kms.stop"' "$dir/audit.log" &&
		"$SL" audit verify --pubkey "$dir/audit.pub" --require-final-checkpoint \
			"$dir/audit.log" >"$dir/verify.out" 2>&1; then
		rm -rf "$dir"
		return 0
	fi
	echo "    $name: exit $SIGTERM_RC; $(grep -ci fatal "$dir/log") fatal lines:" \
		"$(grep -i fatal "$dir/log" | head -n1)"
	sed 's/^/    verify: /' "$dir/verify.out" 2>/dev/null | head -n 3
	return 1
}
