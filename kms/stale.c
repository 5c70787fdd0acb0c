/* Removes temp files that sl_file_write_atomic left behind when a writer
 * died mid-update (kill -9, power loss): "<path>.tmp.<pid>.XXXXXX" whose pid
 * no longer runs. They never hold the live state (the rename is the commit),
 * and keys must not linger on disk in orphaned copies. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kmsd.h"

void kmsd_remove_stale_tmp(const char *path)
{
	char dirbuf[PATH_MAX], basebuf[PATH_MAX], prefix[PATH_MAX + 8];
	DIR *d;
	struct dirent *e;
	if (snprintf(dirbuf, sizeof(dirbuf), "%s", path) >= (int)sizeof(dirbuf) ||
	    snprintf(basebuf, sizeof(basebuf), "%s", path) >= (int)sizeof(basebuf))
		return;
	const char *dir = dirname(dirbuf), *base = basename(basebuf);
	snprintf(prefix, sizeof(prefix), "%s.tmp.", base);
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		size_t pl = strlen(prefix);
		if (strncmp(e->d_name, prefix, pl) != 0)
			continue;
		long pid = strtol(e->d_name + pl, NULL, 10);
		if (pid <= 0 || (pid != getpid() && kill((pid_t)pid, 0) == 0) ||
		    (pid != getpid() && errno != ESRCH))
			continue;
		char full[PATH_MAX * 2];
		snprintf(full, sizeof(full), "%s/%s", dir, e->d_name);
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			kmsd_log(KMSD_LOG_NOTICE, "removed %s (left by an interrupted update)",
			         full);
	}
	closedir(d);
}
