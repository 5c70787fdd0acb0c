/* Host staging: plaintext in a memory file (memfd_secret, else a sealed,
 * locked memfd), never a path on disk or tmpfs. See include/seclaunch/stage.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "stage_int.h"

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

sl_err sl_stage_where_parse(const char *s, sl_stage_where *out)
{
	if (strcmp(s, "auto") == 0)
		*out = SL_STAGE_AUTO;
	else if (strcmp(s, "host") == 0)
		*out = SL_STAGE_HOST;
	else if (strcmp(s, "gpu") == 0)
		*out = SL_STAGE_GPU;
	else if (strcmp(s, "gpu-ipc") == 0)
		*out = SL_STAGE_GPU_IPC;
	else if (strcmp(s, "stream") == 0)
		*out = SL_STAGE_STREAM;
	else
		return sl_err_set(
		    SL_E_USAGE, "--stage: '%s' is not one of auto, host, gpu, gpu-ipc, stream", s);
	return SL_OK;
}

/* Bytes this process has locked already (VmLck), so a new locked mapping is
 * tried only when it fits what RLIMIT_MEMLOCK leaves. */
static uint64_t locked_now(void)
{
	uint64_t kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmLck: %lu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb * 1024u;
}

static bool fits_memlock(uint64_t size)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return false;
	if (rl.rlim_cur == RLIM_INFINITY)
		return true;
	uint64_t used = locked_now();
	return used <= rl.rlim_cur && size <= rl.rlim_cur - used;
}

/* memfd_secret: the pages are locked and removed from the kernel's direct
 * map. Returns false (nothing left open) when the kernel or limit says no. */
static bool try_secretmem(sl_stage *s)
{
	if (s->size == 0 || !fits_memlock(s->size))
		return false;
	int fd = (int)syscall(SYS_memfd_secret, (unsigned)O_CLOEXEC);
	if (fd < 0)
		return false;
	if (ftruncate(fd, (off_t)s->size) != 0) {
		close(fd);
		return false;
	}
	void *p = mmap(NULL, (size_t)s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return false;
	}
	s->fd = fd;
	s->map = p;
	s->map_len = (size_t)s->size;
	s->locked = true;
	s->method = "memfd_secret";
	return true;
}

/* Whether transparent huge pages may back a memory file's mapping
 * (/sys/kernel/mm/transparent_hugepage/shmem_enabled is advise, always,
 * within_size or force; the kernel's default is never). */
static bool shmem_thp_enabled(void)
{
	char buf[128] = "";
	int fd = open("/sys/kernel/mm/transparent_hugepage/shmem_enabled", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, "[advise]") != NULL || strstr(buf, "[always]") != NULL ||
	       strstr(buf, "[within_size]") != NULL || strstr(buf, "[force]") != NULL;
}

static SL_RESULT open_memfd(sl_stage *s)
{
	sl_err rc = SL_E_SYSTEM;
	int fd = memfd_create("seclaunch-stage", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	SL_ENSURE(fd >= 0, SL_E_SYSTEM, "memfd_create for dataset %s: %s", s->dataset_id,
	          strerror(errno));
	s->fd = fd;
	SL_ENSURE(ftruncate(fd, (off_t)s->size) == 0, SL_E_NOMEM,
	          "sizing the staging memory of dataset %s to %llu bytes: %s", s->dataset_id,
	          (unsigned long long)s->size, strerror(errno));
	s->method = "memfd";
	if (s->size > 0) {
		void *p = mmap(NULL, (size_t)s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		SL_ENSURE(p != MAP_FAILED, SL_E_NOMEM,
		          "mapping %llu bytes of staging memory for dataset %s: %s",
		          (unsigned long long)s->size, s->dataset_id, strerror(errno));
		s->map = p;
		s->map_len = (size_t)s->size;
		/* keep plaintext out of core dumps, and out of swap where allowed */
		(void)madvise(p, s->map_len, MADV_DONTDUMP);
		/* 2 MiB pages where the admin enabled them for shared memory: far
		 * fewer faults to set up the stage */
		s->huge = shmem_thp_enabled() && madvise(p, s->map_len, MADV_HUGEPAGE) == 0;
		/* MLOCK_ONFAULT: every page is locked as it is faulted in, before
		 * any plaintext is written to it, and the kernel allocates and
		 * clears pages while (and on whichever thread) the decryptor writes
		 * them, instead of all of them up front on one thread. Without
		 * CAP_IPC_LOCK, a size over RLIMIT_MEMLOCK is refused here as a
		 * whole: the stage is then "memfd" (not locked). */
		s->locked = mlock2(p, s->map_len, MLOCK_ONFAULT) == 0;
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_stage_host_new(const char *dataset_id, uint64_t size, bool force_memfd, sl_stage **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_stage *s = calloc(1, sizeof(*s));

	SL_ENSURE(s != NULL, SL_E_NOMEM, "allocating a staging area");
	s->fd = -1;
	s->size = size;
	s->dataset_id = strdup(dataset_id);
	SL_ENSURE(s->dataset_id != NULL, SL_E_NOMEM, "allocating a staging area");
	SL_ENSURE(size <= (uint64_t)SIZE_MAX / 2, SL_E_TOO_LARGE,
	          "dataset %s: %llu bytes cannot be staged in host memory", dataset_id,
	          (unsigned long long)size);
	if (force_memfd || !try_secretmem(s))
		SL_GUARD(open_memfd(s));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s);
	return rc;
}

#define ALLOC_STEP ((uint64_t)4 << 20)

/* fallocate of a memory file holds the file's lock: on the workers, one
 * waited for the other's allocation with its CPU idle. This one thread does
 * all of it, in order from the start, while the workers decrypt and map. */
static void *alloc_main(void *arg)
{
	sl_stage *s = arg;
	for (uint64_t off = 0; off < s->size && !atomic_load(&s->alloc_stop); off += ALLOC_STEP) {
		uint64_t n = s->size - off < ALLOC_STEP ? s->size - off : ALLOC_STEP;
		if (fallocate(s->fd, 0, (off_t)off, (off_t)n) != 0)
			break; /* the workers' own faults report running out of memory */
	}
	return NULL;
}

void sl_stage_host_alloc_start(sl_stage *s)
{
	/* fallocate goes through the file, not the mapping, and so would get
	 * small pages: with huge pages the workers' faults allocate instead */
	if (s->alloc_running || s->map == NULL || strcmp(s->method, "memfd") != 0 || s->huge)
		return;
	atomic_store(&s->alloc_stop, false);
	s->alloc_running = pthread_create(&s->alloc_tid, NULL, alloc_main, s) == 0;
}

void sl_stage_host_alloc_stop(sl_stage *s)
{
	if (!s->alloc_running)
		return;
	atomic_store(&s->alloc_stop, true);
	pthread_join(s->alloc_tid, NULL);
	s->alloc_running = false;
}

/* Faults in (allocates, clears and, with MLOCK_ONFAULT, locks) the pages of
 * [off, off + len) of a host stage on the calling thread; the decryptor's
 * workers call it for their own chunk just before decrypting into it.
 * fallocate first puts the range's pages into the memory file in one call
 * (about a fifth less kernel time than allocating them one fault at a time;
 * they hold only zeros until they are mapped, locked, and written), then
 * MADV_POPULATE_WRITE maps (and locks) them without a fault per page. Best
 * effort where the kernel lacks either (the same then happens on the first
 * write), but running out of memory is an error here rather than a fault
 * (SIGBUS or the OOM killer) in the middle of a write. */
sl_err sl_stage_host_prefault(sl_stage *s, uint64_t off, size_t len)
{
	if (s->map == NULL || off >= s->map_len || len == 0)
		return SL_OK;
	if (len > s->map_len - off)
		len = (size_t)(s->map_len - off);
	if ((strcmp(s->method, "memfd") == 0 && !s->alloc_running && !s->huge &&
	     fallocate(s->fd, 0, (off_t)off, (off_t)len) != 0 &&
	     (errno == ENOSPC || errno == ENOMEM)) ||
	    (madvise(s->map + off, len, MADV_POPULATE_WRITE) != 0 && errno == ENOMEM))
		return sl_err_set(SL_E_NOMEM,
		                  "dataset %s: no memory for staging bytes %llu to %llu: %s",
		                  s->dataset_id, (unsigned long long)off,
		                  (unsigned long long)(off + len), strerror(errno));
	return SL_OK;
}

sl_err sl_stage_pool_new(const char *dataset_id, uint64_t cap, sl_stage **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_stage *s = NULL;

	*out = NULL;
	SL_GUARD(sl_stage_host_new(dataset_id, cap, false, &s));
	/* every page now, once: no shard pays for faults, and running out of
	 * memory is an error here rather than a fault mid-shard */
	SL_GUARD(sl_stage_host_prefault(s, 0, (size_t)cap));
	/* sealed before any plaintext is in it; our own mapping stays writable */
	s->written = s->size;
	SL_GUARD(sl_stage_seal(s));
	s->pooled = true;
	s->size = 0;
	s->written = 0;
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s);
	return rc;
}

sl_err sl_stage_refill_begin(sl_stage *s, uint64_t size)
{
	if (!s->pooled || s->filling || s->wiped || s->size != 0 || size > s->map_len)
		return sl_err_set(SL_E_INTERNAL,
		                  "dataset %s: a refill of %llu bytes into a buffer of %zu that is "
		                  "not an empty stream buffer",
		                  s->dataset_id, (unsigned long long)size, s->map_len);
	s->size = size;
	s->written = 0;
	s->filling = true;
	return SL_OK;
}

sl_err sl_stage_refill_end(sl_stage *s)
{
	if (!s->filling || s->written != s->size)
		return sl_err_set(SL_E_TRUNCATED, "dataset %s: %llu of %llu bytes staged",
		                  s->dataset_id, (unsigned long long)s->written,
		                  (unsigned long long)s->size);
	s->filling = false;
	return SL_OK;
}

sl_err sl_stage_clear(sl_stage *s)
{
	if (!s->pooled || s->wiped)
		return sl_err_set(SL_E_INTERNAL, "dataset %s: not a live stream buffer",
		                  s->dataset_id);
	/* only what was written can be non-zero: the rest was never touched
	 * since the last clear */
	if (s->written > 0)
		sl_wipe(s->map, (size_t)s->written);
	s->size = 0;
	s->written = 0;
	s->filling = false;
	return SL_OK;
}

sl_err sl_stage_write(sl_stage *s, uint64_t off, const void *p, size_t len)
{
	if ((s->sealed && !s->filling) || s->wiped)
		return sl_err_set(SL_E_INTERNAL, "dataset %s: write after staging ended",
		                  s->dataset_id);
	if (off != s->written || len > s->size - s->written)
		return sl_err_set(SL_E_INTERNAL,
		                  "dataset %s: write of %zu bytes at %llu, expected offset %llu of "
		                  "%llu",
		                  s->dataset_id, len, (unsigned long long)off,
		                  (unsigned long long)s->written, (unsigned long long)s->size);
	if (s->gpu != NULL) {
		sl_err rc = sl_gpu_stage_write(s->gpu, off, p, len);
		if (rc != SL_OK)
			return rc;
	} else if (len > 0) {
		memcpy(s->map + off, p, len);
	}
	s->written += len;
	return SL_OK;
}

sl_err sl_stage_seal(sl_stage *s)
{
	if (s->sealed)
		return SL_OK;
	if (s->written != s->size)
		return sl_err_set(SL_E_TRUNCATED, "dataset %s: %llu of %llu bytes staged",
		                  s->dataset_id, (unsigned long long)s->written,
		                  (unsigned long long)s->size);
	if (s->gpu != NULL) {
		sl_err rc = sl_gpu_stage_finish(s->gpu);
		if (rc != SL_OK)
			return rc;
	} else if (strcmp(s->method, "memfd_secret") == 0) {
		/* not sealable: fixed size, no write(2), no reopen; mode 0400 */
		if (fchmod(s->fd, 0400) != 0)
			return sl_err_set(SL_E_SYSTEM,
			                  "dataset %s: fchmod of the secret memory: %s",
			                  s->dataset_id, strerror(errno));
	} else {
		if (s->locked)
			s->method = "memfd+mlock";
		/* FUTURE_WRITE rather than WRITE: our mapping, made before the seal,
		 * stays writable so the wipe can zero the pages; the job gets no
		 * write(2), no new writable mapping, no mprotect to writable. */
		int seals = F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
		if (fcntl(s->fd, F_ADD_SEALS, seals) != 0)
			return sl_err_set(SL_E_SYSTEM, "dataset %s: sealing the staging memory: %s",
			                  s->dataset_id, strerror(errno));
	}
	s->sealed = true;
	return SL_OK;
}

/* Below this a stage is wiped on the calling thread alone. */
#define WIPE_PARALLEL_MIN ((size_t)64 << 20)
#define WIPE_THREADS_MAX 64

struct wipe_part {
	uint8_t *p;
	size_t len;
	bool zero; /* false: known to hold only zeros already */
	pthread_t tid;
	bool started;
};

/* Zeroes its slice, then unmaps it: the kernel tears down a mapping's pages
 * under the shared mmap lock, so slices unmapped on several threads are
 * torn down in parallel. */
static void *wipe_part_main(void *arg)
{
	struct wipe_part *w = arg;
	if (w->zero)
		sl_wipe(w->p, w->len);
	(void)munmap(w->p, w->len);
	return NULL;
}

/* Zeroes and unmaps the stage's mapping, on one thread per CPU for a big
 * one. Every slice is zeroed before this returns (a slice whose thread
 * could not start is done here). munmap also unlocks: a separate munlock
 * would walk the pages once more (about 40 ms per GiB). */
static void wipe_map(sl_stage *s)
{
	struct wipe_part w[WIPE_THREADS_MAX];
	size_t n = s->map_len >= WIPE_PARALLEL_MIN ? sl_sld_default_threads() : 1;
	if (n > WIPE_THREADS_MAX)
		n = WIPE_THREADS_MAX;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), huge = (size_t)2 << 20;
	/* slices on huge-page bounds, so none splits a huge page */
	size_t align = s->huge ? huge : page, step = (s->map_len / n + align - 1) / align * align;
	/* an emptied stream buffer holds zeros only (sl_stage_clear zeroed
	 * every byte written since the pages came zeroed from the kernel) */
	bool empty = s->pooled && !s->filling && s->written == 0;
	for (size_t i = 0; i < n; i++) {
		size_t off = i * step < s->map_len ? i * step : s->map_len;
		size_t end = off + step < s->map_len && i + 1 < n ? off + step : s->map_len;
		w[i] = (struct wipe_part){.p = s->map + off, .len = end - off, .zero = !empty};
		if (i > 0 && w[i].len > 0)
			w[i].started = pthread_create(&w[i].tid, NULL, wipe_part_main, &w[i]) == 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!w[i].started && w[i].len > 0)
			(void)wipe_part_main(&w[i]);
	for (size_t i = 0; i < n; i++)
		if (w[i].started)
			pthread_join(w[i].tid, NULL);
	s->map = NULL;
}

sl_err sl_stage_wipe(sl_stage *s)
{
	sl_err rc = SL_OK;
	if (s == NULL || s->wiped)
		return SL_OK;
	sl_stage_host_alloc_stop(s);
	if (s->gpu != NULL)
		rc = sl_gpu_stage_wipe(s->gpu);
	s->gpu = NULL;
	if (s->map != NULL)
		wipe_map(s);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->wiped = true;
	return rc;
}

void sl_stage_free(sl_stage *s)
{
	if (s == NULL)
		return;
	sl_err ignored = sl_stage_wipe(s); /* the caller reported wipe results already */
	(void)ignored;
	sl_gpu_job_free(s->gpu_job);
	free(s->dataset_id);
	free(s);
}

const char *sl_stage_method(const sl_stage *s)
{
	return s->method;
}

const char *sl_stage_dataset_id(const sl_stage *s)
{
	return s->dataset_id;
}

uint64_t sl_stage_size(const sl_stage *s)
{
	return s->size;
}

int sl_stage_fd(const sl_stage *s)
{
	return s->gpu != NULL ? -1 : s->fd;
}

const uint8_t *sl_stage_host_view(const sl_stage *s)
{
	return s->gpu != NULL ? NULL : s->map;
}

bool sl_stage_wiped(const sl_stage *s)
{
	return s->wiped;
}

sl_err sl_stage_describe(const sl_stage *s, int job_fd, json_t **out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *o = json_object();
	char path[40];

	SL_ENSURE(o != NULL, SL_E_NOMEM, "building SECLAUNCH_DATA");
	SL_ENSURE(!s->wiped && s->sealed, SL_E_INTERNAL, "dataset %s: not staged", s->dataset_id);
	SL_ENSURE(json_object_set_new(o, "size", json_integer((json_int_t)s->size)) == 0,
	          SL_E_NOMEM, "building SECLAUNCH_DATA");
	SL_ENSURE(json_object_set_new(o, "method", json_string(s->method)) == 0, SL_E_NOMEM,
	          "building SECLAUNCH_DATA");
	if (s->gpu != NULL) {
		SL_ENSURE(json_object_set_new(o, "kind", json_string("gpu")) == 0, SL_E_NOMEM,
		          "building SECLAUNCH_DATA");
		SL_GUARD(sl_gpu_stage_describe(s->gpu, o));
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", job_fd);
		SL_ENSURE(json_object_set_new(o, "kind", json_string("host")) == 0 &&
		              json_object_set_new(o, "fd", json_integer(job_fd)) == 0 &&
		              json_object_set_new(o, "path", json_string(path)) == 0 &&
		              json_object_set_new(o, "huge_pages", json_boolean(s->huge)) == 0,
		          SL_E_NOMEM, "building SECLAUNCH_DATA");
		SL_GUARD(sl_gpu_job_describe(s, o));
	}
	*out = o;
	o = NULL;
	rc = SL_OK;
out:
	json_decref(o);
	return rc;
}
