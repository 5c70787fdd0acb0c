#!/usr/bin/env bash
# The file-level circle check (scripts/check-circles, part of make lint): by
# default it reads every module (each top-level folder with a .c file, not
# tests/ or scripts/) as one graph; a circle, inside a module or across two,
# fails naming its files and symbols; a tree without one passes; --except
# leaves a module out; a source built into a shared object is read from
# it, and the SPANK plugin's is passed over only when it was not built. On
# this build: policy/ has no circle, nor have the modules make lint checks.
. "$(dirname "$0")/lib.sh"
SL_BUILD=${SL_BUILD:-$SL_ROOT/build}
cd "$SL_ROOT" || exit 2
if ! command -v nm >/dev/null || ! command -v cc >/dev/null; then
	skip "circles" "needs nm (binutils) and cc"
	finish
fi

circles() { # TREE ARGS...
	local d=$1
	shift
	env SL_CIRCLES_ROOT="$d" BUILD=build scripts/check-circles "$@"
}

# Objects are named after their sources: x/a.c -> build/x/a.o.
obj_tree() { # DIR NAME=SOURCE... (NAME without .c)
	local d=$1 f n
	shift
	for f in "$@"; do
		n=${f%%=*}
		mkdir -p "$d/$(dirname "$n")" "$d/build/$(dirname "$n")"
		printf '%s\n' "${f#*=}" >"$d/$n.c"
		cc -c -o "$d/build/$n.o" "$d/$n.c" || return 1
	done
}

# Two modules, arrows one way (x/a -> x/c, y/d -> x/c); tests/ and scripts/
# hold sources with no objects, and are not modules.
obj_tree "$T/ok" 'x/a=int c(void); int a(void) { return c(); }' \
	'x/c=int c(void) { return 2; }' 'y/d=int c(void); int d(void) { return c() + 1; }'
mkdir -p "$T/ok/tests" "$T/ok/scripts"
echo 'int main(void) { return 0; }' >"$T/ok/tests/t.c"
echo 'int main(void) { return 0; }' >"$T/ok/scripts/probe.c"
check "a tree without a circle passes (every module by default)" 0 circles "$T/ok"
assert "names the objects and modules it read" grep -q "circles: none (3 objects of x y)" "$T/out"

# A circle of two files inside one module.
obj_tree "$T/one" 'x/a=int b(int); int a(int n) { return n ? b(n - 1) : 0; }' \
	'x/b=int a(int); int b(int n) { return n ? a(n - 1) : 1; }' 'y/c=int c(void) { return 2; }'
check "a circle in a module: fails" 1 circles "$T/one"
assert "names the circle's files and symbols" \
	grep -q "^circle: x/a.c, x/b.c: x/a.c (b) -> x/b.c (a) -> x/a.c$" "$T/out"
assert "and says how many, among which modules" \
	grep -q "^check-circles: 1 circle(s) among the files of x y$" "$T/out"
check "the same circle, its module named: fails" 1 circles "$T/one" x
check "a module without it, named alone: passes" 0 circles "$T/one" y

# A circle across two modules: found only when both are read together.
obj_tree "$T/two" 'x/p=int q(int); int p(int n) { return n ? q(n - 1) : 0; }' \
	'y/q=int p(int); int q(int n) { return n ? p(n - 1) : 1; }' 'z/r=int r(void) { return 3; }'
check "a circle across two modules: fails by default" 1 circles "$T/two"
assert "names both files and the symbols" \
	grep -q "^circle: x/p.c, y/q.c: x/p.c (q) -> y/q.c (p) -> x/p.c$" "$T/out"
check "--except y: passes" 0 circles "$T/two" --except y
assert "reads the other modules" grep -q "circles: none (2 objects of x z)" "$T/out"
check "--except 'y z': passes" 0 circles "$T/two" --except "y z"
assert "reads only x" grep -q "circles: none (1 objects of x)" "$T/out"

# An object missing: an error, not a pass.
obj_tree "$T/miss" 'x/a=int a(void) { return 1; }'
echo 'int b(void) { return 2; }' >"$T/miss/x/b.c"
check "a source without its object: exit 2" 2 circles "$T/miss"
assert "names the object" grep -q "build/x/b.o missing (build first)" "$T/out"

# The job-side library is built straight into a shared object: read from it,
# so a circle through it is found. The SPANK plugin's object is built only
# where Slurm's headers are: passed over, and said, when it is absent.
obj_tree "$T/so" 'x/a=int sldata_size(void); int a(void) { return sldata_size(); }'
mkdir -p "$T/so/jobside" "$T/so/build/jobside" "$T/so/launcher/slurm"
echo 'int a(void); int sldata_size(void) { return a(); }' >"$T/so/jobside/seclaunch_data.c"
cc -shared -fPIC -o "$T/so/build/jobside/libseclaunch_data.so" "$T/so/jobside/seclaunch_data.c"
echo 'int slurm_spank_init(void) { return 0; }' >"$T/so/launcher/slurm/spank_seclaunch.c"
obj_tree "$T/so" 'launcher/run=int run(void) { return 0; }'
check "a circle through the job-side shared object: fails (the unbuilt plugin is not missing)" 1 circles "$T/so"
assert "names it by its source" \
	grep -q "^circle: jobside/seclaunch_data.c, x/a.c: jobside/seclaunch_data.c (a) -> x/a.c (sldata_size) -> jobside/seclaunch_data.c$" "$T/out"
rm "$T/so/jobside/seclaunch_data.c" "$T/so/build/jobside/libseclaunch_data.so"
check "without the job-side library: passes" 0 circles "$T/so"
assert "says the SPANK plugin was not read" \
	grep -q "not built, so not read: launcher/slurm/spank_seclaunch.c" "$T/out"

# This build: no file-level circle in any module (what make lint checks)
if [ ! -f "$SL_BUILD/policy/policy_util.o" ]; then
	skip "circles in this build" "no objects in $SL_BUILD (build first)"
	finish
fi
export BUILD=$SL_BUILD
check "no file-level circle in policy/" 0 scripts/check-circles policy
check "no file-level circle in any module of this build" 0 scripts/check-circles
assert "make lint runs the check on every module" grep -qx 'if ! scripts/check-circles; then' scripts/lint

finish
