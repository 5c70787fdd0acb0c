/* Privilege separation (after OpenSSH's monitor): the KEK operations run in
 * a separate process, forked at start before anything touches the network,
 * the master key or the PKCS#11 PIN. The network-facing process talks to it
 * over SOCK_SEQPACKET socketpairs (one per channel, each served by its own
 * thread) with fixed-size messages from a fixed request table:
 *
 *   op            request                          answer
 *   CREATE        key id, AWS key to adopt or ""   -
 *   ROTATE        key id                           the new version
 *   FORGET        key id                           - (its cached KEKs wiped: the
 *                                                  key was deleted)
 *   SET_STATE     key id, 1 enable / 0 disable     - (the store's state and the
 *                                                  backend's: AWS Enable/DisableKey)
 *   DELETE        key id, 1 force / 0              references counted, deleted
 *                                                  (the store's rows, the cached
 *                                                  KEKs, AWS ScheduleKeyDeletion)
 *   WRAP          key id, dataset id, DEK          wrapped DEK (61 bytes; AWS KMS:
 *                                                  up to 1024)
 *   UNWRAP_SEAL   key id, dataset id, wrapped DEK, the DEK sealed to eph_pub
 *                 eph_pub                          (crypto_box_seal, 80 bytes)
 *   REWRAP        key id, dataset id, wrapped DEK  wrapped DEK (61 bytes)
 *   NEW_SEALED    key id, dataset id, eph_pub      a fresh random DEK, wrapped and
 *                                                  sealed to eph_pub (61 + 80 bytes):
 *                                                  output keys are born here
 *
 * There is no "unwrap" that returns a DEK: the network process only ever
 * sees DEKs already sealed to the client's ephemeral key. It never holds a
 * KEK, the master key or the PIN. A request that is not in the table, or
 * that is malformed (a length, an id that is not NUL-terminated or not
 * valid), ends the key process's service of that channel: the network
 * process is then presumed compromised, and its releases fail closed.
 *
 * The key process keeps its own state-store connections, dies with its
 * parent (PR_SET_PDEATHSIG), and ends when every channel is closed.
 *
 * Supervision: the process forked at start is a small single-threaded
 * monitor (seclaunchd-kmon) that holds the far ends of the channels and
 * forks the key process from them. When the key process dies (a crash, a
 * kill -9) the channels stay open, and the monitor forks a new one after a
 * backoff (0.1 s doubling to 10 s, reset after a minute up), telling the
 * network process over a status pipe, which logs and audits it and reports
 * it in /v1/health. A request in flight when it died answers 503 (every
 * request carries a sequence number, so a late answer is never taken for
 * another's). A key process that ends because a request was malformed or
 * outside the table (the network process is presumed compromised) is not
 * restarted: the monitor exits, every channel closes, releases fail. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kmsd.h"
#include "store.h"

enum kp_op {
	KP_CREATE = 1,
	KP_ROTATE,
	KP_WRAP,
	KP_UNWRAP_SEAL,
	KP_REWRAP,
	KP_NEW_SEALED,
	KP_FORGET,
	KP_SET_STATE,
	KP_DELETE
};
#define KP_OP_LAST KP_DELETE

/* the key process's exit status when a request was malformed: not restarted */
#define KP_EXIT_REFUSED 9
/* how long the network side waits for an answer */
#define KP_TIMEOUT_MS 10000

struct kp_req {
	uint32_t op;
	uint32_t seq;
	char id[SL_KMS_ID_MAX + 1];
	char ds[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
	uint32_t wrapped_len;
	uint32_t arg; /* SET_STATE: enable; DELETE: force */
	char aws_key[KMSD_KEK_WRAPPED_MAX + 1];
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	uint8_t dek[SL_KMS_DEK_LEN];
};

struct kp_res {
	int32_t rc;
	uint32_t seq;
	uint32_t version;
	uint32_t out_len;
	uint32_t wrapped_len; /* NEW_SEALED: the wrapped DEK's part of out */
	uint8_t out[SL_KMS_WRAPPED_DEK_MAX + SL_KMS_DEK_LEN + crypto_box_SEALBYTES];
	char detail[480];
};

/* what the monitor tells the network process */
struct kp_status {
	int32_t up;     /* 1: a key process serves; 0: it died; -1: the monitor ends */
	int32_t pid;    /* the key process */
	int32_t status; /* wait status of the one that died */
};

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

/* ---- the key process ------------------------------------------------------ */

struct serve_arg {
	kmsd_kek *kek;
	int fd;
};

static bool valid_str(const char *s, size_t cap, bool (*check)(const char *))
{
	return memchr(s, '\0', cap) != NULL && check(s);
}

static void handle(kmsd_kek *k, struct kp_req *rq, struct kp_res *rs)
{
	sl_err rc = SL_OK;
	unsigned v = 0;
	size_t n = 0;
	bool b = false;
	switch (rq->op) {
	case KP_CREATE:
		rc = kmsd_kek_adopt(k, rq->id, rq->aws_key[0] ? rq->aws_key : NULL);
		break;
	case KP_SET_STATE:
		rc = kmsd_kek_set_state(k, rq->id, rq->arg != 0, &b);
		rs->version = b;
		break;
	case KP_DELETE:
		rc = kmsd_kek_delete(k, rq->id, rq->arg != 0, &n, &b);
		rs->version = (uint32_t)n;
		rs->wrapped_len = b;
		break;
	case KP_ROTATE:
		rc = kmsd_kek_rotate(k, rq->id, &v);
		rs->version = v;
		break;
	case KP_FORGET:
		rc = kmsd_kek_forget(k, rq->id);
		break;
	case KP_WRAP:
		rc = kmsd_kek_wrap(k, rq->id, rq->ds, rq->dek, rs->out, &n);
		rs->out_len = rc == SL_OK ? (uint32_t)n : 0;
		break;
	case KP_UNWRAP_SEAL:
		rc = kmsd_kek_unwrap_seal(k, rq->id, rq->ds, rq->wrapped, rq->wrapped_len,
		                          rq->eph_pub, rs->out);
		rs->out_len = rc == SL_OK ? SL_KMS_DEK_LEN + crypto_box_SEALBYTES : 0;
		break;
	case KP_REWRAP:
		rc = kmsd_kek_rewrap(k, rq->id, rq->ds, rq->wrapped, rq->wrapped_len, rs->out, &n);
		rs->out_len = rc == SL_OK ? (uint32_t)n : 0;
		break;
	case KP_NEW_SEALED: {
		uint8_t w[SL_KMS_WRAPPED_DEK_MAX];
		rc = kmsd_kek_new_sealed(k, rq->id, rq->ds, rq->eph_pub, w, &n,
		                         rs->out + SL_KMS_WRAPPED_DEK_MAX);
		memcpy(rs->out, w, n);
		rs->wrapped_len = rc == SL_OK ? (uint32_t)n : 0;
		rs->out_len = rc == SL_OK ? SL_KMS_WRAPPED_DEK_MAX + KMSD_SEALED_LEN : 0;
		break;
	}
	default:
		break;
	}
	rs->rc = (int32_t)rc;
	if (rc != SL_OK)
		snprintf(rs->detail, sizeof(rs->detail), "%s",
		         sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
}

static void *serve(void *p)
{
	struct serve_arg *a = p;
	struct kp_req rq;
	struct kp_res rs;
	for (;;) {
		ssize_t n = recv(a->fd, &rq, sizeof(rq), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rq))
			break; /* closed, or not one whole request: stop serving */
		bool no_ds = rq.op == KP_CREATE || rq.op == KP_ROTATE || rq.op == KP_FORGET ||
		             rq.op == KP_SET_STATE || rq.op == KP_DELETE;
		bool ok = rq.op >= KP_CREATE && rq.op <= KP_OP_LAST &&
		          valid_str(rq.id, sizeof(rq.id), kmsd_valid_key_id) &&
		          (no_ds || valid_str(rq.ds, sizeof(rq.ds), kmsd_valid_dataset_id)) &&
		          rq.wrapped_len <= sizeof(rq.wrapped) &&
		          memchr(rq.aws_key, '\0', sizeof(rq.aws_key)) != NULL;
		if (!ok) {
			fprintf(stderr,
			        "seclaunchd-kek: request malformed or outside the table (op %u): "
			        "the network process is presumed compromised; every channel "
			        "closed\n",
			        rq.op);
			_exit(KP_EXIT_REFUSED);
		}
		memset(&rs, 0, sizeof(rs));
		rs.seq = rq.seq;
		handle(a->kek, &rq, &rs);
		sodium_memzero(&rq, sizeof(rq));
		ssize_t w = send(a->fd, &rs, sizeof(rs), MSG_NOSIGNAL);
		sodium_memzero(&rs, sizeof(rs));
		if (w != (ssize_t)sizeof(rs))
			break;
	}
	sodium_memzero(&rq, sizeof(rq));
	close(a->fd);
	return NULL;
}

static void init_reply(int fd, sl_err rc)
{
	struct kp_res rs = {.rc = (int32_t)rc};
	if (rc != SL_OK)
		snprintf(rs.detail, sizeof(rs.detail), "%s",
		         sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
	(void)send(fd, &rs, sizeof(rs), MSG_NOSIGNAL);
}

static _Noreturn void keyproc_main(const kmsd_config *cfg, int *fds, size_t n, bool first)
{
	kmsd_store *st = NULL;
	kmsd_kek *k = NULL;
	pthread_t *th = calloc(n, sizeof(*th));
	struct serve_arg *args = calloc(n, sizeof(*args));
	sl_err rc;
	(void)prctl(PR_SET_NAME, "seclaunchd-kek", 0, 0, 0);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGINT, SIG_IGN); /* the parent ends it by closing the channels */
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	rc = th && args ? kmsd_store_open(cfg->store, (unsigned)(n < 8 ? n : 8), &st) : SL_E_NOMEM;
	if (rc == SL_OK)
		rc = kmsd_kek_open(cfg, st, &k);
	if (first)
		init_reply(fds[0], rc); /* a restarted one logs instead */
	else if (rc != SL_OK)
		fprintf(stderr, "seclaunchd-kek: restart: %s\n",
		        sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
	if (rc != SL_OK)
		_exit(7);
	for (size_t i = 0; i < n; i++) {
		args[i] = (struct serve_arg){k, fds[i]};
		if (i > 0 && pthread_create(&th[i], NULL, serve, &args[i]) != 0)
			_exit(7);
	}
	serve(&args[0]);
	for (size_t i = 1; i < n; i++)
		pthread_join(th[i], NULL);
	kmsd_kek_close(k);
	kmsd_store_close(st);
	_exit(0);
}

/* Wipes the values of the AWS secret variables in this process's
 * environment in place (unsetenv alone leaves the bytes), then drops them. */
static void scrub_aws_env(void)
{
	static const char *const names[] = {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	                                    "AWS_ACCESS_KEY_ID"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *v = getenv(names[i]);
		if (v != NULL)
			sodium_memzero(v, strlen(v));
		(void)unsetenv(names[i]);
	}
}

/* ---- the monitor ------------------------------------------------------------- */

static void tell(int fd, int up, pid_t pid, int status)
{
	struct kp_status m = {.up = up, .pid = (int32_t)pid, .status = status};
	(void)!write(fd, &m, sizeof(m));
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t spawn(const kmsd_config *cfg, int *fds, size_t n, bool first)
{
	pid_t pid = fork();
	if (pid == 0)
		keyproc_main(cfg, fds, n, first);
	return pid;
}

/* Single-threaded: forks the key process, waits for it, forks another when
 * it dies (not when it refused a malformed request, nor when the first one
 * could not open its keys). Ends with its parent or its channels. */
static _Noreturn void monitor_main(const kmsd_config *cfg, int *fds, size_t n, int status_fd)
{
	unsigned backoff_ms = 100;
	(void)prctl(PR_SET_NAME, "seclaunchd-kmon", 0, 0, 0);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	pid_t pid = spawn(cfg, fds, n, true);
	for (bool first = true;; first = false) {
		int st = 0;
		int64_t born = mono_ms();
		if (pid < 0)
			_exit(7);
		if (!first)
			tell(status_fd, 1, pid, 0);
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				_exit(7);
		/* a clean exit: every channel closed (the service stops) */
		if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == KP_EXIT_REFUSED ||
		                      (first && WEXITSTATUS(st) == 7))) {
			tell(status_fd, -1, pid, st);
			_exit(WEXITSTATUS(st));
		}
		tell(status_fd, 0, pid, st);
		if (mono_ms() - born > 60000)
			backoff_ms = 100;
		struct timespec d = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
		backoff_ms = backoff_ms * 2 > 10000 ? 10000 : backoff_ms * 2;
		pid = spawn(cfg, fds, n, false);
	}
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

sl_err kmsd_keyproc_start(const kmsd_config *cfg, unsigned channels, kmsd_keyproc **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_keyproc *kp = calloc(1, sizeof(*kp));
	int *theirs = NULL;
	struct kp_res rs;
	SL_ENSURE(kp != NULL, SL_E_NOMEM, "key process");
	kp->pid = -1;
	kp->status_fd = -1;
	if (channels < 1)
		channels = 1;
	pthread_mutex_init(&kp->mu, NULL);
	pthread_cond_init(&kp->cv, NULL);
	kp->fds = calloc(channels, sizeof(int));
	kp->all = calloc(channels, sizeof(int));
	theirs = calloc(channels, sizeof(int));
	SL_ENSURE(kp->fds && kp->all && theirs, SL_E_NOMEM, "key process");
	for (unsigned i = 0; i < channels; i++) {
		int sv[2];
		SL_ENSURE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0,
		          SL_E_SYSTEM, "key process: socketpair: %s", strerror(errno));
		kp->all[i] = kp->fds[i] = sv[0];
		theirs[i] = sv[1];
		kp->n = kp->nfree = i + 1;
	}
	int sp[2];
	SL_ENSURE(pipe2(sp, O_CLOEXEC) == 0, SL_E_SYSTEM, "key process: pipe: %s", strerror(errno));
	kp->status_fd = sp[0];
	kp->pid = fork();
	if (kp->pid < 0)
		close(sp[1]);
	SL_ENSURE(kp->pid >= 0, SL_E_SYSTEM, "key process: fork: %s", strerror(errno));
	if (kp->pid == 0) {
		for (size_t i = 0; i < kp->n; i++)
			close(kp->all[i]);
		close(sp[0]);
		monitor_main(cfg, theirs, channels, sp[1]);
	}
	close(sp[1]);
	for (unsigned i = 0; i < channels; i++)
		close(theirs[i]);
	/* the AWS credentials are the key process's (its monitor keeps the
	 * environment to start it again): this process forgets its copy */
	if (cfg->backend == KMSD_KEK_AWS)
		scrub_aws_env();
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
	free(theirs);
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

sl_err kmsd_keyproc_create(kmsd_keyproc *kp, const char *id, const char *aws_key_id)
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

sl_err kmsd_keyproc_set_state(kmsd_keyproc *kp, const char *id, bool enable, bool *found)
{
	struct kp_req rq = {.op = KP_SET_STATE, .arg = enable};
	struct kp_res rs = {0};
	ids(&rq, id, NULL);
	sl_err rc = call(kp, &rq, &rs);
	*found = rs.version != 0;
	return rc;
}

sl_err kmsd_keyproc_delete(kmsd_keyproc *kp, const char *id, bool force, size_t *refs,
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

sl_err kmsd_keyproc_rotate(kmsd_keyproc *kp, const char *id, unsigned *version)
{
	struct kp_req rq = {.op = KP_ROTATE};
	struct kp_res rs = {0};
	ids(&rq, id, NULL);
	sl_err rc = call(kp, &rq, &rs);
	*version = rs.version;
	return rc;
}

sl_err kmsd_keyproc_forget(kmsd_keyproc *kp, const char *id)
{
	struct kp_req rq = {.op = KP_FORGET};
	struct kp_res rs;
	ids(&rq, id, NULL);
	return call(kp, &rq, &rs);
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

sl_err kmsd_keyproc_wrap(kmsd_keyproc *kp, const char *id, const char *ds,
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

sl_err kmsd_keyproc_unwrap_seal(kmsd_keyproc *kp, const char *id, const char *ds,
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

sl_err kmsd_keyproc_rewrap(kmsd_keyproc *kp, const char *id, const char *ds, const uint8_t *in,
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

sl_err kmsd_keyproc_new_sealed(kmsd_keyproc *kp, const char *id, const char *ds,
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
