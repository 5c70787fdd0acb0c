/* A CPU stand-in for the CUDA driver-API entry points seclaunch and
 * libseclaunch_data.so use: built only for tests as
 * build/tests/fakecuda/libcuda.so.1 (never installed) and loaded through the
 * same dlopen("libcuda.so.1") path (LD_LIBRARY_PATH or SECLAUNCH_LIBCUDA).
 * It proves the pipeline's logic, not CUDA's semantics:
 *   - "device memory" is host memory; a device pointer is its address;
 *   - each stream is a thread running its queue in order (copies, event
 *     records, kernels); events complete when their stream reaches them;
 *   - kernels of jobside/gcm_kernel.cu run as the same per-thread functions
 *     compiled for the CPU (crypto/gcm_arith.h), one loop per launch;
 *   - cuMemHostRegister fails as in confidential-computing mode (801).
 * What it watches, written to $FAKECUDA_REPORT (key=value lines) after
 * every free and at exit: allocations, frees, device and pinned memory
 * freed while not all zeros, pinned buffers whose bytes changed between the
 * enqueue of a copy from them and the copy itself (reuse before the copy's
 * event completed), copy sizes, cuMemHostRegister calls, kernel launches.
 * Failures on demand: FAKECUDA_FAIL="op:N[,op:N...]" makes the Nth call of op
 * fail (alloc, hostalloc, htod, ipc, launch, init); FAKECUDA_DEVICES=0 shows
 * no device; FAKECUDA_DELAY_US delays every copy on its stream thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../crypto/gcm_arith.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
#define OK 0
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_NOT_INITIALIZED 3
#define E_NO_DEVICE 100
#define E_INVALID_IMAGE 200
#define E_NOT_FOUND 500
#define E_LAUNCH_FAILED 719
#define E_NOT_SUPPORTED 801
#define E_UNKNOWN 999
#define EXPORT __attribute__((visibility("default")))

static const uint8_t sbox[256] = {SLG_SBOX_INIT};

/* ---- bookkeeping -------------------------------------------------------- */
struct region {
	uint8_t *p;
	size_t n;
	int pinned;
	struct region *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static int inited;
static struct {
	unsigned long allocs, frees, freed_nonzero, pinned_allocs, pinned_frees,
	    pinned_freed_nonzero, hostregister, htod, htod_min, htod_max, reuse_violations,
	    launches, htod_streams_mask, copy_failures, alloc_failures;
	unsigned long calls[8];
} st;
enum { OP_ALLOC, OP_HOSTALLOC, OP_HTOD, OP_IPC, OP_LAUNCH, OP_INIT, OP__N };
static const char *op_names[OP__N] = {"alloc", "hostalloc", "htod", "ipc", "launch", "init"};

/* Whether this (1-based, per op) call is one FAKECUDA_FAIL asks to fail. */
static int should_fail(int op)
{
	unsigned long n = ++st.calls[op];
	const char *f = getenv("FAKECUDA_FAIL");
	size_t len = strlen(op_names[op]);
	for (const char *p = f; p != NULL && *p != '\0';) {
		if (strncmp(p, op_names[op], len) == 0 && p[len] == ':' &&
		    strtoul(p + len + 1, NULL, 10) == n)
			return 1;
		p = strchr(p, ',');
		if (p != NULL)
			p++;
	}
	return 0;
}

static void report_locked(void)
{
	const char *path = getenv("FAKECUDA_REPORT");
	if (path == NULL)
		return;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	unsigned long live = 0, live_pinned = 0;
	for (struct region *r = regions; r != NULL; r = r->next)
		r->pinned ? live_pinned++ : live++;
	fprintf(f,
	        "allocs=%lu\nfrees=%lu\nlive=%lu\nfreed_nonzero=%lu\npinned_allocs=%lu\n"
	        "pinned_frees=%lu\nlive_pinned=%lu\npinned_freed_nonzero=%lu\nhostregister=%lu\n"
	        "htod=%lu\nhtod_min=%lu\nhtod_max=%lu\nhtod_streams=%d\nreuse_violations=%lu\n"
	        "launches=%lu\ncopy_failures=%lu\nalloc_failures=%lu\n",
	        st.allocs, st.frees, live, st.freed_nonzero, st.pinned_allocs, st.pinned_frees,
	        live_pinned, st.pinned_freed_nonzero, st.hostregister, st.htod, st.htod_min,
	        st.htod_max, __builtin_popcountl(st.htod_streams_mask), st.reuse_violations,
	        st.launches, st.copy_failures, st.alloc_failures);
	fclose(f);
	rename(tmp, path);
}

__attribute__((destructor)) static void at_exit(void)
{
	pthread_mutex_lock(&mu);
	report_locked();
	pthread_mutex_unlock(&mu);
}

/* For tests that load the fake themselves: the counters as text, and a reset. */
EXPORT void fakecuda_reset(void)
{
	pthread_mutex_lock(&mu);
	memset(&st, 0, sizeof(st));
	pthread_mutex_unlock(&mu);
}

/* One counter by its report name (tests read them in-process). */
EXPORT unsigned long fakecuda_stat(const char *name)
{
	unsigned long v = 0, live = 0, live_pinned = 0;
	pthread_mutex_lock(&mu);
	for (struct region *r = regions; r != NULL; r = r->next)
		r->pinned ? live_pinned++ : live++;
	const struct {
		const char *n;
		unsigned long v;
	} t[] = {{"allocs", st.allocs},
	         {"frees", st.frees},
	         {"live", live},
	         {"freed_nonzero", st.freed_nonzero},
	         {"pinned_allocs", st.pinned_allocs},
	         {"pinned_frees", st.pinned_frees},
	         {"live_pinned", live_pinned},
	         {"pinned_freed_nonzero", st.pinned_freed_nonzero},
	         {"hostregister", st.hostregister},
	         {"htod", st.htod},
	         {"htod_min", st.htod_min},
	         {"htod_max", st.htod_max},
	         {"htod_streams", (unsigned long)__builtin_popcountl(st.htod_streams_mask)},
	         {"reuse_violations", st.reuse_violations},
	         {"launches", st.launches},
	         {"copy_failures", st.copy_failures},
	         {"alloc_failures", st.alloc_failures}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(t[i].n, name) == 0)
			v = t[i].v;
	pthread_mutex_unlock(&mu);
	return v;
}

static int all_zero(const uint8_t *p, size_t n)
{
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return acc == 0;
}

static struct region *find_locked(const void *p, size_t n, int pinned)
{
	for (struct region *r = regions; r != NULL; r = r->next)
		if (r->pinned == pinned && (const uint8_t *)p >= r->p &&
		    (const uint8_t *)p + n <= r->p + r->n)
			return r;
	return NULL;
}

static CUresult add_region(void **out, size_t n, int pinned)
{
	struct region *r = calloc(1, sizeof(*r));
	uint8_t *p = malloc(n > 0 ? n : 1);
	if (r == NULL || p == NULL) {
		free(r), free(p);
		return E_OUT_OF_MEMORY;
	}
	memset(p, 0xdb, n); /* fresh memory is not zero: a missed wipe shows */
	r->p = p, r->n = n, r->pinned = pinned;
	pthread_mutex_lock(&mu);
	r->next = regions, regions = r;
	pinned ? st.pinned_allocs++ : st.allocs++;
	pthread_mutex_unlock(&mu);
	*out = p;
	return OK;
}

static CUresult drop_region(void *p, int pinned)
{
	pthread_mutex_lock(&mu);
	for (struct region **pp = &regions; *pp != NULL; pp = &(*pp)->next) {
		struct region *r = *pp;
		if (r->p == p && r->pinned == pinned) {
			*pp = r->next;
			if (!all_zero(r->p, r->n))
				pinned ? st.pinned_freed_nonzero++ : st.freed_nonzero++;
			pinned ? st.pinned_frees++ : st.frees++;
			report_locked();
			pthread_mutex_unlock(&mu);
			free(r->p), free(r);
			return OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return E_INVALID_VALUE;
}

/* ---- streams and events ------------------------------------------------- */
enum { Q_COPY, Q_EVENT, Q_KERNEL };
struct CUevent_st {
	unsigned long recorded, done;
	CUresult err;
};
struct kernel {
	int fn;
	uint64_t threads;
	CUdeviceptr a[4];
	slg_batch b;
};
struct op {
	int kind;
	uint8_t *dst;
	const uint8_t *src;
	size_t n;
	uint64_t sum;
	int fail;
	struct CUevent_st *ev;
	unsigned long gen;
	struct kernel k;
	struct op *next;
};
struct CUstream_st {
	int id;
	pthread_t th;
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct op *head, *tail;
	int busy, stop;
	CUresult err; /* the first failure since the last synchronisation */
};

#define MAX_STREAMS 64
static struct CUstream_st *streams[MAX_STREAMS];
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void run_kernel(const struct kernel *k)
{
	const slg_params *p = (const slg_params *)(uintptr_t)k->a[0];
	const uint8_t *src = (const uint8_t *)(uintptr_t)k->a[1];
	for (uint64_t t = 0; t < k->threads; t++) {
		if (k->fn == 0 && t < slg_ghash_threads(&k->b))
			slg_ghash_thread(p, &k->b, src, (uint64_t *)(uintptr_t)k->a[2], t);
		else if (k->fn == 1 && t < k->b.nchunks)
			slg_tag_thread(p, p->te0, sbox, &k->b, src, (uint64_t *)(uintptr_t)k->a[2],
			               (uint32_t *)(uintptr_t)k->a[3], (uint32_t)t);
		else if (k->fn == 2 && t < slg_ctr_threads(&k->b))
			slg_ctr_thread(p, p->te0, sbox, &k->b, src, (uint8_t *)(uintptr_t)k->a[2],
			               (const uint32_t *)(uintptr_t)k->a[3], t);
	}
}

static void *stream_main(void *arg)
{
	struct CUstream_st *s = arg;
	pthread_mutex_lock(&s->m);
	for (;;) {
		while (s->head == NULL && !s->stop)
			pthread_cond_wait(&s->cv, &s->m);
		if (s->head == NULL && s->stop)
			break;
		struct op *o = s->head;
		s->busy = 1;
		pthread_mutex_unlock(&s->m);
		CUresult err = OK;
		if (o->kind == Q_COPY) {
			const char *d = getenv("FAKECUDA_DELAY_US");
			if (d != NULL)
				usleep((useconds_t)strtoul(d, NULL, 10));
			if (fnv(o->src, o->n) != o->sum) {
				pthread_mutex_lock(&mu);
				st.reuse_violations++;
				pthread_mutex_unlock(&mu);
			}
			if (o->fail)
				err = E_LAUNCH_FAILED;
			else
				memcpy(o->dst, o->src, o->n);
		} else if (o->kind == Q_KERNEL) {
			run_kernel(&o->k);
		}
		pthread_mutex_lock(&s->m);
		if (err != OK && s->err == OK)
			s->err = err;
		if (o->kind == Q_EVENT) {
			pthread_mutex_lock(&mu);
			o->ev->err = s->err;
			if (o->gen > o->ev->done)
				o->ev->done = o->gen;
			pthread_cond_broadcast(&ev_cv);
			pthread_mutex_unlock(&mu);
		}
		s->head = o->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->busy = 0;
		free(o);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->m);
	return NULL;
}

static void enqueue(struct CUstream_st *s, struct op *o)
{
	pthread_mutex_lock(&s->m);
	if (s->tail != NULL)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->m);
}

static CUresult stream_sync(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->m);
	while (s->head != NULL || s->busy)
		pthread_cond_wait(&s->cv, &s->m);
	CUresult e = s->err;
	s->err = OK;
	pthread_mutex_unlock(&s->m);
	return e;
}

static CUresult sync_all(void)
{
	CUresult e = OK;
	for (int i = 0; i < MAX_STREAMS; i++)
		if (streams[i] != NULL) {
			CUresult r = stream_sync(streams[i]);
			if (e == OK)
				e = r;
		}
	return e;
}

/* ---- the entry points ---------------------------------------------------- */
#define NEED_INIT()                                                                                \
	do {                                                                                       \
		if (!inited)                                                                       \
			return E_NOT_INITIALIZED;                                                  \
	} while (0)

static int ndev(void)
{
	const char *d = getenv("FAKECUDA_DEVICES");
	return d != NULL ? atoi(d) : 1;
}

EXPORT CUresult cuInit(unsigned flags)
{
	(void)flags;
	if (should_fail(OP_INIT))
		return E_NO_DEVICE;
	inited = 1;
	return OK;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return OK;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	NEED_INIT();
	*n = ndev();
	return OK;
}

EXPORT CUresult cuDeviceGet(int *dev, int ordinal)
{
	NEED_INIT();
	if (ordinal < 0 || ordinal >= ndev())
		return E_INVALID_VALUE;
	*dev = ordinal;
	return OK;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, int dev)
{
	snprintf(name, (size_t)len, "fakecuda CPU stand-in %d", dev);
	return OK;
}

static int ctx_token;
static __thread void *current_ctx;

EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	NEED_INIT();
	if (dev < 0 || dev >= ndev())
		return E_INVALID_VALUE;
	*ctx = &ctx_token;
	return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
	(void)dev;
	return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(int dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

EXPORT CUresult cuCtxSetCurrent(void *ctx)
{
	current_ctx = ctx;
	return OK;
}

EXPORT CUresult cuCtxGetCurrent(void **ctx)
{
	*ctx = current_ctx;
	return OK;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	NEED_INIT();
	return sync_all();
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	NEED_INIT();
	void *q = NULL;
	if (should_fail(OP_ALLOC)) {
		st.alloc_failures++;
		return E_OUT_OF_MEMORY;
	}
	CUresult r = add_region(&q, n, 0);
	*p = (CUdeviceptr)(uintptr_t)q;
	return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	sync_all();
	return drop_region((void *)(uintptr_t)p, 0);
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	(void)flags;
	NEED_INIT();
	if (should_fail(OP_HOSTALLOC)) {
		st.alloc_failures++;
		return E_OUT_OF_MEMORY;
	}
	return add_region(p, n, 1);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	return drop_region(p, 1);
}

/* Confidential-computing mode refuses it at every size (error 801). */
EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
	(void)p, (void)n, (void)flags;
	pthread_mutex_lock(&mu);
	st.hostregister++;
	pthread_mutex_unlock(&mu);
	return E_NOT_SUPPORTED;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t n, unsigned flags)
{
	return cuMemHostRegister_v2(p, n, flags);
}

static struct CUstream_st *stream_of(struct CUstream_st *s)
{
	return s != NULL ? s : streams[0];
}

EXPORT CUresult cuStreamCreate(struct CUstream_st **out, unsigned flags)
{
	(void)flags;
	NEED_INIT();
	pthread_mutex_lock(&mu);
	int slot = -1;
	for (int i = 1; i < MAX_STREAMS && slot < 0; i++)
		if (streams[i] == NULL)
			slot = i;
	if (streams[0] == NULL) { /* the legacy default stream */
		streams[0] = calloc(1, sizeof(*streams[0]));
		pthread_mutex_init(&streams[0]->m, NULL);
		pthread_cond_init(&streams[0]->cv, NULL);
		pthread_create(&streams[0]->th, NULL, stream_main, streams[0]);
	}
	pthread_mutex_unlock(&mu);
	if (slot < 0)
		return E_OUT_OF_MEMORY;
	struct CUstream_st *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return E_OUT_OF_MEMORY;
	s->id = slot;
	pthread_mutex_init(&s->m, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
		free(s);
		return E_OUT_OF_MEMORY;
	}
	streams[slot] = s;
	*out = s;
	return OK;
}

EXPORT CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
	if (s == NULL || s->id <= 0 || s->id >= MAX_STREAMS || streams[s->id] != s)
		return E_INVALID_VALUE;
	(void)stream_sync(s);
	pthread_mutex_lock(&s->m);
	s->stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->m);
	pthread_join(s->th, NULL);
	streams[s->id] = NULL;
	free(s);
	return OK;
}

EXPORT CUresult cuStreamSynchronize(struct CUstream_st *s)
{
	NEED_INIT();
	s = stream_of(s);
	return s != NULL ? stream_sync(s) : OK;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n,
                                     struct CUstream_st *s)
{
	NEED_INIT();
	s = stream_of(s);
	if (s == NULL)
		return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	int fail = should_fail(OP_HTOD);
	int ok = find_locked((void *)(uintptr_t)dst, n, 0) != NULL;
	if (ok) {
		st.htod++;
		if (st.htod_min == 0 || n < st.htod_min)
			st.htod_min = n;
		if (n > st.htod_max)
			st.htod_max = n;
		st.htod_streams_mask |= 1ul << (s->id & 63);
		if (fail)
			st.copy_failures++;
	}
	pthread_mutex_unlock(&mu);
	if (!ok)
		return E_INVALID_VALUE;
	struct op *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return E_OUT_OF_MEMORY;
	o->kind = Q_COPY, o->dst = (uint8_t *)(uintptr_t)dst, o->src = src, o->n = n;
	o->sum = fnv(src, n), o->fail = fail;
	enqueue(s, o);
	return OK;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	NEED_INIT();
	CUresult e = sync_all();
	if (e != OK)
		return e;
	pthread_mutex_lock(&mu);
	int ok = find_locked((void *)(uintptr_t)src, n, 0) != NULL;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return E_INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return OK;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	NEED_INIT();
	CUresult e = sync_all();
	if (e != OK)
		return e;
	pthread_mutex_lock(&mu);
	int ok = find_locked((void *)(uintptr_t)dst, n, 0) != NULL;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return E_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return OK;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
	NEED_INIT();
	(void)sync_all();
	pthread_mutex_lock(&mu);
	int ok = find_locked((void *)(uintptr_t)p, n, 0) != NULL;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return E_INVALID_VALUE;
	memset((void *)(uintptr_t)p, v, n);
	return OK;
}

EXPORT CUresult cuEventCreate(struct CUevent_st **ev, unsigned flags)
{
	(void)flags;
	*ev = calloc(1, sizeof(**ev));
	return *ev != NULL ? OK : E_OUT_OF_MEMORY;
}

EXPORT CUresult cuEventDestroy_v2(struct CUevent_st *ev)
{
	free(ev);
	return OK;
}

EXPORT CUresult cuEventRecord(struct CUevent_st *ev, struct CUstream_st *s)
{
	NEED_INIT();
	s = stream_of(s);
	struct op *o = calloc(1, sizeof(*o));
	if (o == NULL || s == NULL) {
		free(o);
		return E_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	o->kind = Q_EVENT, o->ev = ev, o->gen = ++ev->recorded;
	pthread_mutex_unlock(&mu);
	enqueue(s, o);
	return OK;
}

EXPORT CUresult cuEventSynchronize(struct CUevent_st *ev)
{
	pthread_mutex_lock(&mu);
	while (ev->done < ev->recorded)
		pthread_cond_wait(&ev_cv, &mu);
	CUresult e = ev->err;
	ev->err = OK;
	pthread_mutex_unlock(&mu);
	return e;
}

EXPORT CUresult cuEventQuery(struct CUevent_st *ev)
{
	pthread_mutex_lock(&mu);
	CUresult e = ev->done < ev->recorded ? 600 /* CUDA_ERROR_NOT_READY */ : ev->err;
	pthread_mutex_unlock(&mu);
	return e;
}

typedef struct {
	char reserved[64];
} ipc_handle;

EXPORT CUresult cuIpcGetMemHandle(ipc_handle *h, CUdeviceptr p)
{
	NEED_INIT();
	if (should_fail(OP_IPC))
		return E_NOT_SUPPORTED;
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &p, sizeof(p));
	return OK;
}

/* ---- modules: the GCM kernels by name ------------------------------------ */
static int module_token;
static const char *kernel_names[3] = {"sl_gcm_ghash", "sl_gcm_tag", "sl_gcm_ctr"};
static int fn_ids[3] = {0, 1, 2};

EXPORT CUresult cuModuleLoadData(void **mod, const void *image)
{
	NEED_INIT();
	/* PTX text, as nvcc --ptx writes it */
	if (image == NULL || strstr((const char *)image, ".entry sl_gcm_ctr") == NULL)
		return E_INVALID_IMAGE;
	*mod = &module_token;
	return OK;
}

EXPORT CUresult cuModuleUnload(void *mod)
{
	return mod == &module_token ? OK : E_INVALID_VALUE;
}

EXPORT CUresult cuModuleGetFunction(int **f, void *mod, const char *name)
{
	if (mod != &module_token)
		return E_INVALID_VALUE;
	for (int i = 0; i < 3; i++)
		if (strcmp(name, kernel_names[i]) == 0) {
			*f = &fn_ids[i];
			return OK;
		}
	return E_NOT_FOUND;
}

EXPORT CUresult cuLaunchKernel(int *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, struct CUstream_st *s,
                               void **params, void **extra)
{
	(void)shmem, (void)extra;
	NEED_INIT();
	s = stream_of(s);
	if (f == NULL || s == NULL || gy != 1 || gz != 1 || by != 1 || bz != 1)
		return E_INVALID_VALUE;
	if (should_fail(OP_LAUNCH))
		return E_LAUNCH_FAILED;
	struct op *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return E_OUT_OF_MEMORY;
	o->kind = Q_KERNEL;
	o->k.fn = *f;
	o->k.threads = (uint64_t)gx * bx;
	/* (params, batch, src, acc|dst [, ok]) as in gcm_kernel.cu */
	o->k.a[0] = *(CUdeviceptr *)params[0];
	o->k.b = *(slg_batch *)params[1];
	o->k.a[1] = *(CUdeviceptr *)params[2];
	o->k.a[2] = *(CUdeviceptr *)params[3];
	if (*f != 0)
		o->k.a[3] = *(CUdeviceptr *)params[4];
	pthread_mutex_lock(&mu);
	st.launches++;
	pthread_mutex_unlock(&mu);
	enqueue(s, o);
	return OK;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **name)
{
	switch (r) {
	case OK:
		*name = "CUDA_SUCCESS";
		break;
	case E_INVALID_VALUE:
		*name = "CUDA_ERROR_INVALID_VALUE";
		break;
	case E_OUT_OF_MEMORY:
		*name = "CUDA_ERROR_OUT_OF_MEMORY";
		break;
	case E_NOT_INITIALIZED:
		*name = "CUDA_ERROR_NOT_INITIALIZED";
		break;
	case E_NO_DEVICE:
		*name = "CUDA_ERROR_NO_DEVICE";
		break;
	case E_INVALID_IMAGE:
		*name = "CUDA_ERROR_INVALID_IMAGE";
		break;
	case E_NOT_FOUND:
		*name = "CUDA_ERROR_NOT_FOUND";
		break;
	case E_LAUNCH_FAILED:
		*name = "CUDA_ERROR_LAUNCH_FAILED";
		break;
	case E_NOT_SUPPORTED:
		*name = "CUDA_ERROR_NOT_SUPPORTED";
		break;
	default:
		*name = "CUDA_ERROR_UNKNOWN";
		return E_INVALID_VALUE;
	}
	return OK;
}
