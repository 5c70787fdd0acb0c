/* The measurements and checks of scripts/gpu-check (GPU) and of
 * scripts/bench/70-gpu.sh (the CPU side). Not a unit test: it needs a GPU
 * for its gpu mode, and prints figures.
 *
 *   gpu_check cpu MIB                 host-decrypt staging on the CPU
 *   gpu_check gpu MIB LIBRARY         everything, on CUDA device 0
 *
 * gpu mode: peak pinned H2D (cuMemcpyHtoDAsync from cuMemHostAlloc memory,
 * 64 MiB copies, two streams); host-decrypt staging (CPU decryption into a
 * memory file, then libseclaunch_data.so's pinned-pool fill) and GPU-decrypt
 * staging (ciphertext through the pool, AES-256-GCM kernels), each compared
 * by SHA-256 with the plaintext; the kernels alone on device-resident
 * ciphertext (GB/s); a tampered chunk refused with the buffer cleared; the
 * wipe read back as zeros. Exit 0 only when every check held. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../../crypto/gcm_arith.h"
#include "../../jobside/seclaunch_data.h"
#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"

#define MIB ((size_t)1 << 20)
#define GIB ((double)(1u << 30))

static int failures;

static void verdict(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "FAILED", what);
	if (!ok)
		failures++;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
	unsigned len = 32;
	if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
		abort();
}

static void die(const char *what)
{
	fprintf(stderr, "gpu_check: %s: %s\n", what, sl_err_detail());
	exit(2);
}

/* The plaintext, its SLD file in a memory file, the file key, the header. */
struct data {
	size_t n;
	uint8_t *plain, digest[32], hdigest[32], key[32];
	int sld_fd;
	size_t sld_len, hlen;
	uint32_t cs;
	uint64_t count;
	sl_secret *dek;
};

static void make_data(struct data *d, size_t mib)
{
	int in;
	sl_sld_encrypt_params p = {.dataset_id = "gpu-check", .chunk_size = 4 << 20};
	sl_sld_reader *r = NULL;
	sl_secret *fk = NULL;
	d->n = mib * MIB;
	d->plain = malloc(d->n);
	if (d->plain == NULL)
		die("plaintext");
	for (size_t off = 0; off < d->n; off += MIB)
		sl_random(d->plain + off, MIB);
	sha256(d->plain, d->n, d->digest);
	if (sl_secret_random(32, &d->dek) != SL_OK)
		die("DEK");
	in = memfd_create("plain", MFD_CLOEXEC);
	d->sld_fd = memfd_create("sld", MFD_CLOEXEC);
	if (in < 0 || d->sld_fd < 0 || sl_write_all(in, d->plain, d->n, "plain") != SL_OK ||
	    lseek(in, 0, SEEK_SET) != 0)
		die("memfd");
	if (sl_sld_encrypt(d->dek, &p, in, d->n, d->sld_fd) != SL_OK)
		die("encrypt");
	close(in);
	if (sl_sld_open(d->sld_fd, "gpu-check.sld", d->dek, &r) != SL_OK)
		die("open");
	const sl_sld_header *h = sl_sld_reader_header(r);
	d->hlen = sl_sld_header_len(h);
	d->cs = sl_sld_header_chunk_size(h);
	d->count = sl_sld_header_chunk_count(h);
	d->sld_len = (size_t)sl_sld_header_file_size(h);
	sl_sld_header_digest(h, d->hdigest);
	if (sl_sld_export_file_key(r, &fk) != SL_OK)
		die("file key");
	memcpy(d->key, sl_secret_data(fk), 32);
	sl_secret_free(fk);
	sl_sld_close(r);
}

/* Host-decrypt staging: SLD -> host memory file (OpenSSL, all CPUs). */
static sl_stage *host_decrypt(struct data *d, double *secs, double *cpu)
{
	sl_stage *s = NULL;
	double t0 = now(), c0 = cpu_s();
	if (sl_stage_sld(d->sld_fd, "gpu-check.sld", d->dek, NULL, 0, true, NULL, &s) != SL_OK)
		die("host staging");
	*secs = now() - t0;
	*cpu = cpu_s() - c0;
	return s;
}

static int cpu_mode(size_t mib)
{
	struct data d;
	double secs, cpu;
	make_data(&d, mib);
	sl_stage *s = host_decrypt(&d, &secs, &cpu);
	uint8_t h[32];
	sha256(sl_stage_host_view(s), d.n, h);
	verdict(sl_ct_eq(h, d.digest, 32), "host-decrypt staging: SHA-256 of the memory file");
	printf("host-decrypt staging (CPU, %u threads): %.2f GB/s, %.2f CPU-s per GiB\n",
	       sl_sld_default_threads(), (double)d.n / secs / 1e9, cpu / ((double)d.n / GIB));
	printf("GPU figures (pinned H2D limit, GPU AES-GCM, GPU-decrypt staging): need a GPU, "
	       "measured by scripts/gpu-check only\n");
	sl_stage_free(s);
	return failures ? 1 : 0;
}

/* ---- CUDA, for what the library does not measure -------------------------- */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(int *, int);
	CUresult (*DeviceGetName)(char *, int, int);
	CUresult (*PrimaryCtxRetain)(void **, int);
	CUresult (*CtxSetCurrent)(void *);
	CUresult (*CtxSynchronize)(void);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, void *);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*StreamCreate)(void **, unsigned);
	CUresult (*StreamSynchronize)(void *);
	CUresult (*ModuleLoadData)(void **, const void *);
	CUresult (*ModuleGetFunction)(void **, void *, const char *);
	CUresult (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	                         unsigned, void *, void **, void **);
} cu;

#define CK(x)                                                                                      \
	do {                                                                                       \
		CUresult r_ = (x);                                                                 \
		if (r_ != 0) {                                                                     \
			fprintf(stderr, "gpu_check: %s: CUDA error %d\n", #x, r_);                 \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

static void load_cuda(void)
{
	const char *p = getenv("SECLAUNCH_LIBCUDA");
	void *l = dlopen(p != NULL ? p : "libcuda.so.1", RTLD_NOW);
	if (l == NULL) {
		fprintf(stderr, "gpu_check: %s\n", dlerror());
		exit(77);
	}
#define S(f, n) (*(void **)(&cu.f) = dlsym(l, n))
	S(Init, "cuInit"), S(DeviceGet, "cuDeviceGet"), S(DeviceGetName, "cuDeviceGetName");
	S(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"), S(CtxSetCurrent, "cuCtxSetCurrent");
	S(CtxSynchronize, "cuCtxSynchronize"), S(MemAlloc, "cuMemAlloc_v2");
	S(MemFree, "cuMemFree_v2"), S(MemHostAlloc, "cuMemHostAlloc");
	S(MemFreeHost, "cuMemFreeHost"), S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	S(MemcpyDtoH, "cuMemcpyDtoH_v2"), S(MemcpyHtoD, "cuMemcpyHtoD_v2");
	S(StreamCreate, "cuStreamCreate"), S(StreamSynchronize, "cuStreamSynchronize");
	S(ModuleLoadData, "cuModuleLoadData"), S(ModuleGetFunction, "cuModuleGetFunction");
	S(LaunchKernel, "cuLaunchKernel");
#undef S
	void **fns = (void **)&cu;
	for (size_t i = 0; i < sizeof(cu) / sizeof(void *); i++)
		if (fns[i] == NULL) {
			fprintf(stderr, "gpu_check: libcuda.so.1 lacks entry point %zu\n", i);
			exit(2);
		}
	int dev;
	void *ctx;
	char name[128] = "";
	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, 0));
	CK(cu.DeviceGetName(name, sizeof(name), dev));
	CK(cu.PrimaryCtxRetain(&ctx, dev));
	CK(cu.CtxSetCurrent(ctx));
	printf("device 0: %s\n", name);
}

/* Peak pinned H2D: 64 MiB copies from cuMemHostAlloc memory on two streams. */
static double peak_h2d(void)
{
	const size_t chunk = 64 * MIB;
	const char *e = getenv("GPU_CHECK_H2D_COPIES"); /* runs on the CPU stand-in: fewer */
	const int copies = e != NULL ? atoi(e) : 96;    /* 6 GiB */
	void *host[2], *st[2];
	CUdeviceptr dev;
	CK(cu.MemAlloc(&dev, 2 * chunk));
	for (int i = 0; i < 2; i++) {
		CK(cu.MemHostAlloc(&host[i], chunk, 0));
		memset(host[i], 0x5a, chunk);
		CK(cu.StreamCreate(&st[i], 1));
	}
	for (int i = 0; i < 4; i++) /* warm up */
		CK(cu.MemcpyHtoDAsync(dev + (i % 2) * chunk, host[i % 2], chunk, st[i % 2]));
	CK(cu.CtxSynchronize());
	double t0 = now();
	for (int i = 0; i < copies; i++)
		CK(cu.MemcpyHtoDAsync(dev + (i % 2) * chunk, host[i % 2], chunk, st[i % 2]));
	CK(cu.CtxSynchronize());
	double gbs = (double)copies * (double)chunk / (now() - t0) / 1e9;
	for (int i = 0; i < 2; i++)
		CK(cu.MemFreeHost(host[i]));
	CK(cu.MemFree(dev));
	return gbs;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	if (b == NULL || fread(b, 1, (size_t)n, f) != (size_t)n)
		exit(2);
	b[n] = '\0';
	fclose(f);
	return b;
}

/* The kernels alone over device-resident ciphertext: GB/s of plaintext. */
static double kernel_rate(struct data *d, const char *ptx_path)
{
	static const uint8_t sbox[256] = {SLG_SBOX_INIT};
	char *ptx = read_file(ptx_path);
	void *mod, *kg, *kt, *kc;
	CUdeviceptr dp, src, dst, acc, ok;
	slg_params hp;
	uint64_t n = d->count;
	if (ptx == NULL) {
		printf("GPU AES-256-GCM: no kernel at %s\n", ptx_path);
		failures++;
		return 0;
	}
	CK(cu.ModuleLoadData(&mod, ptx));
	CK(cu.ModuleGetFunction(&kg, mod, "sl_gcm_ghash"));
	CK(cu.ModuleGetFunction(&kt, mod, "sl_gcm_tag"));
	CK(cu.ModuleGetFunction(&kc, mod, "sl_gcm_ctr"));
	memset(&hp, 0, sizeof(hp));
	slg_params_init(&hp, d->key, d->hdigest, sbox);
	uint8_t *file = mmap(NULL, d->sld_len, PROT_READ, MAP_SHARED, d->sld_fd, 0);
	if (file == MAP_FAILED)
		exit(2);
	CK(cu.MemAlloc(&dp, sizeof(hp)));
	CK(cu.MemAlloc(&src, d->sld_len - d->hlen));
	CK(cu.MemAlloc(&dst, n * d->cs));
	CK(cu.MemAlloc(&acc, n * 16));
	CK(cu.MemAlloc(&ok, n * 4));
	CK(cu.MemcpyHtoD(dp, &hp, sizeof(hp)));
	CK(cu.MemcpyHtoD(src, file + d->hlen, d->sld_len - d->hlen));
	uint8_t *z = calloc(n, 16);
	CK(cu.MemcpyHtoD(acc, z, n * 16));
	free(z);
	slg_batch b = {.first_chunk = 0,
	               .nchunks = (uint32_t)n,
	               .chunk_size = d->cs,
	               .last_len = (uint32_t)(d->n - (n - 1) * d->cs),
	               .final_last = 1};
	void *ag[] = {&dp, &b, &src, &acc}, *at[] = {&dp, &b, &src, &acc, &ok},
	     *ac[] = {&dp, &b, &src, &dst, &ok};
	double best = 0;
	for (int rep = 0; rep < 4; rep++) {
		CK(cu.CtxSynchronize());
		double t0 = now();
		CK(cu.LaunchKernel(kg, (unsigned)((slg_ghash_threads(&b) + 255) / 256), 1, 1, 256,
		                   1, 1, 0, NULL, ag, NULL));
		CK(cu.LaunchKernel(kt, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, at,
		                   NULL));
		CK(cu.LaunchKernel(kc, (unsigned)((slg_ctr_threads(&b) + 255) / 256), 1, 1, 256, 1,
		                   1, 0, NULL, ac, NULL));
		CK(cu.CtxSynchronize());
		double r = (double)d->n / (now() - t0) / 1e9;
		if (rep > 0 && r > best) /* the first run includes the PTX JIT */
			best = r;
	}
	uint8_t *back = malloc(d->n), h[32];
	CK(cu.MemcpyDtoH(back, dst, d->n));
	sha256(back, d->n, h);
	verdict(sl_ct_eq(h, d->digest, 32),
	        "GPU AES-256-GCM kernels on device-resident ciphertext: SHA-256 matches the CPU's");
	free(back);
	sl_wipe(&hp, sizeof(hp));
	cu.MemFree(dp), cu.MemFree(src), cu.MemFree(dst), cu.MemFree(acc), cu.MemFree(ok);
	munmap(file, d->sld_len);
	free(ptx);
	return best;
}

static struct {
	int (*open)(const char *, sldata **);
	int (*open_fd)(int, uint64_t, sldata **);
	void (*close)(sldata *);
	int (*to_device)(sldata *, int, uint64_t, uint64_t *);
	int (*clear)(uint64_t, uint64_t);
	int (*free_)(uint64_t, uint64_t);
	void (*stats)(const sldata *, sldata_stats *);
	const char *(*err)(void);
} L;

static void load_lib(const char *path)
{
	void *l = dlopen(path, RTLD_NOW);
	if (l == NULL) {
		fprintf(stderr, "gpu_check: %s\n", dlerror());
		exit(2);
	}
	*(void **)(&L.open) = dlsym(l, "sldata_open");
	*(void **)(&L.open_fd) = dlsym(l, "sldata_open_fd");
	*(void **)(&L.close) = dlsym(l, "sldata_close");
	*(void **)(&L.to_device) = dlsym(l, "sldata_to_device");
	*(void **)(&L.clear) = dlsym(l, "sldata_device_clear");
	*(void **)(&L.free_) = dlsym(l, "sldata_device_free");
	*(void **)(&L.stats) = dlsym(l, "sldata_get_stats");
	*(void **)(&L.err) = dlsym(l, "sldata_last_error");
}

static int device_is(CUdeviceptr p, size_t n, const uint8_t *digest, int zeros)
{
	uint8_t *back = malloc(n), h[32];
	CK(cu.MemcpyDtoH(back, p, n));
	int ok;
	if (zeros) {
		uint8_t acc = 0;
		for (size_t i = 0; i < n; i++)
			acc |= back[i];
		ok = acc == 0;
	} else {
		sha256(back, n, h);
		ok = sl_ct_eq(h, digest, 32);
	}
	free(back);
	return ok;
}

/* The memory file `run --gpu-decrypt` stages: key area, then the SLD. */
static int gpu_decrypt_file(struct data *d, const uint8_t *flip_at)
{
	int fd = memfd_create("gpu-dec", MFD_CLOEXEC);
	uint8_t area[4096] = {0};
	uint8_t *file = mmap(NULL, d->sld_len, PROT_READ, MAP_SHARED, d->sld_fd, 0);
	memcpy(area, d->key, 32);
	if (fd < 0 || file == MAP_FAILED || sl_write_all(fd, area, sizeof(area), "m") != SL_OK ||
	    sl_write_all(fd, file, d->sld_len, "m") != SL_OK)
		die("gpu-decrypt memory file");
	munmap(file, d->sld_len);
	sl_wipe(area, sizeof(area));
	if (flip_at != NULL) {
		uint8_t b;
		off_t at = 4096 + (off_t)(uintptr_t)flip_at;
		if (pread(fd, &b, 1, at) != 1)
			exit(2);
		b ^= 0x01;
		if (pwrite(fd, &b, 1, at) != 1)
			exit(2);
	}
	char env[1024], hex[65];
	sl_hex_encode(d->hdigest, 32, hex);
	snprintf(env, sizeof(env),
	         "{\"gpu-check\":{\"kind\":\"sld\",\"size\":%zu,\"fd\":%d,\"header_len\":%zu,"
	         "\"chunk_size\":%u,\"chunk_count\":%llu,\"header_sha256\":\"%s\"}}",
	         d->n, fd, d->hlen, d->cs, (unsigned long long)d->count, hex);
	setenv("SECLAUNCH_DATA", env, 1);
	return fd;
}

static int gpu_mode(size_t mib, const char *lib, const char *ptx)
{
	struct data d;
	sldata *h = NULL;
	sldata_stats st;
	uint64_t dptr = 0;
	double secs, cpu, c0, t0;

	load_cuda();
	load_lib(lib);
	printf("dataset: %zu MiB, 4 MiB chunks, AES-256-GCM\n", mib);
	make_data(&d, mib);

	double h2d = peak_h2d();
	printf(
	    "peak pinned H2D (cuMemcpyHtoDAsync from cuMemHostAlloc, 64 MiB copies): %.2f GB/s\n",
	    h2d);

	/* host-decrypt staging: CPU decryption, then the job's pinned-pool fill */
	sl_stage *s = host_decrypt(&d, &secs, &cpu);
	if (L.open_fd(sl_stage_fd(s), d.n, &h) != SLDATA_OK)
		die("sldata_open_fd");
	c0 = cpu_s();
	t0 = now();
	int rc = L.to_device(h, 0, 0, &dptr);
	double fill_s = now() - t0, fill_cpu = cpu_s() - c0;
	verdict(rc == SLDATA_OK, "fill via the pinned pool (libseclaunch_data.so)");
	if (rc != SLDATA_OK)
		fprintf(stderr, "  %s\n", L.err());
	L.stats(h, &st);
	verdict(rc == SLDATA_OK && device_is(dptr, d.n, d.digest, 0),
	        "fill via the pinned pool: SHA-256 of the device buffer is the plaintext's");
	double cpu_rate = (double)d.n / secs / 1e9, fill_rate = (double)d.n / fill_s / 1e9;
	double host_path = (double)d.n / (secs + fill_s) / 1e9;
	printf("CPU decryption into host memory: %.2f GB/s (%.2f CPU-s/GiB)\n", cpu_rate,
	       cpu / ((double)d.n / GIB));
	printf("pinned-pool fill: %.2f GB/s = %.2f x the pinned H2D limit (%llu copies, max %llu "
	       "bytes, %u pinned buffers, %u streams)\n",
	       fill_rate, fill_rate / h2d, (unsigned long long)st.copies,
	       (unsigned long long)st.max_copy, st.pinned_buffers, st.streams);
	printf("host-decrypt staging end to end: %.2f GB/s = %.2f x the H2D limit, %.2f x the CPU "
	       "decrypt rate; bound: %s; host CPU %.2f s/GiB\n",
	       host_path, host_path / h2d, host_path / cpu_rate,
	       cpu_rate < h2d ? "CPU decryption" : "H2D", (cpu + fill_cpu) / ((double)d.n / GIB));
	/* the wipe */
	verdict(L.clear(dptr, d.n) == SLDATA_OK && device_is(dptr, d.n, NULL, 1),
	        "wipe: the device buffer reads back as zeros");
	(void)L.free_(dptr, d.n);
	L.close(h);
	sl_stage_free(s);

	/* GPU AES-256-GCM, kernels alone */
	double gcm = kernel_rate(&d, ptx);
	printf("GPU AES-256-GCM (kernels, device-resident ciphertext): %.1f GB/s\n", gcm);

	/* GPU-decrypt staging */
	int fd = gpu_decrypt_file(&d, NULL);
	h = NULL, dptr = 0;
	if (L.open("gpu-check", &h) != SLDATA_OK)
		die("sldata_open");
	c0 = cpu_s();
	t0 = now();
	rc = L.to_device(h, 0, 0, &dptr);
	double gd_s = now() - t0, gd_cpu = cpu_s() - c0;
	if (rc != SLDATA_OK)
		fprintf(stderr, "  %s\n", L.err());
	verdict(rc == SLDATA_OK && device_is(dptr, d.n, d.digest, 0),
	        "GPU decryption of the dataset: SHA-256 matches the CPU's");
	L.stats(h, &st);
	double gd = (double)d.n / gd_s / 1e9;
	printf("GPU-decrypt staging: %.2f GB/s = %.2f x the pinned H2D limit; host CPU %.3f s/GiB "
	       "(host-decrypt path: %.2f s/GiB)\n",
	       gd, gd / h2d, gd_cpu / ((double)d.n / GIB), (cpu + fill_cpu) / ((double)d.n / GIB));
	verdict(L.clear(dptr, d.n) == SLDATA_OK && device_is(dptr, d.n, NULL, 1),
	        "wipe after GPU decryption: zeros");
	(void)L.free_(dptr, d.n);
	L.close(h);
	close(fd);

	/* a tampered chunk: refused, the caller's buffer cleared */
	uint64_t victim = d.count / 2;
	fd = gpu_decrypt_file(&d, (const uint8_t *)(uintptr_t)(d.hlen + victim * (d.cs + 16) + 5));
	CUdeviceptr mine = 0;
	CK(cu.MemAlloc(&mine, d.n));
	dptr = mine;
	if (L.open("gpu-check", &h) != SLDATA_OK)
		die("sldata_open");
	rc = L.to_device(h, 0, dptr, NULL);
	char want[64];
	snprintf(want, sizeof(want), "chunk %llu:", (unsigned long long)victim);
	verdict(rc == SLDATA_E_INTEGRITY && strstr(L.err(), want) != NULL,
	        "a tampered chunk is refused (SLDATA_E_INTEGRITY, naming the chunk)");
	verdict(device_is(dptr, d.n, NULL, 1), "after the refusal the device buffer is zeros");
	cu.MemFree(dptr);
	L.close(h);
	close(fd);
	printf("%s\n", failures ? "gpu-check: FAILED" : "gpu-check: all checks passed");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sl_crypto_init() != SL_OK)
		return 2;
	if (argc == 3 && strcmp(argv[1], "cpu") == 0)
		return cpu_mode(strtoul(argv[2], NULL, 10));
	if (argc == 5 && strcmp(argv[1], "gpu") == 0)
		return gpu_mode(strtoul(argv[2], NULL, 10), argv[3], argv[4]);
	fprintf(stderr, "usage: gpu_check cpu MIB | gpu MIB LIBRARY PTX\n");
	return 1;
}
