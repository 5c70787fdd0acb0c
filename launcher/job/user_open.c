/* Opening what a less privileged user named, with that user's rights.
 *
 * seclaunch runs as root for a job's user (run --user, serve --user, the
 * SPANK plugin's serve for a Slurm step). A dataset path that user gave is
 * opened by a child that has become the user (its groups, gid, uid, and
 * no_new_privs), so what the user cannot open stays closed: root is no
 * confused deputy. The child hands the descriptor back over a socketpair
 * (SCM_RIGHTS) and exits; root reads only through that descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"

/* What the child says, beside the descriptor. */
enum { OPEN_OK, OPEN_DROP, OPEN_OPEN, OPEN_KIND, OPEN_SEARCH, OPEN_SEND, OPEN_CREATE };

struct reply {
	int stage; /* OPEN_* */
	int err;   /* its errno */
};

static int open_here(const char *path, bool create, struct reply *r)
{
	struct stat st;
	if (create) {
		/* a new file (never an existing one, never through a link at
		 * its name) in a folder the user may write: made by the user */
		int fd =
		    open(path, /* lint: trusted path (opened as the user who named it) */
		         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
		*r = fd >= 0 ? (struct reply){OPEN_OK, 0} : (struct reply){OPEN_CREATE, errno};
		return fd;
	}
	/* O_NONBLOCK: a FIFO does not hold the open; cleared by the caller */
	int fd = open(path, /* lint: trusted path (opened as the user who named it) */
	              O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		*r = (struct reply){OPEN_OPEN, errno};
		return -1;
	}
	if (fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
		*r = (struct reply){OPEN_KIND, 0};
		close(fd);
		return -1;
	}
	/* a folder dataset's files are opened through this descriptor: the
	 * user must be able to search the folder, not only list it */
	if (S_ISDIR(st.st_mode) && faccessat(fd, ".", R_OK | X_OK, 0) != 0) {
		*r = (struct reply){OPEN_SEARCH, errno};
		close(fd);
		return -1;
	}
	*r = (struct reply){OPEN_OK, 0};
	return fd;
}

/* The child: only async-signal-safe calls (the parent may have threads). */
static void child(const sl_job_user *u, const char *path, bool create, int sock)
{
	struct reply r = {OPEN_DROP, 0};
	int fd = -1;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (setgroups((size_t)u->ngroups, u->groups) != 0 ||
	    setresgid(u->gid, u->gid, u->gid) != 0 || setresuid(u->uid, u->uid, u->uid) != 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || getuid() != u->uid ||
	    geteuid() != u->uid || getegid() != u->gid)
		r.err = errno;
	else
		fd = open_here(path, create, &r);
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	_exit(sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(r) ? 0 : 1);
}

/* Receives the reply and, with OPEN_OK, the descriptor. */
static int receive(int sock, struct reply *r)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = r, .iov_len = sizeof(*r)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	int fd = -1;
	ssize_t n;

	memset(&cm, 0, sizeof(cm));
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c != NULL;
	     c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (n != (ssize_t)sizeof(*r) || (mh.msg_flags & MSG_CTRUNC) != 0 ||
	    (r->stage == OPEN_OK) != (fd >= 0)) {
		if (fd >= 0)
			close(fd);
		*r = (struct reply){OPEN_SEND, n < 0 ? errno : EPROTO};
		return -1;
	}
	return fd;
}

static SL_RESULT user_do(const sl_job_user *u, const char *path, bool create, int *fd_out)
{
	sl_err rc = SL_E_IO;
	struct reply r = {OPEN_SEND, 0};
	int sv[2] = {-1, -1}, fd = -1, st = 0;
	char who[96];
	pid_t pid;

	*fd_out = -1;
	if (u == NULL || !u->set) {
		snprintf(who, sizeof(who), "seclaunch's user");
		fd = open_here(path, create, &r);
	} else {
		snprintf(who, sizeof(who), "the job's user %s (uid %u)", u->name, (unsigned)u->uid);
		SL_ENSURE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0,
		          SL_E_SYSTEM, "%s: socketpair: %s", path, strerror(errno));
		pid = fork();
		SL_ENSURE(pid >= 0, SL_E_SYSTEM, "%s: fork: %s", path, strerror(errno));
		if (pid == 0) {
			close(sv[0]);
			child(u, path, create, sv[1]);
		}
		close(sv[1]);
		sv[1] = -1;
		fd = receive(sv[0], &r);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (fd >= 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
			SL_FAIL(SL_E_SYSTEM, "%s: the opener as %s failed", path, who);
	}
	switch (r.stage) {
	case OPEN_OK:
		break;
	case OPEN_DROP:
		SL_FAIL(SL_E_SYSTEM, "%s: cannot become %s to open it: %s", path, who,
		        strerror(r.err));
	case OPEN_OPEN:
		if (u == NULL || !u->set)
			SL_FAIL(SL_E_IO, "%s: cannot open: %s", path, strerror(r.err));
		SL_FAIL(SL_E_IO, "%s: cannot open: %s cannot read it (%s)", path, who,
		        strerror(r.err));
	case OPEN_KIND:
		SL_FAIL(SL_E_IO, "%s: not a regular file or a folder", path);
	case OPEN_CREATE:
		SL_FAIL(r.err == EEXIST ? SL_E_EXISTS : SL_E_IO, "%s: cannot create it as %s: %s%s",
		        path, who, strerror(r.err),
		        r.err == EEXIST || r.err == ELOOP ? " (it must not exist yet)" : "");
	case OPEN_SEARCH:
		SL_FAIL(SL_E_IO, "%s: cannot open: %s cannot read the folder (%s)", path, who,
		        strerror(r.err));
	default:
		SL_FAIL(SL_E_SYSTEM, "%s: the opener as %s failed: %s", path, who, strerror(r.err));
	}
	/* what the child opened non-blocking reads as usual here */
	int fl = create ? 0 : fcntl(fd, F_GETFL);
	SL_ENSURE(create || (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0), SL_E_SYSTEM,
	          "%s: %s", path, strerror(errno));
	*fd_out = fd;
	fd = -1;
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	for (int k = 0; k < 2; k++)
		if (sv[k] >= 0)
			close(sv[k]);
	return rc;
}

sl_err sl_user_open(const sl_job_user *u, const char *path, int *fd)
{
	return user_do(u, path, false, fd);
}

sl_err sl_user_create(const sl_job_user *u, const char *path, int *fd)
{
	return user_do(u, path, true, fd);
}
