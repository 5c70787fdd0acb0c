#!/usr/bin/env bash
# decrypt -o into a FIFO or device: written only when it is the caller's own
# (or /dev/null) and named directly. A FIFO or device another user planted at
# the output path, or a symlink to one, is refused before any plaintext is
# written; the check is on the opened inode, not on the path.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
printf 'SECRET-PLAINTEXT-%s\n' "$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')" >plain
check "keygen" 0 "$SL" keygen -o k
check "encrypt" 0 "$SL" encrypt -q --key-file k --dataset-id outtest plain -o a.sld

# reader FIFO: a background reader that copies what reaches FIFO into OUT
# and gives up after 60 s (so a refused decrypt leaves no reader behind;
# release below ends it at once where nothing is written). The limit is
# only a backstop: a loaded machine may take seconds to start the decrypt.
reader() { # fifo out
	timeout 60 cat "$1" >"$2" 2>/dev/null &
	echo $!
}
# stop the reader of a FIFO nobody wrote to: open the FIFO for writing once
release() { # fifo pid
	timeout 2 sh -c ': >"$1"' _ "$1" 2>/dev/null
	wait "$2" 2>/dev/null
}

# ---- the caller's own FIFO and /dev/null still work -------------------------
mkfifo own.fifo
p=$(reader own.fifo own.out)
check "own FIFO named directly: written" 0 timeout 20 "$SL" decrypt -q --key-file k a.sld -o own.fifo
wait "$p" 2>/dev/null
assert "own FIFO: the reader got the plaintext" cmp -s plain own.out
check "/dev/null: written" 0 "$SL" decrypt -q --key-file k a.sld -o /dev/null

# ---- a symlink to a FIFO (even the caller's own) -------------------------------
ln -s own.fifo link.fifo
p=$(reader own.fifo link.out)
check_err "symlink to a FIFO: refused" 2 "link.fifo: already exists" \
	timeout 20 "$SL" decrypt -q --key-file k a.sld -o link.fifo
release own.fifo "$p"
assert "symlink to a FIFO: nothing reached the reader" test ! -s link.out
check_err "symlink to a FIFO, --force: refused" 2 "link.fifo: exists and is not a regular file" \
	timeout 20 "$SL" decrypt -q --force --key-file k a.sld -o link.fifo
assert "symlink to a FIFO: the link is left as it was" test -L link.fifo

# ---- FIFOs and devices owned by another user ---------------------------------
if [ "$(id -u)" != 0 ]; then
	skip "foreign FIFO and device" "not root: cannot make a FIFO owned by another uid (CI runs these as root)"
	finish
fi
mkfifo foreign.fifo
chown 65534 foreign.fifo
chmod 666 foreign.fifo
p=$(reader foreign.fifo foreign.out)
check_err "FIFO owned by uid 65534: refused, naming the owner" 2 \
	"foreign.fifo: a FIFO owned by uid 65534, not by this user" \
	timeout 20 "$SL" decrypt -q --key-file k a.sld -o foreign.fifo
release foreign.fifo "$p"
assert "foreign FIFO: nothing reached its reader" test ! -s foreign.out
check_err "foreign FIFO with --force: refused" 2 "owned by uid 65534" \
	timeout 20 "$SL" decrypt -q --force --key-file k a.sld -o foreign.fifo
assert "foreign FIFO: still a FIFO" test -p foreign.fifo

ln -s foreign.fifo flink.fifo
p=$(reader foreign.fifo flink.out)
check_err "symlink to a foreign FIFO: refused" 2 "flink.fifo: already exists" \
	timeout 20 "$SL" decrypt -q --key-file k a.sld -o flink.fifo
release foreign.fifo "$p"
assert "symlink to a foreign FIFO: nothing reached its reader" test ! -s flink.out

if mknod zero.dev c 1 5 2>/dev/null && chown 65534 zero.dev; then
	check_err "character device owned by uid 65534: refused" 2 \
		"zero.dev: a character device owned by uid 65534" \
		"$SL" decrypt -q --key-file k a.sld -o zero.dev
	chown 0 zero.dev
	check "the same device owned by the caller: written" 0 \
		"$SL" decrypt -q --key-file k a.sld -o zero.dev
else
	skip "foreign character device" "mknod not permitted here (nodev file system or no CAP_MKNOD)"
fi
finish
