/* Staging: host memory files (memfd_secret and sealed memfd), the in-order
 * sink contract, sealing, the wipe, SECLAUNCH_DATA entries, and the GPU
 * probe's dlopen failure path (no GPU on test machines). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/stage.h"

#define SIZE (1u << 20)

static uint8_t *pattern(size_t n)
{
	uint8_t *p = malloc(n);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + 7);
	return p;
}

/* Writes data in uneven pieces, as a chunked decryptor would. */
static void fill(sl_stage *s, const uint8_t *data, size_t n)
{
	size_t off = 0, step = 65536 + 13;
	while (off < n) {
		size_t k = n - off < step ? n - off : step;
		assert_int_equal(sl_stage_write(s, off, data + off, k), SL_OK);
		off += k;
	}
}

static unsigned long locked_kb(void)
{
	char line[128];
	unsigned long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmLck: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void check_sealed_memfd(int fd, const uint8_t *data)
{
	char path[40];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* what the job could try with its own descriptor */
	int rw = open(path, O_RDWR);
	assert_true(rw >= 0);
	assert_int_equal(write(rw, "x", 1), -1);
	assert_int_equal(ftruncate(rw, 1), -1);
	assert_int_equal(ftruncate(rw, 2 * SIZE), -1);
	void *w = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	assert_true(w == MAP_FAILED);
	uint8_t *r = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, rw, 0);
	assert_true(r != MAP_FAILED);
	assert_int_equal(mprotect(r, SIZE, PROT_READ | PROT_WRITE), -1);
	assert_memory_equal(r, data, SIZE);
	munmap(r, SIZE);
	close(rw);
}

static void test_memfd_sealed_and_wiped(void **state)
{
	(void)state;
	uint8_t *data = pattern(SIZE);
	sl_stage *s = NULL;
	assert_int_equal(sl_stage_host_new("ds-a", SIZE, true, &s), SL_OK);
	assert_true(strncmp(sl_stage_method(s), "memfd", 5) == 0);
	fill(s, data, SIZE);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	assert_memory_equal(sl_stage_host_view(s), data, SIZE);
	check_sealed_memfd(sl_stage_fd(s), data);
	/* locked as it was written, wherever the kernel allows it (root always) */
	if (geteuid() == 0) {
		assert_string_equal(sl_stage_method(s), "memfd+mlock");
		assert_true(locked_kb() >= SIZE / 1024);
	}

	/* a job that still holds the data sees zeros after the wipe */
	int keep = dup(sl_stage_fd(s));
	uint8_t *job = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, keep, 0);
	assert_true(job != MAP_FAILED);
	assert_int_equal(sl_stage_wipe(s), SL_OK);
	assert_true(sl_stage_wiped(s));
	assert_int_equal(sl_stage_fd(s), -1);
	for (size_t i = 0; i < SIZE; i++)
		if (job[i] != 0)
			fail_msg("byte %zu not wiped", i);
	assert_int_equal(sl_stage_wipe(s), SL_OK); /* idempotent */
	munmap(job, SIZE);
	close(keep);
	sl_stage_free(s);
	free(data);
}

/* A stage big enough to be wiped on several threads, of a size that is no
 * multiple of a page: every byte, the last slice's tail included, reads
 * zero through a job's mapping after the wipe. */
static void test_big_stage_wiped_in_parallel(void **state)
{
	(void)state;
	size_t n = ((size_t)64 << 20) + 12345;
	sl_stage *s = NULL;
	uint8_t *data = malloc(n);
	assert_non_null(data);
	memset(data, 0xa5, n);
	assert_int_equal(sl_stage_host_new("ds-big", n, true, &s), SL_OK);
	fill(s, data, n);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	int keep = dup(sl_stage_fd(s));
	uint8_t *job = mmap(NULL, n, PROT_READ, MAP_SHARED, keep, 0);
	assert_true(job != MAP_FAILED);
	assert_int_equal(job[n - 1], 0xa5);
	assert_int_equal(sl_stage_wipe(s), SL_OK);
	for (size_t i = 0; i < n; i++)
		if (job[i] != 0)
			fail_msg("byte %zu of %zu not wiped", i, n);
	munmap(job, n);
	close(keep);
	sl_stage_free(s);
	free(data);
}

static void test_memfd_secret(void **state)
{
	(void)state;
	uint8_t *data = pattern(SIZE);
	sl_stage *s = NULL;
	assert_int_equal(sl_stage_host_new("ds-s", SIZE, false, &s), SL_OK);
	if (strcmp(sl_stage_method(s), "memfd_secret") != 0) {
		sl_stage_free(s);
		free(data);
		skip(); /* kernel without memfd_secret or a tiny RLIMIT_MEMLOCK */
	}
	fill(s, data, SIZE);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	int fd = sl_stage_fd(s);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0400);
	assert_int_equal((size_t)st.st_size, SIZE);
	/* no reopen through /proc, no write(2), no resize */
	char path[40];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	assert_int_equal(open(path, O_RDONLY), -1);
	assert_int_equal(write(fd, "x", 1), -1);
	assert_int_equal(ftruncate(fd, 2 * SIZE), -1);
	/* the job maps its descriptor directly */
	uint8_t *job = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(job != MAP_FAILED);
	assert_memory_equal(job, data, SIZE);
	int keep = dup(fd);
	assert_int_equal(sl_stage_wipe(s), SL_OK);
	for (size_t i = 0; i < SIZE; i++)
		if (job[i] != 0)
			fail_msg("byte %zu not wiped", i);
	munmap(job, SIZE);
	close(keep);
	sl_stage_free(s);
	free(data);
}

static void test_memlock_limit_falls_back(void **state)
{
	(void)state;
	struct rlimit old, small = {64 * 1024, 0};
	assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &old), 0);
	small.rlim_max = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &small), 0);
	sl_stage *s = NULL;
	sl_err rc = sl_stage_host_new("ds-big", SIZE, false, &s);
	assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &old), 0);
	assert_int_equal(rc, SL_OK);
	/* root may lock past the limit (CAP_IPC_LOCK); memfd_secret is never chosen */
	assert_true(strcmp(sl_stage_method(s), "memfd") == 0 ||
	            strcmp(sl_stage_method(s), "memfd+mlock") == 0);
	sl_stage_free(s);
}

static void test_sink_contract(void **state)
{
	(void)state;
	uint8_t buf[100] = {1};
	sl_stage *s = NULL;
	assert_int_equal(sl_stage_host_new("ds-c", 200, true, &s), SL_OK);
	/* out of order */
	assert_int_equal(sl_stage_write(s, 100, buf, 100), SL_E_INTERNAL);
	assert_non_null(strstr(sl_err_detail(), "expected offset 0"));
	assert_int_equal(sl_stage_write(s, 0, buf, 100), SL_OK);
	/* past the end */
	assert_int_equal(sl_stage_write(s, 100, buf, 101), SL_E_INTERNAL);
	/* sealing early: not every byte was staged */
	assert_int_equal(sl_stage_seal(s), SL_E_TRUNCATED);
	assert_non_null(strstr(sl_err_detail(), "100 of 200"));
	assert_int_equal(sl_stage_write(s, 100, buf, 100), SL_OK);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	assert_int_equal(sl_stage_write(s, 200, buf, 0), SL_E_INTERNAL); /* after seal */
	sl_stage_free(s);
}

static void test_empty_dataset(void **state)
{
	(void)state;
	sl_stage *s = NULL;
	json_t *j = NULL;
	assert_int_equal(sl_stage_host_new("ds-empty", 0, false, &s), SL_OK);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	assert_int_equal(sl_stage_describe(s, 3, &j), SL_OK);
	assert_int_equal(json_integer_value(json_object_get(j, "size")), 0);
	json_decref(j);
	sl_stage_free(s);
}

static void test_describe(void **state)
{
	(void)state;
	sl_stage *s = NULL;
	json_t *j = NULL;
	uint8_t b[10] = {0};
	assert_int_equal(sl_stage_host_new("ds-d", 10, true, &s), SL_OK);
	assert_int_equal(sl_stage_describe(s, 5, &j), SL_E_INTERNAL); /* not sealed yet */
	assert_int_equal(sl_stage_write(s, 0, b, 10), SL_OK);
	assert_int_equal(sl_stage_seal(s), SL_OK);
	assert_int_equal(sl_stage_describe(s, 5, &j), SL_OK);
	assert_string_equal(json_string_value(json_object_get(j, "kind")), "host");
	assert_string_equal(json_string_value(json_object_get(j, "path")), "/proc/self/fd/5");
	assert_int_equal(json_integer_value(json_object_get(j, "fd")), 5);
	assert_int_equal(json_integer_value(json_object_get(j, "size")), 10);
	assert_string_equal(json_string_value(json_object_get(j, "method")), sl_stage_method(s));
	json_decref(j);
	assert_int_equal(sl_stage_wipe(s), SL_OK);
	assert_int_equal(sl_stage_describe(s, 5, &j), SL_E_INTERNAL); /* wiped */
	sl_stage_free(s);
}

static void test_where_parse(void **state)
{
	(void)state;
	sl_stage_where w;
	assert_int_equal(sl_stage_where_parse("auto", &w), SL_OK);
	assert_int_equal(w, SL_STAGE_AUTO);
	assert_int_equal(sl_stage_where_parse("host", &w), SL_OK);
	assert_int_equal(w, SL_STAGE_HOST);
	assert_int_equal(sl_stage_where_parse("gpu", &w), SL_OK);
	assert_int_equal(w, SL_STAGE_GPU);
	assert_int_equal(sl_stage_where_parse("disk", &w), SL_E_USAGE);
	assert_non_null(strstr(sl_err_detail(), "'disk'"));
}

/* No CUDA driver here (or a bogus one named by SECLAUNCH_LIBCUDA): the probe
 * says why and GPU staging is refused, naming the reason. */
static void test_gpu_absent(void **state)
{
	(void)state;
	sl_gpu_info info;
	sl_stage *s = NULL;
	setenv("SECLAUNCH_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	sl_gpu_probe(&info);
	unsetenv("SECLAUNCH_LIBCUDA");
	assert_false(info.usable);
	assert_string_equal(info.cc, "absent");
	assert_non_null(strstr(info.reason, "libcuda.so.1"));
	assert_int_equal(sl_stage_gpu_new("ds-g", 100, 0, &info, &s), SL_E_GPU);
	assert_non_null(strstr(sl_err_detail(), "no usable GPU"));
	assert_null(s);
}

static void test_gpu_devtools_refused(void **state)
{
	(void)state;
	sl_gpu_info info;
	sl_stage *s = NULL;
	memset(&info, 0, sizeof(info));
	info.usable = true;
	info.devtools = true;
	snprintf(info.cc, sizeof(info.cc), "on");
	assert_int_equal(sl_stage_gpu_new("ds-g", 100, 0, &info, &s), SL_E_GPU);
	assert_non_null(strstr(sl_err_detail(), "dev-tools mode"));
	assert_null(s);
}

/* An SLD file in memory: n bytes of pattern under a fresh DEK, 64 KiB chunks. */
static int make_sld_aead(size_t n, sl_aead_id aead, sl_secret **dek)
{
	uint8_t *data = pattern(n);
	int in = memfd_create("plain", MFD_CLOEXEC), out = memfd_create("sld", MFD_CLOEXEC);
	assert_true(in >= 0 && out >= 0);
	assert_int_equal(write(in, data, n), (ssize_t)n);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(sl_secret_random(SL_SLD_DEK_LEN, dek), SL_OK);
	sl_sld_encrypt_params p = {
	    .dataset_id = "ds-sld", .aead = aead, .chunk_size = SL_SLD_CHUNK_MIN, .threads = 2};
	assert_int_equal(sl_sld_encrypt(*dek, &p, in, n, out), SL_OK);
	close(in);
	free(data);
	return out;
}

static int make_sld(size_t n, sl_secret **dek)
{
	return make_sld_aead(n, SL_AEAD_AES_256_GCM, dek);
}

static void test_stage_from_sld(void **state)
{
	(void)state;
	size_t n = 5 * SL_SLD_CHUNK_MIN + 1234;
	sl_secret *dek = NULL;
	sl_stage *s = NULL;
	int fd = make_sld(n, &dek);
	uint8_t *data = pattern(n);
	assert_int_equal(sl_stage_sld(fd, "mem.sld", dek, NULL, 3, false, NULL, &s), SL_OK);
	assert_string_equal(sl_stage_dataset_id(s), "ds-sld");
	assert_int_equal(sl_stage_size(s), n);
	assert_memory_equal(sl_stage_host_view(s), data, n);
	sl_stage_free(s);
	free(data);
	sl_secret_free(dek);
	close(fd);
}

/* A memfd stage filled by decryption in place (every thread count): the
 * same sealing as a stage filled by writes, and locked where allowed. */
static void test_stage_from_sld_memfd(void **state)
{
	(void)state;
	sl_secret *dek = NULL;
	int fd = make_sld(SIZE, &dek);
	uint8_t *data = pattern(SIZE);
	for (unsigned t = 1; t <= 4; t++) {
		sl_stage *s = NULL;
		assert_int_equal(sl_stage_sld(fd, "mem.sld", dek, NULL, t, true, NULL, &s), SL_OK);
		assert_memory_equal(sl_stage_host_view(s), data, SIZE);
		check_sealed_memfd(sl_stage_fd(s), data);
		if (geteuid() == 0) {
			assert_string_equal(sl_stage_method(s), "memfd+mlock");
			assert_true(locked_kb() >= SIZE / 1024);
		}
		assert_int_equal(sl_stage_write(s, SIZE, data, 0), SL_E_INTERNAL);
		sl_stage_free(s);
	}
	free(data);
	sl_secret_free(dek);
	close(fd);
}

/* XChaCha20-Poly1305 chunks are read whole into the stage itself (no
 * streaming form): into memfd_secret where the kernel has it, and a memfd. */
static void test_stage_from_sld_xchacha(void **state)
{
	(void)state;
	sl_secret *dek = NULL;
	size_t n = 3 * SL_SLD_CHUNK_MIN + 77;
	int fd = make_sld_aead(n, SL_AEAD_XCHACHA20_POLY1305, &dek);
	uint8_t *data = pattern(n);
	for (int force = 0; force <= 1; force++) {
		sl_stage *s = NULL;
		assert_int_equal(sl_stage_sld(fd, "x.sld", dek, NULL, 2, force, NULL, &s), SL_OK);
		assert_memory_equal(sl_stage_host_view(s), data, n);
		assert_int_equal(sl_stage_seal(s), SL_OK);
		sl_stage_free(s);
	}
	free(data);
	sl_secret_free(dek);
	close(fd);
}

static void test_stage_sld_tampered_chunk(void **state)
{
	(void)state;
	size_t n = 5 * SL_SLD_CHUNK_MIN;
	sl_secret *dek = NULL, *other = NULL;
	sl_stage *s = NULL;
	int fd = make_sld(n, &dek);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	/* one byte in the middle of the file: chunk 2 of 5 */
	off_t mid = st.st_size / 2;
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, mid), 1);
	b ^= 0x01;
	assert_int_equal(pwrite(fd, &b, 1, mid), 1);
	assert_int_equal(sl_stage_sld(fd, "mem.sld", dek, NULL, 2, false, NULL, &s),
	                 SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "chunk"));
	assert_null(s);
	/* a wrong key stages nothing either */
	b ^= 0x01;
	assert_int_equal(pwrite(fd, &b, 1, mid), 1);
	assert_int_equal(sl_secret_random(SL_SLD_DEK_LEN, &other), SL_OK);
	assert_int_equal(sl_stage_sld(fd, "mem.sld", other, NULL, 2, false, NULL, &s),
	                 SL_E_WRONG_KEY);
	assert_null(s);
	sl_secret_free(other);
	sl_secret_free(dek);
	close(fd);
}

static int interrupt_now(void)
{
	return 15;
}

static void test_stage_sld_interrupted(void **state)
{
	(void)state;
	sl_secret *dek = NULL;
	sl_stage *s = NULL;
	int fd = make_sld(3 * SL_SLD_CHUNK_MIN, &dek);
	assert_int_equal(sl_stage_sld(fd, "mem.sld", dek, NULL, 1, true, interrupt_now, &s),
	                 SL_E_SYSTEM);
	assert_non_null(strstr(sl_err_detail(), "signal 15"));
	assert_null(s);
	sl_secret_free(dek);
	close(fd);
}

/* A CC-mode GPU that was not attested and set ready gets no data; setting
 * it ready needs NVML, which is absent here. */
static void test_gpu_not_ready_refused(void **state)
{
	(void)state;
	sl_gpu_info info;
	sl_stage *s = NULL;
	memset(&info, 0, sizeof(info));
	info.usable = true;
	info.needs_ready = true;
	snprintf(info.cc, sizeof(info.cc), "on");
	assert_int_equal(sl_stage_gpu_new("ds-g", 100, 0, &info, &s), SL_E_GPU);
	assert_non_null(strstr(sl_err_detail(), "not attested and set ready"));
	assert_null(s);
	if (sl_gpu_set_ready(&info) == SL_OK)
		skip(); /* a machine with NVML and the right to set it ready */
	assert_non_null(strstr(sl_err_detail(), "setting the GPU ready"));
	assert_false(info.cc_ready);
}

int main(void)
{
	if (sl_crypto_init() != SL_OK)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_memfd_sealed_and_wiped),
	    cmocka_unit_test(test_memfd_secret),
	    cmocka_unit_test(test_big_stage_wiped_in_parallel),
	    cmocka_unit_test(test_memlock_limit_falls_back),
	    cmocka_unit_test(test_sink_contract),
	    cmocka_unit_test(test_empty_dataset),
	    cmocka_unit_test(test_describe),
	    cmocka_unit_test(test_where_parse),
	    cmocka_unit_test(test_gpu_absent),
	    cmocka_unit_test(test_gpu_not_ready_refused),
	    cmocka_unit_test(test_gpu_devtools_refused),
	    cmocka_unit_test(test_stage_from_sld),
	    cmocka_unit_test(test_stage_from_sld_memfd),
	    cmocka_unit_test(test_stage_from_sld_xchacha),
	    cmocka_unit_test(test_stage_sld_tampered_chunk),
	    cmocka_unit_test(test_stage_sld_interrupted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
