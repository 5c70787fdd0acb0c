# Helpers for run_*.sh and gpu_stage.sh (sourced after lib.sh; not a test).

# pick_port_pair: a port P with P and P+1 both bindable (no SO_REUSEADDR),
# drawn below the kernel's ephemeral range: the TIME_WAIT sockets that busy
# machines (KMS load tests) leave by the ten thousand all sit inside it.
pick_port_pair() {
	python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
lo = lo if lo > 12000 else 61000
for _ in range(200):
    p = random.randrange(10000, lo - 2)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p))
        b = socket.socket(); b.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    print(p)
    break
else:
    raise SystemExit(1)'
}

# start_tpm NAME: a swtpm child whose control channel is on the server port
# + 1, where the TSS "swtpm" TCTI looks for it. Both ports are checked
# bindable first (lingering TIME_WAIT sockets of busy machines make a
# neighbouring port unusable for swtpm), and a swtpm that died at start is
# replaced by another try. Sets SWTPM_PID, SWTPM_PORT, SWTPM_TCTI and
# exports SECLAUNCH_TCTI / TPM2TOOLS_TCTI.
start_tpm() {
	local name=$1 port i j
	for ((i = 0; i < 50; i++)); do
		port=$(pick_port_pair) || continue
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
