/* The data service: a child of this process lists and opens a dataset and
 * reads its bytes through the descriptor it received; a process that does
 * not descend from this one, and one of another user, are refused (and the
 * refusal hook hears of it); malformed and unknown requests get errors;
 * the socket and its folder are gone after free. Under serve's token:
 * any process of the user with the token is served, everyone else refused. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../launcher/stage/data_service.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

static const char payload[] = "the plaintext of dataset one, staged in memory";

static int staged_fd(void)
{
	int fd = memfd_create("staged", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(sl_write_all(fd, payload, sizeof(payload), "memfd"), SL_OK);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_WRITE), 0);
	return fd;
}

static int dial(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(c);
		return -1;
	}
	return c;
}

/* Sends req; returns the answer (caller frees) and any received fd. */
static json_t *ask(int c, const char *req, int *fd_out)
{
	char buf[SL_DSVC_MSG_MAX];
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	if (fd_out != NULL)
		*fd_out = -1;
	/* a refused peer is told so at once and disconnected: its request may
	 * meet a closed socket, the answer is still there to read */
	(void)send(c, req, strlen(req), MSG_NOSIGNAL);
	ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return NULL;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (cm != NULL && cm->cmsg_type == SCM_RIGHTS && fd_out != NULL)
		memcpy(fd_out, CMSG_DATA(cm), sizeof(int));
	return json_loadb(buf, (size_t)n, 0, NULL);
}

struct refusals {
	int n;
	char why[128];
};

static void on_refused(void *ctx, pid_t pid, uid_t uid, const char *why)
{
	struct refusals *r = ctx;
	(void)pid;
	(void)uid;
	r->n++;
	snprintf(r->why, sizeof(r->why), "%s", why);
}

static sl_dsvc *start(struct refusals *r)
{
	sl_dsvc *s = NULL;
	sl_dsvc_opts o = {
	    .job_uid = getuid(), .job_gid = getgid(), .refused = on_refused, .refused_ctx = r};
	int fd = staged_fd();
	json_t *info =
	    json_pack("{s:I,s:s}", "size", (json_int_t)sizeof(payload), "method", "memfd");
	assert_int_equal(sl_dsvc_new(&o, &s), SL_OK);
	assert_int_equal(sl_dsvc_add(s, "one", fd, info), SL_OK);
	assert_int_equal(sl_dsvc_add(s, "one", fd, info), SL_E_INPUT);
	json_decref(info);
	close(fd);
	assert_int_equal(sl_dsvc_serve(s), SL_OK);
	return s;
}

/* A child of this process: served. Exit status says what it saw. */
static int child_reads(const char *path)
{
	int c = dial(path), fd = -1;
	if (c < 0)
		return 10;
	json_t *l = ask(c, "{\"op\":\"list\"}", NULL);
	if (l == NULL || !json_is_true(json_object_get(l, "ok")) ||
	    json_object_get(json_object_get(l, "datasets"), "one") == NULL)
		return 11;
	json_decref(l);
	json_t *a = ask(c, "{\"op\":\"open\",\"dataset\":\"one\"}", &fd);
	if (a == NULL || !json_is_true(json_object_get(a, "ok")) || fd < 0)
		return 12;
	json_decref(a);
	void *m = mmap(NULL, sizeof(payload), PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || memcmp(m, payload, sizeof(payload)) != 0)
		return 13;
	/* read-only for the job: the seals refuse writes */
	if (write(fd, "x", 1) >= 0)
		return 14;
	json_t *u = ask(c, "{\"op\":\"open\",\"dataset\":\"two\"}", &fd);
	if (u == NULL || strcmp(json_string_value(json_object_get(u, "error")), "unknown-dataset"))
		return 15;
	json_decref(u);
	json_t *b = ask(c, "not json", NULL);
	if (b == NULL || strcmp(json_string_value(json_object_get(b, "error")), "bad-request"))
		return 16;
	json_decref(b);
	json_t *x = ask(c, "{\"op\":\"open\",\"dataset\":\"one\",\"extra\":1}", &fd);
	if (x == NULL || json_is_true(json_object_get(x, "ok")) || fd >= 0)
		return 17;
	json_decref(x);
	return 0;
}

static void test_child_is_served(void **state)
{
	(void)state;
	struct refusals r = {0};
	sl_dsvc *s = start(&r);
	char path[128];
	snprintf(path, sizeof(path), "%s", sl_dsvc_path(s));

	pid_t p = fork();
	if (p == 0)
		_exit(child_reads(path));
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(sl_dsvc_served(s), 1);
	assert_int_equal(r.n, 0);
	/* a grandchild started by the job is served too */
	p = fork();
	if (p == 0) {
		pid_t g = fork();
		if (g == 0)
			_exit(child_reads(path));
		int gs;
		waitpid(g, &gs, 0);
		_exit(WIFEXITED(gs) ? WEXITSTATUS(gs) : 99);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(sl_dsvc_served(s), 2);

	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	sl_dsvc_free(s);
	assert_int_not_equal(stat(path, &sb), 0);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_not_equal(stat(path, &sb), 0);
}

/* A process that escaped (reparented away from this one) is refused: it
 * connects after its parent exited, so it no longer descends from us. */
static void test_stranger_is_refused(void **state)
{
	(void)state;
	struct refusals r = {0};
	sl_dsvc *s = start(&r);
	char path[128];
	int pipefd[2];
	snprintf(path, sizeof(path), "%s", sl_dsvc_path(s));
	assert_int_equal(pipe(pipefd), 0);

	pid_t p = fork();
	if (p == 0) {
		pid_t mid = getpid();
		setsid();
		if (fork() == 0) {
			/* wait until the parent is gone: reparented to init or to a
			 * subreaper above this test, never to the test itself */
			while (getppid() == mid)
				usleep(1000);
			int c = dial(path), fd = -1;
			json_t *a = c >= 0 ? ask(c, "{\"op\":\"list\"}", &fd) : NULL;
			char res = 'x';
			if (a != NULL && !json_is_true(json_object_get(a, "ok")) &&
			    strcmp(json_string_value(json_object_get(a, "error")), "refused") == 0)
				res = 'R';
			else if (a != NULL && json_is_true(json_object_get(a, "ok")))
				res = 'S';
			(void)!write(pipefd[1], &res, 1);
			_exit(0);
		}
		_exit(0);
	}
	waitpid(p, NULL, 0);
	char res = 0;
	assert_int_equal(read(pipefd[0], &res, 1), 1);
	assert_int_equal(res, 'R');
	assert_int_equal(r.n, 1);
	assert_string_equal(r.why, "not a process of this job");
	assert_int_equal(sl_dsvc_served(s), 0);
	close(pipefd[0]);
	close(pipefd[1]);
	sl_dsvc_free(s);
}

/* Another user (a child that drops to nobody) is refused by uid, even
 * when the folder's permissions would let it connect. */
static void test_other_user_is_refused(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: needs root to run a child as another user\n");
		skip();
	}
	struct refusals r = {0};
	sl_dsvc *s = start(&r);
	char path[128], dir[128];
	snprintf(path, sizeof(path), "%s", sl_dsvc_path(s));
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(chmod(path, 0777), 0);
	pid_t p = fork();
	if (p == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(20);
		int c = dial(path), fd = -1;
		json_t *a = c >= 0 ? ask(c, "{\"op\":\"open\",\"dataset\":\"one\"}", &fd) : NULL;
		if (a == NULL)
			_exit(21);
		_exit(strcmp(json_string_value(json_object_get(a, "error")), "refused") == 0 &&
		              fd < 0
		          ? 0
		          : 22);
	}
	int st;
	waitpid(p, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.why, "not the job's user");
	sl_dsvc_free(s);
}

#define TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* serve's admission: a process that does not descend from the service (here
 * the service's own process) is answered when each request carries the
 * token; no token, a wrong token (one digit off), a token of the wrong
 * length and a malformed request are refused, the connection cut, the hook
 * told; a socket at a given path is used as given and removed at free. */
static void test_token_admission(void **state)
{
	(void)state;
	struct refusals r = {0};
	sl_dsvc *s = NULL;
	char path[128], wrong[sizeof(TOKEN)], req[256];
	snprintf(path, sizeof(path), "/tmp/sl-dsvc-test-%d.sock", (int)getpid());
	sl_dsvc_opts o = {.job_uid = getuid(),
	                  .job_gid = getgid(),
	                  .path = path,
	                  .token = TOKEN,
	                  .refused = on_refused,
	                  .refused_ctx = &r};
	int fd = staged_fd(), got = -1;
	json_t *info =
	    json_pack("{s:I,s:s}", "size", (json_int_t)sizeof(payload), "method", "memfd");
	assert_int_equal(sl_dsvc_new(&o, &s), SL_OK);
	assert_string_equal(sl_dsvc_path(s), path);
	assert_int_equal(sl_dsvc_add(s, "one", fd, info), SL_OK);
	json_decref(info);
	close(fd);
	assert_int_equal(sl_dsvc_serve(s), SL_OK);

	/* the right token: served, from this very process */
	int c = dial(path);
	assert_true(c >= 0);
	snprintf(req, sizeof(req), "{\"op\":\"open\",\"dataset\":\"one\",\"token\":\"%s\"}", TOKEN);
	json_t *a = ask(c, req, &got);
	assert_non_null(a);
	assert_true(json_is_true(json_object_get(a, "ok")));
	assert_true(got >= 0);
	close(got);
	json_decref(a);
	close(c);
	assert_int_equal(r.n, 0);

	memcpy(wrong, TOKEN, sizeof(TOKEN));
	wrong[63] = 'e';
	const char *bad[] = {
	    "{\"op\":\"open\",\"dataset\":\"one\"}",
	    NULL, /* wrong token, filled below */
	    "{\"op\":\"list\",\"token\":\"0123\"}",
	    "not json",
	};
	char wreq[256];
	snprintf(wreq, sizeof(wreq), "{\"op\":\"open\",\"dataset\":\"one\",\"token\":\"%s\"}",
	         wrong);
	bad[1] = wreq;
	const char *why[] = {"no token", "wrong token", "wrong token", "malformed"};
	for (size_t i = 0; i < 4; i++) {
		c = dial(path);
		assert_true(c >= 0);
		got = -1;
		a = ask(c, bad[i], &got);
		assert_non_null(a);
		assert_string_equal(json_string_value(json_object_get(a, "error")), "refused");
		assert_int_equal(got, -1);
		json_decref(a);
		assert_int_equal(r.n, (int)i + 1);
		assert_non_null(strstr(r.why, why[i]));
		/* the connection is cut: a right request after it gets nothing */
		a = ask(c, req, &got);
		assert_null(a);
		assert_int_equal(got, -1);
		close(c);
	}
	sl_dsvc_free(s);
	struct stat sb;
	assert_int_not_equal(stat(path, &sb), 0);
}

/* A token of the wrong length is a programming error, refused at once; a
 * socket path that exists is not replaced. */
static void test_token_and_path_checked(void **state)
{
	(void)state;
	sl_dsvc *s = NULL;
	char path[128];
	snprintf(path, sizeof(path), "/tmp/sl-dsvc-test-exists-%d", (int)getpid());
	sl_dsvc_opts o = {.job_uid = getuid(), .job_gid = getgid(), .token = "abc"};
	assert_int_equal(sl_dsvc_new(&o, &s), SL_E_INTERNAL);
	assert_null(s);
	int f = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(f >= 0);
	close(f);
	o.token = TOKEN;
	o.path = path;
	assert_int_not_equal(sl_dsvc_new(&o, &s), SL_OK);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0); /* left alone */
	assert_true(S_ISREG(sb.st_mode));
	unlink(path);
}

/* The request parser: each op with exactly its members; anything else
 * refused naming what is wrong. */
static void test_parse(void **state)
{
	(void)state;
	sl_dsvc_req rq;
	const char *good[] = {
	    "{\"op\":\"list\"}",
	    "{\"op\":\"open\",\"dataset\":\"a\"}",
	    "{\"op\":\"open_shard\",\"dataset\":\"a\",\"shard\":4294967295}",
	    "{\"op\":\"release_shard\",\"dataset\":\"a\",\"shard\":0}",
	    "{\"op\":\"files\",\"dataset\":\"a\"}",
	    "{\"op\":\"shards\",\"dataset\":\"a\",\"start\":7}",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(sl_dsvc_parse(good[i], strlen(good[i]), &rq), SL_OK);
	assert_int_equal(rq.op, SL_DSVC_OP_SHARDS);
	assert_string_equal(rq.dataset, "a");
	assert_int_equal(rq.start, 7);
	const char *s = "{\"op\":\"open_shard\",\"dataset\":\"a\",\"shard\":9}";
	assert_int_equal(sl_dsvc_parse(s, strlen(s), &rq), SL_OK);
	assert_int_equal(rq.op, SL_DSVC_OP_OPEN_SHARD);
	assert_int_equal(rq.shard, 9);
	assert_false(rq.has_token);
	const char *t = "{\"op\":\"list\",\"token\":\"abc\"}";
	assert_int_equal(sl_dsvc_parse(t, strlen(t), &rq), SL_OK);
	assert_true(rq.has_token);
	assert_string_equal(rq.token, "abc");
	const struct {
		const char *in, *why;
	} bad[] = {
	    {"not json", "not JSON"},
	    {"[1]", "not a JSON object"},
	    {"{\"op\":\"list\",\"op\":\"list\"}", "duplicate"},
	    {"{\"op\":\"delete\",\"dataset\":\"a\"}", "unknown op \"delete\""},
	    {"{\"op\":\"list\",\"dataset\":\"a\"}", "takes no \"dataset\""},
	    {"{\"op\":\"open\"}", "needs \"dataset\""},
	    {"{\"op\":\"open\",\"dataset\":\"\"}", "empty \"dataset\""},
	    {"{\"op\":\"open\",\"dataset\":\"a\\u0000b\"}", "not JSON"},
	    {"{\"op\":\"open\",\"dataset\":7}", "dataset"},
	    {"{\"op\":\"open_shard\",\"dataset\":\"a\"}", "needs \"shard\""},
	    {"{\"op\":\"open\",\"dataset\":\"a\",\"shard\":1}", "takes no \"shard\""},
	    {"{\"op\":\"open_shard\",\"dataset\":\"a\",\"shard\":4294967296}", "\"shard\""},
	    {"{\"op\":\"open_shard\",\"dataset\":\"a\",\"shard\":-1}", "\"shard\""},
	    {"{\"op\":\"files\",\"dataset\":\"a\",\"start\":-1}", "\"start\""},
	    {"{\"op\":\"files\",\"dataset\":\"a\",\"start\":1.5}", "\"start\""},
	    {"{\"op\":\"open\",\"dataset\":\"a\",\"start\":1}", "takes no \"start\""},
	    {"{\"op\":\"open\",\"dataset\":\"a\",\"x\":1}", "\"x\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sl_dsvc_parse(bad[i].in, strlen(bad[i].in), &rq), SL_E_INPUT);
		if (strstr(sl_err_detail(), bad[i].why) == NULL)
			fail_msg("%s: \"%s\" does not say %s", bad[i].in, sl_err_detail(),
			         bad[i].why);
	}
	char big[300];
	snprintf(big, sizeof(big), "{\"op\":\"open\",\"dataset\":\"%0256d\"}", 0);
	assert_int_equal(sl_dsvc_parse(big, strlen(big), &rq), SL_E_INPUT);
}

/* Pages: within the budget, at least one entry each, next where the
 * following page starts, 0 at the end; every entry exactly once. */
static void test_page(void **state)
{
	(void)state;
	json_t *a = json_array();
	for (int i = 0; i < 1000; i++)
		json_array_append_new(a, json_pack("{s:i}", "n", i));
	uint64_t start = 0, next = 0;
	int seen = 0, pages = 0;
	do {
		json_t *p = sl_dsvc_page(a, start, 200, &next);
		assert_non_null(p);
		char *t = json_dumps(p, JSON_COMPACT);
		assert_true(strlen(t) <= 200);
		free(t);
		for (size_t i = 0; i < json_array_size(p); i++)
			assert_int_equal(
			    json_integer_value(json_object_get(json_array_get(p, i), "n")), seen++);
		json_decref(p);
		pages++;
		assert_true(next == 0 || next > start);
		start = next;
	} while (next != 0);
	assert_int_equal(seen, 1000);
	assert_true(pages > 1);
	/* an entry larger than the budget still makes a page of one */
	json_t *p = sl_dsvc_page(a, 5, 1, &next);
	assert_int_equal(json_array_size(p), 1);
	assert_int_equal(next, 6);
	json_decref(p);
	/* past the end: empty, no next */
	p = sl_dsvc_page(a, 5000, 200, &next);
	assert_int_equal(json_array_size(p), 0);
	assert_int_equal(next, 0);
	json_decref(p);
	json_decref(a);
}

/* ---- admission under load ---------------------------------------------- */

/* A serve-mode service (token) at a path of its own, with the limits given
 * (0: defaults). */
static sl_dsvc *start_serve(struct refusals *r, char *path, size_t cap, unsigned preauth_ms,
                            unsigned idle_ms)
{
	sl_dsvc *s = NULL;
	static int seq;
	snprintf(path, cap, "/tmp/sl-dsvc-adm-%d-%d.sock", (int)getpid(), seq++);
	sl_dsvc_opts o = {.job_uid = getuid(),
	                  .job_gid = getgid(),
	                  .path = path,
	                  .token = TOKEN,
	                  .preauth_ms = preauth_ms,
	                  .idle_ms = idle_ms,
	                  .refused = on_refused,
	                  .refused_ctx = r};
	int fd = staged_fd();
	json_t *info =
	    json_pack("{s:I,s:s}", "size", (json_int_t)sizeof(payload), "method", "memfd");
	assert_int_equal(sl_dsvc_new(&o, &s), SL_OK);
	assert_int_equal(sl_dsvc_add(s, "one", fd, info), SL_OK);
	json_decref(info);
	close(fd);
	assert_int_equal(sl_dsvc_serve(s), SL_OK);
	return s;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A client that gives up after secs instead of hanging: connect (which
 * waits while the listen queue is full) and every receive. */
static int dial_within(const char *path, int secs)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = secs};
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(c);
		return -1;
	}
	return c;
}

/* The right token's request on a fresh connection: true when answered ok. */
static bool served_with_token(const char *path, int secs)
{
	char req[256];
	int c = dial_within(path, secs);
	if (c < 0)
		return false;
	snprintf(req, sizeof(req), "{\"op\":\"list\",\"token\":\"%s\"}", TOKEN);
	json_t *a = ask(c, req, NULL);
	bool ok = a != NULL && json_is_true(json_object_get(a, "ok"));
	json_decref(a);
	close(c);
	return ok;
}

/* A child that opens n connections to path (non-blocking, retried for up to
 * 3 s while the listen queue is full) and keeps them open until *release is
 * closed; with req it sends that on each (and never reads the answer).
 * Returns its pid once it has opened them all (or given up). */
static pid_t flood(const char *path, int n, const char *req, int release[2])
{
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(release), 0);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		struct rlimit rl;
		close(ready[0]);
		close(release[1]);
		/* the parent may have lowered its own limit (its service's) */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
		}
		long long until = now_ms() + 3000;
		int opened = 0;
		for (int i = 0; i < n && now_ms() < until;) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
			if (c < 0)
				break;
			snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
			if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
				close(c);
				usleep(1000);
				continue;
			}
			if (req != NULL)
				(void)send(c, req, strlen(req), MSG_NOSIGNAL);
			opened++;
			i++;
		}
		(void)!write(ready[1], &opened, sizeof(opened));
		char b;
		(void)!read(release[0], &b, 1);
		_exit(0);
	}
	close(ready[1]);
	close(release[0]);
	int opened = 0;
	assert_int_equal(read(ready[0], &opened, sizeof(opened)), (ssize_t)sizeof(opened));
	close(ready[0]);
	return p;
}

static void flood_end(pid_t p, int release[2])
{
	close(release[1]);
	assert_int_equal(waitpid(p, NULL, 0), p);
}

/* More idle connections without a token than there are slots (a process of
 * the job's user that does not have the step's token) do not lock the
 * service: they wait in a pool of their own, the oldest of the biggest
 * holder making room for the next, and a task with the token is served at
 * once. The refusals are all counted, but the refusal hook (the audit log)
 * hears of a burst as a few records and one summary. */
static void test_idle_flood_does_not_lock_out(void **state)
{
	(void)state;
	struct refusals r = {0};
	char path[128];
	int rel[2];
	sl_dsvc *s = start_serve(&r, path, sizeof(path), 0, 0);
	int n = SL_DSVC_SLOTS + SL_DSVC_PREAUTH_SLOTS + 33;

	pid_t p = flood(path, n, NULL, rel);
	long long t0 = now_ms();
	assert_true(served_with_token(path, 5));
	/* well before the pool's deadline freed anything */
	assert_true(now_ms() - t0 < SL_DSVC_PREAUTH_MS);
	assert_true(sl_dsvc_refusals(s) >= (uint64_t)(n - SL_DSVC_PREAUTH_SLOTS - 1));
	flood_end(p, rel);
	uint64_t refused = sl_dsvc_refusals(s);
	sl_dsvc_free(s);
	assert_true(r.n >= 2 && r.n <= 17);
	assert_true(refused > (uint64_t)r.n);
	/* the summary names how many it stands for */
	assert_non_null(strstr(r.why, "more refused"));
}

/* Peers refused for a wrong token that then never hang up are not kept: a
 * handful linger briefly (so the refusal is read, not reset), the rest are
 * closed, and they never hold an admitted slot. */
static void test_refused_peers_do_not_keep_slots(void **state)
{
	(void)state;
	struct refusals r = {0};
	char path[128], req[256];
	int rel[2];
	sl_dsvc *s = start_serve(&r, path, sizeof(path), 0, 0);
	snprintf(req, sizeof(req), "{\"op\":\"list\",\"token\":\"%063d1\"}", 0);

	pid_t p = flood(path, SL_DSVC_SLOTS + 40, req, rel);
	assert_true(served_with_token(path, 5));
	flood_end(p, rel);
	sl_dsvc_free(s);
}

/* The pre-auth deadline: a connection that says nothing is told it is
 * refused and closed, and the hook says why; one that sends the token in
 * time is admitted and stays. */
static void test_preauth_deadline(void **state)
{
	(void)state;
	struct refusals r = {0};
	char path[128], req[256];
	sl_dsvc *s = start_serve(&r, path, sizeof(path), 200, 0);
	int quiet = dial_within(path, 5), good = dial_within(path, 5);
	assert_true(quiet >= 0 && good >= 0);
	snprintf(req, sizeof(req), "{\"op\":\"list\",\"token\":\"%s\"}", TOKEN);
	json_t *a = ask(good, req, NULL);
	assert_true(a != NULL && json_is_true(json_object_get(a, "ok")));
	json_decref(a);

	char buf[SL_DSVC_MSG_MAX];
	long long t0 = now_ms();
	ssize_t got = recv(quiet, buf, sizeof(buf) - 1, 0);
	assert_true(got > 0);
	buf[got] = '\0';
	assert_non_null(strstr(buf, "\"refused\""));
	assert_int_equal(recv(quiet, buf, sizeof(buf), 0), 0); /* closed */
	assert_true(now_ms() - t0 < 3000);
	assert_int_equal(r.n, 1);
	assert_non_null(strstr(r.why, "no request with the token"));
	close(quiet);
	/* the admitted one is still served after the deadline */
	a = ask(good, req, NULL);
	assert_true(a != NULL && json_is_true(json_object_get(a, "ok")));
	json_decref(a);
	close(good);
	sl_dsvc_free(s);
}

/* One process holds at most SL_DSVC_SLOTS_PER_PID admitted connections:
 * the next is told "busy" (not a refusal: it had the token) and closed; a
 * slot given back admits it again. */
static void test_slots_per_process(void **state)
{
	(void)state;
	struct refusals r = {0};
	char path[128], req[256];
	int c[SL_DSVC_SLOTS_PER_PID];
	sl_dsvc *s = start_serve(&r, path, sizeof(path), 0, 0);
	snprintf(req, sizeof(req), "{\"op\":\"list\",\"token\":\"%s\"}", TOKEN);
	for (int i = 0; i < SL_DSVC_SLOTS_PER_PID; i++) {
		c[i] = dial_within(path, 5);
		assert_true(c[i] >= 0);
		json_t *a = ask(c[i], req, NULL);
		assert_true(a != NULL && json_is_true(json_object_get(a, "ok")));
		json_decref(a);
	}
	int extra = dial_within(path, 5);
	assert_true(extra >= 0);
	json_t *a = ask(extra, req, NULL);
	assert_non_null(a);
	assert_non_null(json_string_value(json_object_get(a, "error")));
	assert_string_equal(json_string_value(json_object_get(a, "error")), "busy");
	json_decref(a);
	close(extra);
	assert_int_equal(r.n, 0);
	close(c[0]);
	/* the service sees the hang-up before the next connection */
	bool ok = false;
	for (int t = 0; t < 100 && !ok; t++) {
		ok = served_with_token(path, 5);
		if (!ok)
			usleep(10000);
	}
	assert_true(ok);
	for (int i = 1; i < SL_DSVC_SLOTS_PER_PID; i++)
		close(c[i]);
	sl_dsvc_free(s);
}

/* A stream dataset whose shards are always staged: a memory file each. */
struct fake_stream {
	int held;
};

static sl_err fake_acquire(void *ctx, uint32_t shard, int *fd, uint64_t *len, int *not_ready)
{
	struct fake_stream *f = ctx;
	(void)shard;
	*not_ready = 0;
	*fd = staged_fd();
	*len = sizeof(payload);
	__atomic_add_fetch(&f->held, 1, __ATOMIC_SEQ_CST);
	return SL_OK;
}

static void fake_release(void *ctx, uint32_t shard)
{
	struct fake_stream *f = ctx;
	(void)shard;
	__atomic_sub_fetch(&f->held, 1, __ATOMIC_SEQ_CST);
}

/* The idle timeout: an admitted connection that holds nothing and asks
 * nothing is closed; one that holds a shard is not (closing it would give
 * the shard back and zero the pages under the reader's mapping). */
static void test_idle_timeout_spares_holders(void **state)
{
	(void)state;
	struct refusals r = {0};
	struct fake_stream fs = {0};
	char path[128], req[256];
	sl_dsvc *s = NULL;
	snprintf(path, sizeof(path), "/tmp/sl-dsvc-idle-%d.sock", (int)getpid());
	sl_dsvc_opts o = {.job_uid = getuid(),
	                  .job_gid = getgid(),
	                  .path = path,
	                  .token = TOKEN,
	                  .idle_ms = 300,
	                  .refused = on_refused,
	                  .refused_ctx = &r};
	sl_dsvc_stream_ops ops = {.acquire = fake_acquire, .release = fake_release, .ctx = &fs};
	json_t *info = json_pack("{s:s}", "kind", "stream");
	assert_int_equal(sl_dsvc_new(&o, &s), SL_OK);
	assert_int_equal(sl_dsvc_add_stream(s, "st", info, &ops), SL_OK);
	json_decref(info);
	assert_int_equal(sl_dsvc_serve(s), SL_OK);

	int idle = dial_within(path, 5), holder = dial_within(path, 5), fd = -1;
	snprintf(req, sizeof(req), "{\"op\":\"list\",\"token\":\"%s\"}", TOKEN);
	json_t *a = ask(idle, req, NULL);
	assert_true(a != NULL && json_is_true(json_object_get(a, "ok")));
	json_decref(a);
	snprintf(req, sizeof(req),
	         "{\"op\":\"open_shard\",\"dataset\":\"st\",\"shard\":0,\"token\":\"%s\"}", TOKEN);
	a = ask(holder, req, &fd);
	assert_true(a != NULL && json_is_true(json_object_get(a, "ok")) && fd >= 0);
	json_decref(a);
	close(fd);

	char buf[64];
	long long t0 = now_ms();
	assert_int_equal(recv(idle, buf, sizeof(buf), 0), 0); /* closed, nothing said */
	assert_true(now_ms() - t0 < 3000);
	close(idle);
	usleep(600 * 1000);
	assert_int_equal(__atomic_load_n(&fs.held, __ATOMIC_SEQ_CST), 1);
	snprintf(req, sizeof(req),
	         "{\"op\":\"release_shard\",\"dataset\":\"st\",\"shard\":0,\"token\":\"%s\"}",
	         TOKEN);
	a = ask(holder, req, NULL);
	assert_true(a != NULL && json_is_true(json_object_get(a, "ok")));
	json_decref(a);
	assert_int_equal(__atomic_load_n(&fs.held, __ATOMIC_SEQ_CST), 0);
	close(holder);
	assert_int_equal(r.n, 0);
	sl_dsvc_free(s);
}

/* Out of descriptors (EMFILE) with connections waiting: the service backs
 * off instead of spinning on a listening socket it cannot accept from, and
 * serves again once descriptors are back. */
static void test_out_of_descriptors_does_not_spin(void **state)
{
	(void)state;
	struct refusals r = {0};
	char path[128];
	int rel[2];
	sl_dsvc *s = start_serve(&r, path, sizeof(path), 0, 0);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	/* fill the holes below the highest descriptor, so that the limit
	 * below leaves exactly a few */
	int top = 0, fillers[4096], n_fill = 0;
	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			top = fd;
	for (int f; n_fill < 4096 && (f = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
		fillers[n_fill++] = f;
		if (f >= top)
			break;
	}
	/* room for the flood's pipes and a few accepts; the flood's child
	 * raises its own limit back */
	low = old;
	low.rlim_cur = (rlim_t)fillers[n_fill - 1] + 9;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	pid_t p = flood(path, 40, NULL, rel);
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	usleep(1000 * 1000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	for (int i = 0; i < n_fill; i++)
		close(fillers[i]);
	double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	if (cpu > 0.1)
		fail_msg("the service spun for %.2f s of CPU in 1 s while out of descriptors", cpu);
	flood_end(p, rel);
	assert_true(served_with_token(path, 5));
	sl_dsvc_free(s);
}

int main(void)
{
	/* serve's token lives in guarded memory */
	if (sl_crypto_init() != SL_OK)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_page),
	    cmocka_unit_test(test_child_is_served),
	    cmocka_unit_test(test_stranger_is_refused),
	    cmocka_unit_test(test_other_user_is_refused),
	    cmocka_unit_test(test_token_admission),
	    cmocka_unit_test(test_token_and_path_checked),
	    cmocka_unit_test(test_idle_flood_does_not_lock_out),
	    cmocka_unit_test(test_refused_peers_do_not_keep_slots),
	    cmocka_unit_test(test_preauth_deadline),
	    cmocka_unit_test(test_slots_per_process),
	    cmocka_unit_test(test_idle_timeout_spares_holders),
	    cmocka_unit_test(test_out_of_descriptors_does_not_spin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
