/* sl_sld_encrypt_files: several SLD files encrypted side by side by
 * parallel workers (pread, seal, pwrite) read back by the ordinary reader,
 * equal in layout to sl_sld_encrypt's output, in-order writes to a
 * descriptor whose offset is not ours, and a failing source. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

#include "sld_fixture.h"
#include "testlib.h"

#define NF 3

struct src {
	const uint8_t *plain[NF];
	uint64_t len[NF];
	uint32_t fail_file;
	uint64_t fail_off; /* UINT64_MAX: never */
	int tls_made, tls_freed;
};

static sl_err src_read(void *ctx, void **tls, uint32_t file, uint64_t off, uint8_t *buf, size_t len)
{
	struct src *s = ctx;
	if (*tls == NULL) {
		*tls = malloc(1);
		__atomic_add_fetch(&s->tls_made, 1, __ATOMIC_SEQ_CST);
	}
	if (file == s->fail_file && off == s->fail_off)
		return sl_err_set(SL_E_IO, "source: file %u refused at %llu", file,
		                  (unsigned long long)off);
	if (file >= NF || off + len > s->len[file])
		return sl_err_set(SL_E_INTERNAL, "source: read past file %u", file);
	memcpy(buf, s->plain[file] + off, len);
	return SL_OK;
}

static void src_free(void *ctx, void *tls)
{
	struct src *s = ctx;
	__atomic_add_fetch(&s->tls_freed, 1, __ATOMIC_SEQ_CST);
	free(tls);
}

static uint8_t *decrypt_fd(int fd, sl_secret *dek, size_t n)
{
	sl_sld_reader *r = NULL;
	uint8_t *out = malloc(n + 1);
	assert_non_null(out);
	assert_int_equal(sl_sld_open(fd, "t.sld", dek, &r), SL_OK);
	assert_int_equal(sl_sld_decrypt_into(r, 2, out, n, NULL), SL_OK);
	sl_sld_close(r);
	return out;
}

static void files_round_trip(sl_aead_id aead, unsigned threads, uint32_t cs)
{
	/* with 4 MiB chunks a chunk is read and sealed in several pieces */
	const size_t sizes[NF] = {0, 3 * (size_t)cs + 5,
	                          cs >= (1u << 20) ? 2 * (size_t)cs - (1 << 20) + 12345
	                                           : 7 * (size_t)cs};
	sl_secret *dek = new_dek();
	struct src s = {.fail_off = UINT64_MAX};
	int fd[NF];
	sl_sld_header *h[NF] = {0};
	sl_sld_encrypt_params p = {
	    .dataset_id = "unit/files", .aead = aead, .chunk_size = cs, .threads = threads};

	for (int k = 0; k < NF; k++) {
		s.plain[k] = random_bytes(sizes[k]);
		s.len[k] = sizes[k];
		fd[k] = memfd_create("files-out", MFD_CLOEXEC);
		assert_true(fd[k] >= 0);
	}
	sl_sld_source src = {.ctx = &s, .read_at = src_read, .tls_free = src_free};
	assert_int_equal(sl_sld_encrypt_files(dek, &p, NF, s.len, fd, &src, SL_SLD_WRITE_BEHIND, h),
	                 SL_OK);
	assert_int_equal(s.tls_made, s.tls_freed);
	for (int k = 0; k < NF; k++) {
		/* the layout sl_sld_encrypt gives the same input */
		int ref = encrypt_to_fd(dek, s.plain[k], sizes[k], &p);
		sl_sld_header *rh = NULL;
		assert_int_equal(sl_sld_header_read_fd(ref, "ref", &rh), SL_OK);
		assert_int_equal(fd_size(fd[k]), fd_size(ref));
		assert_int_equal(sl_sld_header_file_size(h[k]), fd_size(fd[k]));
		assert_int_equal(sl_sld_header_len(h[k]), sl_sld_header_len(rh));
		assert_int_equal(sl_sld_header_plaintext_len(h[k]), sizes[k]);
		assert_int_equal(sl_sld_header_chunk_count(h[k]), sl_sld_header_chunk_count(rh));
		assert_int_equal(sl_sld_header_aead(h[k]), aead);
		assert_string_equal(sl_sld_header_dataset_id(h[k]), "unit/files");
		/* the header handed back is the one written */
		uint8_t *raw = malloc(sl_sld_header_len(h[k]));
		assert_int_equal(pread(fd[k], raw, sl_sld_header_len(h[k]), 0),
		                 (ssize_t)sl_sld_header_len(h[k]));
		assert_memory_equal(raw, sl_sld_header_bytes(h[k]), sl_sld_header_len(h[k]));
		free(raw);
		/* every chunk authenticates under the format's nonce, AAD and keys */
		uint8_t *back = decrypt_fd(fd[k], dek, sizes[k]);
		if (sizes[k] > 0)
			assert_memory_equal(back, s.plain[k], sizes[k]);
		free(back);
		sl_sld_header_free(rh);
		sl_sld_header_free(h[k]);
		close(ref);
		close(fd[k]);
		free((void *)s.plain[k]);
	}
	sl_secret_free(dek);
}

static void test_round_trips(void **state)
{
	(void)state;
	unsigned threads[] = {1, 2, 4, 9};
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		files_round_trip(SL_AEAD_AES_256_GCM, threads[t], CS);
		files_round_trip(SL_AEAD_XCHACHA20_POLY1305, threads[t], CS);
	}
	files_round_trip(SL_AEAD_AES_256_GCM, 3, (uint32_t)4 << 20);
	files_round_trip(SL_AEAD_XCHACHA20_POLY1305, 2, (uint32_t)4 << 20);
}

/* SL_SLD_IN_ORDER writes with write(2), from where the descriptor stands
 * (standard output appended to a file), not from offset 0. */
static void test_in_order(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	size_t n = 5 * CS + 17;
	struct src s = {.fail_off = UINT64_MAX};
	s.plain[0] = random_bytes(n);
	s.len[0] = n;
	int fd = memfd_create("in-order", MFD_CLOEXEC);
	assert_int_equal(write(fd, "JUNK!", 5), 5);
	sl_sld_encrypt_params p = {.dataset_id = "unit/files", .chunk_size = CS, .threads = 3};
	sl_sld_source src = {.ctx = &s, .read_at = src_read, .tls_free = src_free};
	sl_sld_header *h = NULL;
	assert_int_equal(sl_sld_encrypt_files(dek, &p, 1, s.len, &fd, &src, SL_SLD_IN_ORDER, &h),
	                 SL_OK);
	assert_int_equal(fd_size(fd), 5 + sl_sld_header_file_size(h));
	size_t all = 0;
	uint8_t *b = fd_bytes(fd, &all);
	assert_memory_equal(b, "JUNK!", 5);
	int fd2 = memfd_with(b + 5, all - 5);
	uint8_t *back = decrypt_fd(fd2, dek, n);
	assert_memory_equal(back, s.plain[0], n);
	free(back);
	free(b);
	close(fd2);
	close(fd);
	sl_sld_header_free(h);
	free((void *)s.plain[0]);
	sl_secret_free(dek);
}

/* A pipe is written in order too; several outputs must all be files. */
static void test_pipe_and_non_files(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	size_t n = 2 * CS;
	struct src s = {.fail_off = UINT64_MAX};
	s.plain[0] = s.plain[1] = random_bytes(n);
	s.len[0] = s.len[1] = n;
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	(void)fcntl(pp[1], F_SETPIPE_SZ, 1 << 20);
	sl_sld_encrypt_params p = {.dataset_id = "unit/files", .chunk_size = CS, .threads = 2};
	sl_sld_source src = {.ctx = &s, .read_at = src_read, .tls_free = src_free};
	assert_int_equal(sl_sld_encrypt_files(dek, &p, 1, s.len, &pp[1], &src, 0, NULL), SL_OK);
	close(pp[1]);
	uint8_t *b = malloc(1 << 20);
	ssize_t got = 0, m;
	while ((m = read(pp[0], b + got, (1 << 20) - (size_t)got)) > 0)
		got += m;
	int fd2 = memfd_with(b, (size_t)got);
	uint8_t *back = decrypt_fd(fd2, dek, n);
	assert_memory_equal(back, s.plain[0], n);
	free(back);
	close(fd2);
	close(pp[0]);

	int fds[2];
	assert_int_equal(pipe(pp), 0);
	fds[0] = memfd_create("a", MFD_CLOEXEC);
	fds[1] = pp[1];
	expect_fail(sl_sld_encrypt_files(dek, &p, 2, s.len, fds, &src, 0, NULL), SL_E_INTERNAL,
	            "not files");
	close(fds[0]);
	close(pp[0]);
	close(pp[1]);
	free(b);
	free((void *)s.plain[0]);
	sl_secret_free(dek);
}

/* The source's own error reaches the caller, whichever worker met it. */
static void test_source_error(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	size_t n = 6 * CS;
	struct src s = {.fail_file = 1, .fail_off = 4 * (uint64_t)CS};
	for (int k = 0; k < NF; k++) {
		s.plain[k] = random_bytes(n);
		s.len[k] = n;
	}
	int fd[NF];
	for (int k = 0; k < NF; k++)
		fd[k] = memfd_create("err", MFD_CLOEXEC);
	sl_sld_encrypt_params p = {.dataset_id = "unit/files", .chunk_size = CS, .threads = 3};
	sl_sld_source src = {.ctx = &s, .read_at = src_read, .tls_free = src_free};
	expect_fail(sl_sld_encrypt_files(dek, &p, NF, s.len, fd, &src, 0, NULL), SL_E_IO,
	            "file 1 refused at 262144");
	assert_int_equal(s.tls_made, s.tls_freed);
	for (int k = 0; k < NF; k++) {
		close(fd[k]);
		free((void *)s.plain[k]);
	}
	sl_secret_free(dek);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),
	    cmocka_unit_test(test_in_order),
	    cmocka_unit_test(test_pipe_and_non_files),
	    cmocka_unit_test(test_source_error),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
