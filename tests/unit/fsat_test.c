/* fd-relative file work (seclaunch/fsat.h), each case with openat2 and with
 * the per-component fallback: a symbolic link at the end or in the middle
 * is refused, as are "..", absolute paths and a file where a folder is
 * wanted; a FIFO is never waited on; mkdir and unlink do not go through a
 * link; an atomic write replaces a planted link instead of writing through
 * it and sets owner and mode; the walk lists in byte order, reports links
 * without following them, stops at the depth limit and at a link loop. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/fsat.h"
#include "testlib.h"

static char base[256], outside[300];
static int root = -1;

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void slurp(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t k = fread(buf, 1, n - 1, f);
	buf[k] = '\0';
	fclose(f);
}

static int setup_common(void)
{
	char p[512];
	snprintf(base, sizeof(base), "/tmp/sl-fsat-test-XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	snprintf(p, sizeof(p), "%s/tree", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/tree/d", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/tree/d/f", base);
	put(p, "inside");
	snprintf(outside, sizeof(outside), "%s/secret", base);
	mkdir(outside, 0700);
	snprintf(p, sizeof(p), "%s/secret/f", base);
	put(p, "SECRET");
	snprintf(p, sizeof(p), "%s/tree/up", base);
	if (symlink(outside, p) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/tree/lf", base);
	if (symlink("d/f", p) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/tree/fifo", base);
	if (mkfifo(p, 0600) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/tree", base);
	root = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return root >= 0 ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	sl_fsat_test_no_openat2(false);
	return setup_common();
}

static int setup_fallback(void **state)
{
	(void)state;
	sl_fsat_test_no_openat2(true);
	return setup_common();
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	close(root);
	sl_fsat_test_no_openat2(false);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_plain_open(void **state)
{
	(void)state;
	char buf[32];
	int fd = sl_fsat_openat(root, "d/f", O_RDONLY, 0, 0);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	assert_int_equal(n, 6);
	close(fd);
	struct stat st;
	assert_int_equal(sl_fsat_open_file(root, "d/f", O_RDONLY, 0, 0, "tree", &fd, &st), SL_OK);
	assert_int_equal(st.st_size, 6);
	close(fd);
}

static void test_link_in_the_middle(void **state)
{
	(void)state;
	errno = 0;
	assert_int_equal(sl_fsat_openat(root, "up/f", O_RDONLY, 0, 0), -1);
	assert_true(errno == ELOOP || errno == ENOTDIR);
	int fd = 99;
	assert_int_equal(sl_fsat_open_file(root, "up/f", O_RDONLY, 0, 0, "tree", &fd, NULL),
	                 SL_E_IO);
	assert_int_equal(fd, -1);
	assert_int_equal(sl_fsat_open_dir(root, "up", 0, "tree", &fd), SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "tree/up"));
}

static void test_link_at_the_end(void **state)
{
	(void)state;
	errno = 0;
	assert_int_equal(sl_fsat_openat(root, "lf", O_RDONLY, 0, 0), -1);
	assert_int_equal(errno, ELOOP);
	/* the caller's own tree may follow */
	int fd = sl_fsat_openat(root, "lf", O_RDONLY, 0, SL_FSAT_FOLLOW);
	assert_true(fd >= 0);
	close(fd);
}

static void test_dotdot_and_absolute(void **state)
{
	(void)state;
	char p[400];
	const char *bad[] = {"d/../d/f", "../tree/d/f", "..", ".", "./d/f", "d//f", "", "d/f/"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_int_equal(sl_fsat_openat(root, bad[i], O_RDONLY, 0, 0), -1);
		assert_int_equal(errno, EINVAL);
	}
	snprintf(p, sizeof(p), "%s/f", outside);
	errno = 0;
	assert_int_equal(sl_fsat_openat(root, p, O_RDONLY, 0, 0), -1);
	assert_int_equal(errno, EINVAL);
}

static void test_not_a_folder(void **state)
{
	(void)state;
	int fd = 99;
	assert_int_equal(sl_fsat_open_dir(root, "d/f", 0, "tree", &fd), SL_E_IO);
	errno = 0;
	assert_int_equal(sl_fsat_openat(root, "d/f/x", O_RDONLY, 0, 0), -1);
	assert_int_equal(errno, ENOTDIR);
	assert_int_equal(sl_fsat_open_file(root, "d", O_RDONLY, 0, 0, "tree", &fd, NULL), SL_E_IO);
	/* a FIFO nobody writes to is refused at once, not waited on */
	assert_int_equal(sl_fsat_open_file(root, "fifo", O_RDONLY, 0, 0, "tree", &fd, NULL),
	                 SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "not a regular file"));
}

static void test_mkdir_unlink(void **state)
{
	(void)state;
	char p[512];
	struct stat st;
	int fd = -1;
	assert_int_equal(sl_fsat_mkdir(root, "d/new", 0750, (uid_t)-1, (gid_t)-1, "tree", &fd),
	                 SL_OK);
	assert_true(fstat(fd, &st) == 0 && S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0750);
	close(fd);
	/* again: kept */
	assert_int_equal(sl_fsat_mkdir(root, "d/new", 0700, (uid_t)-1, (gid_t)-1, "tree", NULL),
	                 SL_OK);
	/* through a link: refused, nothing made outside */
	assert_int_equal(sl_fsat_mkdir(root, "up/new", 0700, (uid_t)-1, (gid_t)-1, "tree", NULL),
	                 SL_E_IO);
	snprintf(p, sizeof(p), "%s/new", outside);
	assert_int_not_equal(lstat(p, &st), 0);
	assert_int_equal(sl_fsat_unlink(root, "up/f", 0), -1);
	snprintf(p, sizeof(p), "%s/f", outside);
	assert_int_equal(lstat(p, &st), 0);
	/* the link itself can go */
	assert_int_equal(sl_fsat_unlink(root, "lf", 0), 0);
	assert_int_equal(sl_fsat_unlink(root, "d/new", AT_REMOVEDIR), 0);
	assert_int_equal(sl_fsat_unlink(root, "../secret/f", 0), -1);
}

static void test_write_atomic(void **state)
{
	(void)state;
	char p[512], q[512], buf[64];
	struct stat st;
	snprintf(p, sizeof(p), "%s/tree/status", base);
	snprintf(q, sizeof(q), "%s/f", outside);
	/* a link planted where the file will be: replaced, never written through */
	assert_int_equal(symlink(q, p), 0);
	assert_int_equal(
	    sl_fsat_write_atomic(root, "status", "1 ok\n", 5, 0640, getuid(), getgid(), "tree"),
	    SL_OK);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_uid, getuid());
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "1 ok\n");
	slurp(q, buf, sizeof(buf));
	assert_string_equal(buf, "SECRET");
	assert_int_equal(sl_fsat_write_atomic(root, "a/b", "x", 1, 0600, (uid_t)-1, (gid_t)-1, "t"),
	                 SL_E_INTERNAL);
	assert_int_equal(sl_fsat_write_atomic(root, "..", "x", 1, 0600, (uid_t)-1, (gid_t)-1, "t"),
	                 SL_E_INTERNAL);
}

struct seen {
	char log[2048];
};

static sl_err record(void *ctx, sl_fsat_ent *e)
{
	struct seen *s = ctx;
	static const char *k[] = {"reg", "dir", "post", "link", "mount", "other"};
	size_t n = strlen(s->log);
	snprintf(s->log + n, sizeof(s->log) - n, "%s:%s%s;", k[e->kind], e->rel,
	         e->followed ? "(f)" : "");
	assert_true(e->kind == SL_FSAT_DIR || e->kind == SL_FSAT_DIR_POST ? e->fd >= 0
	                                                                  : e->fd == -1);
	return SL_OK;
}

static void test_walk(void **state)
{
	(void)state;
	struct seen s = {{0}};
	assert_int_equal(sl_fsat_walk(root, 0, 0, true, record, &s, "tree"), SL_OK);
	assert_string_equal(s.log, "dir:d;reg:d/f;post:d;other:fifo;link:lf;link:up;");
	/* following (the caller's own tree): up's target is listed, lf is a file */
	memset(&s, 0, sizeof(s));
	sl_err wr = sl_fsat_walk(root, SL_FSAT_FOLLOW, 0, true, record, &s, "tree");
	if (wr != SL_OK)
		fprintf(stderr, "%s\n", sl_err_detail());
	assert_int_equal(wr, SL_OK);
	assert_string_equal(s.log, "dir:d;reg:d/f;post:d;other:fifo;reg:lf(f);dir:up(f);"
	                           "reg:up/f;post:up(f);");
}

static void test_walk_limits(void **state)
{
	(void)state;
	char p[512];
	struct seen s = {{0}};
	snprintf(p, sizeof(p), "%s/tree/d/loop", base);
	assert_int_equal(symlink("..", p), 0);
	/* not followed: just a link */
	assert_int_equal(sl_fsat_walk(root, 0, 0, true, record, &s, "tree"), SL_OK);
	assert_non_null(strstr(s.log, "link:d/loop;"));
	memset(&s, 0, sizeof(s));
	assert_int_equal(sl_fsat_walk(root, SL_FSAT_FOLLOW, 0, true, record, &s, "tree"),
	                 SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "tree/d/loop: a link loop"));
	unlink(p);
	snprintf(p, sizeof(p), "%s/tree/d/a", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/tree/d/a/b", base);
	mkdir(p, 0700);
	memset(&s, 0, sizeof(s));
	assert_int_equal(sl_fsat_walk(root, 0, 3, true, record, &s, "tree"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "tree/d/a/b: folders nested deeper than 3"));
	memset(&s, 0, sizeof(s));
	assert_int_equal(sl_fsat_walk(root, 0, 4, true, record, &s, "tree"), SL_OK);
}

#define BOTH(t)                                                                                    \
	cmocka_unit_test_setup_teardown(t, setup, teardown),                                       \
	    cmocka_unit_test_setup_teardown(t, setup_fallback, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    BOTH(test_plain_open),      BOTH(test_link_in_the_middle),
	    BOTH(test_link_at_the_end), BOTH(test_dotdot_and_absolute),
	    BOTH(test_not_a_folder),    BOTH(test_mkdir_unlink),
	    BOTH(test_write_atomic),    BOTH(test_walk),
	    BOTH(test_walk_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
