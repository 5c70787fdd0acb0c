/* Stream staging (stream.h): one thread decrypts shards ahead of the
 * readers into sealed memory files while they fit in the window; a shard
 * the job released lingers (still sealed, in the window) until the linger
 * ends or its room is needed, then is wiped. The memory files are stream
 * buffers (sl_stage_pool_new) of the largest shard's size, made once and
 * reused: a wiped shard's buffer is zeroed in place and goes back to the
 * free list, so no shard pays for allocating, faulting, locking and
 * freeing its pages. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../dataset/dataset_tree.h"
#include "seclaunch/sld.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"
#include "stream.h"

struct slot {
	sl_stage *stage;  /* staged and sealed, or NULL */
	int refs;         /* readers holding it */
	bool demanded;    /* a reader asked for it before it was staged */
	bool consumed;    /* read and released: not staged again unless asked */
	bool lingering;   /* released by every holder, still staged until idle_end */
	bool reused;      /* asked for again while it lingered */
	bool staged_once; /* decrypted before in this run */
	bool gave_way; /* dropped from ahead for a demanded shard: staged again only when asked */
	uint64_t idle_at, idle_end; /* when the last holder released it; its wipe */
};

/* A lingering shard that no reader took back gives way to staging ahead
 * once it has been idle this long (a reader going file by file with read()
 * takes it back within micro- to milliseconds). */
#define STREAM_REUSE_NS (100 * 1000000ull)
/* The staging thread looks at lingering shards at least this often. */
#define STREAM_TICK_NS (50 * 1000000ull)

/* A remote shard's ciphertext lands in one of two memory files kept for
 * the stream's life (one being decrypted, one being fetched into), each
 * sized once for the largest shard and mapped once (out of core dumps;
 * the fetch makes each range's pages present as the range starts, on the
 * fetching thread, so that the first shard's fetch is not held up by
 * faulting in both buffers first), so that no shard pays for allocating,
 * zeroing and freeing its ciphertext's pages. The fetch copies what
 * libcurl hands it straight into the mapping, and the SLD reader
 * authenticates and decrypts straight from it (sl_sld_open_mem): no
 * write() into the file and no read() back. A fetch overwrites the shard's
 * every byte or fails. Ciphertext only, and the process's own: the
 * descriptors are never handed to the job, and each mapping has one
 * writer at a time (the fetch into it ends before its decryption starts,
 * and the other fetch writes the other file), which sl_sld_open_mem
 * requires. */
#define N_CBUFS 2

struct cbuf {
	int fd;
	uint8_t *map; /* cap bytes, MAP_SHARED */
	uint64_t cap;
};

struct sl_stream {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int dfd; /* the local folder (-1: remote) */
	const char *dir;
	sl_remote *remote;
	const sl_sldm *m;
	sl_secret *dek;
	unsigned threads;
	uint32_t n;
	struct slot *slots;
	uint32_t next_seq;    /* the next shard to stage ahead */
	uint64_t reserved;    /* buffer bytes of the shards staged or being staged */
	uint64_t largest;     /* the largest shard's plaintext: every buffer's size */
	sl_stage **free_bufs; /* emptied buffers, ready for the next shard */
	uint32_t n_free, max_bufs;
	uint64_t linger_ns;
	atomic_bool stop;
	sl_err err;
	char errmsg[512];
	bool running;
	pthread_t thr;
	sl_stream_stats st;
	struct cbuf cbuf[N_CBUFS]; /* remote: the ciphertext files (fd -1 for a local dataset) */
	sl_sld_bufs *bufs;         /* the chunk buffers, kept (wiped) across refills */
};

static _Thread_local sl_stream *tl_stream;

static int stream_interrupted(void)
{
	return tl_stream != NULL && atomic_load(&tl_stream->stop) ? SIGTERM : 0;
}

static uint64_t shard_len(const sl_stream *s, uint32_t i)
{
	return sl_sldm_shard_at(s->m, i).plaintext_len;
}

/* What staging shard i holds of the window: one buffer. */
static uint64_t shard_room(const sl_stream *s, uint32_t i)
{
	(void)i;
	return s->largest;
}

/* Empties a shard's buffer in place and keeps it for the next shard; a
 * buffer that cannot be emptied is wiped and freed. Called locked. */
static bool give_back(sl_stream *s, sl_stage *st)
{
	if (sl_stage_clear(st) == SL_OK && s->n_free < s->max_bufs) {
		s->free_bufs[s->n_free++] = st;
		return true;
	}
	bool ok = sl_stage_wipe(st) == SL_OK;
	sl_stage_free(st);
	return ok;
}

/* The next shard to stage (lowest demanded first, else the next one ahead
 * of the readers), or n when none; called locked. */
static uint32_t pick(sl_stream *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->slots[i].demanded && s->slots[i].stage == NULL)
			return i;
	while (s->next_seq < s->n &&
	       (s->slots[s->next_seq].stage != NULL || s->slots[s->next_seq].consumed ||
	        s->slots[s->next_seq].gave_way))
		s->next_seq++;
	return s->next_seq;
}

/* Wipes and frees slot k's stage (no holder). Called locked. */
static void drop(sl_stream *s, uint32_t k)
{
	struct slot *sl = &s->slots[k];
	s->reserved -= shard_room(s, k);
	/* zeroed before the buffer is used again: a reader still mapping it
	 * sees zeros, then only authenticated bytes of a later shard */
	if (!give_back(s, sl->stage))
		s->st.wipe_failed++;
	else if (sl->consumed)
		s->st.wiped++;
	sl->stage = NULL;
	sl->lingering = false;
	if (!sl->consumed && k < s->next_seq)
		s->next_seq = k;
}

/* Lingering shards whose linger ended are wiped; so are those idle past
 * STREAM_REUSE_NS and never taken back, when `ahead` (bytes staging ahead
 * waits to fit) does not fit. Returns whether any shard still lingers.
 * Called locked. */
static bool expire(sl_stream *s, uint64_t ahead)
{
	uint64_t now = sl_now_ns();
	bool any = false;
	for (uint32_t k = 0; k < s->n; k++) {
		struct slot *sl = &s->slots[k];
		if (!sl->lingering)
			continue;
		if (now >= sl->idle_end || (ahead > 0 && s->reserved + ahead > s->st.window &&
		                            !sl->reused && now - sl->idle_at >= STREAM_REUSE_NS))
			drop(s, k);
		else
			any = true;
	}
	return any;
}

/* Staging ahead with no emptied buffer at hand: a lingering shard idle
 * past STREAM_REUSE_NS and never taken back (the longest idle one) gives
 * way now, though the window has room for a new buffer: emptying its
 * buffer in place costs a pass of zeroing, a new one faulting and locking
 * every page now and one more buffer to zero and free when the stream
 * ends (together several times that). A reader going file by file takes a
 * shard back long before STREAM_REUSE_NS. Called locked. */
static void reclaim_idle(sl_stream *s)
{
	uint64_t now = sl_now_ns(), oldest = now;
	uint32_t pick_k = s->n;
	for (uint32_t k = 0; k < s->n; k++) {
		const struct slot *sl = &s->slots[k];
		if (sl->lingering && !sl->reused && now - sl->idle_at >= STREAM_REUSE_NS &&
		    sl->idle_at <= oldest) {
			oldest = sl->idle_at;
			pick_k = k;
		}
	}
	if (pick_k < s->n)
		drop(s, pick_k);
}

/* A reader waits for shard `want`: lingering shards give way first, then
 * shards staged ahead that no one holds yet, the farthest ahead first. One
 * that gave way is staged again when a reader asks for it, not ahead: a
 * reader in shuffled order would otherwise keep asking for shards that
 * push out the ones staged ahead, which are staged ahead again into the
 * room it leaves, each decrypted over and over. Called locked. */
static void make_room(sl_stream *s, uint64_t need, uint32_t want)
{
	for (uint32_t k = 0; k < s->n && s->reserved + need > s->st.window; k++)
		if (k != want && s->slots[k].lingering)
			drop(s, k);
	for (uint32_t k = s->n; k-- > 0 && s->reserved + need > s->st.window;) {
		struct slot *sl = &s->slots[k];
		if (k == want || sl->stage == NULL || sl->refs > 0)
			continue;
		sl->gave_way = !sl->consumed;
		drop(s, k);
	}
}

/* Waits on the stream's condition, at most STREAM_TICK_NS while a shard
 * lingers. Called locked. */
static void wait_for_work(sl_stream *s, bool lingering)
{
	if (!lingering) {
		pthread_cond_wait(&s->cv, &s->mu);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + STREAM_TICK_NS;
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	(void)pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* Fetches shard i into the ciphertext buffer cb and checks its header
 * against the manifest (sl_tree_check_shard_mem, the check every shard
 * reader makes). */
static SL_RESULT fetch_remote(sl_stream *s, uint32_t i, const struct cbuf *cb, char *name,
                              size_t cap)
{
	sl_err rc = SL_E_IO;
	sl_sldm_shard sh = sl_sldm_shard_at(s->m, i);

	snprintf(name, cap, "%s%s", sl_remote_name(s->remote), sh.name);
	SL_GUARD(sl_remote_fetch_mem(s->remote, sh.name, sh.file_size, cb->map, cb->cap));
	SL_GUARD(sl_tree_check_shard_mem(s->m, i, name, cb->map, sh.file_size));
	rc = SL_OK;
out:
	return rc;
}

/* A remote dataset's next shard, fetched (ciphertext, into the ciphertext
 * file not being decrypted) on a thread of its own while the staging
 * thread decrypts the current one, so that the network and the decryption
 * overlap. Only one thread uses the remote reader at a time: the staging
 * thread joins this one first. */
struct prefetch {
	sl_stream *s;
	bool running;
	pthread_t thr;
	uint32_t i;
	int cb; /* the ciphertext file it fills */
	sl_err rc;
	char errmsg[512];
	char name[4096];
};

static void *prefetch_main(void *arg)
{
	struct prefetch *p = arg;
	p->rc = fetch_remote(p->s, p->i, &p->s->cbuf[p->cb], p->name, sizeof(p->name));
	if (p->rc != SL_OK)
		snprintf(p->errmsg, sizeof(p->errmsg), "%s", sl_err_detail());
	return NULL;
}

static void prefetch_start(struct prefetch *p, uint32_t i, int cb)
{
	p->i = i;
	p->cb = cb;
	p->running = pthread_create(&p->thr, NULL, prefetch_main, p) == 0;
}

/* Waits for the prefetch; *cb is the ciphertext file holding shard i when
 * the prefetch fetched it, else -1 (a prefetch of another shard is
 * dropped: its file is free again). */
static SL_RESULT prefetch_take(struct prefetch *p, uint32_t i, int *cb, char *name, size_t cap)
{
	*cb = -1;
	if (!p->running)
		return SL_OK;
	pthread_join(p->thr, NULL);
	p->running = false;
	if (p->i != i)
		return SL_OK;
	if (p->rc != SL_OK)
		return sl_err_set(p->rc, "%s", p->errmsg);
	*cb = p->cb;
	snprintf(name, cap, "%s", p->name);
	return SL_OK;
}

/* Shard i's SLD file for decryption: a local shard opened (*fd, to close),
 * or a remote one in a ciphertext buffer (*cb its index), fetched now
 * unless the prefetch holds it. */
static SL_RESULT shard_source(sl_stream *s, struct prefetch *pf, uint32_t i, int *fd, int *cb,
                              char *name, size_t cap)
{
	sl_err rc = SL_E_IO;

	*fd = -1;
	if (s->remote == NULL)
		return sl_tree_open_shard_at(s->dfd, s->dir, NULL, s->m, i, fd, name, cap);
	SL_GUARD(prefetch_take(pf, i, cb, name, cap));
	if (*cb < 0) {
		*cb = 0;
		SL_GUARD(fetch_remote(s, i, &s->cbuf[0], name, cap));
	}
	rc = SL_OK;
out:
	return rc;
}

/* The shard to fetch ahead of shard i: the next one, when nothing staged
 * or read it yet; n when none. Called locked. */
static uint32_t fetch_ahead(const sl_stream *s, uint32_t i)
{
	uint32_t j = i + 1;
	return s->remote != NULL && j < s->n && s->slots[j].stage == NULL &&
	               !s->slots[j].consumed && !s->slots[j].gave_way
	           ? j
	           : s->n;
}

static void *stage_thread(void *arg)
{
	sl_stream *s = arg;
	char name[4096];
	struct prefetch *pf = calloc(1, sizeof(*pf));

	tl_stream = s;
	if (pf == NULL) {
		pthread_mutex_lock(&s->mu);
		s->err = sl_err_set(SL_E_NOMEM, "stream staging");
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", sl_err_detail());
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		return NULL;
	}
	pf->s = s;
	pthread_mutex_lock(&s->mu);
	while (!atomic_load(&s->stop)) {
		uint32_t i = pick(s);
		if (i < s->n && s->slots[i].demanded)
			make_room(s, shard_room(s, i), i);
		bool lingering = expire(s, i < s->n ? shard_room(s, i) : 0);
		if (i >= s->n || s->reserved + shard_room(s, i) > s->st.window) {
			wait_for_work(s, lingering);
			continue;
		}
		uint64_t len = shard_room(s, i);
		uint32_t ahead = fetch_ahead(s, i);
		s->reserved += len;
		if (s->reserved > s->st.peak)
			s->st.peak = s->reserved;
		if (s->n_free == 0)
			reclaim_idle(s);
		sl_stage *st = s->n_free > 0 ? s->free_bufs[--s->n_free] : NULL;
		pthread_mutex_unlock(&s->mu);

		int fd = -1, cb = -1;
		sl_err rc = SL_OK;
		/* making a buffer (locking and faulting in its pages) takes as
		 * long as fetching a good part of a shard: a remote shard not yet
		 * under way is fetched meanwhile, on the prefetch thread (both
		 * ciphertext files are free: no refill runs now) */
		if (s->remote != NULL && st == NULL && !pf->running)
			prefetch_start(pf, i, 0);
		/* a new buffer only while the window has room for one more: at
		 * most window / largest of them, ever */
		if (st == NULL)
			rc = sl_stage_pool_new(sl_sldm_dataset_id(s->m), s->largest, &st);
		/* always: it joins the prefetch */
		sl_err src = shard_source(s, pf, i, &fd, &cb, name, sizeof(name));
		if (rc == SL_OK)
			rc = src;
		if (rc == SL_OK && ahead < s->n)
			prefetch_start(pf, ahead, (cb + 1) % N_CBUFS);
		if (rc == SL_OK && cb >= 0)
			rc = sl_stage_sld_refill_mem(
			    s->cbuf[cb].map, (size_t)sl_sldm_shard_at(s->m, i).file_size, name,
			    s->dek, s->threads, s->bufs, stream_interrupted, st);
		else if (rc == SL_OK)
			rc = sl_stage_sld_refill(fd, name, s->dek, s->threads, s->bufs,
			                         stream_interrupted, st);
		if (fd >= 0)
			close(fd);

		pthread_mutex_lock(&s->mu);
		if (rc != SL_OK && st != NULL)
			(void)give_back(s, st); /* emptied by the failed refill */
		if (rc != SL_OK) {
			s->reserved -= len;
			if (s->err == SL_OK && !atomic_load(&s->stop)) {
				s->err = rc;
				snprintf(s->errmsg, sizeof(s->errmsg), "%s", sl_err_detail());
			}
			pthread_cond_broadcast(&s->cv);
			break;
		}
		s->slots[i].stage = st;
		s->slots[i].demanded = false;
		s->slots[i].gave_way = false;
		s->st.staged++;
		if (s->slots[i].staged_once)
			s->st.refetched++;
		s->slots[i].staged_once = true;
		if (i == s->next_seq)
			s->next_seq++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	int cb = -1;
	(void)!prefetch_take(pf, s->n, &cb, name, sizeof(name)); /* waits for it */
	free(pf);
	return NULL;
}

/* A ciphertext buffer of cap bytes: a memory file mapped once. */
static SL_RESULT cbuf_new(const char *dataset_id, uint64_t cap, struct cbuf *cb)
{
	sl_err rc = SL_E_NOMEM;
	void *p;

	cb->cap = cap > 0 ? cap : 1;
	SL_ENSURE(cb->cap <= SIZE_MAX, SL_E_NOMEM, "dataset %s: a shard of %llu bytes", dataset_id,
	          (unsigned long long)cap);
	cb->fd = memfd_create("seclaunch-shard", MFD_CLOEXEC);
	SL_ENSURE(cb->fd >= 0, SL_E_NOMEM, "dataset %s: memory file: %s", dataset_id,
	          strerror(errno));
	SL_ENSURE(ftruncate(cb->fd, (off_t)cb->cap) == 0, SL_E_NOMEM,
	          "dataset %s: %llu bytes of memory: %s", dataset_id, (unsigned long long)cb->cap,
	          strerror(errno));
	p = mmap(NULL, (size_t)cb->cap, PROT_READ | PROT_WRITE, MAP_SHARED, cb->fd, 0);
	SL_ENSURE(p != MAP_FAILED, SL_E_NOMEM, "dataset %s: mapping %llu bytes: %s", dataset_id,
	          (unsigned long long)cb->cap, strerror(errno));
	cb->map = p;
	/* out of core dumps, and out of any child forked before it execs the
	 * job: the mapping stays this process's alone */
	SL_ENSURE(madvise(cb->map, (size_t)cb->cap, MADV_DONTDUMP) == 0 &&
	              madvise(cb->map, (size_t)cb->cap, MADV_DONTFORK) == 0,
	          SL_E_SYSTEM, "dataset %s: madvise: %s", dataset_id, strerror(errno));
	rc = SL_OK;
out:
	return rc;
}

static void cbuf_free(struct cbuf *cb)
{
	if (cb->map != NULL)
		munmap(cb->map, (size_t)cb->cap);
	if (cb->fd >= 0)
		close(cb->fd);
	cb->map = NULL;
	cb->fd = -1;
}

sl_err sl_stream_new(int dfd, const char *dir, sl_remote *remote, const sl_sldm *m, sl_secret *dek,
                     uint64_t window, unsigned linger_ms, unsigned threads, sl_stream **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_stream *s = calloc(1, sizeof(*s));
	uint64_t largest = 0, largest_file = 0;
	pthread_condattr_t ca;

	*out = NULL;
	SL_ENSURE(s != NULL, SL_E_NOMEM, "stream staging");
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	s->linger_ns = (uint64_t)linger_ms * 1000000ull;
	s->dfd = dfd;
	s->dir = dir;
	s->remote = remote;
	s->m = m;
	/* a remote stream is as fast as its fetch: decryption (which keeps
	 * up on fewer threads) leaves the fetch and TLS a core of their own */
	if (threads == 0 && remote != NULL)
		threads = sl_sld_default_threads() > 1 ? sl_sld_default_threads() - 1 : 1;
	s->threads = threads;
	s->n = sl_sldm_shard_count(m);
	s->st.window = window;
	for (unsigned k = 0; k < N_CBUFS; k++)
		s->cbuf[k].fd = -1;
	SL_GUARD(sl_sldm_authenticate(m, dek));
	for (uint32_t i = 0; i < s->n; i++) {
		if (shard_len(s, i) > largest)
			largest = shard_len(s, i);
		if (sl_sldm_shard_at(m, i).file_size > largest_file)
			largest_file = sl_sldm_shard_at(m, i).file_size;
	}
	SL_ENSURE(largest <= window, SL_E_USAGE,
	          "dataset %s: its largest shard holds %llu bytes, more than the --window of %llu",
	          sl_sldm_dataset_id(m), (unsigned long long)largest, (unsigned long long)window);
	s->largest = largest > 0 ? largest : 1;
	s->max_bufs = (uint32_t)(window / s->largest < s->n ? window / s->largest : s->n) + 1;
	s->free_bufs = calloc(s->max_bufs, sizeof(*s->free_bufs));
	SL_ENSURE(s->free_bufs != NULL, SL_E_NOMEM, "stream staging");
	s->slots = calloc(s->n, sizeof(*s->slots));
	SL_ENSURE(s->slots != NULL, SL_E_NOMEM, "stream staging");
	SL_GUARD(sl_secret_from(sl_secret_data(dek), sl_secret_len(dek), &s->dek));
	SL_GUARD(sl_sld_bufs_new(&s->bufs));
	for (unsigned k = 0; remote != NULL && k < N_CBUFS; k++)
		SL_GUARD(cbuf_new(sl_sldm_dataset_id(m), largest_file, &s->cbuf[k]));
	if (remote != NULL)
		sl_remote_set_abort(remote, &s->stop);
	SL_ENSURE(pthread_create(&s->thr, NULL, stage_thread, s) == 0, SL_E_SYSTEM,
	          "cannot start the staging thread");
	s->running = true;
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stream_free(s);
	return rc;
}

sl_err sl_stream_acquire(sl_stream *s, uint32_t i, int *fd, uint64_t *len, int *not_ready)
{
	sl_err rc = SL_OK;

	*not_ready = 0;
	pthread_mutex_lock(&s->mu);
	if (s->err != SL_OK) {
		rc = sl_err_set(s->err, "%s", s->errmsg);
	} else if (i >= s->n) {
		rc = sl_err_set(SL_E_INPUT, "shard %u: the dataset has %u", i, s->n);
	} else if (s->slots[i].stage != NULL) {
		if (s->slots[i].lingering) {
			s->slots[i].lingering = false;
			s->slots[i].reused = true;
			s->st.reused++;
		}
		s->slots[i].refs++;
		*fd = sl_stage_fd(s->slots[i].stage);
		*len = sl_stage_size(s->slots[i].stage);
	} else {
		s->slots[i].demanded = true;
		s->st.not_ready++;
		*not_ready = 1;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void sl_stream_release(sl_stream *s, uint32_t i)
{
	pthread_mutex_lock(&s->mu);
	if (i < s->n && s->slots[i].refs > 0 && --s->slots[i].refs == 0 &&
	    s->slots[i].stage != NULL) {
		struct slot *sl = &s->slots[i];
		sl->consumed = true;
		if (s->linger_ns == 0) {
			drop(s, i);
		} else {
			sl->lingering = true;
			sl->idle_at = sl_now_ns();
			sl->idle_end = sl->idle_at + s->linger_ns;
		}
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
}

void sl_stream_stats_get(sl_stream *s, sl_stream_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	pthread_mutex_unlock(&s->mu);
}

sl_err sl_stream_error(sl_stream *s)
{
	pthread_mutex_lock(&s->mu);
	sl_err e = s->err;
	pthread_mutex_unlock(&s->mu);
	return e;
}

sl_err sl_stream_wipe_all(sl_stream *s)
{
	if (s->running) {
		atomic_store(&s->stop, true);
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thr, NULL);
		s->running = false;
	}
	pthread_mutex_lock(&s->mu);
	uint64_t failed = s->st.wipe_failed;
	for (uint32_t i = 0; s->slots != NULL && i < s->n; i++) {
		if (s->slots[i].stage != NULL) {
			if (sl_stage_wipe(s->slots[i].stage) != SL_OK)
				s->st.wipe_failed++;
			else
				s->st.wiped++;
			sl_stage_free(s->slots[i].stage);
			s->slots[i].stage = NULL;
		}
	}
	for (uint32_t k = 0; k < s->n_free; k++) {
		if (sl_stage_wipe(s->free_bufs[k]) != SL_OK)
			s->st.wipe_failed++;
		sl_stage_free(s->free_bufs[k]);
	}
	s->n_free = 0;
	s->reserved = 0;
	bool ok = s->st.wipe_failed == failed;
	pthread_mutex_unlock(&s->mu);
	return ok ? SL_OK : sl_err_set(SL_E_SYSTEM, "a staged shard could not be confirmed zeroed");
}

void sl_stream_free(sl_stream *s)
{
	if (s == NULL)
		return;
	(void)!sl_stream_wipe_all(s);
	if (s->remote != NULL)
		sl_remote_set_abort(s->remote, NULL);
	for (unsigned k = 0; k < N_CBUFS; k++)
		cbuf_free(&s->cbuf[k]);
	free(s->slots);
	free(s->free_bufs);
	sl_sld_bufs_free(s->bufs);
	sl_secret_free(s->dek);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
