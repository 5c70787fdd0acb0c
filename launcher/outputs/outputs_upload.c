/* The upload of a sealed output's shards while the rest is still being
 * sealed (outputs_int.h: sl_out_up_*): each shard is queued as soon as it
 * is complete and PUT by one of a few upload threads; the first failure
 * stops the others from taking more and is what the seal returns. Only
 * ciphertext goes through here. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outputs_int.h"

struct up_item {
	char name[64];
	int fd;
	uint64_t size;
};

struct sl_out_up {
	sl_remote *r;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct up_item *q;
	size_t n, cap, next; /* queued, room, the next one to send */
	size_t sent;         /* PUTs done (answered, either way) */
	size_t max_pending;  /* add waits while this many are queued or under way */
	bool closed;         /* nothing more will be queued */
	bool failed;         /* a PUT failed, or the caller gave up: take no more */
	sl_err rc;
	char msg[1024];
	pthread_t th[SL_OUT_UPLOADS_MAX];
	unsigned n_th;
};

static void *uploader_main(void *arg)
{
	struct sl_out_up *u = arg;
	pthread_mutex_lock(&u->mu);
	for (;;) {
		while (!u->failed && u->next == u->n && !u->closed)
			pthread_cond_wait(&u->cv, &u->mu);
		if (u->failed || u->next == u->n)
			break;
		size_t k = u->next++;
		struct up_item it = u->q[k];
		pthread_mutex_unlock(&u->mu);
		sl_err rc = sl_remote_put(u->r, it.name, it.fd, it.size);
		pthread_mutex_lock(&u->mu);
		/* sent (or refused): the staged copy (unlinked already) goes with
		 * its descriptor */
		close(it.fd);
		u->q[k].fd = -1;
		u->sent++;
		if (rc != SL_OK && !u->failed) {
			u->failed = true;
			u->rc = rc;
			snprintf(u->msg, sizeof(u->msg), "%s", sl_err_detail());
		}
		/* the seal may wait for room, the other uploads for a failure */
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

sl_err sl_out_up_start(const char *url, const sl_remote_opts *ro, unsigned threads,
                       size_t max_pending, sl_out_up **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_out_up *u = calloc(1, sizeof(*u));

	*out = NULL;
	SL_ENSURE(u != NULL, SL_E_NOMEM, "upload queue");
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	u->max_pending = max_pending;
	*out = u;
	SL_GUARD(sl_remote_open(url, ro, &u->r));
	if (threads < 1)
		threads = 1;
	if (threads > SL_OUT_UPLOADS_MAX)
		threads = SL_OUT_UPLOADS_MAX;
	for (unsigned t = 0; t < threads; t++) {
		if (pthread_create(&u->th[u->n_th], NULL, uploader_main, u) != 0)
			break; /* fewer uploads at once: slower, not wrong */
		u->n_th++;
	}
	SL_ENSURE(u->n_th > 0, SL_E_SYSTEM, "starting an upload thread: %s", strerror(errno));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_out_up_put_manifest(sl_out_up *u, const char *dir)
{
	sl_err rc = SL_E_IO;
	char p[4200];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, SL_SLDM_NAME);
	fd = open(p, O_RDONLY | O_CLOEXEC); /* lint: trusted path (root's staging folder) */
	SL_ENSURE(fd >= 0 && fstat(fd, &st) == 0, SL_E_IO, "%s: %s", p, strerror(errno));
	SL_GUARD(sl_remote_put(u->r, SL_SLDM_NAME, fd, (uint64_t)st.st_size));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_out_env_num(const char *name, uint64_t min, uint64_t max, uint64_t def, uint64_t *v)
{
	const char *s = getenv(name);
	*v = def;
	/* set but empty: the default, as unset */
	return s != NULL && s[0] == '\0' ? SL_OK : sl_remote_env_num(name, min, max, v);
}

sl_err sl_out_up_add(sl_out_up *u, const char *name, int fd, uint64_t size)
{
	sl_err rc = SL_E_SYSTEM, failed = SL_OK;
	struct up_item it = {.fd = -1, .size = size};
	char msg[sizeof(u->msg)];

	SL_ENSURE(strlen(name) < sizeof(it.name), SL_E_INTERNAL, "%s: name too long", name);
	snprintf(it.name, sizeof(it.name), "%s", name);
	it.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	SL_ENSURE(it.fd >= 0, SL_E_SYSTEM, "%s: dup: %s", name, strerror(errno));
	pthread_mutex_lock(&u->mu);
	while (!u->failed && u->max_pending > 0 && u->n - u->sent >= u->max_pending)
		pthread_cond_wait(&u->cv, &u->mu);
	if (u->failed) {
		failed = u->rc;
		snprintf(msg, sizeof(msg), "%s", u->msg);
	} else if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 16;
		struct up_item *q = realloc(u->q, cap * sizeof(*q));
		if (q != NULL) {
			u->q = q;
			u->cap = cap;
		}
	}
	bool queued = failed == SL_OK && u->n < u->cap;
	if (queued) {
		u->q[u->n++] = it;
		it.fd = -1;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	/* an upload that failed already: the seal stops with its error */
	SL_ENSURE(failed == SL_OK, failed, "%s", msg);
	SL_ENSURE(queued, SL_E_NOMEM, "%s: upload queue", name);
	rc = SL_OK;
out:
	if (it.fd >= 0)
		close(it.fd);
	return rc;
}

/* Joins every upload thread; closed: after the last PUT queued, else
 * (giving up) once the PUTs under way are done. */
static void join_all(sl_out_up *u, bool give_up)
{
	pthread_mutex_lock(&u->mu);
	u->closed = true;
	if (give_up)
		u->failed = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (unsigned t = 0; t < u->n_th; t++)
		pthread_join(u->th[t], NULL);
	u->n_th = 0;
}

sl_err sl_out_up_wait(sl_out_up *u)
{
	sl_err rc = SL_E_INTERNAL;
	join_all(u, false);
	SL_ENSURE(u->rc == SL_OK, u->rc, "%s", u->msg);
	SL_ENSURE(u->next == u->n, SL_E_INTERNAL, "%zu shard(s) were not uploaded", u->n - u->next);
	rc = SL_OK;
out:
	return rc;
}

void sl_out_up_free(sl_out_up *u)
{
	if (u == NULL)
		return;
	join_all(u, true);
	for (size_t i = 0; i < u->n; i++)
		if (u->q[i].fd >= 0)
			close(u->q[i].fd);
	free(u->q);
	sl_remote_free(u->r);
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	free(u);
}
