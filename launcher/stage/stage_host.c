/* Host staging: plaintext in a memory file (memfd_secret, else a sealed,
 * locked memfd), never a path on disk or tmpfs. See include/seclaunch/stage.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* A host stage's own state (sl_stage.be). */
struct host_stage {
	int fd;
	uint8_t *map;
	size_t map_len;
	bool locked; /* memfd: mlock2(MLOCK_ONFAULT) over the whole mapping took */
	bool huge;   /* memfd: 2 MiB pages asked for (shmem THP enabled by the admin) */
	/* memfd: the thread that allocates the file's pages ahead of the workers */
	pthread_t alloc_tid;
	bool alloc_running;
	atomic_bool alloc_stop;
};

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
static bool try_secretmem(sl_stage *s, struct host_stage *h)
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
	h->fd = fd;
	h->map = p;
	h->map_len = (size_t)s->size;
	h->locked = true;
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

static SL_RESULT open_memfd(sl_stage *s, struct host_stage *h)
{
	sl_err rc = SL_E_SYSTEM;
	int fd = memfd_create("seclaunch-stage", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	SL_ENSURE(fd >= 0, SL_E_SYSTEM, "memfd_create for dataset %s: %s", s->dataset_id,
	          strerror(errno));
	h->fd = fd;
	SL_ENSURE(ftruncate(fd, (off_t)s->size) == 0, SL_E_NOMEM,
	          "sizing the staging memory of dataset %s to %llu bytes: %s", s->dataset_id,
	          (unsigned long long)s->size, strerror(errno));
	s->method = "memfd";
	if (s->size > 0) {
		void *p = mmap(NULL, (size_t)s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		SL_ENSURE(p != MAP_FAILED, SL_E_NOMEM,
		          "mapping %llu bytes of staging memory for dataset %s: %s",
		          (unsigned long long)s->size, s->dataset_id, strerror(errno));
		h->map = p;
		h->map_len = (size_t)s->size;
		/* keep plaintext out of core dumps, and out of swap where allowed */
		(void)madvise(p, h->map_len, MADV_DONTDUMP);
		/* 2 MiB pages where the admin enabled them for shared memory: far
		 * fewer faults to set up the stage */
		h->huge = shmem_thp_enabled() && madvise(p, h->map_len, MADV_HUGEPAGE) == 0;
		/* MLOCK_ONFAULT: every page is locked as it is faulted in, before
		 * any plaintext is written to it, and the kernel allocates and
		 * clears pages while (and on whichever thread) the decryptor writes
		 * them, instead of all of them up front on one thread. Without
		 * CAP_IPC_LOCK, a size over RLIMIT_MEMLOCK is refused here as a
		 * whole: the stage is then "memfd" (not locked). */
		h->locked = mlock2(p, h->map_len, MLOCK_ONFAULT) == 0;
	}
	rc = SL_OK;
out:
	return rc;
}

/* ---- the backend's table ------------------------------------------------ */

static void alloc_stop(struct host_stage *h)
{
	if (!h->alloc_running)
		return;
	atomic_store(&h->alloc_stop, true);
	pthread_join(h->alloc_tid, NULL);
	h->alloc_running = false;
}

static SL_RESULT host_write(sl_stage *s, uint64_t off, const void *p, size_t len)
{
	struct host_stage *h = s->be;
	if (len > 0)
		memcpy(h->map + off, p, len);
	return SL_OK;
}

static SL_RESULT host_seal(sl_stage *s)
{
	struct host_stage *h = s->be;
	if (strcmp(s->method, "memfd_secret") == 0) {
		/* not sealable: fixed size, no write(2), no reopen; mode 0400 */
		if (fchmod(h->fd, 0400) != 0)
			return sl_err_set(SL_E_SYSTEM,
			                  "dataset %s: fchmod of the secret memory: %s",
			                  s->dataset_id, strerror(errno));
		return SL_OK;
	}
	if (h->locked)
		s->method = "memfd+mlock";
	/* FUTURE_WRITE rather than WRITE: our mapping, made before the seal,
	 * stays writable so the wipe can zero the pages; the job gets no
	 * write(2), no new writable mapping, no mprotect to writable. */
	int seals = F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	if (fcntl(h->fd, F_ADD_SEALS, seals) != 0)
		return sl_err_set(SL_E_SYSTEM, "dataset %s: sealing the staging memory: %s",
		                  s->dataset_id, strerror(errno));
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
static void wipe_map(const sl_stage *s, struct host_stage *h)
{
	struct wipe_part w[WIPE_THREADS_MAX];
	size_t n = h->map_len >= WIPE_PARALLEL_MIN ? sl_sld_default_threads() : 1;
	if (n > WIPE_THREADS_MAX)
		n = WIPE_THREADS_MAX;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), huge = (size_t)2 << 20;
	/* slices on huge-page bounds, so none splits a huge page */
	size_t align = h->huge ? huge : page, step = (h->map_len / n + align - 1) / align * align;
	/* an emptied stream buffer holds zeros only (sl_stage_clear zeroed
	 * every byte written since the pages came zeroed from the kernel) */
	bool empty = s->pooled && !s->filling && s->written == 0;
	for (size_t i = 0; i < n; i++) {
		size_t off = i * step < h->map_len ? i * step : h->map_len;
		size_t end = off + step < h->map_len && i + 1 < n ? off + step : h->map_len;
		w[i] = (struct wipe_part){.p = h->map + off, .len = end - off, .zero = !empty};
		if (i > 0 && w[i].len > 0)
			w[i].started = pthread_create(&w[i].tid, NULL, wipe_part_main, &w[i]) == 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!w[i].started && w[i].len > 0)
			(void)wipe_part_main(&w[i]);
	for (size_t i = 0; i < n; i++)
		if (w[i].started)
			pthread_join(w[i].tid, NULL);
	h->map = NULL;
}

/* The one place a host stage's plaintext is zeroed (sl_stage_clear empties
 * a stream buffer between shards, and this still zeroes it at the end). */
static SL_RESULT host_wipe(sl_stage *s)
{
	struct host_stage *h = s->be;
	if (h == NULL)
		return SL_OK;
	alloc_stop(h);
	if (h->map != NULL)
		wipe_map(s, h);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
	s->be = NULL;
	return SL_OK;
}

static SL_RESULT host_describe(const sl_stage *s, int job_fd, json_t *o)
{
	const struct host_stage *h = s->be;
	char path[40];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", job_fd);
	if (json_object_set_new(o, "kind", json_string("host")) != 0 ||
	    json_object_set_new(o, "fd", json_integer(job_fd)) != 0 ||
	    json_object_set_new(o, "path", json_string(path)) != 0 ||
	    json_object_set_new(o, "huge_pages", json_boolean(h->huge)) != 0)
		return sl_err_set(SL_E_NOMEM, "building SECLAUNCH_DATA");
	return SL_OK;
}

static int host_fd(const sl_stage *s)
{
	const struct host_stage *h = s->be;
	return h != NULL ? h->fd : -1;
}

static const uint8_t *host_view(const sl_stage *s)
{
	const struct host_stage *h = s->be;
	return h != NULL ? h->map : NULL;
}

static const struct sl_stage_ops host_ops = {
    .write = host_write,
    .seal = host_seal,
    .describe = host_describe,
    .wipe = host_wipe,
    .fd = host_fd,
    .view = host_view,
};

/* s's host state; NULL for another backend's stage or a wiped one. */
static struct host_stage *host_of(const sl_stage *s)
{
	return s->ops == &host_ops ? s->be : NULL;
}

/* ---- host staging ------------------------------------------------------- */

sl_err sl_stage_host_new(const char *dataset_id, uint64_t size, bool force_memfd, sl_stage **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_stage *s = NULL;
	struct host_stage *h = NULL;

	SL_GUARD(sl_stage_new_(&host_ops, dataset_id, size, &s));
	h = calloc(1, sizeof(*h));
	SL_ENSURE(h != NULL, SL_E_NOMEM, "allocating a staging area");
	h->fd = -1;
	s->be = h;
	SL_ENSURE(size <= (uint64_t)SIZE_MAX / 2, SL_E_TOO_LARGE,
	          "dataset %s: %llu bytes cannot be staged in host memory", dataset_id,
	          (unsigned long long)size);
	if (force_memfd || !try_secretmem(s, h))
		SL_GUARD(open_memfd(s, h));
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
	struct host_stage *h = s->be;
	for (uint64_t off = 0; off < s->size && !atomic_load(&h->alloc_stop); off += ALLOC_STEP) {
		uint64_t n = s->size - off < ALLOC_STEP ? s->size - off : ALLOC_STEP;
		if (fallocate(h->fd, 0, (off_t)off, (off_t)n) != 0)
			break; /* the workers' own faults report running out of memory */
	}
	return NULL;
}

void sl_stage_host_alloc_start(sl_stage *s)
{
	struct host_stage *h = host_of(s);
	/* fallocate goes through the file, not the mapping, and so would get
	 * small pages: with huge pages the workers' faults allocate instead */
	if (h == NULL || h->alloc_running || h->map == NULL || strcmp(s->method, "memfd") != 0 ||
	    h->huge)
		return;
	atomic_store(&h->alloc_stop, false);
	h->alloc_running = pthread_create(&h->alloc_tid, NULL, alloc_main, s) == 0;
}

void sl_stage_host_alloc_stop(sl_stage *s)
{
	struct host_stage *h = host_of(s);
	if (h != NULL)
		alloc_stop(h);
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
	struct host_stage *h = host_of(s);
	if (h == NULL || h->map == NULL || off >= h->map_len || len == 0)
		return SL_OK;
	if (len > h->map_len - off)
		len = (size_t)(h->map_len - off);
	if ((strcmp(s->method, "memfd") == 0 && !h->alloc_running && !h->huge &&
	     fallocate(h->fd, 0, (off_t)off, (off_t)len) != 0 &&
	     (errno == ENOSPC || errno == ENOMEM)) ||
	    (madvise(h->map + off, len, MADV_POPULATE_WRITE) != 0 && errno == ENOMEM))
		return sl_err_set(SL_E_NOMEM,
		                  "dataset %s: no memory for staging bytes %llu to %llu: %s",
		                  s->dataset_id, (unsigned long long)off,
		                  (unsigned long long)(off + len), strerror(errno));
	return SL_OK;
}

uint8_t *sl_stage_host_map(sl_stage *s)
{
	struct host_stage *h = host_of(s);
	return h != NULL ? h->map : NULL;
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
	struct host_stage *h = host_of(s);
	if (h == NULL || !s->pooled || s->filling || s->wiped || s->size != 0 || size > h->map_len)
		return sl_err_set(SL_E_INTERNAL,
		                  "dataset %s: a refill of %llu bytes into a buffer of %zu that is "
		                  "not an empty stream buffer",
		                  s->dataset_id, (unsigned long long)size,
		                  h != NULL ? h->map_len : 0);
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
	struct host_stage *h = host_of(s);
	if (h == NULL || !s->pooled || s->wiped)
		return sl_err_set(SL_E_INTERNAL, "dataset %s: not a live stream buffer",
		                  s->dataset_id);
	/* only what was written can be non-zero: the rest was never touched
	 * since the last clear */
	if (s->written > 0)
		sl_wipe(h->map, (size_t)s->written);
	s->size = 0;
	s->written = 0;
	s->filling = false;
	return SL_OK;
}
