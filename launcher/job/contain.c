/* Containment of the job: a cgroup v2 of its own, else seclaunch as a child
 * subreaper. Either way a job that leaves its process group (setsid, double
 * fork) is still found and killed when the run ends. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* This process's cgroup v2 directory: the cgroup2 mount from mountinfo plus
 * the "0::" path of /proc/self/cgroup (relative to that mount's root). */
static bool own_cgroup_dir(char *out, size_t n, char *why, size_t whyn)
{
	char line[4096], cg[1024] = "", mnt[1024] = "", root[1024] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (f == NULL) {
		snprintf(why, whyn, "/proc/self/cgroup: %s", strerror(errno));
		return false;
	}
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(cg, sizeof(cg), "%s", line + 3);
		}
	fclose(f);
	if (cg[0] != '/') {
		snprintf(why, whyn, "no cgroup v2 membership in /proc/self/cgroup");
		return false;
	}
	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL) {
		snprintf(why, whyn, "/proc/self/mountinfo: %s", strerror(errno));
		return false;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		/* id parent maj:min root mountpoint opts... - fstype source superopts */
		char r[1024], m[1024];
		const char *sep = strstr(line, " - ");
		if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %1023s %1023s", r, m) != 2)
			continue;
		snprintf(root, sizeof(root), "%s", r);
		snprintf(mnt, sizeof(mnt), "%s", m);
		break;
	}
	fclose(f);
	if (mnt[0] == '\0') {
		snprintf(why, whyn, "no cgroup2 file system mounted");
		return false;
	}
	size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (rl > 0 && (strncmp(cg, root, rl) != 0 || (cg[rl] != '/' && cg[rl] != '\0'))) {
		snprintf(why, whyn, "this process's cgroup %s is outside the cgroup2 mount", cg);
		return false;
	}
	if (snprintf(out, n, "%s%s", mnt, cg + rl) >= (int)n) {
		snprintf(why, whyn, "cgroup path too long");
		return false;
	}
	/* "/sys/fs/cgroup" + "/" */
	size_t l = strlen(out);
	if (l > 1 && out[l - 1] == '/')
		out[l - 1] = '\0';
	return true;
}

static bool try_cgroup(sl_contain *c, const char *name)
{
	char base[512], p[600];
	if (!own_cgroup_dir(base, sizeof(base), c->why, sizeof(c->why)))
		return false;
	if (snprintf(c->dir, sizeof(c->dir), "%s/seclaunch-%s", base, name) >=
	    (int)sizeof(c->dir)) {
		snprintf(c->why, sizeof(c->why), "cgroup path too long");
		return false;
	}
	if (mkdir(c->dir, 0755) != 0) {
		snprintf(c->why, sizeof(c->why), "cannot create a cgroup under %s: %s", base,
		         strerror(errno));
		c->dir[0] = '\0';
		return false;
	}
	snprintf(p, sizeof(p), "%s/cgroup.kill", c->dir);
	if (access(p, W_OK) != 0) {
		snprintf(c->why, sizeof(c->why), "no cgroup.kill (kernel before 5.14)");
		goto undo;
	}
	snprintf(p, sizeof(p), "%s/cgroup.procs", c->dir);
	c->procs_fd = open(p, O_WRONLY | O_CLOEXEC);
	if (c->procs_fd < 0) {
		snprintf(c->why, sizeof(c->why), "%s: %s", p, strerror(errno));
		goto undo;
	}
	/* for clone3 into the cgroup; without it, the child writes cgroup.procs */
	c->dir_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return true;
undo:
	(void)rmdir(c->dir);
	c->dir[0] = '\0';
	return false;
}

sl_err sl_contain_init(sl_contain *c, const char *name, bool allow_cgroup)
{
	memset(c, 0, sizeof(*c));
	c->procs_fd = -1;
	c->dir_fd = -1;
	/* always: an orphan of the job is reparented to seclaunch, not to init,
	 * so it can be reaped (and, without a cgroup, found) */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		return sl_err_set(SL_E_SYSTEM, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	if (!allow_cgroup)
		snprintf(c->why, sizeof(c->why), "cgroup containment turned off");
	else if (try_cgroup(c, name)) {
		c->kind = SL_CONTAIN_CGROUP;
		return SL_OK;
	}
	c->kind = SL_CONTAIN_SUBREAPER;
	return SL_OK;
}

int sl_contain_enter(const sl_contain *c)
{
	if (c->kind != SL_CONTAIN_CGROUP)
		return 0;
	/* "0": the writing process itself */
	return write(c->procs_fd, "0", 1) == 1 ? 0 : -1;
}

pid_t sl_contain_fork(const sl_contain *c, bool *entered)
{
	*entered = false;
	if (c->kind == SL_CONTAIN_CGROUP && c->dir_fd >= 0) {
		struct clone_args a;
		memset(&a, 0, sizeof(a));
		a.flags = CLONE_INTO_CGROUP;
		a.exit_signal = SIGCHLD;
		a.cgroup = (uint64_t)c->dir_fd;
		long pid = syscall(SYS_clone3, &a, sizeof(a));
		if (pid >= 0) {
			*entered = true;
			return (pid_t)pid;
		}
		/* a kernel before 5.7, or a seccomp filter that refuses clone3
		 * (ENOSYS), or a cgroup clone3 may not use: fork and migrate */
	}
	return fork();
}

const char *sl_contain_name(const sl_contain *c)
{
	return c->kind == SL_CONTAIN_CGROUP ? "cgroup" : "subreaper";
}

/* Calls fn(pid) for each process of the job's cgroup; returns the count. */
static unsigned each_member(const sl_contain *c, void (*fn)(pid_t, int), int sig)
{
	char p[600], buf[64];
	unsigned n = 0;
	snprintf(p, sizeof(p), "%s/cgroup.procs", c->dir);
	FILE *f = fopen(p, "re");
	if (f == NULL)
		return 0;
	while (fgets(buf, sizeof(buf), f) != NULL) {
		long pid = strtol(buf, NULL, 10);
		if (pid > 0) {
			n++;
			if (fn != NULL)
				fn((pid_t)pid, sig);
		}
	}
	fclose(f);
	return n;
}

/* Calls fn(pid) for each living child of this process (found in /proc, as
 * an orphan of the job is a child here once its parent is gone). */
static unsigned each_child(void (*fn)(pid_t, int), int sig)
{
	pid_t self = getpid();
	unsigned n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char p[64], stat[512];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t got = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (got <= 0)
			continue;
		stat[got] = '\0';
		/* pid (comm) state ppid ...: comm may hold anything but ')' ends it last */
		const char *rp = strrchr(stat, ')');
		char state = 0;
		long ppid = 0;
		if (rp == NULL || sscanf(rp + 1, " %c %ld", &state, &ppid) != 2)
			continue;
		if ((pid_t)ppid != self || state == 'Z')
			continue;
		n++;
		if (fn != NULL)
			fn((pid_t)strtol(e->d_name, NULL, 10), sig);
	}
	closedir(d);
	return n;
}

static void send(pid_t pid, int sig)
{
	(void)kill(pid, sig);
}

void sl_contain_signal(const sl_contain *c, pid_t pgid, int sig)
{
	if (pgid > 0)
		(void)kill(-pgid, sig);
	if (c->kind == SL_CONTAIN_CGROUP)
		(void)each_member(c, send, sig);
	else
		(void)each_child(send, sig);
}

static unsigned reap_all(void)
{
	unsigned n = 0;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		n++;
	return n;
}

unsigned sl_contain_kill_all(sl_contain *c, pid_t pgid)
{
	unsigned leftover = 0;
	if (pgid > 0)
		(void)kill(-pgid, SIGKILL);
	if (c->kind == SL_CONTAIN_CGROUP) {
		char p[600];
		leftover = each_member(c, NULL, 0);
		snprintf(p, sizeof(p), "%s/cgroup.kill", c->dir);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (write(fd, "1", 1) != 1) {
				/* the sweep below still kills them one by one */
			}
			close(fd);
		}
		/* until the cgroup is empty (SIGKILL is not instant) */
		for (int i = 0; i < 500 && each_member(c, send, SIGKILL) > 0; i++) {
			(void)reap_all();
			sleep_ms(10);
		}
		(void)reap_all();
		return leftover;
	}
	/* subreaper: kill each child; its own children become ours, and are
	 * found on the next pass; until none is left. Each is counted once,
	 * when it is reaped. */
	for (int pass = 0; pass < 2000; pass++) {
		unsigned n = each_child(send, SIGKILL);
		leftover += reap_all();
		if (n == 0) {
			pid_t w = waitpid(-1, NULL, WNOHANG);
			if (w > 0)
				leftover++;
			else if (w < 0 && errno == ECHILD)
				break;
		}
		sleep_ms(n == 0 ? 5 : 1);
	}
	return leftover;
}

void sl_contain_free(sl_contain *c)
{
	if (c->procs_fd >= 0)
		close(c->procs_fd);
	c->procs_fd = -1;
	if (c->dir_fd >= 0)
		close(c->dir_fd);
	c->dir_fd = -1;
	if (c->kind == SL_CONTAIN_CGROUP && c->dir[0] != '\0') {
		/* the last member may still be leaving */
		for (int i = 0; i < 100 && rmdir(c->dir) != 0 && errno == EBUSY; i++)
			sleep_ms(10);
	}
	c->dir[0] = '\0';
}
