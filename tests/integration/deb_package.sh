#!/usr/bin/env bash
# The Debian package: `make deb` builds seclaunch_VERSION_ARCH.deb (lintian:
# no errors); unpacked with dpkg-deb -x into a throwaway root, its programs
# run, python3 imports seclaunch_data from its dist-packages, the systemd unit
# verifies and its sandbox scores, every man page renders without a groff
# warning and names what it must (every command; every configuration key of
# kms/daemon/config.c). Then the unpacked seclaunchd runs from the shipped example
# configuration (paths moved under the test folder) through enrollment, key
# creation and a release, under strace: every system call, socket family,
# memory mapping, device, /proc and write it makes is one the unit's sandbox
# allows (SystemCallFilter=, RestrictAddressFamilies=, MemoryDenyWriteExecute=,
# PrivateDevices=, ProcSubset=pid, ProtectSystem=strict).
# The package is built from the normal build (bin/, build/), whatever
# BUILD/BIN the suite runs with: a package never holds sanitizer builds.
. "$(dirname "$0")/lib.sh"

for tool in dh help2man fakeroot dpkg-deb; do
	if ! command -v $tool >/dev/null; then
		skip deb_package "$tool is not installed (scripts/install-deps installs it)"
		finish
	fi
done

# --- build -------------------------------------------------------------------
start=$(date +%s)
env -u BUILD -u BIN -u CFLAGS -u LDFLAGS -u SAN make -C "$SL_ROOT" --no-print-directory -j2 \
	BUILD=build BIN=bin deb DEB_OUT="$T/deb" >"$T/build.log" 2>&1
rc=$?
VERSION=$(sed -n 's/^#define SL_VERSION "\(.*\)"/\1/p' "$SL_ROOT/include/seclaunch/util.h")
DEB=$T/deb/seclaunch_${VERSION}_$(dpkg-architecture -qDEB_HOST_ARCH).deb
if [ $rc -eq 0 ] && [ -f "$DEB" ]; then
	_passed=$((_passed + 1))
	echo "ok - make deb builds $(basename "$DEB") ($(stat -c %s "$DEB") bytes, $(($(date +%s) - start)) s)"
else
	_failed=$((_failed + 1))
	echo "not ok - make deb (exit $rc)"
	tail -n 30 "$T/build.log" | sed 's/^/    /'
	finish
fi
if command -v lintian >/dev/null; then
	assert "lintian: no errors" grep -q "^deb: lintian: no errors" "$T/build.log"
	grep -E "^[WEI]: " "$T/build.log" | sed 's/^/    lintian /'
else
	skip "lintian" "lintian is not installed (scripts/install-deps installs it)"
fi

# --- contents ------------------------------------------------------------------
R=$T/root
check "dpkg-deb -x into a throwaway root" 0 dpkg-deb -x "$DEB" "$R"
for f in usr/bin/seclaunch usr/bin/seclaunchd lib/systemd/system/seclaunchd.service \
	etc/seclaunchd/seclaunchd.conf usr/lib/sysusers.d/seclaunch.conf \
	usr/lib/python3/dist-packages/seclaunch_data.py usr/share/man/man1/seclaunch.1.gz \
	usr/share/man/man5/seclaunchd.conf.5.gz usr/share/man/man8/seclaunchd.8.gz \
	usr/share/bash-completion/completions/seclaunch usr/share/bash-completion/completions/seclaunchd \
	usr/lib/seclaunch/libseclaunch_data.so usr/include/seclaunch_data.h; do
	assert "the package holds /$f" test -e "$R/$f"
done
# the documents the man pages and --help point to as docs/NAME.md
named=$(for p in man1/seclaunch.1.gz man5/seclaunchd.conf.5.gz man8/seclaunchd.8.gz; do
	zcat "$R/usr/share/man/$p"
done | sed 's/\\-/-/g' | grep -oE 'docs/[a-z0-9-]+\.md' | sed 's|^docs/||' | sort -u)
assert "the man pages name docs/*.md ($(echo $named | wc -w) documents)" test -n "$named"
missing=
for d in $named $(cd "$SL_ROOT/docs" && ls *.md) README.md SECURITY.md; do
	src=$SL_ROOT/docs/$d
	[ -f "$src" ] || src=$SL_ROOT/$d
	cmp -s "$src" "$R/usr/share/doc/seclaunch/$d" || missing="$missing $d"
done
assert "the package holds every docs/*.md (and each one a man page names) in /usr/share/doc/seclaunch, uncompressed${missing:+ (missing or different:$missing)}" \
	test -z "$missing"
MA=$(${CC:-cc} -print-multiarch 2>/dev/null)
assert "the package holds the Slurm SPANK plugin in Slurm's plugin folder" \
	test -e "$R/usr/lib/$MA/slurm-wlm/spank_seclaunch.so"
assert "... and a plugstack.conf example" \
	test -e "$R/usr/share/doc/seclaunch/examples/plugstack.conf.d/seclaunch.conf"
assert "the system user is _seclaunchd (sysusers.d)" grep -q '^u _seclaunchd ' "$R/usr/lib/sysusers.d/seclaunch.conf"
dpkg-deb -f "$DEB" Depends >"$T/depends"
assert "it depends on the shared libraries it links (shlibs)" grep -q libsodium "$T/depends"
assert "/etc/seclaunchd/seclaunchd.conf is a conffile" \
	sh -c "dpkg-deb --ctrl-tarfile '$DEB' | tar -xO ./conffiles | grep -qx /etc/seclaunchd/seclaunchd.conf"

# --- the unpacked programs -------------------------------------------------------
check "seclaunch version" 0 "$R/usr/bin/seclaunch" version
assert "it prints seclaunch $VERSION" grep -qx "seclaunch $VERSION" "$T/out"
check "seclaunch --help" 0 "$R/usr/bin/seclaunch" --help
assert "--help lists the commands" grep -q "^Commands:" "$T/out"
check "seclaunchd --help" 0 "$R/usr/bin/seclaunchd" --help
check "seclaunchd --version" 0 "$R/usr/bin/seclaunchd" --version
check "python3 imports seclaunch_data from the package's dist-packages" 0 \
	env PYTHONPATH="$R/usr/lib/python3/dist-packages" python3 -c \
	'import seclaunch_data, sys; print(seclaunch_data.__file__); sys.exit(not hasattr(seclaunch_data, "datasets"))'
assert "... the module file is the unpacked one" grep -q "^$R/usr/lib/python3/dist-packages/seclaunch_data.py$" "$T/out"

# --- the systemd unit ---------------------------------------------------------------
UNIT=$R/lib/systemd/system/seclaunchd.service
if command -v systemd-analyze >/dev/null; then
	# the unit as shipped, but for ExecStart's program, taken from the unpacked
	# root; MANPATH lets its Documentation= man pages be found there too
	mkdir -p "$T/unit"
	sed "s|^ExecStart=/usr/bin/seclaunchd |ExecStart=$R/usr/bin/seclaunchd |" "$UNIT" >"$T/unit/seclaunchd.service"
	check "systemd-analyze verify seclaunchd.service" 0 \
		env MANPATH="$R/usr/share/man" systemd-analyze verify "$T/unit/seclaunchd.service"
	assert "... with nothing to say" test ! -s "$T/err"
	sed 's/^/    /' "$T/err" | head -n 5
	systemd-analyze security --offline=yes --root="$R" "$UNIT" >"$T/sec" 2>&1
	score=$(sed -n 's/.*Overall exposure level for seclaunchd.service: \([0-9.]*\).*/\1/p' "$T/sec")
	echo "    systemd-analyze security: exposure $score"
	assert "systemd-analyze security: exposure ${score:-?} is at most 2.0 (of 10)" \
		awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'
else
	skip "systemd-analyze verify" "systemd-analyze is not installed"
fi
for k in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes PrivateDevices=yes \
	MemoryDenyWriteExecute=yes 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' \
	SystemCallFilter=@system-service CapabilityBoundingSet= LockPersonality=yes \
	User=_seclaunchd StateDirectory=seclaunchd 'ExecReload=/bin/kill -HUP $MAINPID' \
	Restart=on-failure 'ExecStart=/usr/bin/seclaunchd --config /etc/seclaunchd/seclaunchd.conf'; do
	assert "the unit sets $k" grep -qxF "$k" "$UNIT"
done

# --- man pages ---------------------------------------------------------------------
for page in man1/seclaunch.1.gz man5/seclaunchd.conf.5.gz man8/seclaunchd.8.gz; do
	p=$(basename "$page" .gz)
	check "man -l $p renders" 0 env MANWIDTH=80 man --warnings -l "$R/usr/share/man/$page"
	assert "... without a groff warning" test ! -s "$T/err"
	sed 's/^/    /' "$T/err" | head -n 3
	cp "$T/out" "$T/$p.txt"
done
missing=
for c in $("$R/usr/bin/seclaunch" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
	grep -q "^   seclaunch $c\$" "$T/seclaunch.1.txt" || missing="$missing $c"
done
assert "seclaunch(1) has a section for every command${missing:+ (missing:$missing)}" test -z "$missing"
assert "seclaunch(1) carries each command's options (encrypt --dataset-id)" grep -q -- "--dataset-id D" "$T/seclaunch.1.txt"
# the settings table (kmsd_settings[]): STR/NUM rows and the kek_backend
# row; state_dir is an option, never a file key
keys=$(sed -n '/KMSD_SET_OPTION/d; s/^[[:space:]]*\(STR\|NUM\)("\([a-z0-9_]*\)",.*/\2/p; s/^[[:space:]]*{"\([a-z0-9_]*\)", KMSD_SET_.*/\1/p' \
	"$SL_ROOT/kms/daemon/config.c" | sort -u)
missing='' n=0
for k in $keys; do
	n=$((n + 1))
	grep -q "^       $k: " "$T/seclaunchd.conf.5.txt" || missing="$missing $k"
done
assert "kms/daemon/config.c's keys were read ($n)" test "$n" -ge 25
assert "seclaunchd.conf(5) documents every key${missing:+ (missing:$missing)}" test -z "$missing"
assert "seclaunchd(8)'s synopsis has both usage forms (--config, --dev)" test \
	"$(sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' "$T/seclaunchd.8.txt" | grep -cE '^       seclaunchd +--(config|dev) ')" -eq 2
assert "seclaunchd(8) documents the PKCS#11 device override" grep -q "PrivateDevices=no" "$T/seclaunchd.8.txt"

# --- bash completion from the package, through bash-completion's loader -------------
if [ -f /usr/share/bash-completion/bash_completion ]; then
	out=$(XDG_DATA_DIRS="$R/usr/share" bash --norc --noprofile -c '
		. /usr/share/bash-completion/bash_completion
		_completion_loader seclaunchd
		complete -p seclaunch seclaunchd >/dev/null || exit 1
		COMP_WORDS=(seclaunch enc); COMP_CWORD=1; _seclaunch; echo "${COMPREPLY[*]}"' 2>&1)
	assert "bash-completion loads the packaged completion: seclaunch enc<TAB> -> encrypt (got '$out')" \
		test "$out" = encrypt
else
	skip "bash-completion loader" "bash-completion is not installed"
fi

# --- the shipped configuration, run by the unpacked seclaunchd, under strace --------
if ! command -v strace >/dev/null || ! strace -f -qq -o /dev/null true 2>/dev/null; then
	skip "the sandbox check" "strace is missing or cannot trace here"
	finish
fi
. "$(dirname "$0")/tpm2_lib.bash"
. "$(dirname "$0")/kms_lib.bash"
ETC=$T/etc/seclaunchd STATE=$T/var/lib/seclaunchd LOGS=$T/var/log/seclaunchd RUN=$T/run/seclaunchd
mkdir -p "$ETC/ek-ca" "$STATE" "$LOGS" "$RUN"
chmod 700 "$STATE"
PORT=$(free_port)
sed -e "s|/etc/seclaunchd/|$ETC/|; s|/var/lib/seclaunchd/|$STATE/|; s|/var/log/seclaunchd/|$LOGS/|" \
	-e "s|/run/seclaunchd/|$RUN/|; s|\"127.0.0.1:8443\"|\"127.0.0.1:$PORT\"|" \
	-e 's|^# "url_file"|"url_file"|; s|^# "accept_ek_without_cert": false|"accept_ek_without_cert": true|' \
	"$R/etc/seclaunchd/seclaunchd.conf" >"$ETC/seclaunchd.conf"
# what the package's postinst makes, then what the operator supplies
(
	umask 077
	head -c 32 /dev/urandom >"$ETC/registry.key"
	head -c 32 /dev/urandom >"$ETC/master.key"
	od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$ETC/admin.token"
	"$SL" audit keygen --secret-key "$ETC/audit.key" --public-key "$ETC/audit.pub" >/dev/null
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=seclaunchd-test -addext subjectAltName=IP:127.0.0.1 \
		-addext basicConstraints=critical,CA:TRUE -keyout "$ETC/tls.key" -out "$ETC/tls.pem" 2>/dev/null
	cat >"$ETC/policy.json" <<'EOP'
{"version": 1,
 "allow_unverified_region": true,
 "datasets": [{"id": "ds-*", "allowed_regions": ["aws:eu-west-1"], "tee_kinds": ["tpm2"]}],
 "keys": {"k1": ["ds-*"]}}
EOP
	"$SL" policy keygen --secret-key "$T/pol.key" --public-key "$ETC/compliance.pub" -W >/dev/null
	"$SL" policy sign --secret-key "$T/pol.key" --policy "$ETC/policy.json" >/dev/null
)
chmod 644 "$ETC/audit.pub" "$ETC/tls.pem" "$ETC/compliance.pub"
build_probe || { echo "cannot build kms_probe" >&2; exit 1; }
start_swtpm_tcti tpm || exit 1

(cd "$STATE" && exec strace -f -qq -y -o "$T/strace" "$R/usr/bin/seclaunchd" --config "$ETC/seclaunchd.conf") \
	>"$T/kmsd.log" 2>&1 &
KPID=$!
_PIDS+=("$KPID")
for ((i = 0; i < 300; i++)); do
	[ -s "$RUN/url" ] && break
	kill -0 "$KPID" 2>/dev/null || break
	sleep 0.05
done
if ! assert "the unpacked seclaunchd starts from the shipped example configuration" test -s "$RUN/url"; then
	sed 's/^/    /' "$T/kmsd.log" | head -n 10
	finish
fi
URL=$(cat "$RUN/url") CA=$ETC/tls.pem
export SECLAUNCH_KMS_CA=$CA
check "health over TLS" 0 curl -sf --cacert "$CA" "$URL/v1/health"
check "enroll the TPM's AK" 0 "$SL" enroll --kms "$URL" -q
check "key create" 0 "$SL" key create --kms "$URL" --admin-token-file "$ETC/admin.token" --id k1 -q
head -c 100000 /dev/urandom >"$T/plain"
check "encrypt --kms" 0 "$SL" encrypt --kms "$URL" --key-id k1 --admin-token-file "$ETC/admin.token" \
	--dataset-id ds-1 -q "$T/plain" -o "$T/a.sld"
KMS_PROBE_IDENTITY='[{"kind": "unsigned", "region": "aws:eu-west-1"}]' \
	check "an attested release the policy allows" 0 "$PROBE" "$URL" "$CA" release k1 ds-1 "$(wrapped_of "$T/a.sld")"
check_err "a release the policy denies" 4 "policy_denied" "$PROBE" "$URL" "$CA" release k1 ds-1 "$(wrapped_of "$T/a.sld")"
check_err "metrics without the admin token: 401" 22 "" curl -sf --cacert "$CA" "$URL/metrics"
check "metrics with the admin token" 0 curl -sf --cacert "$CA" -H "Authorization: Bearer $(cat "$ETC/admin.token")" "$URL/metrics"
# strace -o FILE blocks SIGTERM itself: signals go to its tracee, seclaunchd
DPID=$(cat "/proc/$KPID/task/$KPID/children")
if "$R/usr/bin/seclaunchd" --help | grep -q "SIGHUP reloads"; then
	kill -HUP "$DPID" # what the unit's ExecReload= sends
	sleep 0.5
	assert "SIGHUP (systemctl reload) leaves it running" kill -0 "$DPID"
	check "it answers after the reload" 0 curl -sf --cacert "$CA" "$URL/v1/health"
	grep -q '"event":"kms.reload"' "$LOGS/audit.log" 2>/dev/null && echo "    (the reload is audited)"
else
	skip "reload under the sandbox" "this seclaunchd does not reload on SIGHUP"
fi
kill -TERM "$DPID"
wait "$KPID"
assert "SIGTERM stops it with status 0" test $? -eq 0
check "its audit log verifies, closing checkpoint included" 0 \
	"$SL" audit verify --pubkey "$ETC/audit.pub" --require-final-checkpoint "$LOGS/audit.log"

# The sandbox, from what strace saw. The allowed system calls are the unit's
# SystemCallFilter= lines, expanded by systemd-analyze syscall-filter.
python3 - "$UNIT" "$T/strace" "$T" "$STATE" "$LOGS" "$RUN" >"$T/sandbox" 2>&1 <<'PY'
import os, re, subprocess, sys
unit, trace, tdir, state, logs, run = sys.argv[1:7]

def expand(name, seen=None):
    seen = seen if seen is not None else set()
    if not name.startswith("@"):
        return {name}
    if name in seen:
        return set()
    seen.add(name)
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True, text=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        w = line.strip()
        if w and not w.startswith("#"):
            calls |= expand(w, seen)
    return calls

allowed = set()
for line in open(unit):
    m = re.match(r"^SystemCallFilter=(~?)(.*)$", line.strip())
    if not m:
        continue
    names = set()
    for w in m.group(2).split():
        names |= expand(w)
    allowed = allowed - names if m.group(1) else allowed | names
families = set(re.search(r"^RestrictAddressFamilies=(.*)$", open(unit).read(), re.M).group(1).split())
devs = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
        "/dev/ptmx", "/dev/log", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
writable = (state, logs, run, "/tmp/", "/var/tmp/")
bad, used = {}, set()
first_exec = True
for line in open(trace):
    m = re.match(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)(\(| resumed>)(.*)$", line)
    if not m:
        continue
    call, rest = m.group(1), m.group(3)
    if call == "execve" and first_exec:
        first_exec = False          # strace starting the program
        continue
    used.add(call)
    if call not in allowed:
        bad.setdefault("call " + call, "system call %s is outside SystemCallFilter=: %s" % (call, line.strip()[:160]))
    # a call strace shows split across threads ("<... socket resumed>) = 13")
    # carries its arguments on its "<unfinished ...>" line, checked there
    if call == "socket" and m.group(2) == "(":
        fam = rest.split(",")[0].strip()
        if fam not in families:
            bad.setdefault(fam, "socket family %s is outside RestrictAddressFamilies=" % fam)
    if call in ("mmap", "mprotect", "pkey_mprotect") and "PROT_EXEC" in rest and \
            (call != "mmap" or "PROT_WRITE" in rest):
        bad.setdefault("mdwe", "MemoryDenyWriteExecute= refuses: %s" % line.strip()[:160])
    if call in ("openat", "open", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat",
                "renameat2", "linkat", "symlinkat", "truncate", "chmod", "fchmodat"):
        p = re.match(r'(?:AT_FDCWD|\d+<([^>]*)>)?,?\s*"([^"]*)"', rest)
        if not p:
            continue
        path = p.group(2) if p.group(2).startswith("/") else os.path.join(p.group(1) or state, p.group(2))
        if path.startswith("/dev/") and path not in devs and not path.startswith(("/dev/pts/", "/dev/shm/")):
            bad.setdefault(path, "PrivateDevices= hides %s" % path)
        if path.startswith("/proc/") and not re.match(r"^/proc/(self|thread-self|\d+)(/|$)", path):
            bad.setdefault(path, "ProcSubset=pid hides %s" % path)
        if path.startswith(("/home/", "/root/")):
            bad.setdefault(path, "ProtectHome= hides %s" % path)
        writes = call != "openat" and call != "open" or re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TMPFILE", rest)
        if writes and not path.startswith(writable) and path not in devs:
            bad.setdefault(path, "ProtectSystem=strict refuses writing %s: %s" % (path, line.strip()[:120]))
print("system calls used: %d (%d allowed by the unit)" % (len(used), len(allowed)))
for b in sorted(bad.values()):
    print("SANDBOX: " + b)
sys.exit(1 if bad or len(used) < 20 else 0)
PY
assert "every system call, socket, mapping, device and write is one the unit allows" test $? -eq 0
sed 's/^/    /' "$T/sandbox" | head -n 20
[ -n "${SL_KEEP_STRACE:-}" ] && cp "$T/strace" "$SL_KEEP_STRACE"
finish
