/* The key process's server half (../keyproc_table.h holds the request
 * table and the design): the monitor, the key process it forks, and the
 * thread per channel that checks each request against the table and runs it
 * with the in-process KEK operations (kek.c). The client half is
 * kms/http/kek_client.c. */
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

#include "keys.h"

#include "../keyproc_table.h" /* after the folder header */

/* ---- the key process ------------------------------------------------------ */

struct serve_arg {
	kmsd_keys *kek;
	int fd;
};

static bool valid_str(const char *s, size_t cap, bool (*check)(const char *))
{
	return memchr(s, '\0', cap) != NULL && check(s);
}

static void handle(kmsd_keys *k, struct kp_req *rq, struct kp_res *rs)
{
	sl_err rc = SL_OK;
	unsigned v = 0;
	size_t n = 0;
	bool b = false;
	switch (rq->op) {
	case KP_CREATE:
		rc = kmsd_keys_adopt(k, rq->id, rq->aws_key[0] ? rq->aws_key : NULL);
		break;
	case KP_SET_STATE:
		rc = kmsd_keys_set_state(k, rq->id, rq->arg != 0, &b);
		rs->version = b;
		break;
	case KP_DELETE:
		rc = kmsd_keys_delete(k, rq->id, rq->arg != 0, &n, &b);
		rs->version = (uint32_t)n;
		rs->wrapped_len = b;
		break;
	case KP_ROTATE:
		rc = kmsd_keys_rotate(k, rq->id, &v);
		rs->version = v;
		break;
	case KP_WRAP:
		rc = kmsd_keys_wrap(k, rq->id, rq->ds, rq->dek, rs->out, &n);
		rs->out_len = rc == SL_OK ? (uint32_t)n : 0;
		break;
	case KP_UNWRAP_SEAL:
		rc = kmsd_keys_unwrap_seal(k, rq->id, rq->ds, rq->wrapped, rq->wrapped_len,
		                           rq->eph_pub, rs->out);
		rs->out_len = rc == SL_OK ? KMSD_SEALED_LEN : 0;
		break;
	case KP_REWRAP:
		rc = kmsd_keys_rewrap(k, rq->id, rq->ds, rq->wrapped, rq->wrapped_len, rs->out, &n);
		rs->out_len = rc == SL_OK ? (uint32_t)n : 0;
		break;
	case KP_NEW_SEALED: {
		uint8_t w[SL_KMS_WRAPPED_DEK_MAX];
		rc = kmsd_keys_new_sealed(k, rq->id, rq->ds, rq->eph_pub, w, &n,
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
		bool no_ds = rq.op == KP_CREATE || rq.op == KP_ROTATE || rq.op == KP_SET_STATE ||
		             rq.op == KP_DELETE;
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
	kmsd_keys *k = NULL;
	pthread_t *th = calloc(n, sizeof(*th));
	struct serve_arg *args = calloc(n, sizeof(*args));
	sl_err rc;
	(void)prctl(PR_SET_NAME, "seclaunchd-kek", 0, 0, 0);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGINT, SIG_IGN); /* the parent ends it by closing the channels */
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	/* the store connections of the network process's setting, no more
	 * than there are channels (each thread holds one at a time) */
	unsigned pool = kmsd_store_pool(cfg);
	rc = th && args ? kmsd_store_open(cfg->store, (unsigned)(n < pool ? n : pool), &st)
	                : SL_E_NOMEM;
	if (rc == SL_OK)
		rc = kmsd_keys_open(cfg, st, &k);
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
	kmsd_keys_close(k);
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

sl_err kmsd_keyproc_spawn(const kmsd_config *cfg, unsigned channels, int *near, int *status_fd,
                          pid_t *pid)
{
	sl_err rc = SL_E_NOMEM;
	int *theirs = calloc(channels, sizeof(int));
	int sp[2] = {-1, -1};
	unsigned made = 0;
	*status_fd = -1;
	*pid = -1;
	SL_ENSURE(theirs != NULL, SL_E_NOMEM, "key process");
	for (; made < channels; made++) {
		int sv[2];
		SL_ENSURE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0,
		          SL_E_SYSTEM, "key process: socketpair: %s", strerror(errno));
		near[made] = sv[0];
		theirs[made] = sv[1];
	}
	SL_ENSURE(pipe2(sp, O_CLOEXEC) == 0, SL_E_SYSTEM, "key process: pipe: %s", strerror(errno));
	*pid = fork();
	SL_ENSURE(*pid >= 0, SL_E_SYSTEM, "key process: fork: %s", strerror(errno));
	if (*pid == 0) {
		for (unsigned i = 0; i < channels; i++)
			close(near[i]);
		close(sp[0]);
		monitor_main(cfg, theirs, channels, sp[1]);
	}
	*status_fd = sp[0];
	sp[0] = -1;
	/* the AWS credentials are the key process's (its monitor keeps the
	 * environment to start it again): this process forgets its copy */
	if (cfg->backend == KMSD_KEK_AWS)
		scrub_aws_env();
	rc = SL_OK;
out:
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	for (unsigned i = 0; i < made; i++) {
		close(theirs[i]);
		if (rc != SL_OK)
			close(near[i]);
	}
	free(theirs);
	return rc;
}
