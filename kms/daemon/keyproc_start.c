/* The key process, started: its server half forks it (kms/keys/), its
 * client half takes the channels (kms/http/). Only the daemon links both
 * sides of the privilege wall. */
#include <stdlib.h>

#include "daemon.h"

sl_err kmsd_keyproc_start(const kmsd_config *cfg, unsigned channels, kmsd_keyproc **out)
{
	sl_err rc = SL_E_NOMEM;
	int status_fd = -1;
	pid_t pid = -1;
	if (channels < 1)
		channels = 1;
	int *near = calloc(channels, sizeof(int));
	SL_ENSURE(near != NULL, SL_E_NOMEM, "key process");
	SL_GUARD(kmsd_keyproc_spawn(cfg, channels, near, &status_fd, &pid));
	rc = kmsd_keyproc_attach(near, channels, status_fd, pid, out);
out:
	free(near);
	return rc;
}
