/* tests/testlib: expect_fail passes only on the wanted code with the wanted
 * detail, and a failure names the caller's line and the call; vector paths
 * honour SL_VECTORS; tl_rmtree removes a tree without following links. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seclaunch/error.h"
#include "seclaunch/util.h"
#include "testlib.h"

static sl_err refuse(sl_err code, const char *detail)
{
	return sl_err_set(code, "%s", detail);
}

static void expect_fail_passes(void **state)
{
	(void)state;
	expect_fail(refuse(SL_E_INPUT, "field 'x': too long"), SL_E_INPUT, "'x'");
	expect_fail(refuse(SL_E_INPUT, "anything"), SL_E_INPUT, NULL);
	expect_fail(refuse(SL_E_INPUT, "case 3: bad"), SL_E_INPUT, "bad", "case 3");
}

/* Each of these must fail the test it runs in. */
static void wrong_code(void **state)
{
	(void)state;
	expect_fail(refuse(SL_E_INPUT, "field 'x'"), SL_E_FORMAT, "'x'");
}

static void wrong_detail(void **state)
{
	(void)state;
	expect_fail(refuse(SL_E_INPUT, "field 'x'"), SL_E_INPUT, "'y'", "the label");
}

static void success_is_not_failure(void **state)
{
	(void)state;
	expect_fail(SL_OK, SL_E_INPUT, NULL);
}

/* Runs one test in a child cmocka group; returns its failure count and its
 * stderr+stdout in out. */
static int run_child(void (*fn)(void **), char *out, size_t n)
{
	char path[] = "/tmp/sl-testlib.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		const struct CMUnitTest t[] = {{"child", fn, NULL, NULL, NULL}};
		_exit(cmocka_run_group_tests(t, NULL, NULL));
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	ssize_t got = pread(fd, out, n - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	close(fd);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void expect_fail_fails(void **state)
{
	(void)state;
	char out[8192];
	assert_int_equal(run_child(wrong_code, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "refuse(SL_E_INPUT, \"field 'x'\"): got SL_E_INPUT"));
	assert_non_null(strstr(out, "testlib_test.c:")); /* the caller, not testlib.c */
	assert_int_equal(run_child(wrong_detail, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "the label: refuse("));
	assert_non_null(strstr(out, "naming ''y''"));
	assert_int_equal(run_child(success_is_not_failure, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "got SL_OK"));
}

static void vectors_dir(void **state)
{
	(void)state;
	char p[256];
	assert_int_equal(setenv("SL_VECTORS", "/some/where", 1), 0);
	assert_string_equal(tl_vector_path(p, sizeof(p), "amd-sev-snp/%s", "x.bin"),
	                    "/some/where/amd-sev-snp/x.bin");
	assert_int_equal(unsetenv("SL_VECTORS"), 0);
	assert_string_equal(tl_vectors(), "tests/vectors");
}

static void tmpdir_and_rmtree(void **state)
{
	(void)state;
	char d[128], outside[128], p[256];
	tl_tmpdir(d, sizeof(d), "testlib");
	tl_tmpdir(outside, sizeof(outside), "testlib-outside");
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(p, sizeof(p), "%s/sub", d);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sub/f", d);
	assert_int_equal(sl_file_write_atomic(p, (const uint8_t *)"x", 1, 0600, false), SL_OK);
	/* a link to a directory outside: removed, its target kept */
	snprintf(p, sizeof(p), "%s/link", d);
	assert_int_equal(symlink(outside, p), 0);
	assert_int_equal(tl_rmtree(d), 0);
	assert_int_not_equal(lstat(d, &st), 0);
	assert_int_equal(stat(outside, &st), 0);
	assert_int_equal(tl_rmtree(outside), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(expect_fail_passes),
	    cmocka_unit_test(expect_fail_fails),
	    cmocka_unit_test(vectors_dir),
	    cmocka_unit_test(tmpdir_and_rmtree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
