# Shared by the benchmarks in scripts/bench/ (sourced right after
# `set -uo pipefail`; run-bench runs only *.sh, so not a benchmark itself):
# the paths (ROOT, BIN, and SL_ROOT / SL_BIN for the integration tests'
# library, sourced here: swtpm and seclaunchd on free loopback ports, a
# private temp dir $T (also $W), all stopped and removed at exit), and the
# measuring helpers.
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SL_BIN=${SL_BIN:-$SL_ROOT/bin}
ROOT=$SL_ROOT BIN=$SL_BIN
. "$ROOT/tests/integration/lib.sh"
W=$T
BENCH=$(basename "$0" .sh)

# The benchmark's name, the message on stderr, exit 1.
die() {
	echo "$BENCH: $*" >&2
	exit 1
}

# Dies naming the first TOOL that is not installed.
need_tools() { # TOOL...
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null || die "$t not installed"
	done
}

# Median wall seconds of N runs of a command (stdout discarded); a run that
# fails ends it, naming the command with the end of its stderr.
median_of() { # N cmd...
	local n=$1
	shift
	python3 - "$n" "$@" <<'EOF2'
import statistics, subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
ts = []
for _ in range(n):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ts.append(time.perf_counter() - t0)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s: %s" % (r.returncode, " ".join(cmd), r.stderr.decode()[-400:]))
print("%.4f" % statistics.median(ts))
EOF2
}

# A / B with DECIMALS digits (default 2).
ratio() { # A B [DECIMALS]
	python3 -c "import sys; print('%.*f' % (int(sys.argv[3]), float(sys.argv[1]) / float(sys.argv[2])))" \
		"$1" "$2" "${3:-2}"
}

# Key `bench` of the seclaunchd at URL wraps a DEK for each of 64 datasets
# (ds-0 .. ds-63); prints "bench DATASET WRAPPED_DEK SHA256(DEK)" lines, the
# key file of the release probe (tests/integration/kms_probe.c).
bench_wrap_keys() { # CA URL ADMIN_TOKEN_FILE
	python3 - "$1" "$2" "$(cat "$3")" <<'EOP'
import base64, hashlib, http.client, json, os, ssl, sys, urllib.parse
ca, url, token = sys.argv[1:4]
u = urllib.parse.urlparse(url)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
for i in range(64):
    dek = os.urandom(32)
    c.request("POST", "/v1/keys/bench/wrap", body=json.dumps({"dataset_id": f"ds-{i}", "dek": base64.b64encode(dek).decode()}), headers={"Authorization": "Bearer " + token})
    print("bench", f"ds-{i}", json.loads(c.getresponse().read())["wrapped_dek"], hashlib.sha256(dek).hexdigest())
EOP
}
