/* sl_user_open: a path opened with the rights of the job's user. As root
 * (CI): a 0600 root file in a 0700 root folder is refused for nobody and
 * read for root; a file nobody may read comes back as a descriptor of
 * that very file; a folder nobody may list but not search is refused; a
 * FIFO does not hang the opener. Without root only the self case runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../launcher/job/job.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sl-useropen.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return chmod(dir, 0755);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *rel, const char *text, mode_t mode)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
}

static void path_of(const char *rel, char *p, size_t n)
{
	snprintf(p, n, "%s/%s", dir, rel);
}

/* Reads what fd holds (at most 63 bytes). */
static void expect_text(int fd, const char *want)
{
	char buf[64] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static bool nobody(sl_job_user *u)
{
	if (geteuid() != 0 || getpwnam("nobody") == NULL)
		return false;
	return sl_job_user_parse("nobody", u) == SL_OK && u->set;
}

static void test_self(void **state)
{
	(void)state;
	char p[256];
	int fd = -1;
	put("mine", "mine", 0600);
	path_of("mine", p, sizeof(p));
	assert_int_equal(sl_user_open(NULL, p, &fd), SL_OK);
	expect_text(fd, "mine");
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	path_of("absent", p, sizeof(p));
	assert_int_equal(sl_user_open(NULL, p, &fd), SL_E_IO);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(sl_err_detail(), "cannot open"));
}

static void test_as_nobody(void **state)
{
	(void)state;
	sl_job_user u, root;
	char p[256];
	struct stat a, b;
	int fd = -1;
	if (!nobody(&u)) {
		skip();
		return;
	}
	assert_int_equal(sl_job_user_parse("0", &root), SL_OK);
	/* a root-only file in a root-only folder: the confused-deputy case */
	path_of("vault", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	put("vault/private.sld", "secret", 0600);
	path_of("vault/private.sld", p, sizeof(p));
	assert_int_equal(sl_user_open(&u, p, &fd), SL_E_IO);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(sl_err_detail(), p));
	assert_non_null(strstr(sl_err_detail(), "the job's user nobody"));
	assert_non_null(strstr(sl_err_detail(), "cannot read it"));
	/* the same file for root (a root job): opened */
	assert_int_equal(sl_user_open(&root, p, &fd), SL_OK);
	expect_text(fd, "secret");
	close(fd);
	/* a file nobody may read, in a folder nobody may search: the
	 * descriptor is of that very file */
	put("open.sld", "public", 0644);
	path_of("open.sld", p, sizeof(p));
	assert_int_equal(sl_user_open(&u, p, &fd), SL_OK);
	expect_text(fd, "public");
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(p, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	/* a folder: an O_DIRECTORY-usable descriptor; one nobody may list but
	 * not search is refused */
	path_of("ds", p, sizeof(p));
	assert_int_equal(mkdir(p, 0755), 0);
	put("ds/manifest.sldm", "m", 0644);
	assert_int_equal(sl_user_open(&u, p, &fd), SL_OK);
	int m = openat(fd, "manifest.sldm", O_RDONLY | O_CLOEXEC);
	assert_true(m >= 0);
	expect_text(m, "m");
	close(m);
	close(fd);
	assert_int_equal(chmod(p, 0744), 0);
	assert_int_equal(sl_user_open(&u, p, &fd), SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "cannot read the folder"));
	/* a FIFO does not hold the opener; it is refused */
	path_of("fifo", p, sizeof(p));
	assert_int_equal(mkfifo(p, 0666), 0);
	assert_int_equal(sl_user_open(&u, p, &fd), SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "not a regular file or a folder"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_self),
	    cmocka_unit_test(test_as_nobody),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
