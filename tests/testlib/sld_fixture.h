/* Shared fixtures of the SLD unit tests (tests/unit/sld_test.c, sld_header_test.c):
 * DEKs, memfds holding plaintext or ciphertext. Included once per test
 * program, after cmocka.h and the seclaunch headers. */
#ifndef SECLAUNCH_TESTS_SLD_FIXTURE_H
#define SECLAUNCH_TESTS_SLD_FIXTURE_H

#define CS ((uint32_t)64 << 10)

static int setup(void **state)
{
	(void)state;
	return sl_crypto_init() == SL_OK ? 0 : -1;
}

static sl_secret *new_dek(void)
{
	sl_secret *k = NULL;
	assert_int_equal(sl_secret_random(SL_SLD_DEK_LEN, &k), SL_OK);
	return k;
}

static int memfd_with(const uint8_t *p, size_t n)
{
	int fd = memfd_create("sld-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (n > 0)
		assert_int_equal(sl_write_all(fd, p, n, "memfd"), SL_OK);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *p = malloc(n + 1);
	assert_non_null(p);
	sl_random(p, n);
	return p;
}

/* Encrypts plain into a new memfd; returns it (offset 0). */
static int encrypt_to_fd(sl_secret *dek, const uint8_t *plain, size_t n,
                         const sl_sld_encrypt_params *p)
{
	int in = memfd_with(plain, n);
	int out = memfd_create("sld-out", MFD_CLOEXEC);
	assert_true(out >= 0);
	assert_int_equal(sl_sld_encrypt(dek, p, in, n, out), SL_OK);
	close(in);
	return out;
}

static size_t fd_size(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return (size_t)st.st_size;
}

static uint8_t *fd_bytes(int fd, size_t *n)
{
	*n = fd_size(fd);
	uint8_t *p = malloc(*n + 1);
	assert_non_null(p);
	assert_int_equal(pread(fd, p, *n, 0), (ssize_t)*n);
	return p;
}

#endif
