# The one library of the integration tests (tests/integration/*.sh) and of
# the benchmarks that start services (scripts/bench/). Source it first:
#   . "$(dirname "$0")/lib.sh"      (a shim that sources this file)
# Every service is started here as a child on a free 127.0.0.1 port and
# stopped by its own pid at exit; $T is the test's private temp directory,
# removed at exit. Cases are counted with `check`, `check_err`, `assert` and
# `skip`; `finish` prints "# passed=P failed=F skipped=S" (read by
# scripts/run-tests) and sets the exit status. Sourcing it twice is harmless
# (lib.sh, kms_lib.bash, run_lib.bash and tpm2_lib.bash all source it).
[ -n "${_SL_TESTLIB:-}" ] && return 0
_SL_TESTLIB=1
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
	set +e # a script under set -e still stops everything and removes $T
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

# stop_kms: SIGTERM to the seclaunchd start_kms started; returns its exit
# status (0: a graceful stop).
stop_kms() {
	kill -TERM "$KMS_PID" 2>/dev/null
	wait "$KMS_PID"
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
	check_err "$name" "$want" "" "$@"
}

# check_err NAME WANT_RC PATTERN CMD...: as check, and stderr must match the
# extended regex PATTERN (the error names what failed).
check_err() {
	local name=$1 want=$2 pat=$3
	shift 3
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && { [ -z "$pat" ] || grep -Eq -- "$pat" "$T/err"; }; then
		_pass "$name"
		return 0
	fi
	_fail "$name: exit $rc (want $want)${pat:+, stderr must match /$pat/}"
	sed 's/^/    stderr: /' "$T/err" | head -n 5
	return 1
}

# assert NAME CONDITION-CMD...: passes when the command succeeds.
assert() {
	local name=$1
	shift
	if "$@"; then
		_pass "$name"
		return 0
	fi
	_fail "$name"
}

_pass() {
	_passed=$((_passed + 1))
	echo "ok - $1"
}

_fail() {
	_failed=$((_failed + 1))
	echo "not ok - $1"
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

# sl_make [VAR=value...] ARGS...: make in the repository, quiet, as a make of
# its own (not a sub-make of a `make check` that runs the test); the leading
# VAR=value words go to its environment (PKG_CONFIG_LIBDIR, BUILD...).
sl_make() {
	local envs=()
	while [[ ${1:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
		envs+=("$1")
		shift
	done
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES "${envs[@]}" \
		make -s -C "$SL_ROOT" --no-print-directory "$@"
}

# ---- bytes and claims -----------------------------------------------------

# hexat FILE OFFSET LEN: LEN bytes of FILE at OFFSET, as hex.
hexat() { xxd -s "$2" -l "$3" -p "$1" | tr -d '\n'; }

# flip IN OUT OFFSET MASK: copies IN to OUT with the byte at OFFSET xor MASK.
flip() {
	python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[int(sys.argv[3],0)]^=int(sys.argv[4],0); open(sys.argv[2],"wb").write(b)' "$@"
}

# b64 FILE: FILE's bytes as a JSON string of base64.
b64() { python3 -c 'import base64,sys; print("\"" + base64.b64encode(open(sys.argv[1],"rb").read()).decode() + "\"")' "$1"; }

# claim KEY: one claim from the KEY=value lines `seclaunch verify` left in
# $T/out. claim FILE KEY: one claim from `seclaunch verify --json` output
# saved in FILE ("<absent>" when it has none).
claim() {
	if [ $# -eq 1 ]; then
		sed -n "s/^$1=//p" "$T/out"
	else
		python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "<absent>"))' "$1" "$2"
	fi
}

# ---- TPM evidence ----------------------------------------------------------

# ev_edit IN OUT FIELD ACTION [ARG]: copies evidence IN to OUT with one edit.
#   FIELD is a base64 field (tpms_attest, signature, ak_public, ak_cert,
#   event_log) or "pcrs.BANK.N" or any top-level key.
#   ACTION: flip OFF (xor 0x01 at byte OFF; negative counts from the end),
#   set OFF HEX (overwrite bytes), truncate, append, replace VALUE (JSON
#   value), delete, copy-from FILE (take FIELD from another evidence file).
ev_edit() {
	python3 - "$@" <<'EOF'
import base64, json, sys
src, dst, field, action = sys.argv[1:5]
arg = sys.argv[5] if len(sys.argv) > 5 else None
ev = json.load(open(src))
if field.startswith("pcrs."):
    _, bank, n = field.split(".")
    v = bytearray(bytes.fromhex(ev["pcrs"][bank][n]))
    v[0] ^= 1
    ev["pcrs"][bank][n] = v.hex()
elif action == "replace":
    ev[field] = json.loads(arg)
elif action == "delete":
    del ev[field]
elif action == "copy-from":
    ev[field] = json.load(open(arg))[field]
else:
    b = bytearray(base64.b64decode(ev[field]))
    if action == "flip":
        b[int(arg)] ^= 1
    elif action == "set":
        off, hx = arg.split(":")
        v = bytes.fromhex(hx)
        off = int(off)
        b[off:off + len(v)] = v
    elif action == "truncate":
        b = b[:-1]
    elif action == "append":
        b += b"\x00"
    ev[field] = base64.b64encode(bytes(b)).decode()
json.dump(ev, open(dst, "w"), indent=1)
EOF
}

# ev_get FILE FIELD: prints a top-level string field.
ev_get() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# gce_evidence TAG BANK OUT: builds a "tpm2" evidence object from the GCE
# vTPM vector files (the AK public there is a TPMT_PUBLIC without its size).
gce_evidence() {
	python3 - "$SL_VECTORS/tpm2/gce-cos85" "$@" <<'EOF'
import base64, json, sys
d, tag, bank, out = sys.argv[1:5]
rd = lambda p: open(f"{d}/{p}", "rb").read()
b64 = lambda b: base64.b64encode(b).decode()
tpmt = rd("gce-cos-85.ak_pub.tpmt_public")
pcrs = {}
for line in open(f"{d}/{tag}.pcrs_{bank}.txt"):
    i, v = line.split()
    pcrs[i] = v
ev = {
    "kind": "tpm2", "version": 1,
    "tpms_attest": b64(rd(f"{tag}.quote_{bank}.tpms_attest")),
    "signature": b64(rd(f"{tag}.quote_{bank}.tpmt_signature")),
    "ak_public": b64(len(tpmt).to_bytes(2, "big") + tpmt),
    "ak_cert": b64(rd("gce-cos-85.ak_cert.der")),
    "event_log": b64(rd("gce-cos-85.event_log.bin")),
    "pcrs": {bank: pcrs},
}
json.dump(ev, open(out, "w"), indent=1)
EOF
}

# ---- seclaunchd ------------------------------------------------------------

# build_probe: compiles tests/integration/kms_probe.c against the library
# under test ($SL_BUILD, sanitized when it is) into $T/kms_probe (sets PROBE).
build_probe() {
	local build=${SL_BUILD:-$SL_ROOT/build} san= pkgs
	pkgs=$(sl_make print-pkgs)
	if nm "$build/libseclaunch.a" 2>/dev/null | grep -q __asan_init; then
		san="-fsanitize=address,undefined"
	fi
	PROBE=$T/kms_probe
	# shellcheck disable=SC2046,SC2086
	cc -std=c11 -D_GNU_SOURCE -O2 $san -I"$SL_ROOT/include" -I"$SL_ROOT/launcher" \
		$(pkg-config --cflags $pkgs) "$SL_ROOT/tests/integration/kms_probe.c" \
		"$build/libseclaunch.a" $(pkg-config --libs $pkgs) -lpthread -ldl -lm -o "$PROBE"
}

# wrapped_of FILE.sld: the header's wrapped DEK (base64).
wrapped_of() {
	"$SL" inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"]["wrapped_dek"])'
}

# kms_metric NAME_WITH_LABELS: the value of one metric line (0 when absent).
kms_metric() {
	local v
	v=$(curl -s --cacert "$KMS_CA" -H "Authorization: Bearer $(cat "$KMS_TOKEN")" "$KMS_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }')
	echo "${v:-0}"
}

# release EVIDENCE.json: a raw /v1/release with that one evidence item (a
# fresh challenge, random keys): HTTP status in $T/code, body in $T/body.
release() {
	curl -s --cacert "$KMS_CA" -d '{}' "$KMS_URL/v1/challenge" >"$T/ch.json"
	python3 -c 'import base64,json,os,sys
ch=json.load(open(sys.argv[1])); ev=json.load(open(sys.argv[2]))
b=lambda n: base64.b64encode(os.urandom(n)).decode()
print(json.dumps({"nonce":ch["nonce"],"eph_pub":b(32),"policy_digest":ch["policy_digest"],
  "evidence":[ev],"keys":[{"key_id":"k1","dataset_id":"ds","wrapped_dek":b(61)}]}))' \
		"$T/ch.json" "$1" >"$T/req.json"
	curl -s -o "$T/body" -w '%{http_code}' --cacert "$KMS_CA" --data-binary @"$T/req.json" \
		"$KMS_URL/v1/release" >"$T/code"
}

# Older names of start_swtpm and free_port_pair, for scripts that use them.
start_tpm() { start_swtpm "$@"; }
start_swtpm_tcti() { start_swtpm "$@"; }
swtpm_port_pair() { free_port_pair; }

# ---- object stores (remote datasets) ---------------------------------------

# make_tls_ca DIR: a throw-away CA (DIR/ca.pem) and a server certificate for
# 127.0.0.1 signed by it (DIR/srv.pem, DIR/srv.key), P-256.
make_tls_ca() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
		-out "$d/ca.pem" -days 2 -subj /CN=seclaunch-test-ca 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/srv.key" \
			-out "$d/srv.csr" -subj /CN=127.0.0.1 2>/dev/null &&
		printf 'subjectAltName=IP:127.0.0.1\n' >"$d/ext" &&
		openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
			-out "$d/srv.pem" -days 2 -extfile "$d/ext" 2>/dev/null
}

# start_nginx ROOT TLSDIR [WORKERS]: nginx (Debian's nginx-light) as a child
# serving ROOT over HTTPS (HTTP/2 offered, Range as usual) on a free
# 127.0.0.1 port with TLSDIR's srv.pem/srv.key (make_tls_ca). Sets
# NGINX_PORT, NGINX_PID, NGINX_LOG (the access log). Returns 2 with
# NGINX_SKIP set when nginx is not installed.
start_nginx() {
	local root=$1 tls=$2 workers=${3:-1} ngx i
	ngx=$(command -v nginx || echo /usr/sbin/nginx)
	if [ ! -x "$ngx" ]; then
		NGINX_SKIP="nginx is not installed (nginx-light)"
		return 2
	fi
	local d=$T/nginx.$RANDOM
	mkdir -p "$d/tmp"
	NGINX_LOG=$d/access.log
	for ((i = 0; i < 5; i++)); do
		NGINX_PORT=$(free_port)
		cat >"$d/nginx.conf" <<NGX
user root; daemon off; pid $d/nginx.pid; error_log $d/error.log; worker_processes $workers;
events {}
http { access_log $NGINX_LOG; client_body_temp_path $d/tmp; proxy_temp_path $d/tmp;
  fastcgi_temp_path $d/tmp; uwsgi_temp_path $d/tmp; scgi_temp_path $d/tmp;
  server { listen 127.0.0.1:$NGINX_PORT ssl http2; ssl_certificate $tls/srv.pem;
    ssl_certificate_key $tls/srv.key; root $root; } }
NGX
		"$ngx" -c "$d/nginx.conf" -p "$d" 2>>"$d/start.log" &
		NGINX_PID=$!
		if wait_port "$NGINX_PORT" 5 2>/dev/null && kill -0 "$NGINX_PID" 2>/dev/null; then
			_PIDS+=("$NGINX_PID")
			return 0
		fi
		kill "$NGINX_PID" 2>/dev/null
		wait "$NGINX_PID" 2>/dev/null
	done
	cat "$d/start.log" "$d/error.log" >&2 2>/dev/null
	return 1
}

# start_remote_fake ROOT LOG [ARGS...]: tests/integration/remote_fake.py (a
# misbehaving store and metadata services, see its header) as a child on a
# free 127.0.0.1 port. Sets FAKE_PORT and FAKE_PID.
start_remote_fake() {
	local root=$1 log=$2 pf i
	shift 2
	pf=$T/fake.port.$RANDOM
	python3 "$SL_ROOT/tests/integration/remote_fake.py" "$root" "$pf" "$log" "$@" \
		2>>"$T/fake.err" &
	FAKE_PID=$!
	_PIDS+=("$FAKE_PID")
	for ((i = 0; i < 200; i++)); do
		[ -s "$pf" ] && break
		kill -0 "$FAKE_PID" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -s "$pf" ]; then
		cat "$T/fake.err" >&2
		return 1
	fi
	FAKE_PORT=$(cat "$pf")
}

# s3rver_install: npm's s3rver (3.x) under $SL_ROOT/build/s3rver, installed
# once with `npm install --prefix`. Sets S3RVER_BIN; returns 2 with
# S3RVER_SKIP set when node/npm or the registry is unavailable.
s3rver_install() {
	local dir=${SL_BUILD:-$SL_ROOT/build}/s3rver
	S3RVER_BIN=$dir/node_modules/.bin/s3rver
	[ -x "$S3RVER_BIN" ] && return 0
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		S3RVER_SKIP="node/npm are not installed (nodejs, npm)"
		return 2
	fi
	mkdir -p "$dir"
	if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
		s3rver@3 >"$dir/npm.log" 2>&1 || [ ! -x "$S3RVER_BIN" ]; then
		S3RVER_SKIP="npm could not install s3rver (registry unreachable? see $dir/npm.log)"
		return 2
	fi
}

# start_s3rver DATADIR TLSDIR BUCKET: s3rver over HTTPS (TLSDIR's srv.pem and
# srv.key) on a free 127.0.0.1 port, with BUCKET created, as a child. Its
# one account is S3RVER / S3RVER. Sets S3RVER_PORT, S3RVER_PID (or returns 2
# with S3RVER_SKIP, see s3rver_install).
start_s3rver() {
	local data=$1 tls=$2 bucket=$3 i
	s3rver_install || return $?
	mkdir -p "$data"
	for ((i = 0; i < 5; i++)); do
		S3RVER_PORT=$(free_port)
		"$S3RVER_BIN" -d "$data" -a 127.0.0.1 -p "$S3RVER_PORT" -s --no-vhost-buckets \
			--key "$tls/srv.key" --cert "$tls/srv.pem" --configure-bucket "$bucket" \
			>>"$data.log" 2>&1 &
		S3RVER_PID=$!
		if wait_port "$S3RVER_PORT" 10 2>/dev/null && kill -0 "$S3RVER_PID" 2>/dev/null; then
			_PIDS+=("$S3RVER_PID")
			return 0
		fi
		kill "$S3RVER_PID" 2>/dev/null
		wait "$S3RVER_PID" 2>/dev/null
	done
	cat "$data.log" >&2
	return 1
}

# s3_put CA URL FILE: an object PUT, SigV4-signed by curl as S3RVER.
s3_put() {
	curl -sf --cacert "$1" --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$3" "$2" -o /dev/null
}
