/* The key process's client half (../keyproc_table.h holds the request
 * table and the design): what the network process knows of KEKs. Every KEK
 * operation is one request to the key process; the reads of a key's state
 * are the state store's. The server half is kms/keys/keyproc.c: no symbol
 * of kms/keys/ is referenced here (scripts/check-layers). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

#include "../keyproc_table.h" /* after the folder header */

struct kmsd_keyproc {
	pid_t pid; /* the monitor */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int *fds; /* free channels: fds[0..nfree) */
	size_t nfree, n;
	int *all;
	int status_fd;
	atomic_uint gen;    /* deaths seen: a request across one fails */
	atomic_bool up;     /* a key process serves now */
	atomic_int kek_pid; /* the current key process */
	atomic_uint seq;
	pthread_t watch;
	bool watching;
	void (*on_event)(void *arg, int state, int pid, int status);
	void *event_arg;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the network side ------------------------------------------------------ */

static void *watch_main(void *p)
{
	kmsd_keyproc *kp = p;
	struct kp_status m;
	for (;;) {
		ssize_t r = read(kp->status_fd, &m, sizeof(m));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(m))
			m = (struct kp_status){.up = -1, .pid = atomic_load(&kp->kek_pid)};
		if (m.up == 1) {
			atomic_store(&kp->kek_pid, m.pid);
			atomic_store(&kp->up, true);
		} else {
			atomic_store(&kp->up, false);
			atomic_fetch_add(&kp->gen, 1);
		}
		if (kp->on_event != NULL)
			kp->on_event(kp->event_arg, m.up, m.pid, m.status);
		if (m.up == -1)
			return NULL;
	}
}

sl_err kmsd_keyproc_watch(kmsd_keyproc *kp, void (*fn)(void *arg, int state, int pid, int status),
                          void *arg)
{
	kp->on_event = fn;
	kp->event_arg = arg;
	if (pthread_create(&kp->watch, NULL, watch_main, kp) != 0)
		return sl_err_set(SL_E_SYSTEM, "key process: watch thread: %s", strerror(errno));
	kp->watching = true;
	return SL_OK;
}

bool kmsd_keyproc_up(const kmsd_keyproc *kp)
{
	return atomic_load(&kp->up);
}

sl_err kmsd_keyproc_attach(int *near, unsigned channels, int status_fd, pid_t pid,
                           kmsd_keyproc **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_keyproc *kp = calloc(1, sizeof(*kp));
	struct kp_res rs;
	if (kp == NULL) {
		for (unsigned i = 0; i < channels; i++)
			close(near[i]);
		if (status_fd >= 0)
			close(status_fd);
		if (pid > 0)
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		return sl_err_set(SL_E_NOMEM, "key process");
	}
	kp->pid = pid;
	kp->status_fd = status_fd;
	pthread_mutex_init(&kp->mu, NULL);
	pthread_cond_init(&kp->cv, NULL);
	kp->fds = calloc(channels, sizeof(int));
	kp->all = calloc(channels, sizeof(int));
	if (kp->fds == NULL || kp->all == NULL) {
		for (unsigned i = 0; i < channels; i++)
			close(near[i]);
		rc = sl_err_set(SL_E_NOMEM, "key process");
		goto out;
	}
	for (unsigned i = 0; i < channels; i++)
		kp->all[i] = kp->fds[i] = near[i];
	kp->n = kp->nfree = channels;
	/* the first answer says whether the key process could open its keys */
	SL_ENSURE(recv(kp->fds[0], &rs, sizeof(rs), 0) == (ssize_t)sizeof(rs), SL_E_SYSTEM,
	          "key process exited during start");
	rs.detail[sizeof(rs.detail) - 1] = '\0';
	SL_ENSURE(rs.rc == SL_OK, (sl_err)rs.rc, "%s", rs.detail);
	atomic_store(&kp->up, true);
	for (unsigned i = 0; i < channels; i++)
		(void)fcntl(kp->all[i], F_SETFL, fcntl(kp->all[i], F_GETFL) | O_NONBLOCK);
	*out = kp;
	kp = NULL;
	rc = SL_OK;
out:
	kmsd_keyproc_stop(kp);
	return rc;
}

pid_t kmsd_keyproc_pid(const kmsd_keyproc *kp)
{
	return kp->pid;
}

void kmsd_keyproc_stop(kmsd_keyproc *kp)
{
	if (kp == NULL)
		return;
	for (size_t i = 0; i < kp->n; i++)
		close(kp->all[i]);
	if (kp->pid > 0) {
		int st;
		while (waitpid(kp->pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	/* the monitor's end closed the status pipe: the watch thread returns */
	if (kp->watching)
		pthread_join(kp->watch, NULL);
	if (kp->status_fd >= 0)
		close(kp->status_fd);
	free(kp->fds);
	free(kp->all);
	pthread_cond_destroy(&kp->cv);
	pthread_mutex_destroy(&kp->mu);
	free(kp);
}

/* One answer to request seq on fd: waits at most KP_TIMEOUT_MS, and not
 * across a death of the key process (the request may be lost with it);
 * answers to earlier requests that timed out are dropped. */
static SL_RESULT answer(kmsd_keyproc *kp, int fd, uint32_t seq, unsigned gen, struct kp_res *rs)
{
	int64_t end = mono_ms() + KP_TIMEOUT_MS;
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int64_t left = end - mono_ms();
		if (atomic_load(&kp->gen) != gen)
			return sl_err_set(SL_E_SYSTEM,
			                  "key process: it died during the request (restarting)");
		if (left <= 0)
			return sl_err_set(SL_E_SYSTEM, "key process: no answer in %d s",
			                  KP_TIMEOUT_MS / 1000);
		int r = poll(&pf, 1, left < 200 ? (int)left : 200);
		if (r < 0 && errno != EINTR)
			return sl_err_set(SL_E_SYSTEM, "key process: poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		ssize_t n = recv(fd, rs, sizeof(*rs), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n != (ssize_t)sizeof(*rs))
			return sl_err_set(SL_E_SYSTEM, "key process: channel lost (%s)",
			                  n == 0 ? "closed" : strerror(errno));
		if (rs->seq == seq)
			return SL_OK;
	}
}

static SL_RESULT call(kmsd_keyproc *kp, struct kp_req *rq, struct kp_res *rs)
{
	sl_err rc = SL_OK;
	int fd;
	unsigned gen = atomic_load(&kp->gen);
	if (!atomic_load(&kp->up)) {
		sodium_memzero(rq, sizeof(*rq));
		return sl_err_set(SL_E_SYSTEM, "key process: down (restarting)");
	}
	rq->seq = atomic_fetch_add(&kp->seq, 1) + 1;
	pthread_mutex_lock(&kp->mu);
	while (kp->nfree == 0)
		pthread_cond_wait(&kp->cv, &kp->mu);
	fd = kp->fds[--kp->nfree];
	pthread_mutex_unlock(&kp->mu);
	if (send(fd, rq, sizeof(*rq), MSG_NOSIGNAL) != (ssize_t)sizeof(*rq))
		rc = sl_err_set(SL_E_SYSTEM, "key process: channel lost (%s)", strerror(errno));
	else
		rc = answer(kp, fd, rq->seq, gen, rs);
	sodium_memzero(rq, sizeof(*rq));
	pthread_mutex_lock(&kp->mu);
	kp->fds[kp->nfree++] = fd;
	pthread_cond_signal(&kp->cv);
	pthread_mutex_unlock(&kp->mu);
	if (rc == SL_OK && rs->rc != SL_OK) {
		rs->detail[sizeof(rs->detail) - 1] = '\0';
		rc = sl_err_set((sl_err)rs->rc, "%s", rs->detail);
	}
	return rc;
}

static void ids(struct kp_req *rq, const char *id, const char *ds)
{
	snprintf(rq->id, sizeof(rq->id), "%s", id);
	if (ds != NULL)
		snprintf(rq->ds, sizeof(rq->ds), "%s", ds);
}

static SL_RESULT kp_create(kmsd_keyproc *kp, const char *id, const char *aws_key_id)
{
	struct kp_req rq = {.op = KP_CREATE};
	struct kp_res rs;
	ids(&rq, id, NULL);
	if (aws_key_id != NULL && strlen(aws_key_id) >= sizeof(rq.aws_key))
		return sl_err_set(SL_E_INPUT, "aws_key_id: longer than %zu bytes",
		                  sizeof(rq.aws_key) - 1);
	if (aws_key_id != NULL)
		snprintf(rq.aws_key, sizeof(rq.aws_key), "%s", aws_key_id);
	return call(kp, &rq, &rs);
}

static SL_RESULT kp_set_state(kmsd_keyproc *kp, const char *id, bool enable, bool *found)
{
	struct kp_req rq = {.op = KP_SET_STATE, .arg = enable};
	struct kp_res rs = {0};
	ids(&rq, id, NULL);
	sl_err rc = call(kp, &rq, &rs);
	*found = rs.version != 0;
	return rc;
}

static SL_RESULT kp_delete(kmsd_keyproc *kp, const char *id, bool force, size_t *refs,
                           bool *deleted)
{
	struct kp_req rq = {.op = KP_DELETE, .arg = force};
	struct kp_res rs = {0};
	ids(&rq, id, NULL);
	sl_err rc = call(kp, &rq, &rs);
	*refs = rs.version;
	*deleted = rs.wrapped_len != 0;
	return rc;
}

static SL_RESULT kp_rotate(kmsd_keyproc *kp, const char *id, unsigned *version)
{
	struct kp_req rq = {.op = KP_ROTATE};
	struct kp_res rs = {0};
	ids(&rq, id, NULL);
	sl_err rc = call(kp, &rq, &rs);
	*version = rs.version;
	return rc;
}

/* An answer of 1..max bytes (a wrapped DEK's length is the backend's). */
static SL_RESULT out_upto(struct kp_res *rs, uint8_t *out, size_t max, size_t *len)
{
	if (rs->out_len == 0 || rs->out_len > max)
		return sl_err_set(SL_E_SYSTEM, "key process: answer of %u bytes", rs->out_len);
	memcpy(out, rs->out, rs->out_len);
	*len = rs->out_len;
	return SL_OK;
}

static SL_RESULT out_of(struct kp_res *rs, uint8_t *out, size_t want)
{
	if (rs->out_len != want)
		return sl_err_set(SL_E_SYSTEM, "key process: answer of %u bytes", rs->out_len);
	memcpy(out, rs->out, want);
	return SL_OK;
}

static SL_RESULT kp_wrap(kmsd_keyproc *kp, const char *id, const char *ds,
                         const uint8_t dek[static SL_KMS_DEK_LEN],
                         uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	struct kp_req rq = {.op = KP_WRAP};
	struct kp_res rs = {0};
	ids(&rq, id, ds);
	memcpy(rq.dek, dek, SL_KMS_DEK_LEN);
	sl_err rc = call(kp, &rq, &rs);
	sodium_memzero(rq.dek, sizeof(rq.dek));
	return rc != SL_OK ? rc : out_upto(&rs, out, SL_KMS_WRAPPED_DEK_MAX, out_len);
}

static SL_RESULT kp_unwrap_seal(kmsd_keyproc *kp, const char *id, const char *ds,
                                const uint8_t *wrapped, size_t len,
                                const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                uint8_t sealed[static KMSD_SEALED_LEN])
{
	struct kp_req rq = {.op = KP_UNWRAP_SEAL};
	struct kp_res rs = {0};
	if (len == 0 || len > SL_KMS_WRAPPED_DEK_MAX)
		return sl_err_set(SL_E_INTEGRITY, "wrapped DEK for key '%s': %zu bytes, at most %d",
		                  id, len, SL_KMS_WRAPPED_DEK_MAX);
	ids(&rq, id, ds);
	memcpy(rq.wrapped, wrapped, len);
	rq.wrapped_len = (uint32_t)len;
	memcpy(rq.eph_pub, eph_pub, SL_EPH_PUB_LEN);
	sl_err rc = call(kp, &rq, &rs);
	return rc != SL_OK ? rc : out_of(&rs, sealed, KMSD_SEALED_LEN);
}

static SL_RESULT kp_rewrap(kmsd_keyproc *kp, const char *id, const char *ds, const uint8_t *in,
                           size_t len, uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	struct kp_req rq = {.op = KP_REWRAP};
	struct kp_res rs = {0};
	if (len == 0 || len > SL_KMS_WRAPPED_DEK_MAX)
		return sl_err_set(SL_E_INTEGRITY, "wrapped DEK for key '%s': %zu bytes", id, len);
	ids(&rq, id, ds);
	memcpy(rq.wrapped, in, len);
	rq.wrapped_len = (uint32_t)len;
	sl_err rc = call(kp, &rq, &rs);
	return rc != SL_OK ? rc : out_upto(&rs, out, SL_KMS_WRAPPED_DEK_MAX, out_len);
}

static SL_RESULT kp_new_sealed(kmsd_keyproc *kp, const char *id, const char *ds,
                               const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                               uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX], size_t *wrapped_len,
                               uint8_t sealed[static KMSD_SEALED_LEN])
{
	struct kp_req rq = {.op = KP_NEW_SEALED};
	struct kp_res rs = {0};
	ids(&rq, id, ds);
	memcpy(rq.eph_pub, eph_pub, SL_EPH_PUB_LEN);
	sl_err rc = call(kp, &rq, &rs);
	if (rc == SL_OK && (rs.out_len != SL_KMS_WRAPPED_DEK_MAX + KMSD_SEALED_LEN ||
	                    rs.wrapped_len == 0 || rs.wrapped_len > SL_KMS_WRAPPED_DEK_MAX))
		rc = sl_err_set(SL_E_SYSTEM, "key process: answer of %u bytes", rs.out_len);
	if (rc == SL_OK) {
		memcpy(wrapped, rs.out, rs.wrapped_len);
		*wrapped_len = rs.wrapped_len;
		memcpy(sealed, rs.out + SL_KMS_WRAPPED_DEK_MAX, KMSD_SEALED_LEN);
	}
	sodium_memzero(&rs, sizeof(rs));
	return rc;
}

/* ---- the network process's KEK handle ------------------------------------ */

struct kmsd_kek {
	kmsd_keyproc *kp;
	kmsd_store *st; /* the reads of a key's state */
};

sl_err kmsd_kek_open_remote(kmsd_keyproc *kp, kmsd_store *st, kmsd_kek **out)
{
	kmsd_kek *k = calloc(1, sizeof(*k));
	if (k == NULL)
		return sl_err_set(SL_E_NOMEM, "kek backend");
	k->kp = kp;
	k->st = st;
	*out = k;
	return SL_OK;
}

void kmsd_kek_close(kmsd_kek *k)
{
	free(k);
}

sl_err kmsd_kek_create(kmsd_kek *k, const char *id)
{
	return kp_create(k->kp, id, NULL);
}

sl_err kmsd_kek_adopt(kmsd_kek *k, const char *id, const char *aws_key_id)
{
	return kp_create(k->kp, id, aws_key_id);
}

sl_err kmsd_kek_set_state(kmsd_kek *k, const char *id, bool enable, bool *found)
{
	*found = false;
	return kp_set_state(k->kp, id, enable, found);
}

sl_err kmsd_kek_delete(kmsd_kek *k, const char *id, bool force, size_t *refs, bool *deleted)
{
	*refs = 0;
	*deleted = false;
	return kp_delete(k->kp, id, force, refs, deleted);
}

sl_err kmsd_kek_rotate(kmsd_kek *k, const char *id, unsigned *version)
{
	return kp_rotate(k->kp, id, version);
}

sl_err kmsd_kek_wrap(kmsd_kek *k, const char *id, const char *dataset_id,
                     const uint8_t dek[static SL_KMS_DEK_LEN],
                     uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	*out_len = 0;
	return kp_wrap(k->kp, id, dataset_id, dek, out, out_len);
}

sl_err kmsd_kek_rewrap(kmsd_kek *k, const char *id, const char *dataset_id, const uint8_t *in,
                       size_t len, uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	return kp_rewrap(k->kp, id, dataset_id, in, len, out, out_len);
}

sl_err kmsd_kek_unwrap_seal(kmsd_kek *k, const char *id, const char *dataset_id,
                            const uint8_t *wrapped, size_t len,
                            const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                            uint8_t sealed[static KMSD_SEALED_LEN])
{
	return kp_unwrap_seal(k->kp, id, dataset_id, wrapped, len, eph_pub, sealed);
}

sl_err kmsd_kek_new_sealed(kmsd_kek *k, const char *id, const char *dataset_id,
                           const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                           uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX], size_t *wrapped_len,
                           uint8_t sealed[static KMSD_SEALED_LEN])
{
	return kp_new_sealed(k->kp, id, dataset_id, eph_pub, wrapped, wrapped_len, sealed);
}

sl_err kmsd_kek_state(kmsd_kek *k, const char *id, kmsd_key_row *row, bool *found)
{
	return kmsd_store_key_get(k->st, id, row, found);
}

/* The row of id read ahead in rd, if it holds one. */
static bool read_ahead(const kmsd_release_read *rd, const char *id, kmsd_key_row *row, bool *found)
{
	for (size_t i = 0; rd != NULL && i < rd->nkeys; i++) {
		if (rd->key[i].read && strcmp(rd->key[i].id, id) == 0) {
			*row = rd->key[i].row;
			*found = rd->key[i].found;
			return true;
		}
	}
	return false;
}

int kmsd_kek_usable(kmsd_kek *k, const kmsd_release_read *rd, const char *id, char *why,
                    size_t why_n)
{
	kmsd_key_row row = {0};
	bool found = false;
	if (!read_ahead(rd, id, &row, &found) &&
	    kmsd_store_key_get(k->st, id, &row, &found) != SL_OK)
		return KMSD_KEY_STORE_DOWN;
	if (!found) {
		snprintf(why, why_n, "unknown key id '%s'", id);
		return KMSD_D_KEY_UNKNOWN;
	}
	if (row.state != KMSD_KEY_ENABLED) {
		snprintf(why, why_n, "key '%s' is disabled (seclaunch key enable)", id);
		return KMSD_D_KEY_DISABLED;
	}
	return KMSD_KEY_USABLE;
}

size_t kmsd_kek_count(kmsd_kek *k)
{
	size_t n = 0;
	if (kmsd_store_count(k->st, KMSD_T_KEYS, &n) != SL_OK)
		return 0;
	return n;
}
