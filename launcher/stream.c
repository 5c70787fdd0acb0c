/* Stream staging (stream.h): one thread decrypts shards ahead of the
 * readers into sealed memory files while they fit in the window; a shard
 * the job released is wiped at once. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset_tree.h"
#include "seclaunch/stage.h"
#include "stream.h"

struct slot {
	sl_stage *stage; /* staged and sealed, or NULL */
	int refs;        /* readers holding it */
	bool demanded;   /* a reader asked for it before it was staged */
	bool consumed;   /* read and released: not staged again unless asked */
};

struct sl_stream {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const char *dir;
	sl_remote *remote;
	const sl_sldm *m;
	sl_secret *dek;
	unsigned threads;
	uint32_t n;
	struct slot *slots;
	uint32_t next_seq; /* the next shard to stage ahead */
	uint64_t reserved; /* plaintext bytes staged or being staged */
	atomic_bool stop;
	sl_err err;
	char errmsg[512];
	bool running;
	pthread_t thr;
	sl_stream_stats st;
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

/* The next shard to stage (lowest demanded first, else the next one ahead
 * of the readers), or n when none; called locked. */
static uint32_t pick(sl_stream *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->slots[i].demanded && s->slots[i].stage == NULL)
			return i;
	while (s->next_seq < s->n &&
	       (s->slots[s->next_seq].stage != NULL || s->slots[s->next_seq].consumed))
		s->next_seq++;
	return s->next_seq;
}

/* A reader waits for shard `want`: shards staged ahead that no one holds
 * yet give way, the farthest ahead first (they are staged again when their
 * turn comes). Called locked. */
static void make_room(sl_stream *s, uint64_t need, uint32_t want)
{
	for (uint32_t k = s->n; k-- > 0 && s->reserved + need > s->st.window;) {
		struct slot *sl = &s->slots[k];
		if (k == want || sl->stage == NULL || sl->refs > 0)
			continue;
		s->reserved -= sl_stage_size(sl->stage);
		if (sl_stage_wipe(sl->stage) != SL_OK)
			s->st.wipe_failed++;
		sl_stage_free(sl->stage);
		sl->stage = NULL;
		if (k < s->next_seq)
			s->next_seq = k;
	}
}

static void *stage_thread(void *arg)
{
	sl_stream *s = arg;
	char name[4096];

	tl_stream = s;
	pthread_mutex_lock(&s->mu);
	while (!atomic_load(&s->stop)) {
		uint32_t i = pick(s);
		if (i < s->n && s->slots[i].demanded)
			make_room(s, shard_len(s, i), i);
		if (i >= s->n || s->reserved + shard_len(s, i) > s->st.window) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		uint64_t len = shard_len(s, i);
		s->reserved += len;
		if (s->reserved > s->st.peak)
			s->st.peak = s->reserved;
		pthread_mutex_unlock(&s->mu);

		sl_stage *st = NULL;
		int fd = -1;
		sl_err rc = sl_tree_open_shard(s->dir, s->remote, s->m, i, &fd, name, sizeof(name));
		if (rc == SL_OK)
			rc = sl_stage_sld(fd, name, s->dek, NULL, s->threads, false,
			                  stream_interrupted, &st);
		if (fd >= 0)
			close(fd);

		pthread_mutex_lock(&s->mu);
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
		s->st.staged++;
		if (i == s->next_seq)
			s->next_seq++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

sl_err sl_stream_new(const char *dir, sl_remote *remote, const sl_sldm *m, sl_secret *dek,
                     uint64_t window, unsigned threads, sl_stream **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_stream *s = calloc(1, sizeof(*s));
	uint64_t largest = 0;

	*out = NULL;
	SL_ENSURE(s != NULL, SL_E_NOMEM, "stream staging");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->dir = dir;
	s->remote = remote;
	s->m = m;
	s->threads = threads;
	s->n = sl_sldm_shard_count(m);
	s->st.window = window;
	SL_GUARD(sl_sldm_authenticate(m, dek));
	for (uint32_t i = 0; i < s->n; i++)
		if (shard_len(s, i) > largest)
			largest = shard_len(s, i);
	SL_ENSURE(largest <= window, SL_E_USAGE,
	          "dataset %s: its largest shard holds %llu bytes, more than the --window of %llu",
	          sl_sldm_dataset_id(m), (unsigned long long)largest, (unsigned long long)window);
	s->slots = calloc(s->n, sizeof(*s->slots));
	SL_ENSURE(s->slots != NULL, SL_E_NOMEM, "stream staging");
	SL_GUARD(sl_secret_from(sl_secret_data(dek), sl_secret_len(dek), &s->dek));
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
		s->reserved -= sl_stage_size(sl->stage);
		/* zeroed before the pages go back: a reader still mapping it sees zeros */
		if (sl_stage_wipe(sl->stage) != SL_OK)
			s->st.wipe_failed++;
		sl_stage_free(sl->stage);
		sl->stage = NULL;
		sl->consumed = true;
		s->st.wiped++;
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
	free(s->slots);
	sl_secret_free(s->dek);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
