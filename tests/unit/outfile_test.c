/* sl_output_is_stream / sl_output_open_stream: a FIFO or device is written
 * only when it is the caller's own (or /dev/null) and named directly; the
 * check is made on the inode that is opened. */
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include "seclaunch/error.h"
#include "seclaunch/util.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sl-outfile.XXXXXX");
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *at(const char *name)
{
	static char p[4][128];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(mkfifo(at("f"), 0600), 0);
	assert_int_equal(symlink(at("f"), at("link")), 0);
	FILE *f = fopen(at("reg"), "w");
	assert_non_null(f);
	fclose(f);
	assert_true(sl_output_is_stream(at("f")));
	assert_true(sl_output_is_stream("/dev/null"));
	assert_false(sl_output_is_stream(at("link"))); /* a symlink is a file that exists */
	assert_false(sl_output_is_stream(at("reg")));
	assert_false(sl_output_is_stream(at("absent")));
}

static void test_own_fifo_and_dev_null(void **state)
{
	(void)state;
	int fd = -1;
	assert_int_equal(mkfifo(at("own"), 0600), 0);
	/* a reader first, so opening for writing does not wait */
	int rd = open(at("own"), O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	assert_int_equal(sl_output_open_stream(at("own"), &fd), SL_OK);
	assert_int_equal(write(fd, "x", 1), 1);
	char c = 0;
	assert_int_equal(read(rd, &c, 1), 1);
	assert_int_equal(c, 'x');
	close(fd);
	close(rd);
	assert_int_equal(sl_output_open_stream("/dev/null", &fd), SL_OK);
	close(fd);
}

static void test_refusals(void **state)
{
	(void)state;
	int fd = 7;
	assert_int_equal(mkfifo(at("target"), 0600), 0);
	assert_int_equal(symlink(at("target"), at("sym")), 0);
	assert_int_equal(sl_output_open_stream(at("sym"), &fd), SL_E_EXISTS);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(sl_err_detail(), "symbolic link"));
	FILE *f = fopen(at("plain"), "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(sl_output_open_stream(at("plain"), &fd), SL_E_EXISTS);
	assert_int_equal(sl_output_open_stream(at("missing"), &fd), SL_E_IO);
}

/* As root only: a FIFO and a device another uid owns. */
static void test_foreign_owner(void **state)
{
	(void)state;
	int fd = -1;
	if (geteuid() != 0)
		skip();
	assert_int_equal(mkfifo(at("foreign"), 0666), 0);
	assert_int_equal(chown(at("foreign"), 65534, 65534), 0);
	int rd = open(at("foreign"), O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	assert_int_equal(sl_output_open_stream(at("foreign"), &fd), SL_E_EXISTS);
	assert_non_null(strstr(sl_err_detail(), "owned by uid 65534"));
	assert_int_equal(fd, -1);
	close(rd);
	if (mknod(at("zero"), S_IFCHR | 0666, makedev(1, 5)) == 0) {
		assert_int_equal(chown(at("zero"), 65534, 65534), 0);
		assert_int_equal(sl_output_open_stream(at("zero"), &fd), SL_E_EXISTS);
		assert_non_null(strstr(sl_err_detail(), "character device owned by uid 65534"));
		/* /dev/null's numbers, whoever owns the node: harmless, allowed */
		assert_int_equal(mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)), 0);
		assert_int_equal(chown(at("null"), 65534, 65534), 0);
		assert_int_equal(sl_output_open_stream(at("null"), &fd), SL_OK);
		close(fd);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_own_fifo_and_dev_null),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_foreign_owner),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
