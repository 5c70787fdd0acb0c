# A single-host Slurm cluster for the tests and the benchmark, started as
# children: munged with a generated key, slurmctld and slurmd with a
# generated slurm.conf (one node, two CPUs, 127.0.0.1, free ports, state
# under $T/slurm), root as SlurmUser, stopped by pid at exit (lib.bash).
# Process tracking by parent pid and no task plugin, so no cgroup setup is
# needed. start_slurm PLUGSTACK_LINE... sets SLURM_CONF (exported),
# SLURM_NODE and SLURM_DIR; slurm_missing says which binary is absent.

slurm_missing() {
	local b
	for b in munged slurmctld slurmd srun scancel sinfo; do
		command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] || {
			echo "$b"
			return 0
		}
	done
	[ "$(id -u)" = 0 ] || {
		echo "root (slurmd)"
		return 0
	}
	return 1
}

# start_slurm [PLUGSTACK LINE]: the cluster, with PLUGSTACK LINE in its
# plugstack.conf (rewrite $SLURM_DIR/plugstack.conf to change it: every
# step reads it anew).
start_slurm() {
	SLURM_DIR=$T/slurm
	SLURM_NODE=sln1
	local m=$SLURM_DIR/munge
	mkdir -p "$m" "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/log"
	chmod 0700 "$m"
	head -c 1024 /dev/urandom >"$m/munge.key"
	chmod 0400 "$m/munge.key"
	PATH=$PATH:/usr/sbin munged -F -f --key-file="$m/munge.key" --socket="$m/munge.socket" \
		--pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/seed" \
		>"$m/out" 2>&1 &
	MUNGE_PID=$!
	_PIDS+=("$MUNGE_PID")
	local i
	for ((i = 0; i < 100; i++)); do
		[ -S "$m/munge.socket" ] && break
		sleep 0.05
	done
	[ -S "$m/munge.socket" ] || {
		echo "munged did not start:" >&2
		cat "$m/out" "$m/munged.log" >&2
		return 1
	}
	local cport dport
	cport=$(free_port)
	dport=$(free_port)
	printf '%s\n' "${1:-}" >"$SLURM_DIR/plugstack.conf"
	cat >"$SLURM_DIR/slurm.conf" <<EOF2
ClusterName=sltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/munge.socket
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
PlugStackConfig=$SLURM_DIR/plugstack.conf
KillWait=5
NodeName=$SLURM_NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=t Nodes=$SLURM_NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF2
	export SLURM_CONF=$SLURM_DIR/slurm.conf
	PATH=$PATH:/usr/sbin slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_DIR/log/ctld.out" 2>&1 &
	SLURMCTLD_PID=$!
	_PIDS+=("$SLURMCTLD_PID")
	PATH=$PATH:/usr/sbin slurmd -D -N "$SLURM_NODE" -f "$SLURM_CONF" >"$SLURM_DIR/log/d.out" 2>&1 &
	SLURMD_PID=$!
	_PIDS+=("$SLURMD_PID")
	for ((i = 0; i < 300; i++)); do
		sinfo -h -N -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)' && return 0
		if ! kill -0 "$SLURMCTLD_PID" 2>/dev/null || ! kill -0 "$SLURMD_PID" 2>/dev/null; then
			break
		fi
		sleep 0.1
	done
	echo "slurm did not come up:" >&2
	tail -n 15 "$SLURM_DIR/log/ctld.out" "$SLURM_DIR/log/d.out" "$SLURM_DIR/log/slurmctld.log" \
		"$SLURM_DIR/log/slurmd.log" >&2 2>/dev/null
	return 1
}
