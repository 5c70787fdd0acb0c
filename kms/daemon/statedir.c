/* The --dev state directory holds the admin token, the master key, the
 * registry key and the TLS key. A directory another user owns, or one that
 * group or others may write, lets them swap any of these (a token they
 * know, a CA they hold) under the service, so it is refused the way a key
 * file readable by others is refused: naming the directory, what is wrong,
 * and the fix. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"

sl_err kmsd_state_dir_check(const char *dir)
{
	struct stat st;
	uid_t me = geteuid();
	if (stat(dir, &st) != 0)
		return sl_err_set(SL_E_IO, "%s: state directory: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sl_err_set(SL_E_PERM, "%s: state directory is not a directory", dir);
	if (st.st_uid != me)
		return sl_err_set(SL_E_PERM,
		                  "%s: state directory is owned by uid %u, not by uid %u that runs "
		                  "seclaunchd: its owner could replace the admin token, keys or CA "
		                  "in it; use a directory of your own (or chown %u %s)",
		                  dir, (unsigned)st.st_uid, (unsigned)me, (unsigned)me, dir);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
		return sl_err_set(SL_E_PERM,
		                  "%s: state directory has mode %04o: group or others may write "
		                  "it, and so replace the admin token, keys or CA in it; run "
		                  "chmod 700 %s",
		                  dir, (unsigned)(st.st_mode & 07777), dir);
	return SL_OK;
}
