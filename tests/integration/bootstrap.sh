#!/usr/bin/env bash
# The build's bootstrap, without uninstalling anything: a pkg-config module
# hidden from pkg-config (PKG_CONFIG_LIBDIR holding every other .pc file)
# stops make before anything compiles, with one line naming the module and
# the Debian package that provides it, for plain `make`, for the entry
# targets after deps, and for every module the build declares; reading the
# Makefile asks pkg-config nothing; and under -j nothing compiles before
# deps has ended (a deps that takes a second, a compiler that notes any call
# made before it ended).
. "$(dirname "$0")/lib.sh"

# Every make here: a build of its own in $T, and pkg-config reading only
# $T/pc, a directory of links to every .pc file it would find (hide_pc and
# show_pc move one aside and back).
MK=(sl_make PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$T/pc" BUILD="$T/b" BIN="$T/bin")

if ! command -v pkg-config >/dev/null || ! command -v make >/dev/null; then
	skip bootstrap "make or pkg-config not installed"
	finish
fi

# The first .pc file of a name wins, as in pkg-config's search order.
mkdir -p "$T/pc" "$T/pc-hidden"
for dir in $(echo "${PKG_CONFIG_PATH:-}:$(pkg-config --variable pc_path pkg-config)" | tr : ' '); do
	[ -d "$dir" ] || continue
	for f in "$dir"/*.pc; do
		[ -e "$f" ] && [ ! -e "$T/pc/$(basename "$f")" ] && ln -s "$f" "$T/pc/"
	done
done
hide_pc() { mv "$T/pc/$1.pc" "$T/pc-hidden/" 2>/dev/null; }
show_pc() { mv "$T/pc-hidden/$1.pc" "$T/pc/" 2>/dev/null; }

# one_line NAME MODULE PACKAGE: $T/err is exactly one line, make's stop, and
# names both.
one_line() {
	local lines
	lines=$(wc -l <"$T/err")
	assert "$1: one line (got $lines)" test "$lines" -eq 1
	assert "$1: names module $2 and package $3" grep -Eq "\*\*\* missing .*\b$2\b.*\(Debian package.* $3\b" "$T/err"
	assert "$1: nothing compiled" test ! -e "$T/b"
}

pkgs="$(sl_make print-pkgs) $(sl_make print-test-pkgs)"
debs=$("$SL_ROOT/scripts/install-deps" --list)
assert "the build declares p11-kit-1" grep -qw p11-kit-1 <<<"$pkgs"
assert "install-deps installs libp11-kit-dev" grep -qx libp11-kit-dev <<<"$debs"
check "reading the Makefile asks pkg-config nothing" 0 \
	"${MK[@]}" PKG_CONFIG="$T/no-such-pkg-config" INSTALL_DEPS=true deps

# Every module: plain make (unit tests for cmocka) stops with one line.
for m in $pkgs; do
	goal=all
	[ "$m" = cmocka ] && goal=unit-build
	deb=$("${MK[@]}" print-deb-"$m")
	assert "$m: a Debian package is known ($deb)" test -n "$deb" -a "$deb" != unknown
	assert "$m: install-deps installs $deb" grep -qx -- "$deb" <<<"$debs"
	rm -rf "$T/b"
	hide_pc "$m"
	check "$m hidden: make $goal stops" 2 "${MK[@]}" "$goal"
	show_pc "$m"
	one_line "$m hidden, make $goal" "$m" "$deb"
done

# The entry targets: deps runs first, then the same one line.
for goal in demo check bench asan fuzz; do
	rm -rf "$T/deps-ran" "$T/b"
	hide_pc jansson
	check "jansson hidden: make $goal stops after deps" 2 "${MK[@]}" -j2 \
		INSTALL_DEPS="touch $T/deps-ran" "$goal"
	assert "make $goal: deps ran first" test -e "$T/deps-ran"
	show_pc jansson
	one_line "jansson hidden, make $goal" jansson libjansson-dev
done

rm -rf "$T/b"
check "no pkg-config: make stops" 2 "${MK[@]}" PKG_CONFIG="$T/no-such-pkg-config" all
one_line "no pkg-config" pkg-config pkg-config

# -j: a deps that takes a second; a compiler, linker and archiver that note
# any call made before deps ended and only touch their output.
cat >"$T/slow-deps" <<'SH'
#!/bin/sh
sleep 1
: >"$SLB_DONE"
SH
cat >"$T/fake-cc" <<'SH'
#!/bin/sh
[ -e "$SLB_DONE" ] || echo "$*" >>"$SLB_EARLY"
echo x >>"$SLB_CALLS"
out= prev=
for a in "$@"; do
	[ "$prev" = -o ] && out=$a
	prev=$a
done
[ -z "$out" ] || : >"$out"
SH
chmod +x "$T/slow-deps" "$T/fake-cc"
export SLB_DONE=$T/deps-done SLB_EARLY=$T/early SLB_CALLS=$T/calls
for goal in build build-tests; do
	rm -rf "$T/b" "$T/bin" "$SLB_DONE" "$SLB_EARLY" "$SLB_CALLS"
	check "make -j4 $goal with a slow deps" 0 "${MK[@]}" -j4 INSTALL_DEPS="$T/slow-deps" \
		CC="$T/fake-cc" AR="$T/fake-cc" "$goal"
	n=$(cat "$SLB_CALLS" 2>/dev/null | wc -l)
	assert "make -j4 $goal: the build ran ($n compiler calls)" test "$n" -gt 20
	assert "make -j4 $goal: nothing compiled before deps ended" test ! -s "$SLB_EARLY"
done

# make -n -j demo: deps is printed before the first compile.
rm -rf "$T/b" "$T/bin"
"${MK[@]}" -n -j4 demo >"$T/n.out" 2>&1
d=$(grep -n 'install-deps' "$T/n.out" | head -n1 | cut -d: -f1)
c=$(grep -n -- ' -c ' "$T/n.out" | head -n1 | cut -d: -f1)
assert "make -n -j4 demo: deps (line ${d:-none}) before the first compile (line ${c:-none})" \
	test -n "$d" -a -n "$c" -a "${d:-0}" -lt "${c:-0}"

finish
