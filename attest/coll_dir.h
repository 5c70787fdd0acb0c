/* A collateral directory read once (private to attest/): the names and
 * bytes of its certificate (*.pem, *.crt, *.cer, *.der) and JSON files, in
 * directory order, shared by every verification while the directory and
 * each of those files are unchanged (device, inode, size, mtime, ctime).
 * A snapshot is kept only when nothing in it changed in the two seconds
 * before it was read, so a change within one timestamp tick of the read is
 * never mistaken for the state read. Anything unusual (too many or too
 * large files, a read error, a change while reading) makes no snapshot:
 * callers then read the directory themselves, as without one. It caches
 * bytes only; every check on them runs as before. */
#ifndef SECLAUNCH_ATTEST_COLL_DIR_H
#define SECLAUNCH_ATTEST_COLL_DIR_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_coll_dir sl_coll_dir;

typedef struct sl_coll_file {
	const char *name; /* in the directory, without a path */
	const uint8_t *data;
	size_t len;
	uint8_t sha256[32];
} sl_coll_file;

/* The directory's current snapshot (a reference: release it), or NULL. */
sl_coll_dir *sl_coll_dir_get(const char *dir);
void sl_coll_dir_release(sl_coll_dir *d);
size_t sl_coll_dir_count(const sl_coll_dir *d);
const sl_coll_file *sl_coll_dir_file(const sl_coll_dir *d, size_t i);
/* Snapshots served and directories read (tests). */
void sl_coll_dir_stats(uint64_t *served, uint64_t *read);

#endif
