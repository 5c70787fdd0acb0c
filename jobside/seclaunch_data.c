/* libseclaunch_data.so (seclaunch_data.h): runs inside the job's process. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../crypto/gcm_arith.h"
#include "../include/seclaunch/cuda_api.h"
#include "seclaunch_data.h"

#define API __attribute__((visibility("default")))
#define MIB ((uint64_t)1 << 20)
#define MIN_COPY (8 * MIB)
#define NSLOTS 4
#define NSTREAMS 2
#define KEY_AREA 4096 /* --gpu-decrypt: the file key, then the SLD file at this offset */

static const uint8_t sbox[256] = {SLG_SBOX_INIT};

/* ---- errors --------------------------------------------------------------- */
static __thread char last_err[512];

__attribute__((format(printf, 2, 3))) static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_err, sizeof(last_err), fmt, ap);
	va_end(ap);
	return code;
}

API const char *sldata_last_error(void)
{
	return last_err;
}

static volatile sig_atomic_t cancelled;

API void sldata_cancel(void)
{
	cancelled = 1;
}

static void wipe(void *p, size_t n)
{
	volatile uint8_t *v = p;
	while (n-- > 0)
		*v++ = 0;
}

/* ---- the CUDA driver API, by dlopen (seclaunch/cuda_api.h) --------------- */
static struct sl_cuda_api cu;
static int cu_loaded;

static int cuda_load(void)
{
	char why[512];
	if (cu_loaded)
		return SLDATA_OK;
	if (!sl_cuda_api_load(&cu, why, sizeof(why)))
		return fail(SLDATA_E_SYSTEM, "%s", why);
	cu_loaded = 1;
	return SLDATA_OK;
}

static const char *cu_err(CUresult r)
{
	return sl_cuda_err(&cu, r);
}

#define CU(expr, ...)                                                                              \
	do {                                                                                       \
		CUresult r_ = (expr);                                                              \
		if (r_ != 0) {                                                                     \
			char m_[200];                                                              \
			snprintf(m_, sizeof(m_), __VA_ARGS__);                                     \
			rc = fail(SLDATA_E_SYSTEM, "%s: %s", m_, cu_err(r_));                      \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* ---- the dataset ---------------------------------------------------------- */
struct sldata {
	int fd;
	uint64_t size;      /* plaintext bytes */
	uint64_t file_size; /* bytes of the memory file */
	const uint8_t *map;
	size_t map_len;
	int sld; /* --gpu-decrypt: the file holds the key and the SLD file */
	uint64_t header_len, chunk_count;
	uint32_t chunk_size;
	uint8_t digest[32];
	sldata_stats stats;
};

static int map_file(sldata *d)
{
	struct stat st;
	if (fstat(d->fd, &st) != 0)
		return fail(SLDATA_E_SYSTEM, "fstat: %s", strerror(errno));
	d->file_size = (uint64_t)st.st_size;
	if (d->file_size == 0)
		return SLDATA_OK;
	void *p = mmap(NULL, (size_t)d->file_size, PROT_READ, MAP_SHARED, d->fd, 0);
	if (p == MAP_FAILED)
		return fail(SLDATA_E_SYSTEM, "mapping the staged memory file: %s", strerror(errno));
	d->map = p;
	d->map_len = (size_t)d->file_size;
	return SLDATA_OK;
}

static int new_dataset(int fd, uint64_t size, sldata **out)
{
	sldata *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return fail(SLDATA_E_SYSTEM, "out of memory");
	d->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	d->size = size;
	if (d->fd < 0) {
		free(d);
		return fail(SLDATA_E_USAGE, "descriptor %d: %s", fd, strerror(errno));
	}
	int rc = map_file(d);
	if (rc != SLDATA_OK) {
		sldata_close(d);
		return rc;
	}
	*out = d;
	return SLDATA_OK;
}

API int sldata_open_fd(int fd, uint64_t size, sldata **out)
{
	sldata *d = NULL;
	int rc = new_dataset(fd, size, &d);
	if (rc != SLDATA_OK)
		return rc;
	if (d->file_size < size) {
		sldata_close(d);
		return fail(SLDATA_E_INPUT, "the memory file holds %llu bytes, not %llu",
		            (unsigned long long)d->file_size, (unsigned long long)size);
	}
	*out = d;
	return SLDATA_OK;
}

static int get_u64(json_t *o, const char *k, uint64_t *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return 0;
	*v = (uint64_t)json_integer_value(x);
	return 1;
}

static int unhex32(const char *h, uint8_t out[32])
{
	if (h == NULL || strlen(h) != 64)
		return 0;
	for (int i = 0; i < 32; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			return 0;
		out[i] = (uint8_t)v;
	}
	return 1;
}

/* The SLD geometry of a --gpu-decrypt entry, checked against the file. */
static int sld_setup(sldata *d, json_t *e, const char *id)
{
	uint64_t hl = 0, cs = 0, cc = 0;
	json_t *h = json_object_get(e, "header_sha256");
	if (!get_u64(e, "header_len", &hl) || !get_u64(e, "chunk_size", &cs) ||
	    !get_u64(e, "chunk_count", &cc) || !json_is_string(h) ||
	    !unhex32(json_string_value(h), d->digest))
		return fail(SLDATA_E_INPUT,
		            "%s: the gpu-decrypt entry lacks header_len, chunk_size, chunk_count "
		            "or header_sha256",
		            id);
	if (cs < 65536 || cs > (64u << 20) || (cs & (cs - 1)) != 0 || cc == 0 ||
	    cc != (d->size == 0 ? 1 : (d->size + cs - 1) / cs) || hl == 0 || hl > 65536)
		return fail(SLDATA_E_INPUT, "%s: inconsistent SLD geometry", id);
	if (d->file_size != KEY_AREA + hl + d->size + 16 * cc)
		return fail(SLDATA_E_INPUT,
		            "%s: the memory file has %llu bytes, the SLD needs %llu", id,
		            (unsigned long long)d->file_size,
		            (unsigned long long)(KEY_AREA + hl + d->size + 16 * cc));
	d->sld = 1;
	d->header_len = hl;
	d->chunk_size = (uint32_t)cs;
	d->chunk_count = cc;
	return SLDATA_OK;
}

/* Asks the data service for dataset id: {"op":"open","dataset":id} (and
 * "token" when SECLAUNCH_DATA_TOKEN is set), the
 * descriptor comes by SCM_RIGHTS with {"ok":true,"info":{...}}. */
static int from_service(const char *id, int *fd, json_t **info)
{
	const char *path = getenv("SECLAUNCH_DATA_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s = -1, rc = SLDATA_E_SYSTEM;
	json_t *rq = NULL, *ans = NULL;
	char *text = NULL, buf[4096];
	*fd = -1;
	if (path == NULL || strlen(path) >= sizeof(sa.sun_path))
		return fail(SLDATA_E_USAGE,
		            "dataset %s: not in SECLAUNCH_DATA with a descriptor, "
		            "and no data service (SECLAUNCH_DATA_SOCKET)",
		            id);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = fail(SLDATA_E_SYSTEM, "data service %s: %s", path, strerror(errno));
		goto out;
	}
	/* under `seclaunch serve` every request carries the step's token */
	const char *tok = getenv("SECLAUNCH_DATA_TOKEN");
	rq = json_pack("{s:s,s:s,s:s*}", "op", "open", "dataset", id, "token",
	               tok != NULL && tok[0] != '\0' ? tok : NULL);
	text = rq != NULL ? json_dumps(rq, JSON_COMPACT) : NULL;
	if (text == NULL || send(s, text, strlen(text), MSG_NOSIGNAL) < 0) {
		rc = fail(SLDATA_E_SYSTEM, "data service %s: send: %s", path, strerror(errno));
		goto out;
	}
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} cb;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.c, .msg_controllen = sizeof(cb.c)};
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0) {
		rc = fail(SLDATA_E_SYSTEM, "data service %s: no answer", path);
		goto out;
	}
	buf[n] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	ans = json_loads(buf, 0, NULL);
	if (ans == NULL || !json_is_true(json_object_get(ans, "ok"))) {
		json_t *m = ans != NULL ? json_object_get(ans, "message") : NULL;
		rc = fail(SLDATA_E_USAGE, "data service refused dataset %s: %s", id,
		          json_is_string(m) ? json_string_value(m) : "malformed answer");
		goto out;
	}
	if (*fd < 0 || !json_is_object(json_object_get(ans, "info"))) {
		rc = fail(SLDATA_E_INPUT, "data service: dataset %s came without a descriptor", id);
		goto out;
	}
	*info = json_incref(json_object_get(ans, "info"));
	rc = SLDATA_OK;
out:
	if (rc != SLDATA_OK && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	if (s >= 0)
		close(s);
	free(text);
	json_decref(rq);
	json_decref(ans);
	return rc;
}

API int sldata_open(const char *dataset_id, sldata **out)
{
	int rc = SLDATA_E_INPUT, fd = -1, own_fd = 0;
	json_t *doc = NULL, *e = NULL, *info = NULL;
	uint64_t size = 0, fdv = 0;
	const char *env = getenv("SECLAUNCH_DATA");
	sldata *d = NULL;

	*out = NULL;
	if (dataset_id == NULL)
		return fail(SLDATA_E_USAGE, "no dataset id");
	if (env != NULL) {
		doc = json_loads(env, 0, NULL);
		if (!json_is_object(doc)) {
			rc = fail(SLDATA_E_INPUT, "SECLAUNCH_DATA is not a JSON object");
			goto out;
		}
		e = json_object_get(doc, dataset_id);
	}
	json_t *k0 = json_is_object(e) ? json_object_get(e, "kind") : NULL;
	if (json_is_string(k0) && strcmp(json_string_value(k0), "gpu") == 0) {
		rc = fail(SLDATA_E_USAGE, "%s: staged with --stage gpu-ipc (a CUDA IPC handle)",
		          dataset_id);
		goto out;
	}
	if (json_is_object(e) && get_u64(e, "fd", &fdv) && fdv <= INT_MAX) {
		fd = (int)fdv;
	} else {
		rc = from_service(dataset_id, &fd, &info);
		if (rc != SLDATA_OK)
			goto out;
		own_fd = 1;
		e = info;
	}
	if (!get_u64(e, "size", &size)) {
		rc = fail(SLDATA_E_INPUT, "%s: entry without a size", dataset_id);
		goto out;
	}
	json_t *kind = json_object_get(e, "kind");
	rc = new_dataset(fd, size, &d);
	if (rc != SLDATA_OK)
		goto out;
	if (json_is_string(kind) && strcmp(json_string_value(kind), "sld") == 0)
		rc = sld_setup(d, e, dataset_id);
	else if (d->file_size < size)
		rc = fail(SLDATA_E_INPUT, "%s: the memory file holds %llu bytes, not %llu",
		          dataset_id, (unsigned long long)d->file_size, (unsigned long long)size);
	if (rc != SLDATA_OK)
		goto out;
	*out = d;
	d = NULL;
out:
	sldata_close(d);
	if (own_fd && fd >= 0)
		close(fd);
	json_decref(info);
	json_decref(doc);
	return rc;
}

API void sldata_close(sldata *d)
{
	if (d == NULL)
		return;
	if (d->map != NULL)
		munmap((void *)d->map, d->map_len);
	if (d->fd >= 0)
		close(d->fd);
	wipe(d, sizeof(*d));
	free(d);
}

API uint64_t sldata_size(const sldata *d)
{
	return d->size;
}

API int sldata_gpu_decrypt(const sldata *d)
{
	return d->sld;
}

API void sldata_get_stats(const sldata *d, sldata_stats *out)
{
	*out = d->stats;
}

/* ---- the pinned pool ------------------------------------------------------ */
struct pool {
	size_t slot_size;
	void *pinned[NSLOTS];
	CUevent ev[NSLOTS];
	int busy[NSLOTS];
	CUstream stream[NSTREAMS];
};

static int pool_open(struct pool *p, size_t slot_size)
{
	int rc = SLDATA_E_SYSTEM;
	memset(p, 0, sizeof(*p));
	p->slot_size = slot_size;
	for (int i = 0; i < NSTREAMS; i++)
		CU(cu.StreamCreate(&p->stream[i], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	for (int i = 0; i < NSLOTS; i++) {
		CU(cu.MemHostAlloc(&p->pinned[i], slot_size, 0),
		   "cuMemHostAlloc of a %zu-byte pinned buffer", slot_size);
		CU(cu.EventCreate(&p->ev[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	}
	rc = SLDATA_OK;
out:
	return rc;
}

/* The slot for copy k, once its previous copy's event completed. */
static int pool_slot(struct pool *p, uint64_t k, unsigned *slot)
{
	int rc = SLDATA_E_SYSTEM;
	unsigned s = (unsigned)(k % NSLOTS);
	if (p->busy[s])
		CU(cu.EventSynchronize(p->ev[s]), "a host-to-device copy failed");
	p->busy[s] = 0;
	*slot = s;
	rc = SLDATA_OK;
out:
	return rc;
}

/* Waits for every copy, zeroes and frees every pinned buffer; the first
 * failure is kept in rc. */
static int pool_close(struct pool *p, int rc)
{
	for (int i = 0; i < NSLOTS; i++) {
		if (p->busy[i]) {
			CUresult r = cu.EventSynchronize(p->ev[i]);
			if (r != 0 && rc == SLDATA_OK)
				rc = fail(SLDATA_E_SYSTEM, "a host-to-device copy failed: %s",
				          cu_err(r));
		}
		if (p->pinned[i] != NULL) {
			wipe(p->pinned[i], p->slot_size);
			(void)cu.MemFreeHost(p->pinned[i]);
		}
		if (p->ev[i] != NULL)
			(void)cu.EventDestroy(p->ev[i]);
	}
	for (int i = 0; i < NSTREAMS; i++)
		if (p->stream[i] != NULL) {
			CUresult r = cu.StreamSynchronize(p->stream[i]);
			if (r != 0 && rc == SLDATA_OK)
				rc = fail(SLDATA_E_SYSTEM, "a host-to-device copy failed: %s",
				          cu_err(r));
			(void)cu.StreamDestroy(p->stream[i]);
		}
	memset(p, 0, sizeof(*p));
	return rc;
}

/* One copy of n bytes from src to dst through slot k's pinned buffer. */
static int pool_copy(struct pool *p, sldata *d, uint64_t k, CUdeviceptr dst, const uint8_t *src,
                     size_t n, unsigned *stream_out)
{
	int rc = SLDATA_E_SYSTEM;
	unsigned slot = 0;
	if ((rc = pool_slot(p, k, &slot)) != SLDATA_OK)
		goto out;
	rc = SLDATA_E_SYSTEM;
	memcpy(p->pinned[slot], src, n);
	CUstream st = p->stream[k % NSTREAMS];
	CU(cu.MemcpyHtoDAsync(dst, p->pinned[slot], n, st), "copying %zu bytes to the device", n);
	CU(cu.EventRecord(p->ev[slot], st), "cuEventRecord");
	p->busy[slot] = 1;
	d->stats.copies++;
	d->stats.bytes_copied += n;
	if (d->stats.min_copy == 0 || n < d->stats.min_copy)
		d->stats.min_copy = n;
	if (n > d->stats.max_copy)
		d->stats.max_copy = n;
	if (stream_out != NULL)
		*stream_out = (unsigned)(k % NSTREAMS);
	rc = SLDATA_OK;
out:
	return rc;
}

static size_t copy_size(void)
{
	const char *e = getenv("SECLAUNCH_DATA_COPY_MB");
	unsigned long mb = e != NULL ? strtoul(e, NULL, 10) : 0;
	return (size_t)(mb * MIB > MIN_COPY ? mb * MIB : MIN_COPY);
}

/* ---- plaintext fill --------------------------------------------------------- */
static int fill_plain(sldata *d, CUdeviceptr dptr)
{
	struct pool p;
	size_t cs = copy_size();
	size_t slot = d->size < cs ? (size_t)d->size : cs;
	int rc = pool_open(&p, slot > 0 ? slot : 1);
	if (rc != SLDATA_OK)
		return pool_close(&p, rc);
	d->stats.pinned_buffers = NSLOTS;
	d->stats.streams = NSTREAMS;
	uint64_t k = 0;
	for (uint64_t off = 0; off < d->size; off += slot, k++) {
		if (cancelled) {
			rc = fail(SLDATA_E_CANCELLED, "cancelled at byte %llu",
			          (unsigned long long)off);
			break;
		}
		size_t n = d->size - off < slot ? (size_t)(d->size - off) : slot;
		rc = pool_copy(&p, d, k, dptr + off, d->map + off, n, NULL);
		if (rc != SLDATA_OK)
			break;
	}
	return pool_close(&p, rc);
}

/* ---- GPU decryption ----------------------------------------------------------- */
static char *read_ptx(void)
{
	char path[PATH_MAX];
	const char *env = getenv("SECLAUNCH_GCM_PTX");
	Dl_info info;
	if (env != NULL && *env != '\0') {
		snprintf(path, sizeof(path), "%s", env);
	} else if (dladdr((void *)read_ptx, &info) != 0 && info.dli_fname != NULL) {
		snprintf(path, sizeof(path), "%s", info.dli_fname);
		char *slash = strrchr(path, '/');
		snprintf(slash != NULL ? slash + 1 : path,
		         sizeof(path) - (size_t)(slash != NULL ? slash + 1 - path : 0),
		         "gcm_kernel.ptx");
	} else {
		return NULL;
	}
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		fail(SLDATA_E_SYSTEM, "the GCM kernel %s: %s (built with nvcc)", path,
		     strerror(errno));
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 65536 + 1 > cap) {
			char *nb = realloc(buf, cap = cap * 2 + 65536 + 1);
			if (nb == NULL)
				break;
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

static unsigned grid_of(uint64_t threads, unsigned block)
{
	uint64_t g = (threads + block - 1) / block;
	return (unsigned)(g > 0 ? g : 1);
}

static int fill_decrypt(sldata *d, CUdeviceptr dptr)
{
	int rc = SLDATA_E_SYSTEM;
	struct pool p = {0};
	int pool_up = 0;
	CUmodule mod = NULL;
	CUfunction kg = NULL, kt = NULL, kc = NULL;
	CUdeviceptr dparams = 0, dct[NSTREAMS] = {0}, dacc[NSTREAMS] = {0}, dok = 0;
	char *ptx = NULL;
	slg_params *hp = NULL;
	uint32_t *ok = NULL;
	const uint64_t stride = (uint64_t)d->chunk_size + SLG_TAG_LEN;
	uint64_t per = (copy_size() + stride - 1) / stride;
	if (per > d->chunk_count)
		per = d->chunk_count;
	const size_t batch_bytes = (size_t)(per * stride);
	const uint8_t *chunks = d->map + KEY_AREA + d->header_len;

	if ((ptx = read_ptx()) == NULL) {
		rc = last_err[0] != '\0' ? SLDATA_E_SYSTEM
		                         : fail(SLDATA_E_SYSTEM, "the GCM kernel cannot be found");
		goto out;
	}
	CU(cu.ModuleLoadData(&mod, ptx), "loading the AES-256-GCM kernel (cuModuleLoadData)");
	CU(cu.ModuleGetFunction(&kg, mod, "sl_gcm_ghash"), "kernel sl_gcm_ghash");
	CU(cu.ModuleGetFunction(&kt, mod, "sl_gcm_tag"), "kernel sl_gcm_tag");
	CU(cu.ModuleGetFunction(&kc, mod, "sl_gcm_ctr"), "kernel sl_gcm_ctr");
	CU(cu.MemAlloc(&dparams, sizeof(slg_params)), "allocating the kernel's parameters");
	CU(cu.MemAlloc(&dok, d->chunk_count * sizeof(uint32_t)), "allocating the tag results");
	CU(cu.MemsetD8(dok, 0, d->chunk_count * sizeof(uint32_t)), "clearing the tag results");
	for (int i = 0; i < NSTREAMS; i++) {
		CU(cu.MemAlloc(&dct[i], batch_bytes), "allocating %zu bytes for ciphertext",
		   batch_bytes);
		CU(cu.MemAlloc(&dacc[i], per * 2 * sizeof(uint64_t)), "allocating GHASH sums");
		CU(cu.MemsetD8(dacc[i], 0, per * 2 * sizeof(uint64_t)), "clearing GHASH sums");
	}
	if ((rc = pool_open(&p,
	                    batch_bytes > sizeof(slg_params) ? batch_bytes : sizeof(slg_params))) !=
	    SLDATA_OK)
		goto out;
	pool_up = 1;
	rc = SLDATA_E_SYSTEM;
	d->stats.pinned_buffers = NSLOTS;
	d->stats.streams = NSTREAMS;

	/* round keys and H from the file key (first bytes of the memory file) */
	hp = (slg_params *)p.pinned[NSLOTS - 1];
	memset(hp, 0, sizeof(*hp));
	slg_params_init(hp, d->map, d->digest, sbox);
	CU(cu.MemcpyHtoDAsync(dparams, hp, sizeof(*hp), p.stream[0]), "copying the round keys");
	CU(cu.StreamSynchronize(p.stream[0]), "copying the round keys");
	wipe(hp, sizeof(*hp));
	hp = NULL;
	CU(cu.StreamSynchronize(p.stream[1]), "waiting for stream 1");

	uint64_t k = 0;
	for (uint64_t first = 0; first < d->chunk_count; first += per, k++) {
		if (cancelled) {
			rc = fail(SLDATA_E_CANCELLED, "cancelled at chunk %llu",
			          (unsigned long long)first);
			goto out;
		}
		uint32_t n =
		    (uint32_t)(d->chunk_count - first < per ? d->chunk_count - first : per);
		uint64_t last = first + n - 1;
		uint32_t last_len = last + 1 < d->chunk_count
		                        ? d->chunk_size
		                        : (uint32_t)(d->size - last * (uint64_t)d->chunk_size);
		size_t bytes = (size_t)((n - 1) * stride + last_len + SLG_TAG_LEN);
		unsigned si = 0;
		if ((rc = pool_copy(&p, d, k, dct[k % NSTREAMS], chunks + first * stride, bytes,
		                    &si)) != SLDATA_OK)
			goto out;
		rc = SLDATA_E_SYSTEM;
		slg_batch b = {.first_chunk = first,
		               .nchunks = n,
		               .chunk_size = d->chunk_size,
		               .last_len = last_len,
		               .final_last = last + 1 == d->chunk_count};
		CUdeviceptr src = dct[si], acc = dacc[si], dst = dptr + first * d->chunk_size;
		void *ag[] = {&dparams, &b, &src, &acc};
		void *at[] = {&dparams, &b, &src, &acc, &dok};
		void *ac[] = {&dparams, &b, &src, &dst, &dok};
		CU(cu.LaunchKernel(kg, grid_of(slg_ghash_threads(&b), 256), 1, 1, 256, 1, 1, 0,
		                   p.stream[si], ag, NULL),
		   "launching sl_gcm_ghash");
		CU(cu.LaunchKernel(kt, grid_of(n, 256), 1, 1, 256, 1, 1, 0, p.stream[si], at, NULL),
		   "launching sl_gcm_tag");
		CU(cu.LaunchKernel(kc, grid_of(slg_ctr_threads(&b), 256), 1, 1, 256, 1, 1, 0,
		                   p.stream[si], ac, NULL),
		   "launching sl_gcm_ctr");
		d->stats.kernel_launches += 3;
	}
	rc = pool_close(&p, SLDATA_OK);
	pool_up = 0;
	if (rc != SLDATA_OK)
		goto out;
	rc = SLDATA_E_SYSTEM;
	ok = malloc(d->chunk_count * sizeof(uint32_t));
	if (ok == NULL) {
		rc = fail(SLDATA_E_SYSTEM, "out of memory");
		goto out;
	}
	CU(cu.MemcpyDtoH(ok, dok, d->chunk_count * sizeof(uint32_t)), "reading the tag results");
	for (uint64_t i = 0; i < d->chunk_count; i++)
		if (ok[i] != 1) {
			rc = fail(SLDATA_E_INTEGRITY,
			          "chunk %llu: authentication failed on the GPU (tampered, "
			          "reordered or wrong key); the device buffer was cleared",
			          (unsigned long long)i);
			goto out;
		}
	rc = SLDATA_OK;
out:
	if (hp != NULL)
		wipe(hp, sizeof(*hp));
	if (pool_up)
		rc = pool_close(&p, rc);
	if (dparams != 0) {
		(void)cu.MemsetD8(dparams, 0, sizeof(slg_params));
		(void)cu.MemFree(dparams);
	}
	for (int i = 0; i < NSTREAMS; i++) {
		if (dct[i] != 0)
			(void)cu.MemsetD8(dct[i], 0, batch_bytes), (void)cu.MemFree(dct[i]);
		if (dacc[i] != 0)
			(void)cu.MemsetD8(dacc[i], 0, per * 2 * sizeof(uint64_t)),
			    (void)cu.MemFree(dacc[i]);
	}
	if (dok != 0)
		(void)cu.MemsetD8(dok, 0, d->chunk_count * sizeof(uint32_t)), (void)cu.MemFree(dok);
	if (mod != NULL)
		(void)cu.ModuleUnload(mod);
	free(ok);
	free(ptx);
	return rc;
}

/* ---- the entry points --------------------------------------------------------- */
static int use_context(int device)
{
	int rc = SLDATA_E_SYSTEM;
	CUcontext ctx = NULL;
	CUdevice dev;
	CU(cu.Init(0), "cuInit");
	CU(cu.CtxGetCurrent(&ctx), "cuCtxGetCurrent");
	if (ctx == NULL) { /* the primary context: the one PyTorch and CuPy use */
		CU(cu.DeviceGet(&dev, device), "cuDeviceGet(%d)", device);
		CU(cu.PrimaryCtxRetain(&ctx, dev), "retaining device %d's primary context", device);
		CU(cu.CtxSetCurrent(ctx), "making the primary context current");
	}
	rc = SLDATA_OK;
out:
	return rc;
}

API int sldata_to_device(sldata *d, int device, uint64_t dptr, uint64_t *out)
{
	int rc;
	CUdeviceptr mine = 0;
	struct timespec t0, t1;
	if (d == NULL || (dptr == 0 && out == NULL))
		return fail(SLDATA_E_USAGE,
		            "sldata_to_device: no dataset or no place for the pointer");
	if ((rc = cuda_load()) != SLDATA_OK || (rc = use_context(device)) != SLDATA_OK)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&d->stats, 0, sizeof(d->stats));
	cancelled = 0;
	if (dptr == 0) {
		CUresult r = cu.MemAlloc(&mine, d->size > 0 ? (size_t)d->size : 1);
		if (r != 0)
			return fail(SLDATA_E_SYSTEM, "allocating %llu bytes of device memory: %s",
			            (unsigned long long)d->size, cu_err(r));
		dptr = mine;
	}
	rc = d->sld ? fill_decrypt(d, dptr) : fill_plain(d, dptr);
	if (rc != SLDATA_OK) {
		/* nothing partial stays: the buffer is cleared (and freed if ours) */
		char keep[sizeof(last_err)];
		memcpy(keep, last_err, sizeof(keep));
		if (d->size > 0 && sldata_device_clear(dptr, d->size) != SLDATA_OK)
			snprintf(last_err, sizeof(last_err),
			         "%s; clearing the device buffer FAILED", keep);
		else
			memcpy(last_err, keep, sizeof(keep));
		if (mine != 0)
			(void)cu.MemFree(mine);
		return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	d->stats.seconds =
	    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (out != NULL)
		*out = dptr;
	return SLDATA_OK;
}

API int sldata_device_clear(uint64_t dptr, uint64_t len)
{
	int rc = cuda_load();
	if (rc != SLDATA_OK)
		return rc;
	rc = SLDATA_E_SYSTEM;
	if (len == 0)
		return SLDATA_OK;
	(void)cu.CtxSynchronize(); /* let copies in flight land first */
	CU(cu.MemsetD8(dptr, 0, (size_t)len), "clearing device memory");
	CU(cu.CtxSynchronize(), "confirming the clearing of device memory");
	rc = SLDATA_OK;
out:
	return rc;
}

API int sldata_device_free(uint64_t dptr, uint64_t len)
{
	int rc = sldata_device_clear(dptr, len);
	if (cu_loaded && dptr != 0) {
		CUresult r = cu.MemFree(dptr);
		if (r != 0 && rc == SLDATA_OK)
			rc = fail(SLDATA_E_SYSTEM, "cuMemFree: %s", cu_err(r));
	}
	return rc;
}
