# Shared helpers for integration tests. Source it first:
#   . "$(dirname "$0")/lib.sh"
# Every service is started here as a child on a free 127.0.0.1 port and
# stopped by its own pid at exit. Cases are counted with `check`; `finish`
# prints "# passed=P failed=F skipped=S" (read by scripts/run-tests) and
# sets the exit status.
set -u

SL_ROOT=${SL_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
SL_VECTORS=${SL_VECTORS:-$SL_ROOT/tests/vectors}
SL=$SL_BIN/seclaunch
SLD=$SL_BIN/seclaunchd
T=$(mktemp -d "${TMPDIR:-/tmp}/sltest.XXXXXX")
_PIDS=()
_passed=0 _failed=0 _skipped=0

_cleanup() {
	local p
	for p in "${_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${_PIDS[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap _cleanup EXIT

# A free TCP port on 127.0.0.1 (the kernel picks; the socket is closed again).
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_port() { # port [seconds]
	local i
	for ((i = 0; i < ${2:-10} * 20; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "port $1 did not open" >&2
	return 1
}

# free_port_pair: a port P on 127.0.0.1 such that P and P+1 are both free
# (the TSS "swtpm" TCTI expects swtpm's control channel at port + 1). Chosen
# below the kernel's ephemeral range: the swtpm TCTI reconnects for every TPM
# command, and the TIME_WAIT sockets it leaves there can block a listener.
free_port_pair() {
	python3 - <<'PY'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
lo = lo if lo > 12000 else 61000
for _ in range(200):
    p = random.randrange(10000, lo - 2)
    socks = []
    try:
        for q in (p, p + 1):
            s = socket.socket(); socks.append(s); s.bind(("127.0.0.1", q))
    except OSError:
        continue
    finally:
        for s in socks: s.close()
    print(p); break
PY
}

# start_swtpm [NAME]: a fresh swtpm (TPM 2.0) with its state in $T/NAME, the
# server on a free port P and the control channel on P+1. Sets SWTPM_PID,
# SWTPM_PORT, SWTPM_STATE and SWTPM_TCTI (and exports SECLAUNCH_TCTI and
# TPM2TOOLS_TCTI to it). A port taken meanwhile makes swtpm exit at once; then
# another pair is tried.
start_swtpm() {
	local name=${1:-tpm} port i j
	SWTPM_STATE=$T/$name
	mkdir -p "$SWTPM_STATE"
	for ((i = 0; i < 50; i++)); do
		port=$(free_port_pair)
		[ -n "$port" ] || continue
		swtpm socket --tpm2 --tpmstate dir="$SWTPM_STATE" \
			--server type=tcp,port="$port",bindaddr=127.0.0.1 \
			--ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 \
			--flags not-need-init,startup-clear >"$SWTPM_STATE/log" 2>&1 &
		SWTPM_PID=$!
		for ((j = 0; j < 200; j++)); do
			(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
			kill -0 "$SWTPM_PID" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$SWTPM_PID" 2>/dev/null; then
			_PIDS+=("$SWTPM_PID")
			SWTPM_PORT=$port
			SWTPM_TCTI="swtpm:host=127.0.0.1,port=$port"
			export SECLAUNCH_TCTI=$SWTPM_TCTI TPM2TOOLS_TCTI=$SWTPM_TCTI
			return 0
		fi
		wait "$SWTPM_PID" 2>/dev/null
	done
	echo "swtpm did not start:" >&2
	cat "$SWTPM_STATE/log" >&2
	return 1
}

# start_kms [STATEDIR] [extra seclaunchd args...]: seclaunchd --dev on a free
# port. Sets KMS_PID, KMS_STATE, KMS_URL, KMS_CA, KMS_TOKEN (the token file).
start_kms() {
	KMS_STATE=${1:-$T/kms}
	shift || true
	mkdir -p "$KMS_STATE"
	rm -f "$KMS_STATE/url"
	"$SLD" --dev --state "$KMS_STATE" --listen 127.0.0.1:0 "$@" >"$KMS_STATE/log" 2>&1 &
	KMS_PID=$!
	_PIDS+=("$KMS_PID")
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$KMS_STATE/url" ] && break
		kill -0 "$KMS_PID" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -s "$KMS_STATE/url" ]; then
		echo "seclaunchd did not start:" >&2
		cat "$KMS_STATE/log" >&2
		return 1
	fi
	KMS_URL=$(cat "$KMS_STATE/url")
	KMS_CA=$KMS_STATE/ca.pem
	KMS_TOKEN=$KMS_STATE/admin.token
}

# Stops one child started above, by pid.
stop_pid() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

# check NAME WANT_RC CMD...: runs CMD (stdout to $T/out, stderr to $T/err),
# passes when its exit status is WANT_RC.
check() {
	local name=$1 want=$2
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq "$want" ]; then
		_passed=$((_passed + 1))
		echo "ok - $name"
		return 0
	fi
	_failed=$((_failed + 1))
	echo "not ok - $name: exit $rc, want $want"
	sed 's/^/    stderr: /' "$T/err" | head -n 5
	return 1
}

# check_err NAME WANT_RC PATTERN CMD...: as check, and stderr must match the
# extended regex PATTERN (the error names what failed).
check_err() {
	local name=$1 want=$2 pat=$3
	shift 3
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -Eq -- "$pat" "$T/err"; then
		_passed=$((_passed + 1))
		echo "ok - $name"
		return 0
	fi
	_failed=$((_failed + 1))
	echo "not ok - $name: exit $rc (want $want), stderr must match /$pat/"
	sed 's/^/    stderr: /' "$T/err" | head -n 5
	return 1
}

# assert NAME CONDITION-CMD...: passes when the command succeeds.
assert() {
	local name=$1
	shift
	if "$@"; then
		_passed=$((_passed + 1))
		echo "ok - $name"
		return 0
	fi
	_failed=$((_failed + 1))
	echo "not ok - $name"
	return 1
}

skip() {
	_skipped=$((_skipped + 1))
	echo "skip - $1: $2"
}

finish() {
	echo "# passed=$_passed failed=$_failed skipped=$_skipped"
	[ "$_failed" -eq 0 ]
	exit $?
}
