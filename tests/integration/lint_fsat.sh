#!/usr/bin/env bash
# The privilege-boundary lint (scripts/lint-fsat, part of make lint): the
# real files pass; a snippet with a path-based call (open, stat, chown by
# path, nftw, openat from the working directory) fails naming the line; the
# same call with "lint: trusted path (WHY)" on its line passes; a comment
# that merely mentions open( is not a call.
. "$(dirname "$0")/lib.sh"
cd "$SL_ROOT" || exit 2

check "the files that work in job-controlled trees pass" 0 scripts/lint-fsat
for call in 'int fd = open(p, O_RDONLY);' 'if (lstat(p, &st) != 0)' 'chown(path, uid, gid);' \
	'nftw(dir, cb, 16, FTW_PHYS);' 'fd = openat(AT_FDCWD, p, O_RDONLY);' 'unlink(p);' \
	'rename(a, b);' 'd = opendir(dir);' 'realpath(p, buf);' 'mkdir(p, 0700);'; do
	printf 'static void f(void)\n{\n\t%s\n}\n' "$call" >"$T/bad.c"
	check "refused: $call" 1 scripts/lint-fsat "$T/bad.c"
	assert "... naming the file and line" grep -q "bad.c:3:" "$T/out"
done
printf 'static void f(void)\n{\n\tint fd = open(p, O_RDONLY); /* lint: trusted path (root'"'"'s own) */\n}\n' >"$T/ok.c"
check "allowed with a reason on the line" 0 scripts/lint-fsat "$T/ok.c"
printf 'static void f(void)\n{\n\t/* never open( by name here */\n\tint fd = sl_fsat_openat(d, p, O_RDONLY, 0, 0);\n\tfstat(fd, &st);\n\tfchown(fd, 1, 1);\n}\n' >"$T/fine.c"
check "fd-relative calls and a comment pass" 0 scripts/lint-fsat "$T/fine.c"
finish
