# A private PostgreSQL cluster for the replica tests and benchmarks (source
# after lib.bash). start_pg makes a cluster in $T/pg (initdb, trust
# authentication, no TCP: a Unix socket in $T/pg/sock only) and runs the
# server as a child, stopped by its pid (stop_pg, or lib.bash's cleanup).
# Run as root, the server runs as "nobody" (PostgreSQL refuses root).
# Sets PG_PID, PG_URI (the store URI for seclaunchd), PSQL (a psql command).

pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
	done
	return 1
}

# "${PG_AS[@]}" CMD...: runs CMD as the cluster's owner (a plain command, so
# that a background one's $! is the server's own pid)
PG_AS=()
[ "$(id -u)" -eq 0 ] && PG_AS=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)

start_pg() {
	local bin i
	bin=$(pg_bin) || return 1
	PG_DIR=$T/pg
	PG_PORT=$(free_port)
	if [ ! -d "$PG_DIR/data" ]; then
		chmod 711 "$T"
		mkdir -p "$PG_DIR/sock"
		[ "$(id -u)" -eq 0 ] && chown -R nobody:nogroup "$PG_DIR"
		"${PG_AS[@]}" "$bin/initdb" -D "$PG_DIR/data" -U seclaunch --auth=trust -E UTF8 \
			--no-instructions >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; return 1; }
	fi
	"${PG_AS[@]}" "$bin/postgres" -D "$PG_DIR/data" -k "$PG_DIR/sock" -p "$PG_PORT" \
		-c listen_addresses= -c fsync=on -c max_connections=200 >>"$PG_DIR/log" 2>&1 &
	PG_PID=$!
	_PIDS+=("$PG_PID")
	for ((i = 0; i < 200; i++)); do
		"$bin/pg_isready" -q -h "$PG_DIR/sock" -p "$PG_PORT" && break
		kill -0 "$PG_PID" 2>/dev/null || break
		sleep 0.05
	done
	if ! "$bin/pg_isready" -q -h "$PG_DIR/sock" -p "$PG_PORT"; then
		echo "postgres did not start:" >&2
		tail -n 20 "$PG_DIR/log" >&2
		return 1
	fi
	PG_URI="postgresql:///postgres?host=$PG_DIR/sock&port=$PG_PORT&user=seclaunch"
	PSQL="$bin/psql -qAtX -h $PG_DIR/sock -p $PG_PORT -U seclaunch postgres"
}

# restart_pg: the same cluster on the same port (after stop_pg)
restart_pg() {
	local bin i
	bin=$(pg_bin) || return 1
	"${PG_AS[@]}" "$bin/postgres" -D "$PG_DIR/data" -k "$PG_DIR/sock" -p "$PG_PORT" \
		-c listen_addresses= -c fsync=on -c max_connections=200 >>"$PG_DIR/log" 2>&1 &
	PG_PID=$!
	_PIDS+=("$PG_PID")
	for ((i = 0; i < 200; i++)); do
		"$bin/pg_isready" -q -h "$PG_DIR/sock" -p "$PG_PORT" && return 0
		sleep 0.05
	done
	return 1
}

# stop_pg: a fast shutdown (SIGINT: active sessions are ended)
stop_pg() {
	kill -INT "$PG_PID" 2>/dev/null
	wait "$PG_PID" 2>/dev/null
	return 0
}

# start_replica NAME CONFIG: a seclaunchd replica in $T/NAME on the shared
# store CONFIG names; B..Z share A's master key, registry key and admin
# token (they are one service). Sets URL_NAME, CA_NAME and PID_NAME.
start_replica() {
	local n=$1
	mkdir -p -m 700 "$T/$n"
	if [ "$n" != A ]; then
		cp -p "$T/A/master.key" "$T/A/registry.key" "$T/A/admin.token" "$T/$n/"
	fi
	start_kms "$T/$n" --config "$2" || return 1
	eval "URL_$n=\$KMS_URL CA_$n=\$KMS_CA PID_$n=\$KMS_PID"
}
