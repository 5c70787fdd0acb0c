#!/usr/bin/env bash
# jobside/python/seclaunch_data.py on its own (no seclaunch run needed): a
# host entry over a real memfd (as seclaunch hands it over), size 0, and the
# error cases: SECLAUNCH_DATA unset, not JSON, not an object, unknown kind,
# bad size, unknown dataset id, a GPU entry asked for host memory.
. "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null; then
	skip run_pyhelper "python3 not installed"
	finish
fi
export PYTHONPATH=$SL_ROOT/jobside/python PYTHONDONTWRITEBYTECODE=1

py() { # name want-rc code: runs code with the helper importable
	local name=$1 want=$2
	shift 2
	check "$name" "$want" python3 -c "$1"
}

py "host entry: memoryview over the memfd, read-only, exact bytes" 0 '
import json, os, subprocess, sys
data = b"a,b\n1,2\n" * 1000
fd = os.memfd_create("stage", os.MFD_ALLOW_SEALING)
os.write(fd, data)
import fcntl
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_WRITE)
env = dict(os.environ, SECLAUNCH_DATA=json.dumps({"ds": {"kind": "host", "size": len(data),
    "fd": fd, "path": "/proc/self/fd/%d" % fd, "method": "memfd"}, "empty": {"kind": "host",
    "size": 0, "fd": fd, "path": "", "method": "memfd"}}))
code = """
import seclaunch_data as sd
ds = sd.get("ds")
v = ds.memoryview()
assert v.readonly and v.tobytes() == %r, "content"
assert ds.text().count("1,2") == 1000
assert sd.get("empty").bytes() == b""
try:
    v[0] = 0
    raise SystemExit("writable")
except TypeError:
    pass
print(sorted(sd.datasets()))
""" % data
sys.exit(subprocess.call([sys.executable, "-c", code], env=env, pass_fds=(fd,)))
'

py "one Dataset and one mapping per process: opening a file neither re-reads SECLAUNCH_DATA nor maps again" 0 '
import json, os, subprocess, sys
data = b"".join(bytes([i]) * 100 for i in range(50))
fd = os.memfd_create("stage")
os.write(fd, data)
files = [{"path": "f%02d" % i, "offset": 100 * i, "size": 100, "mode": 420} for i in range(50)]
env = dict(os.environ, SECLAUNCH_DATA=json.dumps({"ds": {"kind": "host", "size": len(data),
    "fd": fd, "path": "", "method": "memfd", "files": files}}))
code = """
import os, seclaunch_data as sd
a = sd.get("ds")
first = a.view("f01")
os.environ["SECLAUNCH_DATA"] = "not read again"
b = sd.get("ds")
assert a is b, "a new Dataset per get()"
assert sd.open("ds", "f07").read() == bytes([7]) * 100, "bytes"
assert sd.open("ds", "f49").getbuffer().obj is first.obj, "a new mapping per file"
print("ok")
"""
r = subprocess.run([sys.executable, "-c", code], env=env, pass_fds=(fd,))
sys.exit(r.returncode)
'

py "stream connection: asked again on a new connection once the service closed the idle one" 0 '
import json, os, socket, tempfile, threading
import seclaunch_data as sd
d = tempfile.mkdtemp()
path = os.path.join(d, "data.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
srv.bind(path)
srv.listen(4)
seen = []
def service():
    # answers one request per connection, then closes it, as the data
    # service closes a connection idle past its timeout
    for _ in range(2):
        c, _a = srv.accept()
        seen.append(json.loads(c.recv(4096).decode()))
        c.send(json.dumps({"ok": True, "n": len(seen)}).encode())
        c.close()
t = threading.Thread(target=service, daemon=True)
t.start()
os.environ["SECLAUNCH_DATA_SOCKET"] = path
os.environ["SECLAUNCH_DATA_TOKEN"] = "ab" * 32
a, _ = sd._stream_ask({"op": "release_shard", "dataset": "d", "shard": 0})
import time
time.sleep(0.2)
b, _ = sd._stream_ask({"op": "release_shard", "dataset": "d", "shard": 1})
t.join(5)
assert (a["n"], b["n"]) == (1, 2), (a, b)
assert [r["shard"] for r in seen] == [0, 1] and all(r["token"] == "ab" * 32 for r in seen), seen
print("ok")
'

expect_error() { # name SECLAUNCH_DATA-value code pattern
	local name=$1 val=$2 code=$3 pat=$4
	check_err "$name" 1 "$pat" env SECLAUNCH_DATA="$val" python3 -c "import seclaunch_data as sd; $code"
}
check_err "SECLAUNCH_DATA unset: says to run under seclaunch run" 1 "seclaunch run" \
	env -u SECLAUNCH_DATA python3 -c "import seclaunch_data as sd; sd.datasets()"
expect_error "not JSON" "{nope" "sd.datasets()" "not JSON"
expect_error "not an object" "[1,2]" "sd.datasets()" "not a JSON object"
expect_error "unknown kind" '{"a":{"kind":"disk","size":1}}' "sd.datasets()" "unknown kind"
expect_error "negative size" '{"a":{"kind":"host","size":-1,"fd":3}}' "sd.datasets()" "bad size"
expect_error "unknown dataset id names the staged ones" '{"a":{"kind":"host","size":1,"fd":3}}' \
	"sd.get('b')" "'b' was not staged \\(have: a\\)"
expect_error "gpu entry asked for host memory" \
	'{"g":{"kind":"gpu","size":8,"device":0,"ipc_handle":"00"}}' "sd.get('g').memoryview()" \
	"staged on the GPU"
expect_error "host entry whose fd is not open" '{"a":{"kind":"host","size":8,"fd":99}}' \
	"sd.get('a').memoryview()" "cannot map fd 99"
finish
