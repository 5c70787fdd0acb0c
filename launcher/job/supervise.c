/* Job supervision: start the command in its own process group with only the
 * staged descriptors, forward termination signals, enforce the timeout, wait,
 * and leave nothing of the job behind. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "job.h"
#include "seclaunch/util.h"

extern char **environ;

static sigset_t orig_mask;
static bool inited;

static void term_set(sigset_t *s, bool with_chld)
{
	sigemptyset(s);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGHUP);
	if (with_chld)
		sigaddset(s, SIGCHLD);
}

sl_err sl_supervise_init(void)
{
	sigset_t s;
	if (inited)
		return SL_OK;
	/* a closed stderr must not kill seclaunch before it wipes */
	signal(SIGPIPE, SIG_IGN);
	term_set(&s, true);
	if (sigprocmask(SIG_BLOCK, &s, &orig_mask) != 0)
		return sl_err_set(SL_E_SYSTEM, "blocking signals: %s", strerror(errno));
	inited = true;
	return SL_OK;
}

int sl_supervise_take_pending(void)
{
	sigset_t pend, want;
	struct timespec zero = {0, 0};
	term_set(&want, false);
	if (sigpending(&pend) != 0)
		return 0;
	for (int sig = 1; sig < 32; sig++)
		if (sigismember(&want, sig) && sigismember(&pend, sig)) {
			sigset_t one;
			sigemptyset(&one);
			sigaddset(&one, sig);
			return sigtimedwait(&one, NULL, &zero);
		}
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void close_from(int lo, int hi) /* [lo, hi], async-signal-safe */
{
	if (lo > hi)
		return;
	if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) == 0)
		return;
	for (int fd = lo; fd <= hi && fd < 65536; fd++)
		close(fd);
}

/* [lo, hi] but a and b (either may be -1), async-signal-safe */
static void close_except(int lo, int hi, int a, int b)
{
	int x = a < b ? a : b, y = a < b ? b : a;
	if (x >= lo && x <= hi) {
		close_from(lo, x - 1);
		lo = x + 1;
	}
	if (y >= lo && y <= hi) {
		close_from(lo, y - 1);
		lo = y + 1;
	}
	close_from(lo, hi);
}

/* The job's user: supplementary groups, group, user, in that order (each
 * needs the privilege the next drops); then no way back. */
static int drop_to(const sl_job_user *u, pid_t parent)
{
	if (u == NULL || !u->set)
		return 0;
	/* raw system calls: glibc's wrappers would signal the parent's other
	 * threads, which a clone3 child (sl_contain_fork) does not have */
	if (syscall(SYS_setgroups, (size_t)u->ngroups, u->groups) != 0 ||
	    syscall(SYS_setgid, u->gid) != 0 || syscall(SYS_setuid, u->uid) != 0)
		return -1;
	if (u->uid != 0 &&
	    (syscall(SYS_setuid, 0) == 0 || syscall(SYS_setresuid, -1, 0, -1) == 0)) {
		errno = EPERM;
		return -1;
	}
	/* a change of credentials clears the parent-death signal: set it again */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return -1;
	if (getppid() != parent)
		_exit(127);
	return 0;
}

enum child_step { STEP_CONTAIN = 1, STEP_FDS, STEP_USER, STEP_EXEC };

/* In the child between fork and exec: async-signal-safe calls only. */
static void child(const sl_job_spec *sp, const sl_contain *ct, bool entered, const int *sorted,
                  int errpipe, pid_t parent)
{
	int err[2] = {0, 0}; /* what failed (enum child_step), errno */
	setpgid(0, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
		_exit(127); /* seclaunch is gone already: no job without its supervisor */
	err[0] = STEP_CONTAIN;
	if (!entered && sl_contain_enter(ct) != 0)
		goto fail;
	err[0] = STEP_FDS;
	/* only 0, 1, 2, the staged descriptors, the exec-error pipe and the
	 * measured executable's descriptor (close-on-exec: for execveat) survive */
	int lo = 3, xfd = sp->exec_fd != NULL ? *sp->exec_fd : -1;
	for (size_t i = 0; i < sp->nfds; i++) {
		if (sorted[i] < 3)
			continue;
		close_except(lo, sorted[i] - 1, errpipe, xfd);
		lo = sorted[i] + 1;
		if (fcntl(sorted[i], F_SETFD, 0) != 0)
			goto fail;
	}
	int top = errpipe > xfd ? errpipe : xfd;
	if (top >= lo) {
		close_except(lo, top - 1, errpipe, xfd);
		lo = top + 1;
	}
	close_from(lo, ~0u >> 1);
	/* after every descriptor of seclaunch's own is closed */
	err[0] = STEP_USER;
	if (drop_to(sp->user, parent) != 0)
		goto fail;
	err[0] = STEP_EXEC;
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &orig_mask, NULL);
	if (sp->exec_fd != NULL) {
		syscall(SYS_execveat, *sp->exec_fd, "", sp->argv, sp->envp, AT_EMPTY_PATH);
	} else if (sp->path != NULL) {
		execve(sp->path, sp->argv, sp->envp);
	} else {
		environ = (char **)sp->envp; /* execvp looks argv[0] up in the job's PATH */
		execvp(sp->argv[0], sp->argv);
	}
fail:
	err[1] = errno;
	if (write(errpipe, err, sizeof(err)) < 0) {
		/* nothing more to report through */
	}
	_exit(127);
}

static const char *sig_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

static void give_tty(pid_t pgid)
{
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGTTOU);
	sigprocmask(SIG_BLOCK, &s, &old);
	(void)tcsetpgrp(STDIN_FILENO, pgid);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

sl_err sl_job_run(const sl_job_spec *sp, sl_job_result *res)
{
	sl_err rc = SL_E_SYSTEM;
	int sfd = -1, pipefd[2] = {-1, -1}, *sorted = NULL, status = 0, err[2] = {0, 0}, first = 0;
	bool tty = false, reaped = false, contained = false, entered = false;
	pid_t pid = -1, self = getpid();
	sigset_t mask;
	uint64_t deadline = 0, kill_at = 0;
	unsigned grace = sp->grace_s;
	sl_contain ct;
	char cgname[48];
	static unsigned job_seq;

	memset(res, 0, sizeof(*res));
	SL_GUARD(sl_supervise_init());
	SL_ENSURE(sp->argv != NULL && sp->argv[0] != NULL, SL_E_USAGE, "no command to run");
	sorted = calloc(sp->nfds + 1, sizeof(int));
	SL_ENSURE(sorted != NULL, SL_E_NOMEM, "allocating the descriptor list");
	if (sp->nfds > 0)
		memcpy(sorted, sp->fds, sp->nfds * sizeof(int));
	qsort(sorted, sp->nfds, sizeof(int), cmp_int);
	term_set(&mask, true);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	SL_ENSURE(sfd >= 0, SL_E_SYSTEM, "signalfd: %s", strerror(errno));
	SL_ENSURE(pipe2(pipefd, O_CLOEXEC) == 0, SL_E_SYSTEM, "pipe: %s", strerror(errno));
	tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
	if (sp->name == NULL) /* unique all the same: the cgroup is named after it */
		snprintf(cgname, sizeof(cgname), "job-%ld-%u", (long)self, ++job_seq);
	SL_GUARD(sl_contain_init(&ct, sp->name != NULL ? sp->name : cgname, !sp->no_cgroup));
	contained = true;
	res->containment = sl_contain_name(&ct);

	pid = sl_contain_fork(&ct, &entered);
	SL_ENSURE(pid >= 0, SL_E_SYSTEM, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(pipefd[0]);
		child(sp, &ct, entered, sorted, pipefd[1], self);
	}
	res->pid = pid;
	(void)setpgid(pid, pid); /* both sides set it: no window where it is ours */
	close(pipefd[1]);
	pipefd[1] = -1;
	ssize_t n;
	do
		n = read(pipefd[0], err, sizeof(err));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(err)) {
		bool as = sp->user != NULL && sp->user->set;
		(void)waitpid(pid, NULL, 0);
		reaped = true;
		SL_ENSURE(err[0] != STEP_CONTAIN, SL_E_SYSTEM, "joining the job's cgroup %s: %s",
		          ct.dir, strerror(err[1]));
		SL_ENSURE(err[0] != STEP_USER, SL_E_SYSTEM, "becoming user %s for the job: %s",
		          as ? sp->user->name : "?", strerror(err[1]));
		SL_FAIL(SL_E_INPUT, "cannot execute '%s'%s%s: %s", sp->argv[0],
		        as ? " as user " : "", as ? sp->user->name : "", strerror(err[1]));
	}
	if (tty)
		give_tty(pid);
	if (sp->started != NULL)
		sp->started(pid, sp->ctx);
	if (sp->timeout_s != 0)
		deadline = sl_now_ns() + (uint64_t)sp->timeout_s * 1000000000u;

	while (!reaped) {
		int wait_ms = -1;
		uint64_t now = sl_now_ns(), next = kill_at != 0 ? kill_at : deadline;
		if (deadline != 0 && deadline < next)
			next = deadline; /* whichever comes first */
		if (next != 0)
			wait_ms = next <= now ? 0 : (int)((next - now) / 1000000u) + 1;
		struct pollfd pfd[2] = {
		    {.fd = sfd, .events = POLLIN},
		    {.fd = sp->stop_fd != NULL && !res->stopped ? *sp->stop_fd : -1,
		     .events = POLLIN}};
		if (poll(pfd, 2, wait_ms) < 0 && errno != EINTR)
			SL_FAIL(SL_E_SYSTEM, "poll: %s", strerror(errno));
		now = sl_now_ns();
		if (pfd[1].fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP)) != 0) {
			/* the lease ended: the whole job is stopped, as at a timeout */
			res->stopped = true;
			sl_contain_signal(&ct, pid, SIGTERM);
			uint64_t at = now + (uint64_t)grace * 1000000000u;
			if (kill_at == 0 || at < kill_at)
				kill_at = at;
		}
		if (deadline != 0 && now >= deadline && !res->timed_out) {
			res->timed_out = true;
			deadline = 0;
			/* escaped descendants too: the timeout is the job's, not its group's */
			sl_contain_signal(&ct, pid, SIGTERM);
			if (kill_at == 0)
				kill_at = now + (uint64_t)grace * 1000000000u;
		}
		if (kill_at != 0 && now >= kill_at) {
			res->killed = true;
			kill_at = 0;
			if (res->escalated)
				fprintf(
				    stderr,
				    "seclaunch run: the job did not stop within %u s: SIGKILL\n",
				    grace);
			sl_contain_signal(&ct, pid, SIGKILL);
		}
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			int sig = (int)si.ssi_signo;
			if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
				continue;
			res->forwarded = sig;
			kill(-pid, sig);
			if (sig == SIGHUP || res->escalated)
				continue;
			if (first == 0) {
				first = sig;
				continue;
			}
			/* a second SIGINT/SIGTERM: the job gets grace seconds more */
			res->escalated = true;
			uint64_t at = sl_now_ns() + (uint64_t)grace * 1000000000u;
			if (kill_at == 0 || at < kill_at)
				kill_at = at;
			char what[32];
			if (sig == first)
				snprintf(what, sizeof(what), "%s again", sig_name(sig));
			else
				snprintf(what, sizeof(what), "%s after %s", sig_name(sig),
				         sig_name(first));
			fprintf(stderr,
			        "seclaunch run: %s: the job gets SIGKILL in %u s unless it exits "
			        "(--kill-grace)\n",
			        what, grace);
		}
		/* the job, and orphans of it that were reparented here and exited
		 * (a long job must not pile up zombies) */
		pid_t w;
		int st = 0;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == pid) {
				status = st;
				reaped = true;
			}
		if (w < 0 && errno != EINTR && errno != ECHILD)
			SL_FAIL(SL_E_SYSTEM, "waitpid: %s", strerror(errno));
	}
	if (WIFSIGNALED(status)) {
		res->signaled = true;
		res->signo = WTERMSIG(status);
		res->exit_code = 128 + res->signo;
	} else {
		res->exit_code = WEXITSTATUS(status);
	}
	rc = SL_OK;
out:
	if (pid > 0) {
		/* whatever the job left behind goes with it, wherever it went */
		if (!reaped) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, NULL, 0);
		}
		res->leftover = sl_contain_kill_all(&ct, pid);
		if (tty)
			give_tty(getpgrp());
	}
	if (contained)
		sl_contain_free(&ct);
	/* a SIGCHLD of this job must not look pending to a later step */
	{
		struct timespec zero = {0, 0};
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		while (sigtimedwait(&chld, NULL, &zero) > 0) {
		}
	}
	if (sfd >= 0)
		close(sfd);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(sorted);
	return rc;
}
