/* libseclaunch_data.so (jobside/) against the CPU stand-in for libcuda.so.1
 * (tests/fakecuda/): the real library, loaded as a job would load it, with
 * "device memory" that is host memory, so every byte can be checked.
 * Fill through the pinned pool (order, copy sizes, two streams, no
 * cuMemHostRegister, a pinned buffer reused only after its copy completed:
 * the fake delays copies and counts buffers whose bytes changed before their
 * copy ran), a copy that fails midway, allocations that fail, cancellation
 * by a signal, GPU decryption of SLD files made by sl_sld_encrypt (tamper
 * refused, buffer cleared), and the wipe: every device and pinned buffer
 * reads back as zeros when it is freed. Skips when the library or the fake
 * was not built. */
#include <dlfcn.h>
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
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

#include "../../jobside/seclaunch_data.h"
#include "../../launcher/stage/data_service.h"
#include "sld_fixture.h"
#include "testlib.h"

#define MIB ((size_t)1 << 20)

static struct {
	void *lib, *fake;
	int (*open)(const char *, sldata **);
	int (*open_fd)(int, uint64_t, sldata **);
	void (*close)(sldata *);
	int (*to_device)(sldata *, int, uint64_t, uint64_t *);
	int (*device_free)(uint64_t, uint64_t);
	void (*cancel)(void);
	void (*stats)(const sldata *, sldata_stats *);
	const char *(*error)(void);
	unsigned long (*stat)(const char *);
	void (*reset)(void);
} L;
static char skip_why[300];
static char ptx_path[4200];

#define SYM(lib, f, name) (*(void **)(&L.f) = dlsym(lib, name))

static int group_setup(void **state)
{
	char so[4096], fake[4096];
	const char *b = getenv("SL_BUILD");
	if (setup(state) != 0) /* sld_fixture.h: crypto */
		return -1;
	snprintf(so, sizeof(so), "%s/jobside/libseclaunch_data.so", b != NULL ? b : "build");
	snprintf(fake, sizeof(fake), "%s/tests/fakecuda/libcuda.so.1", b != NULL ? b : "build");
	if (access(so, R_OK) != 0 || access(fake, R_OK) != 0) {
		snprintf(skip_why, sizeof(skip_why), "%s or %s not built", so, fake);
		return 0;
	}
	setenv("SECLAUNCH_LIBCUDA", fake, 1);
	L.fake = dlopen(fake, RTLD_NOW | RTLD_LOCAL);
	L.lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(L.fake);
	assert_non_null(L.lib);
	SYM(L.lib, open, "sldata_open");
	SYM(L.lib, open_fd, "sldata_open_fd");
	SYM(L.lib, close, "sldata_close");
	SYM(L.lib, to_device, "sldata_to_device");
	SYM(L.lib, device_free, "sldata_device_free");
	SYM(L.lib, cancel, "sldata_cancel");
	SYM(L.lib, stats, "sldata_get_stats");
	SYM(L.lib, error, "sldata_last_error");
	SYM(L.fake, stat, "fakecuda_stat");
	SYM(L.fake, reset, "fakecuda_reset");
	assert_true(L.open && L.open_fd && L.close && L.to_device && L.device_free && L.cancel &&
	            L.stats && L.error && L.stat && L.reset);
	/* the real kernel when nvcc built it (the fake checks its entry names),
	 * else a stand-in naming the same entries */
	snprintf(ptx_path, sizeof(ptx_path), "%s/jobside/gcm_kernel.ptx", b != NULL ? b : "build");
	if (access(ptx_path, R_OK) != 0) {
		char dir[64];
		assert_non_null(tl_tmpdir(dir, sizeof(dir), "ptx"));
		snprintf(ptx_path, sizeof(ptx_path), "%s/gcm_kernel.ptx", dir);
		FILE *f = fopen(ptx_path, "w");
		assert_non_null(f);
		fputs("// stand-in\n.entry sl_gcm_ghash\n.entry sl_gcm_tag\n.entry sl_gcm_ctr\n",
		      f);
		fclose(f);
	}
	setenv("SECLAUNCH_GCM_PTX", ptx_path, 1);
	return 0;
}

static int each_setup(void **state)
{
	(void)state;
	if (skip_why[0] != '\0') {
		fprintf(stderr, "skip: %s\n", skip_why);
		return 0;
	}
	unsetenv("FAKECUDA_FAIL");
	unsetenv("FAKECUDA_DELAY_US");
	unsetenv("SECLAUNCH_DATA");
	L.reset();
	return 0;
}

#define NEED_LIB()                                                                                 \
	do {                                                                                       \
		if (skip_why[0] != '\0')                                                           \
			skip();                                                                    \
	} while (0)

static int all_zero(const uint8_t *p, size_t n)
{
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return acc == 0;
}

/* Nothing left allocated, and everything freed read as zeros. */
static void assert_clean(void)
{
	assert_int_equal(L.stat("live"), 0);
	assert_int_equal(L.stat("live_pinned"), 0);
	assert_int_equal(L.stat("freed_nonzero"), 0);
	assert_int_equal(L.stat("pinned_freed_nonzero"), 0);
	assert_int_equal(L.stat("hostregister"), 0);
}

/* n random bytes in a memory file, opened by the library. */
struct plainfd {
	size_t n;
	uint8_t *plain;
	int fd;
	sldata *d;
	uint64_t dptr;
};

static void plain_make(struct plainfd *p, size_t n)
{
	p->n = n;
	p->plain = random_bytes(n);
	p->fd = memfd_with(p->plain, n);
	p->d = NULL;
	p->dptr = 0;
}

static void plain_open(struct plainfd *p, size_t n)
{
	plain_make(p, n);
	assert_int_equal(L.open_fd(p->fd, n, &p->d), SLDATA_OK);
}

static void plain_close(struct plainfd *p)
{
	if (p->d != NULL)
		L.close(p->d);
	close(p->fd);
	free(p->plain);
}

/* The device holds exactly `plain`; freeing it leaves nothing behind. */
static void assert_filled_then_free(uint64_t dptr, const uint8_t *plain, size_t n)
{
	assert_memory_equal((const void *)(uintptr_t)dptr, plain, n);
	assert_int_equal(L.device_free(dptr, n), SLDATA_OK);
	assert_clean();
}

/* ---- plaintext through the pinned pool ------------------------------------ */
static void test_fill_pool(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd p;
	sldata_stats s;
	/* slow copies: a pinned buffer reused before its copy ran would be seen */
	setenv("FAKECUDA_DELAY_US", "30000", 1);
	plain_open(&p, 20 * MIB + 5);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_OK);
	assert_true(p.dptr != 0);
	L.stats(p.d, &s);
	assert_int_equal(s.copies, 3);
	assert_int_equal(s.max_copy, 8 * MIB);
	assert_int_equal(L.stat("htod"), 3);
	assert_int_equal(L.stat("htod_max"), 8 * MIB);
	assert_int_equal(L.stat("htod_streams"), 2);
	assert_int_equal(L.stat("reuse_violations"), 0);
	assert_int_equal(L.stat("pinned_allocs"), 4);
	/* the pinned buffers are zeroed and freed once the fill is done */
	assert_int_equal(L.stat("live_pinned"), 0);
	/* chunk order: the device buffer is the plaintext, byte for byte */
	assert_filled_then_free(p.dptr, p.plain, p.n);
	plain_close(&p);
}

/* More copies than pinned buffers with slow copies: every buffer is reused,
 * each only after its event (the fake sees any change before the copy). */
static void test_pool_reuse_waits_for_event(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd p;
	setenv("FAKECUDA_DELAY_US", "150000", 1);
	plain_open(&p, 72 * MIB);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_OK);
	assert_int_equal(L.stat("htod"), 9);
	assert_int_equal(L.stat("reuse_violations"), 0);
	assert_filled_then_free(p.dptr, p.plain, p.n);
	plain_close(&p);
}

/* The third copy fails on the device: the fill fails naming it, the
 * caller's buffer is cleared, the library's own buffer freed. */
static void test_copy_fails_midway(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd p;
	plain_open(&p, 40 * MIB);
	setenv("FAKECUDA_FAIL", "htod:3", 1);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_E_SYSTEM);
	assert_non_null(strstr(L.error(), "copy failed"));
	assert_int_equal(L.stat("copy_failures"), 1);
	assert_clean();

	/* into a caller's buffer: cleared on failure, not freed */
	L.reset();
	setenv("FAKECUDA_FAIL", "htod:2", 1);
	/* the caller's buffer must be device memory: allocate it through the fake */
	int (*alloc)(uint64_t *, size_t) = NULL;
	int (*freep)(uint64_t) = NULL;
	*(void **)(&alloc) = dlsym(L.fake, "cuMemAlloc_v2");
	*(void **)(&freep) = dlsym(L.fake, "cuMemFree_v2");
	assert_int_equal(alloc(&p.dptr, p.n), 0);
	memset((void *)(uintptr_t)p.dptr, 0x5a, p.n);
	assert_int_equal(L.to_device(p.d, 0, p.dptr, NULL), SLDATA_E_SYSTEM);
	assert_true(all_zero((const uint8_t *)(uintptr_t)p.dptr, p.n));
	assert_int_equal(freep(p.dptr), 0);
	assert_clean();
	plain_close(&p);
}

static void test_alloc_fails(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd p;
	plain_open(&p, 9 * MIB);
	setenv("FAKECUDA_FAIL", "alloc:1", 1);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_E_SYSTEM);
	assert_non_null(strstr(L.error(), "allocating"));
	assert_non_null(strstr(L.error(), "CUDA_ERROR_OUT_OF_MEMORY"));
	assert_clean();
	L.reset();
	setenv("FAKECUDA_FAIL", "hostalloc:3", 1);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_E_SYSTEM);
	assert_non_null(strstr(L.error(), "cuMemHostAlloc"));
	assert_int_equal(L.stat("pinned_allocs"), 2);
	assert_clean();
	plain_close(&p);
}

static void on_alarm(int sig)
{
	(void)sig;
	L.cancel();
}

/* A signal during the fill: its handler calls sldata_cancel; the fill stops
 * at the next copy, clears and frees what it wrote. */
static void test_cancel_by_signal(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd p;
	struct sigaction sa = {.sa_handler = on_alarm};
	struct itimerval it = {.it_value = {.tv_usec = 60000}};
	sigaction(SIGALRM, &sa, NULL);
	setenv("FAKECUDA_DELAY_US", "30000", 1);
	plain_open(&p, 80 * MIB);
	setitimer(ITIMER_REAL, &it, NULL);
	assert_int_equal(L.to_device(p.d, 0, 0, &p.dptr), SLDATA_E_CANCELLED);
	assert_true(L.stat("htod") < 10);
	assert_clean();
	signal(SIGALRM, SIG_DFL);
	plain_close(&p);
}

/* ---- GPU decryption ----------------------------------------------------------- */
struct sldfile {
	int fd;
	uint8_t *plain;
	size_t n;
	char digest_hex[65];
	size_t hlen;
	uint32_t cs;
	uint64_t count;
};

/* The memory file `run --gpu-decrypt` stages: the file key in the first
 * 4096 bytes, then the SLD file. */
static void make_sld(struct sldfile *f, size_t n)
{
	sl_secret *dek = new_dek(), *fk = NULL;
	sl_sld_encrypt_params p = {.dataset_id = "gpu-dec", .chunk_size = CS, .threads = 2};
	sl_sld_reader *r = NULL;
	uint8_t digest[32], area[4096] = {0};
	f->n = n;
	f->plain = random_bytes(n);
	int sld = encrypt_to_fd(dek, f->plain, n, &p);
	size_t flen = 0;
	uint8_t *file = fd_bytes(sld, &flen);
	assert_int_equal(sl_sld_open(sld, "t.sld", dek, &r), SL_OK);
	const sl_sld_header *h = sl_sld_reader_header(r);
	f->hlen = sl_sld_header_len(h);
	f->cs = sl_sld_header_chunk_size(h);
	f->count = sl_sld_header_chunk_count(h);
	sl_sld_header_digest(h, digest);
	sl_hex_encode(digest, 32, f->digest_hex);
	assert_int_equal(sl_sld_export_file_key(r, &fk), SL_OK);
	memcpy(area, sl_secret_data(fk), 32);
	sl_secret_free(fk);
	sl_sld_close(r);
	sl_secret_free(dek);
	close(sld);
	f->fd = memfd_create("gpu-dec", MFD_CLOEXEC);
	assert_true(f->fd >= 0);
	assert_int_equal(sl_write_all(f->fd, area, sizeof(area), "memfd"), SL_OK);
	assert_int_equal(sl_write_all(f->fd, file, flen, "memfd"), SL_OK);
	free(file);
}

static void set_entry(const struct sldfile *f, const char *kind)
{
	char env[1024];
	snprintf(env, sizeof(env),
	         "{\"gpu-dec\":{\"kind\":\"%s\",\"size\":%zu,\"fd\":%d,\"method\":\"gpu-decrypt\","
	         "\"header_len\":%zu,\"chunk_size\":%u,\"chunk_count\":%llu,"
	         "\"header_sha256\":\"%s\"}}",
	         kind, f->n, f->fd, f->hlen, f->cs, (unsigned long long)f->count, f->digest_hex);
	setenv("SECLAUNCH_DATA", env, 1);
}

static void test_gpu_decrypt(void **state)
{
	(void)state;
	NEED_LIB();
	static const size_t sizes[] = {1, CS, 3 * CS + 17, 9 * MIB + 3};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sldfile f;
		sldata *d = NULL;
		uint64_t dptr = 0;
		sldata_stats s;
		L.reset();
		make_sld(&f, sizes[i]);
		set_entry(&f, "sld");
		assert_int_equal(L.open("gpu-dec", &d), SLDATA_OK);
		assert_int_equal(L.to_device(d, 0, 0, &dptr), SLDATA_OK);
		L.stats(d, &s);
		assert_true(s.kernel_launches >= 3);
		assert_int_equal(L.stat("launches"), s.kernel_launches);
		/* ciphertext copies of at least 8 MiB where the file has that much */
		if (f.n > 8 * MIB)
			assert_true(L.stat("htod_max") >= 8 * MIB);
		assert_filled_then_free(dptr, f.plain, f.n);
		L.close(d);
		close(f.fd);
		free(f.plain);
	}
}

/* A flipped ciphertext byte in chunk 2: integrity error naming the chunk,
 * the caller's buffer cleared, the library's scratch (round keys included)
 * zeroed before it was freed. */
static void test_gpu_decrypt_tamper(void **state)
{
	(void)state;
	NEED_LIB();
	struct sldfile f;
	sldata *d = NULL;
	uint64_t dptr = 0;
	make_sld(&f, 4 * CS);
	uint8_t b;
	off_t at = 4096 + (off_t)f.hlen + 2 * ((off_t)f.cs + 16) + 7;
	assert_int_equal(pread(f.fd, &b, 1, at), 1);
	b ^= 0x20;
	assert_int_equal(pwrite(f.fd, &b, 1, at), 1);
	set_entry(&f, "sld");
	assert_int_equal(L.open("gpu-dec", &d), SLDATA_OK);
	assert_int_equal(L.to_device(d, 0, 0, &dptr), SLDATA_E_INTEGRITY);
	assert_non_null(strstr(L.error(), "chunk 2: authentication failed"));
	assert_int_equal(dptr, 0);
	assert_clean();
	L.close(d);

	/* a wrong size for the geometry is refused before anything is copied */
	assert_int_equal(ftruncate(f.fd, 4096 + (off_t)f.hlen + 100), 0);
	assert_int_equal(L.open("gpu-dec", &d), SLDATA_E_INPUT);
	assert_non_null(strstr(L.error(), "the SLD needs"));
	close(f.fd);
	free(f.plain);
}

/* A data service (token NULL: none asked) serving p's memory file as `id`
 * to a job of this uid/gid. */
static sl_dsvc *serve_plain(const struct plainfd *p, const char *id, const char *token)
{
	sl_dsvc *svc = NULL;
	sl_dsvc_opts o = {.job_uid = getuid(), .job_gid = getgid(), .token = token};
	json_t *info =
	    json_pack("{s:s,s:I,s:s}", "kind", "host", "size", (json_int_t)p->n, "method", "memfd");
	assert_int_equal(sl_dsvc_new(&o, &svc), SL_OK);
	assert_int_equal(sl_dsvc_add(svc, id, p->fd, info), SL_OK);
	json_decref(info);
	assert_int_equal(sl_dsvc_serve(svc), SL_OK);
	return svc;
}

/* In the job's child: `id` is announced without a descriptor, so the
 * library asks svc's socket for it. */
static void child_env(const sl_dsvc *svc, const char *id)
{
	char env[256];
	snprintf(env, sizeof(env), "{\"%s\":{\"kind\":\"host\",\"size\":1}}", id);
	setenv("SECLAUNCH_DATA", env, 1);
	setenv("SECLAUNCH_DATA_SOCKET", sl_dsvc_path(svc), 1);
}

/* The child p ran every check (exit 0; else its status names the one that failed). */
static void assert_child_ok(pid_t p)
{
	int st = 0;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A dataset not in SECLAUNCH_DATA with a descriptor comes from the data
 * service: a process of the job (a child here) asks for it by id over the
 * socket, gets the memory file by SCM_RIGHTS, and fills the device from it. */
static void test_from_data_service(void **state)
{
	(void)state;
	NEED_LIB();
	struct plainfd f;
	plain_make(&f, 9 * MIB + 1);
	sl_dsvc *svc = serve_plain(&f, "svc-ds", NULL);
	pid_t p = fork();
	if (p == 0) {
		sldata *d = NULL;
		uint64_t dptr = 0;
		child_env(svc, "svc-ds");
		if (L.open("svc-ds", &d) != SLDATA_OK)
			_exit(10);
		if (L.to_device(d, 0, 0, &dptr) != SLDATA_OK)
			_exit(11);
		if (memcmp((const void *)(uintptr_t)dptr, f.plain, f.n) != 0)
			_exit(12);
		if (L.open("no-such", &d) != SLDATA_E_USAGE ||
		    strstr(L.error(), "data service refused") == NULL)
			_exit(13);
		_exit(0);
	}
	assert_child_ok(p);
	assert_int_equal(sl_dsvc_served(svc), 1);
	sl_dsvc_free(svc);
	plain_close(&f);
}

/* Under `seclaunch serve` the service wants the step's token: the library
 * sends SECLAUNCH_DATA_TOKEN with its request, and without it is refused. */
static void test_from_serve_with_token(void **state)
{
	(void)state;
	NEED_LIB();
	static const char tok[] =
	    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	struct plainfd f;
	plain_make(&f, 3 * MIB);
	sl_dsvc *svc = serve_plain(&f, "tok-ds", tok);
	pid_t p = fork();
	if (p == 0) {
		sldata *d = NULL;
		uint64_t dptr = 0;
		child_env(svc, "tok-ds");
		unsetenv("SECLAUNCH_DATA_TOKEN");
		if (L.open("tok-ds", &d) == SLDATA_OK || strstr(L.error(), "no token") == NULL)
			_exit(10);
		setenv("SECLAUNCH_DATA_TOKEN", tok, 1);
		if (L.open("tok-ds", &d) != SLDATA_OK)
			_exit(11);
		if (L.to_device(d, 0, 0, &dptr) != SLDATA_OK ||
		    memcmp((const void *)(uintptr_t)dptr, f.plain, f.n) != 0)
			_exit(12);
		_exit(0);
	}
	assert_child_ok(p);
	assert_int_equal(sl_dsvc_served(svc), 1);
	assert_int_equal(sl_dsvc_refusals(svc), 1);
	sl_dsvc_free(svc);
	plain_close(&f);
}

static void test_unknown_dataset(void **state)
{
	(void)state;
	NEED_LIB();
	sldata *d = NULL;
	setenv("SECLAUNCH_DATA", "{}", 1);
	unsetenv("SECLAUNCH_DATA_SOCKET");
	assert_int_equal(L.open("nope", &d), SLDATA_E_USAGE);
	assert_non_null(strstr(L.error(), "no data service"));
	setenv("SECLAUNCH_DATA", "{\"x\":{\"kind\":\"gpu\",\"size\":1,\"ipc_handle\":\"00\"}}", 1);
	assert_int_equal(L.open("x", &d), SLDATA_E_USAGE);
	assert_non_null(strstr(L.error(), "gpu-ipc"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_fill_pool, each_setup),
	    cmocka_unit_test_setup(test_pool_reuse_waits_for_event, each_setup),
	    cmocka_unit_test_setup(test_copy_fails_midway, each_setup),
	    cmocka_unit_test_setup(test_alloc_fails, each_setup),
	    cmocka_unit_test_setup(test_cancel_by_signal, each_setup),
	    cmocka_unit_test_setup(test_gpu_decrypt, each_setup),
	    cmocka_unit_test_setup(test_gpu_decrypt_tamper, each_setup),
	    cmocka_unit_test_setup(test_from_data_service, each_setup),
	    cmocka_unit_test_setup(test_from_serve_with_token, each_setup),
	    cmocka_unit_test_setup(test_unknown_dataset, each_setup),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
