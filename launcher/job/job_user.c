/* Who the job runs as (--user) and what it executes: both settled before
 * anything is attested, so a mistake costs no key release. */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seclaunch/util.h"

#include "job.h"

static bool all_digits(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

sl_err sl_job_user_parse(const char *spec, sl_job_user *u)
{
	sl_err rc = SL_E_USAGE;
	char user[128], *group = NULL, buf[16384];
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;

	memset(u, 0, sizeof(*u));
	SL_ENSURE(strlen(spec) > 0 && strlen(spec) < sizeof(user), SL_E_USAGE,
	          "--user '%s': want USER[:GROUP]", spec);
	snprintf(user, sizeof(user), "%s", spec);
	group = strchr(user, ':');
	if (group != NULL)
		*group++ = '\0';
	SL_ENSURE(user[0] != '\0' && (group == NULL || group[0] != '\0'), SL_E_USAGE,
	          "--user '%s': want USER[:GROUP]", spec);
	if (all_digits(user))
		(void)getpwuid_r((uid_t)strtoul(user, NULL, 10), &pw, buf, sizeof(buf), &pwp);
	else
		(void)getpwnam_r(user, &pw, buf, sizeof(buf), &pwp);
	SL_ENSURE(pwp != NULL, SL_E_USAGE, "--user: no user '%s' in the user database", user);
	u->uid = pw.pw_uid;
	u->gid = pw.pw_gid;
	snprintf(u->name, sizeof(u->name), "%s", pw.pw_name);
	snprintf(u->home, sizeof(u->home), "%s", pw.pw_dir != NULL ? pw.pw_dir : "/");
	u->ngroups = SL_JOB_MAX_GROUPS;
	if (getgrouplist(pw.pw_name, pw.pw_gid, u->groups, &u->ngroups) < 0)
		SL_FAIL(SL_E_USAGE, "--user %s: more than %d groups", user, SL_JOB_MAX_GROUPS);
	if (group != NULL) {
		char gbuf[16384];
		if (all_digits(group))
			(void)getgrgid_r((gid_t)strtoul(group, NULL, 10), &gr, gbuf, sizeof(gbuf),
			                 &grp);
		else
			(void)getgrnam_r(group, &gr, gbuf, sizeof(gbuf), &grp);
		SL_ENSURE(grp != NULL, SL_E_USAGE, "--user: no group '%s' in the group database",
		          group);
		/* the named group replaces the user's groups */
		u->gid = gr.gr_gid;
		u->groups[0] = gr.gr_gid;
		u->ngroups = 1;
	}
	if (geteuid() != 0) {
		SL_ENSURE(u->uid == getuid() && (group == NULL || u->gid == getgid()), SL_E_USAGE,
		          "--user %s: only root can run the job as another user or group", spec);
		return SL_OK; /* oneself: nothing to change */
	}
	u->set = true;
	rc = SL_OK;
out:
	return rc;
}

/* 0: path is a file this process may execute; 126 (with why) when it
 * exists but cannot be executed; 127: absent. access() asks as the real
 * user: permissions, ACLs and every directory on the way. */
static int check_one(const char *path, const char **why)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		*why = strerror(errno);
		return errno == ENOENT || errno == ENOTDIR ? 127 : 126;
	}
	if (S_ISDIR(st.st_mode)) {
		*why = "is a directory";
		return 126;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return 126;
	}
	if (access(path, X_OK) != 0) {
		*why = "not executable";
		return 126;
	}
	return 0;
}

/* The lookup as this process: execvp's order, the first executable match;
 * a match that cannot be executed is remembered and the search goes on. */
static int resolve_self(const char *argv0, char *const *envp, char *out, size_t n, char *msg,
                        size_t msgn)
{
	const char *path = NULL, *why = NULL, *bad_why = NULL;
	char cand[PATH_MAX], bad[PATH_MAX] = "";
	int best = 127;

	if (argv0[0] == '\0') {
		snprintf(msg, msgn, "the command is empty");
		return 127;
	}
	if (strchr(argv0, '/') != NULL) {
		int r = check_one(argv0, &why);
		if (r == 0 && snprintf(out, n, "%s", argv0) < (int)n)
			return 0;
		snprintf(msg, msgn, "cannot execute '%s': %s", argv0,
		         r == 0 ? "path too long" : why);
		return r == 0 ? 126 : r;
	}
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;;) {
		const char *end = strchr(p, ':');
		size_t dl = end != NULL ? (size_t)(end - p) : strlen(p);
		int w = dl == 0 ? snprintf(cand, sizeof(cand), "%s", argv0) /* "": cwd */
		                : snprintf(cand, sizeof(cand), "%.*s/%s", (int)dl, p, argv0);
		if (w > 0 && w < (int)sizeof(cand)) {
			int r = check_one(cand, &why);
			if (r == 0 && snprintf(out, n, "%s", cand) < (int)n)
				return 0;
			if (r == 126 && best == 127) {
				best = 126;
				bad_why = why;
				snprintf(bad, sizeof(bad), "%s", cand);
			}
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	if (best == 126)
		snprintf(msg, msgn, "cannot execute '%s': %s: %s", argv0, bad, bad_why);
	else
		snprintf(msg, msgn, "cannot execute '%s': not found in the job's PATH (%s)", argv0,
		         path);
	return best;
}

struct resolved {
	int code;
	char path[PATH_MAX];
	char msg[1024];
};

int sl_job_resolve(const char *argv0, char *const *envp, const sl_job_user *u, char *out, size_t n)
{
	struct resolved r;
	int fd[2] = {-1, -1};
	pid_t pid;

	memset(&r, 0, sizeof(r));
	if (u == NULL || !u->set) {
		r.code = resolve_self(argv0, envp, out, n, r.msg, sizeof(r.msg));
		goto done;
	}
	/* as the job's user, in a child that has become it: what it may search
	 * and execute is what access() says there */
	r.code = 127;
	snprintf(r.msg, sizeof(r.msg), "cannot execute '%s': checking it as user %s failed", argv0,
	         u->name);
	if (pipe2(fd, O_CLOEXEC) != 0)
		goto done;
	pid = fork();
	if (pid == 0) {
		struct resolved c;
		memset(&c, 0, sizeof(c));
		if (setgroups((size_t)u->ngroups, u->groups) != 0 || setgid(u->gid) != 0 ||
		    setuid(u->uid) != 0)
			_exit(1);
		c.code = resolve_self(argv0, envp, c.path, sizeof(c.path), c.msg, sizeof(c.msg));
		_exit(write(fd[1], &c, sizeof(c)) == (ssize_t)sizeof(c) ? 0 : 1);
	}
	close(fd[1]);
	fd[1] = -1;
	if (pid > 0) {
		struct resolved c;
		size_t got = 0;
		if (sl_read_full(fd[0], &c, sizeof(c), &got, "resolver") == SL_OK &&
		    got == sizeof(c)) {
			c.path[sizeof(c.path) - 1] = c.msg[sizeof(c.msg) - 1] = '\0';
			r = c;
			if (r.code == 0 && snprintf(out, n, "%s", r.path) >= (int)n) {
				r.code = 126;
				snprintf(r.msg, sizeof(r.msg), "cannot execute '%s': path too long",
				         argv0);
			}
		}
		(void)waitpid(pid, NULL, 0);
	}
	close(fd[0]);
	if (r.code == 126 && strstr(r.msg, "not executable") != NULL)
		snprintf(r.msg + strlen(r.msg), sizeof(r.msg) - strlen(r.msg), " by user %s",
		         u->name);
done:
	if (r.code != 0)
		(void)sl_err_set(SL_E_INPUT, "%s", r.msg);
	return r.code;
}
