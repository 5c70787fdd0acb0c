/* An ordered worker pool for chunked AEAD work.
 *
 * The calling thread fills buffers in index order (encryption reads its
 * input here), workers transform them in any order, and the calling thread
 * emits them strictly in index order. A window of 2 x threads buffers
 * bounds memory and lets workers run ahead of a slow consumer; buffers are
 * sl_secret memory, so whatever plaintext they held is wiped at the end. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sld_internal.h"

enum slot_state { SLOT_FREE, SLOT_READY, SLOT_BUSY, SLOT_DONE };

struct slot {
	sl_secret *buf;
	size_t len;
	enum slot_state state;
	sl_err rc;
	char msg[512]; /* the worker's error detail (details are thread-local) */
};

struct pool {
	const struct sld_pool_ops *ops;
	pthread_mutex_t mu;
	pthread_cond_t work_cv;
	pthread_cond_t done_cv;
	struct slot *slots;
	size_t nslots;
	uint64_t published; /* indices < published are READY or later */
	uint64_t next_take;
	bool stop;
};

struct worker {
	struct pool *pool;
	void *wstate;
	pthread_t tid;
	bool started;
};

/* The pool's default size: one worker per CPU this process may run on. */
unsigned sl_sld_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	/* a CPU affinity mask (taskset, cgroup cpusets) may allow fewer */
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 &&
	    CPU_COUNT(&set) < n)
		n = CPU_COUNT(&set);
	if (n < 1)
		n = 1;
	if (n > SL_SLD_THREADS_MAX)
		n = SL_SLD_THREADS_MAX;
	return (unsigned)n;
}

static uint8_t *slot_data(sl_secret *buf)
{
	return buf != NULL ? sl_secret_data(buf) : NULL;
}

sl_err sl_sld_bufs_new(sl_sld_bufs **out)
{
	*out = calloc(1, sizeof(**out));
	return *out != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "allocating chunk buffers");
}

/* Frees every buffer of b (freeing wipes), leaving its slots empty. */
static void bufs_drop(sl_sld_bufs *b)
{
	for (size_t k = 0; k < b->n; k++) {
		sl_secret_free(b->buf[k]);
		b->buf[k] = NULL;
	}
}

void sl_sld_bufs_free(sl_sld_bufs *b)
{
	if (b == NULL)
		return;
	bufs_drop(b);
	free(b->buf);
	free(b);
}

/* Moves the first n buffers of keep (buffers of another size are freed:
 * another file's chunk size) into dst, growing keep to n entries. */
static SL_RESULT keep_take(sl_sld_bufs *keep, size_t size, size_t n, sl_secret **dst)
{
	if (keep->size != size) {
		bufs_drop(keep);
		keep->size = size;
	}
	if (keep->n < n) {
		sl_secret **b = realloc(keep->buf, n * sizeof(*b));
		if (b == NULL)
			return sl_err_set(SL_E_NOMEM, "allocating chunk buffers");
		memset(b + keep->n, 0, (n - keep->n) * sizeof(*b));
		keep->buf = b;
		keep->n = n;
	}
	for (size_t k = 0; k < n; k++) {
		dst[k] = keep->buf[k];
		keep->buf[k] = NULL;
	}
	return SL_OK;
}

/* The end of a run for slot k's buffer *b: zeroed and back in keep, or
 * freed (which wipes it) without one. */
static void buf_end(sl_sld_bufs *keep, size_t size, sl_secret **b, size_t k)
{
	if (keep != NULL && *b != NULL && k < keep->n && keep->size == size) {
		sl_wipe(sl_secret_data(*b), size);
		keep->buf[k] = *b;
	} else {
		sl_secret_free(*b);
	}
	*b = NULL;
}

/* Takes the next published item and processes it; called and returns with
 * p->mu held. */
static void take_one(struct pool *p, struct worker *w)
{
	uint64_t i = p->next_take++;
	struct slot *s = &p->slots[i % p->nslots];
	s->state = SLOT_BUSY;
	pthread_mutex_unlock(&p->mu);

	size_t len = s->len;
	sl_err_clear();
	/* a slot's buffer is allocated (and its pages faulted in and locked) by
	 * the first worker that uses it, in parallel with the other workers'
	 * crypto, rather than all of them on one thread before any starts */
	sl_err rc = SL_OK;
	if (s->buf == NULL && p->ops->buf_size > 0)
		rc = sl_secret_new(p->ops->buf_size, &s->buf);
	if (rc == SL_OK)
		rc = p->ops->work(p->ops->ctx, w->wstate, i, slot_data(s->buf), &len);
	if (rc != SL_OK)
		snprintf(s->msg, sizeof(s->msg), "%s", sl_err_detail());

	pthread_mutex_lock(&p->mu);
	s->len = len;
	s->rc = rc;
	s->state = SLOT_DONE;
	pthread_cond_broadcast(&p->done_cv);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->next_take >= p->published)
			pthread_cond_wait(&p->work_cv, &p->mu);
		if (p->stop)
			break;
		take_one(p, w);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* One thread: the same steps without any locking. */
static SL_RESULT run_inline(const struct sld_pool_ops *ops)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *buf = NULL;
	void *ws = NULL;
	bool ws_live = false;

	if (ops->keep != NULL && ops->buf_size > 0)
		SL_GUARD(keep_take(ops->keep, ops->buf_size, 1, &buf));
	if (ops->buf_size > 0 && buf == NULL)
		SL_GUARD(sl_secret_new(ops->buf_size, &buf));
	SL_GUARD(ops->worker_init(ops->ctx, &ws));
	ws_live = true;
	for (uint64_t i = 0; i < ops->count; i++) {
		size_t len = 0;
		if (ops->fill != NULL)
			SL_GUARD(ops->fill(ops->ctx, i, slot_data(buf), &len));
		SL_GUARD(ops->work(ops->ctx, ws, i, slot_data(buf), &len));
		SL_GUARD(ops->emit(ops->ctx, i, slot_data(buf), len));
	}
	rc = SL_OK;
out:
	if (ws_live)
		ops->worker_fini(ops->ctx, ws);
	buf_end(ops->keep, ops->buf_size, &buf, 0);
	return rc;
}

sl_err sld_pool_run(const struct sld_pool_ops *ops)
{
	sl_err rc = SL_E_NOMEM;
	struct pool p = {.ops = ops};
	struct worker *workers = NULL;
	unsigned nthreads = ops->threads;
	bool sync_live = false;

	if (nthreads == 0)
		nthreads = 1;
	if ((uint64_t)nthreads > ops->count)
		nthreads = ops->count > 0 ? (unsigned)ops->count : 1;
	if (nthreads == 1)
		return run_inline(ops);

	p.nslots = 2 * (size_t)nthreads;
	if (p.nslots > ops->count)
		p.nslots = (size_t)ops->count;
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	workers = calloc(nthreads, sizeof(*workers));
	SL_ENSURE(p.slots != NULL && workers != NULL, SL_E_NOMEM, "allocating the worker pool");
	if (ops->keep != NULL && ops->buf_size > 0) {
		sl_secret **kept = calloc(p.nslots, sizeof(*kept));
		SL_ENSURE(kept != NULL, SL_E_NOMEM, "allocating the worker pool");
		rc = keep_take(ops->keep, ops->buf_size, p.nslots, kept);
		for (size_t k = 0; k < p.nslots; k++)
			p.slots[k].buf = kept[k];
		free(kept);
		SL_GUARD(rc);
	}
	SL_ENSURE(pthread_mutex_init(&p.mu, NULL) == 0, SL_E_SYSTEM, "pthread_mutex_init");
	pthread_cond_init(&p.work_cv, NULL);
	pthread_cond_init(&p.done_cv, NULL);
	sync_live = true;
	/* workers[0] is the calling thread: it works too while it waits for
	 * the next chunk in order, so `threads` is the number of threads that
	 * do crypto and none sits idle on a busy machine */
	for (unsigned t = 0; t < nthreads; t++) {
		workers[t].pool = &p;
		SL_GUARD(ops->worker_init(ops->ctx, &workers[t].wstate));
		if (t == 0)
			continue;
		SL_ENSURE(pthread_create(&workers[t].tid, NULL, worker_main, &workers[t]) == 0,
		          SL_E_SYSTEM, "starting decryption worker %u", t);
		workers[t].started = true;
	}

	uint64_t dispatched = 0;
	for (uint64_t i = 0; i < ops->count; i++) {
		while (dispatched < ops->count && dispatched < i + p.nslots) {
			struct slot *s = &p.slots[dispatched % p.nslots];
			size_t len = 0;
			if (ops->fill != NULL && s->buf == NULL && ops->buf_size > 0)
				SL_GUARD(sl_secret_new(ops->buf_size, &s->buf));
			if (ops->fill != NULL)
				SL_GUARD(ops->fill(ops->ctx, dispatched, slot_data(s->buf), &len));
			pthread_mutex_lock(&p.mu);
			s->len = len;
			s->state = SLOT_READY;
			p.published = ++dispatched;
			pthread_cond_signal(&p.work_cv);
			pthread_mutex_unlock(&p.mu);
		}
		struct slot *s = &p.slots[i % p.nslots];
		pthread_mutex_lock(&p.mu);
		while (s->state != SLOT_DONE) {
			if (p.next_take < p.published)
				take_one(&p, &workers[0]);
			else
				pthread_cond_wait(&p.done_cv, &p.mu);
		}
		pthread_mutex_unlock(&p.mu);
		if (s->rc != SL_OK)
			SL_FAIL(s->rc, "%s", s->msg);
		SL_GUARD(ops->emit(ops->ctx, i, slot_data(s->buf), s->len));
		s->state = SLOT_FREE;
	}
	rc = SL_OK;
out:
	if (sync_live) {
		pthread_mutex_lock(&p.mu);
		p.stop = true;
		pthread_cond_broadcast(&p.work_cv);
		pthread_mutex_unlock(&p.mu);
	}
	for (unsigned t = 0; workers != NULL && t < nthreads; t++) {
		if (workers[t].started)
			pthread_join(workers[t].tid, NULL);
		if (workers[t].wstate != NULL)
			ops->worker_fini(ops->ctx, workers[t].wstate);
	}
	if (sync_live) {
		pthread_cond_destroy(&p.work_cv);
		pthread_cond_destroy(&p.done_cv);
		pthread_mutex_destroy(&p.mu);
	}
	for (size_t k = 0; p.slots != NULL && k < p.nslots; k++)
		buf_end(ops->keep, ops->buf_size, &p.slots[k].buf, k);
	free(p.slots);
	free(workers);
	return rc;
}
