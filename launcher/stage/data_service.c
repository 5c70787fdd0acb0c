/* The data service (data_service.h): a SOCK_SEQPACKET Unix socket served by
 * one thread with poll(2). One request per message, one JSON answer per
 * message, a descriptor attached by SCM_RIGHTS to an "open" answer.
 *
 * Admission (docs/job-interface.md, "Admission and limits"): a connection
 * holds one of three bounded pools. Under serve it waits in the pre-auth
 * pool until its first request shows the token (SL_DSVC_PREAUTH_SLOTS, for
 * preauth_ms; when full, the oldest connection of the process holding most
 * of it makes room), and only then takes an admitted slot (SL_DSVC_SLOTS, at
 * most SL_DSVC_SLOTS_PER_PID from one process, closed after idle_ms without
 * a request unless it holds a shard). Under run the peer check at accept is
 * the admission. A refused peer lingers a moment in a pool of its own, so it
 * reads its refusal rather than a reset, and is then closed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "data_service.h"
#include "dsvc_int.h"
#include "seclaunch/secret.h"

#define MAX_DATASETS 4096
/* refused peers kept until they hang up or LINGER_MS pass */
#define LINGER_SLOTS 16
#define LINGER_MS 2000
#define CONN_CAP (SL_DSVC_SLOTS + SL_DSVC_PREAUTH_SLOTS + LINGER_SLOTS)
/* out of descriptors: the listening socket rests this long */
#define ACCEPT_PAUSE_MS 100
/* refusals told one by one per window; past that, one summary per window */
#define REPORT_BURST 16
#define REPORT_WINDOW_MS 10000

#define TOKEN_HEX 64

sl_err sl_dsvc_new(const sl_dsvc_opts *o, sl_dsvc **out)
{
	sl_err rc = SL_E_SYSTEM;
	sl_dsvc *s = calloc(1, sizeof(*s));
	const char *parent = o->dir;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	SL_ENSURE(s != NULL, SL_E_NOMEM, "data service");
	s->lfd = -1;
	s->dfd = s->pdfd = -1;
	s->wake[0] = s->wake[1] = -1;
	s->o = *o;
	s->self = getpid();
	s->o.token = NULL; /* the copy below is the service's own */
	s->preauth_ms = o->preauth_ms != 0 ? o->preauth_ms : SL_DSVC_PREAUTH_MS;
	s->idle_ms = o->idle_ms != 0 ? o->idle_ms : SL_DSVC_IDLE_MS;
	pthread_mutex_init(&s->mu, NULL);
	if (o->token != NULL) {
		SL_ENSURE(strlen(o->token) == TOKEN_HEX, SL_E_INTERNAL,
		          "data service: the token is not %d hex digits", TOKEN_HEX);
		SL_GUARD(sl_secret_new(TOKEN_HEX, &s->token));
		memcpy(sl_secret_data(s->token), o->token, TOKEN_HEX);
		sl_secret_readonly(s->token);
	}
	if (o->path != NULL) {
		SL_ENSURE(strlen(o->path) < sizeof(s->path), SL_E_USAGE,
		          "%s: longer than a socket path may be (%zu bytes)", o->path,
		          sizeof(s->path) - 1);
		snprintf(s->path, sizeof(s->path), "%s", o->path);
		const char *slash = strrchr(s->path, '/');
		SL_ENSURE(slash != NULL && slash[1] != '\0', SL_E_USAGE,
		          "%s: not an absolute path to a socket", s->path);
		snprintf(s->base, sizeof(s->base), "%s", slash + 1);
		char pdir[108];
		snprintf(pdir, sizeof(pdir), "%.*s", slash == s->path ? 1 : (int)(slash - s->path),
		         s->path);
		s->dfd = open(pdir, /* lint: trusted path (the administrator's --socket) */
		              O_PATH | O_DIRECTORY | O_CLOEXEC);
		SL_ENSURE(s->dfd >= 0, SL_E_SYSTEM, "%s: %s", pdir, strerror(errno));
		goto bind_it;
	}
	/* the caller's own runtime folder only when the job runs as the
	 * caller: root's $XDG_RUNTIME_DIR (/run/user/0, 0700) is a folder the
	 * job's user cannot even pass through, and a folder the job's user
	 * owns is one it could change under root's feet; /tmp is neither */
	if (parent == NULL && o->job_uid == getuid())
		parent = getenv("XDG_RUNTIME_DIR");
	if (parent == NULL || parent[0] != '/' || strlen(parent) > 60)
		parent = "/tmp";
	s->pdfd = open(parent, /* lint: trusted path (/tmp or the caller's own runtime folder) */
	               O_PATH | O_DIRECTORY | O_CLOEXEC);
	SL_ENSURE(s->pdfd >= 0, SL_E_SYSTEM, "%s: %s", parent, strerror(errno));
	snprintf(s->dir, sizeof(s->dir), "%s/seclaunch-data-XXXXXX", parent);
	SL_ENSURE(mkdtemp(s->dir) != NULL, SL_E_SYSTEM, "%s: cannot create the socket folder: %s",
	          s->dir, strerror(errno));
	s->made_dir = true;
	snprintf(s->dname, sizeof(s->dname), "%s", strrchr(s->dir, '/') + 1);
	s->dfd = openat(s->pdfd, s->dname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	SL_ENSURE(s->dfd >= 0, SL_E_SYSTEM, "%s: %s", s->dir, strerror(errno));
	snprintf(s->base, sizeof(s->base), "data.sock");
	snprintf(s->path, sizeof(s->path), "%s/data.sock", s->dir);
bind_it:
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	SL_ENSURE(s->lfd >= 0, SL_E_SYSTEM, "data service socket: %s", strerror(errno));
	/* through the folder's descriptor: a name swapped on the way since
	 * it was opened leads nowhere else */
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", s->dfd, s->base) >=
	    (int)sizeof(sa.sun_path))
		memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		if (!s->made_dir)
			s->path[0] = '\0'; /* not ours to unlink */
		SL_FAIL(e == EADDRINUSE ? SL_E_EXISTS : SL_E_SYSTEM, "%s: bind: %s",
		        o->path != NULL ? o->path : s->path, strerror(e));
	}
	SL_ENSURE(listen(s->lfd, 64) == 0, SL_E_SYSTEM, "%s: listen: %s", s->path, strerror(errno));
	/* the folder keeps everyone but the job's user out; the peer check
	 * keeps out the user's other processes. The socket was made 0700 by
	 * the umask (077, set at start); a --socket path may lie in a folder
	 * the job's user can write, so nothing below follows a symlink there:
	 * the socket is changed only inside the folder made here, and chowned
	 * without following a link (a swapped name changes only the link).
	 * The socket first: while the folder is still root's, its name cannot
	 * be swapped. */
	SL_ENSURE(!s->made_dir || fchmodat(s->dfd, s->base, 0600, 0) == 0, SL_E_SYSTEM,
	          "%s: chmod: %s", s->path, strerror(errno));
	if (o->job_uid != getuid())
		SL_ENSURE(fchownat(s->dfd, s->base, o->job_uid, o->job_gid, AT_SYMLINK_NOFOLLOW) ==
		                  0 &&
		              (!s->made_dir || fchownat(s->pdfd, s->dname, o->job_uid, o->job_gid,
		                                        AT_SYMLINK_NOFOLLOW) == 0),
		          SL_E_SYSTEM, "%s: chown to uid %u: %s", s->path, (unsigned)o->job_uid,
		          strerror(errno));
	SL_ENSURE(pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) == 0, SL_E_SYSTEM, "pipe: %s",
	          strerror(errno));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_dsvc_free(s);
	return rc;
}

static SL_RESULT add(sl_dsvc *s, const char *dataset_id, int fd, json_t *info,
                     const sl_dsvc_stream_ops *ops)
{
	sl_err rc = SL_E_NOMEM;
	struct dataset *v;

	SL_ENSURE(!s->running, SL_E_INTERNAL, "data service: datasets are added before serving");
	SL_ENSURE(s->n_ds < MAX_DATASETS, SL_E_TOO_LARGE, "data service: more than %d datasets",
	          MAX_DATASETS);
	for (size_t i = 0; i < s->n_ds; i++)
		SL_ENSURE(strcmp(s->ds[i].id, dataset_id) != 0, SL_E_INPUT,
		          "data service: dataset \"%s\" given twice", dataset_id);
	v = realloc(s->ds, (s->n_ds + 1) * sizeof(*v));
	SL_ENSURE(v != NULL, SL_E_NOMEM, "data service");
	s->ds = v;
	struct dataset *d = &s->ds[s->n_ds];
	memset(d, 0, sizeof(*d));
	d->id = strdup(dataset_id);
	d->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
	d->info = json_incref(info);
	if (ops != NULL)
		d->ops = *ops;
	if (d->id == NULL || (fd >= 0 && d->fd < 0)) {
		free(d->id);
		if (d->fd >= 0)
			close(d->fd);
		json_decref(d->info);
		SL_FAIL(SL_E_SYSTEM, "data service: %s", strerror(errno));
	}
	s->n_ds++;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_dsvc_add(sl_dsvc *s, const char *dataset_id, int fd, json_t *info)
{
	if (fd < 0)
		return sl_err_set(SL_E_INTERNAL, "data service: dataset \"%s\" has no descriptor",
		                  dataset_id);
	return add(s, dataset_id, fd, info, NULL);
}

sl_err sl_dsvc_add_stream(sl_dsvc *s, const char *dataset_id, json_t *info,
                          const sl_dsvc_stream_ops *ops)
{
	return add(s, dataset_id, -1, info, ops);
}

const char *sl_dsvc_path(const sl_dsvc *s)
{
	return s->path;
}

uint64_t sl_dsvc_served(const sl_dsvc *s)
{
	pthread_mutex_lock((pthread_mutex_t *)&s->mu);
	uint64_t v = s->served;
	pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
	return v;
}

uint64_t sl_dsvc_refusals(const sl_dsvc *s)
{
	pthread_mutex_lock((pthread_mutex_t *)&s->mu);
	uint64_t v = s->refused;
	pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
	return v;
}

/* The parent of pid from /proc/PID/stat (field 4, after the parenthesised
 * command, which may itself hold parentheses and spaces). */
static pid_t parent_of(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC); /* lint: trusted path (procfs) */
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	int ppid = -1;
	char state;
	if (rp == NULL || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
		return -1;
	return (pid_t)ppid;
}

/* NULL when the peer may be served, else why not. */
static const char *check_peer(const sl_dsvc *s, const struct ucred *c)
{
	if (c->uid != s->o.job_uid)
		return "not the job's user";
	if (s->token != NULL)
		return NULL; /* the token in each request decides */
	pid_t p = c->pid;
	for (int depth = 0; depth < 4096 && p > 1; depth++) {
		p = parent_of(p);
		if (p == s->self)
			return NULL;
	}
	return "not a process of this job";
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connections in state st (of pid, when pid > 0), not counting those
 * closing this round. */
static int count(const struct conn *conns, int n, enum conn_state st, pid_t pid)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += !conns[i].gone && conns[i].st == st && (pid <= 0 || conns[i].pid == pid);
	return k;
}

/* Whether pid's share of the admitted slots is taken. A peer in a pid
 * namespace this one cannot see has pid 0: no share of its own. */
static bool pid_full(const struct conn *conns, int n, pid_t pid)
{
	return pid > 0 && count(conns, n, C_IN, pid) >= SL_DSVC_SLOTS_PER_PID;
}

/* Not a refusal (the peer may be served): no slot is free for it. */
static void send_busy(int fd, int per_pid)
{
	char m[160];
	snprintf(m, sizeof(m),
	         per_pid ? "this process holds %d connections to the data service already; close "
	                   "one and retry"
	                 : "the data service has %d connections already; retry",
	         per_pid ? SL_DSVC_SLOTS_PER_PID : SL_DSVC_SLOTS);
	sl_dsvc_send(fd, sl_dsvc_error("busy", m), -1);
}

/* A connection that showed the token takes an admitted slot, if one is
 * free for it; else it is told "busy" and closed. */
static bool admit(const struct conn *conns, int n, struct conn *c)
{
	bool all = count(conns, n, C_IN, 0) >= SL_DSVC_SLOTS;
	if (all || pid_full(conns, n, c->pid)) {
		send_busy(c->fd, !all);
		c->gone = true;
		return false;
	}
	c->st = C_IN;
	return true;
}

static const char *check_token(const sl_dsvc *s, const char *token)
{
	if (s->token == NULL)
		return token == NULL ? NULL : "a token was given, but this service takes none";
	if (token == NULL)
		return "no token (SECLAUNCH_DATA_TOKEN) in the request";
	if (strlen(token) != TOKEN_HEX || !sl_ct_eq(token, sl_secret_data(s->token), TOKEN_HEX))
		return "wrong token";
	return NULL;
}

/* One request (sl_dsvc_parse), of a peer admitted or being admitted: the
 * token checked, a pre-auth connection given its slot, then answered.
 * Returns why the request is refused (the peer is then cut off), or NULL. */
static const char *answer(sl_dsvc *s, struct conn *conns, int n_conns, struct conn *c,
                          const char *msg, size_t len)
{
	sl_dsvc_req rq;
	const char *why = NULL;

	if (sl_dsvc_parse(msg, len, &rq) != SL_OK) {
		if (s->token != NULL) {
			why = "a malformed request (no token read)";
			goto out;
		}
		sl_dsvc_send(c->fd, sl_dsvc_error("bad-request", sl_err_detail()), -1);
		goto out;
	}
	why = check_token(s, rq.has_token ? rq.token : NULL);
	if (why != NULL)
		goto out;
	if (c->st == C_PRE && !admit(conns, n_conns, c))
		goto out;
	sl_dsvc_answer(s, c, &rq);
out:
	sl_wipe(&rq, sizeof(rq));
	return why;
}

/* The hook hears of the first REPORT_BURST refusals of a window one by one,
 * of the rest in one summary at the window's end (or the service's); a
 * window that needed a summary leaves the next one none to tell one by one,
 * so a lasting flood writes one record per window. */
static void tell_held_back(sl_dsvc *s)
{
	struct reports *r = &s->rep;
	char m[256];
	if (r->held_back == 0)
		return;
	snprintf(m, sizeof(m),
	         "%llu more refused connections within %d s, not recorded one by one (the "
	         "last: %s)",
	         (unsigned long long)r->held_back, REPORT_WINDOW_MS / 1000, r->why);
	if (s->o.refused != NULL)
		s->o.refused(s->o.refused_ctx, r->pid, r->uid, m);
	r->held_back = 0;
}

static void next_window(sl_dsvc *s, int64_t now)
{
	struct reports *r = &s->rep;
	bool flooded = r->held_back > 0;
	tell_held_back(s);
	r->window_end = now + REPORT_WINDOW_MS;
	r->told = flooded ? REPORT_BURST : 0;
}

/* Counted and reported (audited) before the peer is answered (fd >= 0), so
 * that whoever reads the refusal finds it recorded already. */
static void refuse(sl_dsvc *s, int fd, pid_t pid, uid_t uid, const char *why)
{
	struct reports *r = &s->rep;
	int64_t now = now_ms();

	pthread_mutex_lock(&s->mu);
	s->refused++;
	pthread_mutex_unlock(&s->mu);
	if (now >= r->window_end)
		next_window(s, now);
	if (r->told < REPORT_BURST) {
		r->told++;
		if (s->o.refused != NULL)
			s->o.refused(s->o.refused_ctx, pid, uid, why);
	} else {
		r->held_back++;
		r->pid = pid;
		r->uid = uid;
		r->why = why;
	}
	if (fd >= 0)
		sl_dsvc_send(fd, sl_dsvc_error("refused", why), -1);
}

/* A refused connection lingers (its peer reads the refusal, not a reset)
 * while the linger pool has room, else it is closed at once. */
static void linger(struct conn *conns, int n, struct conn *c, int64_t now)
{
	if (count(conns, n, C_SHUT, 0) >= LINGER_SLOTS) {
		c->gone = true;
		return;
	}
	(void)shutdown(c->fd, SHUT_WR);
	c->st = C_SHUT;
	c->since = now;
}

static void conn_close(sl_dsvc *s, struct conn *c)
{
	close(c->fd);
	sl_dsvc_release_all(s, c);
}

/* The connections closing this round go; the last takes each one's place. */
static int compact(sl_dsvc *s, struct conn *conns, int n)
{
	for (int i = 0; i < n; i++) {
		if (!conns[i].gone)
			continue;
		conn_close(s, &conns[i]);
		conns[i] = conns[n - 1];
		conns[n - 1] = (struct conn){0};
		n--;
		i--;
	}
	return n;
}

/* When c's time in its state is up (INT64_MAX: never). */
static int64_t deadline(const sl_dsvc *s, const struct conn *c)
{
	switch (c->st) {
	case C_PRE:
		return c->since + s->preauth_ms;
	case C_SHUT:
		return c->since + LINGER_MS;
	case C_IN:
		/* a holder's shards would go back, and their pages be zeroed
		 * under the reader's mapping */
		return c->n == 0 ? c->since + s->idle_ms : INT64_MAX;
	}
	return INT64_MAX;
}

/* The connections whose time is up: pre-auth ones refused and closed,
 * refused ones closed, idle admitted ones closed without a word. */
static void expire(sl_dsvc *s, struct conn *conns, int n, int64_t now)
{
	for (int i = 0; i < n; i++) {
		struct conn *c = &conns[i];
		if (c->gone || now < deadline(s, c))
			continue;
		if (c->st == C_PRE)
			refuse(s, c->fd, c->pid, c->uid,
			       "no request with the token (SECLAUNCH_DATA_TOKEN) in time");
		c->gone = true;
	}
}

/* poll's timeout: until the next deadline, the listening socket's rest or
 * the end of a window with refusals held back; -1 for none. */
static int poll_timeout(const sl_dsvc *s, const struct conn *conns, int n, int64_t now,
                        int64_t accept_after)
{
	int64_t next = INT64_MAX;
	for (int i = 0; i < n; i++) {
		int64_t d = deadline(s, &conns[i]);
		next = d < next ? d : next;
	}
	if (accept_after > now && accept_after < next)
		next = accept_after;
	if (s->rep.held_back > 0 && s->rep.window_end < next)
		next = s->rep.window_end;
	if (next == INT64_MAX)
		return -1;
	return next <= now ? 0 : (next - now > 60000 ? 60000 : (int)(next - now));
}

/* One request or hang-up on c. */
static void on_readable(sl_dsvc *s, struct conn *conns, int n, struct conn *c, char *msg,
                        int64_t now)
{
	ssize_t got = recv(c->fd, msg, SL_DSVC_MSG_MAX, MSG_DONTWAIT);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) {
		c->gone = true;
		return;
	}
	if (c->st == C_SHUT)
		return; /* refused: read and dropped */
	const char *why = answer(s, conns, n, c, msg, (size_t)got);
	if (why != NULL) {
		refuse(s, c->fd, c->pid, c->uid, why);
		linger(conns, n, c, now);
	} else if (c->st == C_IN) {
		c->since = now;
	}
}

/* The oldest pre-auth connection of the process holding most of the pool:
 * one process flooding it only ever pushes out its own. */
static struct conn *preauth_victim(struct conn *conns, int n)
{
	struct conn *v = NULL;
	int most = 0;
	for (int i = 0; i < n; i++) {
		struct conn *c = &conns[i];
		if (c->gone || c->st != C_PRE)
			continue;
		int k = count(conns, n, C_PRE, c->pid);
		if (k > most || (k == most && v != NULL && c->since < v->since)) {
			most = k;
			v = c;
		}
	}
	return v;
}

/* One new connection: checked (uid; under run the descendant check), then
 * into the pool its state says. Returns the new count. */
static int on_accept(sl_dsvc *s, struct conn *conns, int n, int64_t now, int64_t *accept_after)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		/* the connection stays queued and the socket readable: rest
		 * rather than spin */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			*accept_after = now + ACCEPT_PAUSE_MS;
		return n;
	}
	struct ucred cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	socklen_t cl = sizeof(cr);
	const char *why = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0
	                      ? "no peer credentials"
	                      : check_peer(s, &cr);
	struct conn c = {.fd = fd, .pid = cr.pid, .uid = cr.uid, .since = now};
	if (why != NULL) {
		refuse(s, fd, cr.pid, cr.uid, why);
		c.st = C_SHUT;
		if (count(conns, n, C_SHUT, 0) >= LINGER_SLOTS) {
			close(fd);
			return n;
		}
		(void)shutdown(fd, SHUT_WR);
	} else if (s->token != NULL) {
		c.st = C_PRE;
		if (count(conns, n, C_PRE, 0) >= SL_DSVC_PREAUTH_SLOTS) {
			struct conn *v = preauth_victim(conns, n);
			refuse(s, v->fd, v->pid, v->uid,
			       "no request with the token yet, and the connections waiting for "
			       "one are too many");
			conn_close(s, v);
			*v = conns[n - 1];
			conns[n - 1] = (struct conn){0};
			n--;
		}
	} else {
		c.st = C_IN;
		bool all = count(conns, n, C_IN, 0) >= SL_DSVC_SLOTS;
		if (all || pid_full(conns, n, cr.pid)) {
			send_busy(fd, !all);
			close(fd);
			return n;
		}
	}
	if (n >= CONN_CAP) { /* cannot happen: each pool is bounded */
		close(fd);
		return n;
	}
	conns[n] = c;
	return n + 1;
}

static void *serve(void *arg)
{
	sl_dsvc *s = arg;
	struct pollfd *pf = calloc(CONN_CAP + 2, sizeof(*pf));
	struct conn *conns = calloc(CONN_CAP, sizeof(*conns));
	char *msg = malloc(SL_DSVC_MSG_MAX);
	int n = 0;
	int64_t accept_after = 0;

	if (msg == NULL || conns == NULL || pf == NULL)
		goto out;
	s->rep.window_end = now_ms() + REPORT_WINDOW_MS;
	for (;;) {
		int64_t now = now_ms();
		int timeout = poll_timeout(s, conns, n, now, accept_after);
		pf[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
		pf[1] = (struct pollfd){.fd = now >= accept_after ? s->lfd : -1, .events = POLLIN};
		for (int i = 0; i < n; i++)
			pf[i + 2] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
		if (poll(pf, (nfds_t)n + 2, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents != 0)
			break;
		now = now_ms();
		/* conns[i] is pf[i + 2] until compact() moves them */
		for (int i = 0; i < n; i++)
			if (pf[i + 2].revents != 0 && !conns[i].gone)
				on_readable(s, conns, n, &conns[i], msg, now);
		expire(s, conns, n, now);
		n = compact(s, conns, n);
		if (pf[1].revents & POLLIN)
			n = on_accept(s, conns, n, now, &accept_after);
		if (s->rep.held_back > 0 && now >= s->rep.window_end)
			next_window(s, now);
	}
	for (int i = 0; i < n; i++)
		conn_close(s, &conns[i]);
	tell_held_back(s);
out:
	free(pf);
	free(conns);
	free(msg);
	return NULL;
}
sl_err sl_dsvc_serve(sl_dsvc *s)
{
	if (pthread_create(&s->thread, NULL, serve, s) != 0)
		return sl_err_set(SL_E_SYSTEM, "cannot start the data service thread");
	s->running = true;
	return SL_OK;
}

void sl_dsvc_free(sl_dsvc *s)
{
	if (s == NULL)
		return;
	if (s->running) {
		(void)!write(s->wake[1], "x", 1);
		pthread_join(s->thread, NULL);
	}
	if (s->lfd >= 0)
		close(s->lfd);
	/* the folder may be the job's user's by now: removed through the
	 * descriptors opened while it was root's (a name the user swapped for
	 * a link is the link removed, or nothing) */
	if (s->path[0] != '\0' && s->dfd >= 0)
		(void)unlinkat(s->dfd, s->base, 0);
	if (s->made_dir && s->pdfd >= 0)
		(void)unlinkat(s->pdfd, s->dname, AT_REMOVEDIR);
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->pdfd >= 0)
		close(s->pdfd);
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	for (size_t i = 0; i < s->n_ds; i++) {
		free(s->ds[i].id);
		if (s->ds[i].fd >= 0)
			close(s->ds[i].fd);
		json_decref(s->ds[i].info);
	}
	free(s->ds);
	sl_secret_free(s->token);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
