/* The dataset handle of a launch (dataset.h). */
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "dataset_tree.h"
#include "seclaunch/util.h"

void sl_dataset_init(sl_dataset *d)
{
	*d = (sl_dataset){.fd = -1, .dfd = -1};
}

sl_err sl_dataset_open(sl_dataset *d, const char *path, const sl_job_user *user, sl_remote_opts *ro)
{
	sl_err rc = SL_E_INPUT;
	uint8_t dg[32];

	d->path = path;
	if (sl_remote_is_url(path)) {
		SL_GUARD(sl_remote_open(path, ro, &d->rem));
		SL_GUARD(sl_tree_manifest(NULL, d->rem, &d->man));
	} else {
		/* opened with the rights of the job's user (--user): a dataset
		 * that user cannot read is not read for them by root; every later
		 * read goes through this descriptor */
		struct stat st;
		int fd = -1;
		SL_GUARD(sl_user_open(user, path, &fd));
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			d->dfd = fd;
			SL_GUARD(sl_tree_manifest_at(fd, path, &d->man));
		} else {
			d->fd = fd;
			SL_GUARD(sl_sld_header_read_fd(fd, path, &d->hdr));
		}
	}
	if (d->man != NULL)
		sl_sldm_root(d->man, dg);
	else
		sl_sld_header_digest(d->hdr, dg);
	sl_hex_encode(dg, sizeof(dg), d->root);
	rc = SL_OK;
out:
	return rc;
}

const char *sl_dataset_id(const sl_dataset *d)
{
	return d->man != NULL ? sl_sldm_dataset_id(d->man) : sl_sld_header_dataset_id(d->hdr);
}

const char *sl_dataset_key_id(const sl_dataset *d)
{
	return d->man != NULL ? sl_sldm_key_id(d->man) : sl_sld_header_key_id(d->hdr);
}

const uint8_t *sl_dataset_wrapped_dek(const sl_dataset *d, size_t *len)
{
	return d->man != NULL ? sl_sldm_wrapped_dek(d->man, len)
	                      : sl_sld_header_wrapped_dek(d->hdr, len);
}

uint64_t sl_dataset_size(const sl_dataset *d)
{
	return d->man != NULL ? sl_sldm_plaintext_len(d->man) : sl_sld_header_plaintext_len(d->hdr);
}

const char *sl_dataset_local_path(const sl_dataset *d)
{
	return d->rem != NULL ? NULL : d->path;
}

void sl_dataset_close_file(sl_dataset *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

void sl_dataset_free(sl_dataset *d)
{
	sl_dataset_close_file(d);
	if (d->dfd >= 0)
		close(d->dfd);
	d->dfd = -1;
	sl_sld_header_free(d->hdr);
	d->hdr = NULL;
	sl_sldm_free(d->man);
	d->man = NULL;
	sl_remote_free(d->rem);
	d->rem = NULL;
}
