/* Whether a process still runs, for the code that waits on one it did not
 * start (serve --until-pid, the SPANK plugin's step watch). Header-only:
 * the SPANK plugin is built alone, without libseclaunch. */
#ifndef SECLAUNCH_PROC_H
#define SECLAUNCH_PROC_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* True while pid runs: a zombie has ended; a process we may not signal
 * (EPERM) still runs. */
static inline bool sl_proc_alive(pid_t pid)
{
	char p[64], buf[512];
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	/* the state follows the last ')' (the command name may hold one) */
	const char *rp = strrchr(buf, ')');
	return rp == NULL || rp[1] == '\0' || rp[2] != 'Z';
}

#endif
