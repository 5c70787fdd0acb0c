/* launcher/stage/stage_gpu.c (--stage gpu-ipc: seclaunch fills device buffers)
 * on the CPU stand-in for libcuda.so.1 (tests/fakecuda/), through the same
 * dlopen path ($SECLAUNCH_LIBCUDA): chunk order (the device buffer, whose
 * address the fake's IPC handle carries, is the plaintext), pinned buffers
 * reused only after their copy's event (copies slowed down; the fake counts
 * buffers changed before their copy ran), a copy failing midway, device and
 * pinned allocations failing, cancellation by a signal, an IPC export the
 * driver refuses, a sharded dataset staged whole (its shards through one
 * kept set of chunk buffers), and the wipe (every buffer zero when freed). Skips when
 * the fake was not built. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
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
#include <dlfcn.h>

#include "../../launcher/dataset/dataset_tree.h"
#include "../../launcher/stage/stage_tree.h"
#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"

#include "sld_fixture.h"
#include "testlib.h"

static void *fake;
static unsigned long (*fstat_)(const char *);
static void (*freset)(void);
static char skip_why[300];
static sl_gpu_info gpu;

static int group_setup(void **state)
{
	char path[4096];
	const char *b = getenv("SL_BUILD");
	if (setup(state) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/tests/fakecuda/libcuda.so.1", b != NULL ? b : "build");
	if (access(path, R_OK) != 0) {
		snprintf(skip_why, sizeof(skip_why), "%s not built", path);
		return 0;
	}
	setenv("SECLAUNCH_LIBCUDA", path, 1);
	fake = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(fake);
	*(void **)(&fstat_) = dlsym(fake, "fakecuda_stat");
	*(void **)(&freset) = dlsym(fake, "fakecuda_reset");
	assert_true(fstat_ != NULL && freset != NULL);
	sl_gpu_probe(&gpu);
	assert_true(gpu.usable);
	return 0;
}

static int each(void **state)
{
	(void)state;
	if (fake != NULL) {
		unsetenv("FAKECUDA_FAIL");
		unsetenv("FAKECUDA_DELAY_US");
		freset();
	}
	return 0;
}

#define NEED_FAKE()                                                                                \
	do {                                                                                       \
		if (skip_why[0] != '\0') {                                                         \
			fprintf(stderr, "skip: %s\n", skip_why);                                   \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

static void assert_clean(void)
{
	assert_int_equal(fstat_("live"), 0);
	assert_int_equal(fstat_("live_pinned"), 0);
	assert_int_equal(fstat_("freed_nonzero"), 0);
	assert_int_equal(fstat_("pinned_freed_nonzero"), 0);
	assert_int_equal(fstat_("hostregister"), 0);
}

struct sld {
	sl_secret *dek;
	uint8_t *plain;
	size_t n;
	int fd;
};

static void make(struct sld *s, size_t n)
{
	sl_sld_encrypt_params p = {.dataset_id = "ipc-ds", .chunk_size = CS, .threads = 2};
	s->dek = new_dek();
	s->n = n;
	s->plain = random_bytes(n);
	s->fd = encrypt_to_fd(s->dek, s->plain, n, &p);
	size_t flen = 0;
	free(fd_bytes(s->fd, &flen));
	assert_true(flen > n); /* header and tags: ciphertext, as staged from */
}

static void drop(struct sld *s)
{
	sl_secret_free(s->dek);
	free(s->plain);
	close(s->fd);
}

/* The device address the fake put in the IPC handle. */
static const uint8_t *device_of(sl_stage *st)
{
	json_t *e = NULL;
	uint8_t h[64];
	uint64_t p;
	assert_int_equal(sl_stage_describe(st, -1, &e), SL_OK);
	const char *hex = json_string_value(json_object_get(e, "ipc_handle"));
	assert_non_null(hex);
	assert_string_equal(json_string_value(json_object_get(e, "method")), "gpu-ipc");
	assert_string_equal(json_string_value(json_object_get(e, "kind")), "gpu");
	for (int i = 0; i < 64; i++)
		assert_int_equal(sscanf(hex + 2 * i, "%2hhx", &h[i]), 1);
	json_decref(e);
	memcpy(&p, h, sizeof(p));
	return (const uint8_t *)(uintptr_t)p;
}

/* The device buffer of st holds plain, no pinned buffer was reused early
 * and none is left; then st is wiped: every buffer zero when freed. */
static void expect_staged_then_wiped(sl_stage *st, const uint8_t *plain, size_t n)
{
	assert_memory_equal(device_of(st), plain, n);
	assert_int_equal(fstat_("reuse_violations"), 0);
	/* the pinned buffers are zeroed and freed once staging ends */
	assert_int_equal(fstat_("live_pinned"), 0);
	assert_int_equal(fstat_("live"), 1);
	assert_int_equal(sl_stage_wipe(st), SL_OK);
	assert_clean();
	sl_stage_free(st);
}

static void test_stage_order_reuse_wipe(void **state)
{
	(void)state;
	NEED_FAKE();
	struct sld s;
	sl_stage *st = NULL;
	make(&s, 9 * CS + 77);
	setenv("FAKECUDA_DELAY_US", "40000", 1);
	assert_int_equal(sl_stage_sld(s.fd, "ipc.sld", s.dek, &gpu, 2, true, NULL, &st), SL_OK);
	assert_int_equal(fstat_("htod"), 10);
	assert_int_equal(fstat_("htod_streams"), 2);
	expect_staged_then_wiped(st, s.plain, s.n);
	drop(&s);
}

static void test_copy_fails_midway(void **state)
{
	(void)state;
	NEED_FAKE();
	struct sld s;
	sl_stage *st = NULL;
	make(&s, 6 * CS);
	setenv("FAKECUDA_FAIL", "htod:3", 1);
	expect_fail(sl_stage_sld(s.fd, "ipc.sld", s.dek, &gpu, 2, true, NULL, &st), SL_E_GPU,
	            "copy");
	assert_null(st);
	assert_int_equal(fstat_("copy_failures"), 1);
	assert_clean();
	drop(&s);
}

static void test_alloc_fails(void **state)
{
	(void)state;
	NEED_FAKE();
	struct sld s;
	sl_stage *st = NULL;
	make(&s, 2 * CS);
	setenv("FAKECUDA_FAIL", "alloc:1", 1);
	expect_fail(sl_stage_sld(s.fd, "ipc.sld", s.dek, &gpu, 2, true, NULL, &st), SL_E_GPU,
	            "allocating", "CUDA_ERROR_OUT_OF_MEMORY");
	assert_clean();
	freset();
	setenv("FAKECUDA_FAIL", "hostalloc:2", 1);
	expect_fail(sl_stage_sld(s.fd, "ipc.sld", s.dek, &gpu, 2, true, NULL, &st), SL_E_GPU,
	            "pinning");
	assert_null(st);
	assert_clean();
	drop(&s);
}

static int polls;
static int term_after_three(void)
{
	return ++polls > 3 ? SIGTERM : 0;
}

static void test_cancel_by_signal(void **state)
{
	(void)state;
	NEED_FAKE();
	struct sld s;
	sl_stage *st = NULL;
	make(&s, 8 * CS);
	polls = 0;
	expect_fail(sl_stage_sld(s.fd, "ipc.sld", s.dek, &gpu, 2, true, term_after_three, &st),
	            SL_E_SYSTEM, "interrupted by signal 15");
	assert_null(st);
	assert_true(fstat_("allocs") > 0);
	assert_clean();
	drop(&s);
}

static void test_ipc_refused(void **state)
{
	(void)state;
	NEED_FAKE();
	setenv("FAKECUDA_FAIL", "ipc:1", 1);
	expect_fail(sl_gpu_ipc_probe(&gpu), SL_E_GPU, "CUDA IPC is not available",
	            "use --stage gpu");
	assert_clean();
	unsetenv("FAKECUDA_FAIL");
	assert_int_equal(sl_gpu_ipc_probe(&gpu), SL_OK);
	assert_clean();
}

/* A sharded dataset staged whole onto the device (sl_stage_sldm): every
 * shard decrypted through one set of chunk buffers kept across shards, the
 * device buffer the shards' plaintexts back to back, on one thread and on
 * a pool. */
static void test_sharded_on_device(void **state)
{
	(void)state;
	NEED_FAKE();
	char dir[256], in[300], ds[300];
	const size_t n = 5 * (size_t)(128 << 10) + 777; /* 6 shards of 128 KiB */
	sl_secret *dek = new_dek();
	uint8_t *plain = random_bytes(n);
	tl_tmpdir(dir, sizeof(dir), "gpu-sldm");
	snprintf(in, sizeof(in), "%s/a.bin", dir);
	snprintf(ds, sizeof(ds), "%s/ds", dir);
	int fd = open(in, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(sl_write_all(fd, plain, n, in), SL_OK);
	close(fd);
	const char *paths[] = {in};
	sl_tree_encrypt_opts o = {.paths = paths,
	                          .n_paths = 1,
	                          .out_dir = ds,
	                          .quiet = true,
	                          .shard_size = 128 << 10,
	                          .p = {.dataset_id = "ipc-ds", .chunk_size = CS, .threads = 2}};
	sl_tree_stats ts;
	assert_int_equal(sl_tree_encrypt(dek, &o, &ts), SL_OK);
	sl_sldm *m = NULL;
	assert_int_equal(sl_tree_manifest(ds, NULL, &m), SL_OK);
	assert_int_equal(sl_sldm_shard_count(m), 6);
	int dfd = open(ds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	const unsigned threads[] = {1, 3};
	for (size_t k = 0; k < sizeof(threads) / sizeof(threads[0]); k++) {
		sl_stage *st = NULL;
		freset();
		assert_int_equal(
		    sl_stage_sldm(dfd, ds, NULL, m, dek, &gpu, threads[k], true, NULL, &st), SL_OK);
		expect_staged_then_wiped(st, plain, n);
	}
	close(dfd);
	sl_sldm_free(m);
	assert_int_equal(tl_rmtree(dir), 0);
	free(plain);
	sl_secret_free(dek);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_stage_order_reuse_wipe, each),
	    cmocka_unit_test_setup(test_copy_fails_midway, each),
	    cmocka_unit_test_setup(test_alloc_fails, each),
	    cmocka_unit_test_setup(test_cancel_by_signal, each),
	    cmocka_unit_test_setup(test_ipc_refused, each),
	    cmocka_unit_test_setup(test_sharded_on_device, each),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
