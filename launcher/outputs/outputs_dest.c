/* Where outputs go (outputs.h): --output's DEST as a folder or a URL, the
 * file:// form of a folder, and the LATEST a destination names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "outputs_int.h"
#include "seclaunch/util.h"

const char *sl_out_file_url_path(const char *dest)
{
	if (strncmp(dest, "file://", 7) != 0)
		return dest;
	dest += 7;
	if (strncmp(dest, "localhost/", 10) == 0)
		dest += 9;
	return dest[0] == '/' ? dest : NULL;
}

sl_err sl_out_destination(const char *spec, char *dest, size_t dest_n, char *policy_dest,
                          size_t policy_n, bool *remote)
{
	sl_err rc = SL_E_USAGE;
	char cwd[1024];
	const char *eq = strchr(spec, '=');
	SL_ENSURE(eq != NULL, SL_E_USAGE, "--output %s: NAME=DEST", spec);
	*remote = sl_remote_is_url(eq + 1);
	size_t dl = strlen(eq + 1);
	SL_ENSURE(dl + 2 < dest_n && dl + 9 < policy_n, SL_E_USAGE, "--output %s: too long", spec);
	if (*remote) {
		snprintf(dest, dest_n, "%s%s", eq + 1, eq[dl] == '/' ? "" : "/");
		snprintf(policy_dest, policy_n, "%s", dest);
	} else {
		/* file:///PATH/ is the folder PATH: the same dest, the same policy_dest */
		const char *folder = sl_out_file_url_path(eq + 1);
		SL_ENSURE(folder != NULL, SL_E_USAGE,
		          "--output %s: a file:// DEST names a folder of this machine "
		          "(file:///PATH/)",
		          spec);
		SL_ENSURE(strstr(folder, "://") == NULL, SL_E_USAGE,
		          "--output %s: DEST is a folder, file:///PATH/, https://, s3:// or gs://",
		          spec);
		dl = strlen(folder);
		if (folder[0] == '/')
			snprintf(dest, dest_n, "%s", folder);
		else {
			SL_ENSURE(getcwd(cwd, sizeof(cwd)) != NULL, SL_E_SYSTEM, "getcwd: %s",
			          strerror(errno));
			SL_ENSURE(strlen(cwd) + dl + 2 < dest_n, SL_E_USAGE,
			          "--output %s: too long", spec);
			snprintf(dest, dest_n, "%s/%s", cwd, folder);
		}
		size_t l = strlen(dest);
		while (l > 1 && dest[l - 1] == '/')
			dest[--l] = '\0';
		SL_ENSURE(strstr(dest, "/../") == NULL && strstr(dest, "/./") == NULL &&
		              (l < 3 || strcmp(dest + l - 3, "/..") != 0),
		          SL_E_USAGE, "--output %s: no . or .. in the folder", spec);
		SL_ENSURE(l + 9 < policy_n, SL_E_USAGE, "--output %s: too long", spec);
		snprintf(policy_dest, policy_n, "file://%s/", dest);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_out_mkdir_p(const char *path)
{
	char buf[2048];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0755) != 0 && /* lint: trusted path (--output DEST) */
			    errno != EEXIST)
				return sl_err_set(SL_E_IO, "%s: %s", buf, strerror(errno));
			*p = '/';
		}
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST) /* lint: trusted path (--output DEST) */
		return sl_err_set(SL_E_IO, "%s: %s", buf, strerror(errno));
	return SL_OK;
}

/* The sequence LATEST names at dest; 0 when there is none yet. */
sl_err sl_out_read_latest(struct sl_outputs *O, const char *dest, bool remote, uint64_t *seq)
{
	sl_err rc = SL_E_INPUT;
	uint8_t *p = NULL;
	size_t len = 0;
	sl_remote *r = NULL;
	char path[2100];

	*seq = 0;
	if (remote) {
		O->x.remote->quiet = sl_cli_quiet;
		SL_GUARD(sl_remote_open(dest, O->x.remote, &r));
		/* room for a store's XML error body: a 404 must be seen as one */
		rc = sl_remote_get(r, LATEST, 4096, &p, &len);
		if (rc != SL_OK && strstr(sl_err_detail(), "HTTP 404") != NULL)
			rc = SL_OK; /* nothing written there yet */
		else if (rc != SL_OK)
			goto out;
	} else {
		snprintf(path, sizeof(path), "%s/" LATEST, dest);
		if (access(path, F_OK) == 0)
			SL_GUARD(sl_file_read(path, 64, &p, &len));
	}
	if (p != NULL) {
		char *end = NULL;
		unsigned long long v = strtoull((const char *)p, &end, 10);
		SL_ENSURE(len > 0 && len <= 32 && p[0] >= '0' && p[0] <= '9' && end != NULL &&
		              (*end == '\n' || *end == '\0') && v > 0,
		          SL_E_INTEGRITY, "%s%s" LATEST ": not a sequence number", dest,
		          remote ? "" : "/");
		*seq = v;
	}
	rc = SL_OK;
out:
	free(p);
	sl_remote_free(r);
	return rc;
}
