# Helpers for run_*.sh and gpu_stage.sh (sourced after lib.sh; not a test).

# start_tpm NAME: a swtpm child whose control channel is on the server port
# + 1, where the TSS "swtpm" TCTI looks for it. Both ports are checked
# bindable first (lingering TIME_WAIT sockets of busy machines make a
# neighbouring port unusable for swtpm), and a swtpm that died at start is
# replaced by another try. Sets SWTPM_PID, SWTPM_PORT, SWTPM_TCTI and
# exports SECLAUNCH_TCTI / TPM2TOOLS_TCTI.
start_tpm() {
	local name=$1 port i j
	for ((i = 0; i < 50; i++)); do
		port=$(python3 -c '
import socket
a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
b = socket.socket(); b.bind(("127.0.0.1", p + 1))
print(p)' 2>/dev/null) || continue
		SWTPM_STATE=$T/$name.$i
		mkdir -p "$SWTPM_STATE"
		swtpm socket --tpm2 --tpmstate dir="$SWTPM_STATE" \
			--server type=tcp,port="$port",bindaddr=127.0.0.1 \
			--ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 \
			--flags not-need-init,startup-clear >"$SWTPM_STATE/log" 2>&1 &
		SWTPM_PID=$!
		for ((j = 0; j < 200; j++)); do
			kill -0 "$SWTPM_PID" 2>/dev/null || break
			(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
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
	echo "swtpm did not start (50 tries)" >&2
	return 1
}
