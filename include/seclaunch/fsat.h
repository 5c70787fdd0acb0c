/* File work relative to a directory descriptor, for code that runs with
 * more privilege than the owner of the tree it touches (a job's output
 * folder, a tree being sealed): every path is resolved beneath a folder
 * opened once, never through a symbolic link, a magic link or "..", and
 * what is found is checked on its descriptor (fstat, fchown, fchmod), never
 * again by name. openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) where the kernel has it, else
 * one component at a time with O_NOFOLLOW and a device check.
 * SECURITY.md, "The privilege boundary"; `make lint` refuses path-based
 * calls in the files that work on such trees. */
#ifndef SECLAUNCH_FSAT_H
#define SECLAUNCH_FSAT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "seclaunch/error.h"

/* How deep a walk goes: one descriptor per level is open. */
#define SL_FSAT_DEPTH_MAX 256

/* The how argument (0: beneath, no link of any kind, one file system). */
enum {
	/* may enter another mount below the folder (the caller's own tree) */
	SL_FSAT_CROSS_MOUNTS = 1u << 0,
	/* follows symbolic links: only for a tree of the caller's own, never
	 * for one a less privileged user can change (encrypt --follow-symlinks) */
	SL_FSAT_FOLLOW = 1u << 1,
};

/* Opens rel beneath dirfd: openat(2)'s flags (O_NOFOLLOW and O_CLOEXEC are
 * always added) and mode. rel is relative, of names separated by single
 * '/': "", ".", ".." and an absolute path are refused (EINVAL); a symbolic
 * link anywhere in it is refused (ELOOP), as is a component on another file
 * system (EXDEV) unless how allows them. -1 with errno on failure. */
int sl_fsat_openat(int dirfd, const char *rel, int flags, mode_t mode, unsigned how);

/* The same, as an error naming WHAT/REL: a folder (O_DIRECTORY) ... */
SL_MUST_USE sl_err sl_fsat_open_dir(int dirfd, const char *rel, unsigned how, const char *what,
                                    int *fd);
/* ... or a regular file (checked on the descriptor; st receives its fstat
 * when not NULL). A FIFO or device is never waited on (O_NONBLOCK while
 * opening). */
SL_MUST_USE sl_err sl_fsat_open_file(int dirfd, const char *rel, int flags, mode_t mode,
                                     unsigned how, const char *what, int *fd, struct stat *st);

/* Creates the folder rel beneath dirfd (an existing folder is kept), and
 * gives it uid:gid and mode through its descriptor (uid (uid_t)-1: left as
 * made). fd receives it open when not NULL. */
SL_MUST_USE sl_err sl_fsat_mkdir(int dirfd, const char *rel, mode_t mode, uid_t uid, gid_t gid,
                                 const char *what, int *fd);

/* unlinkat(2) of rel's last name, in its parent opened beneath dirfd.
 * -1 with errno on failure. */
int sl_fsat_unlink(int dirfd, const char *rel, int flags);

/* Writes dirfd/name atomically: a new temporary file beside it (O_EXCL),
 * given uid:gid (uid (uid_t)-1: left as made) and mode on its descriptor
 * before anything is written, fsync, renameat onto name. Never follows a
 * link; a name put in its place meanwhile is replaced, never written through. */
SL_MUST_USE sl_err sl_fsat_write_atomic(int dirfd, const char *name, const void *data, size_t len,
                                        mode_t mode, uid_t uid, gid_t gid, const char *what);

/* ---- the walk ----------------------------------------------------------- */

enum sl_fsat_kind {
	SL_FSAT_REG,      /* a regular file */
	SL_FSAT_DIR,      /* a folder, before its entries (set skip to stay out) */
	SL_FSAT_DIR_POST, /* the same folder, after its entries */
	SL_FSAT_LINK,     /* a symbolic link (followed only under SL_FSAT_FOLLOW) */
	SL_FSAT_MOUNT,    /* a folder on another file system (not entered) */
	SL_FSAT_OTHER,    /* a FIFO, socket or device */
};

typedef struct sl_fsat_ent {
	enum sl_fsat_kind kind;
	int dirfd;        /* the folder that holds it */
	const char *name; /* its name there */
	const char *rel;  /* its path below the walk's root */
	unsigned depth;   /* 1 for the root's own entries */
	/* fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW); a folder: fstat of its
	 * descriptor; under SL_FSAT_FOLLOW a link's target */
	struct stat st;
	int fd;        /* a folder (DIR, DIR_POST): its descriptor; else -1 */
	bool followed; /* reached through a link (SL_FSAT_FOLLOW) */
	bool skip;     /* DIR: set by the callback to leave it unvisited */
} sl_fsat_ent;

/* A callback's error ends the walk with it. */
typedef sl_err (*sl_fsat_fn)(void *ctx, sl_fsat_ent *e);

/* Visits every entry below rootfd, depth first, each folder's entries in
 * byte order of their names when sorted is true (the same tree, the same
 * order), and enters a folder only through a descriptor opened beneath its
 * parent (sl_fsat_openat with how). A folder that contains itself (a link
 * loop, SL_FSAT_FOLLOW) or folders nested deeper than max_depth
 * (<= SL_FSAT_DEPTH_MAX) fail with SL_E_INPUT; an entry removed while the
 * walk runs is passed over. Messages name WHAT/REL. */
SL_MUST_USE sl_err sl_fsat_walk(int rootfd, unsigned how, unsigned max_depth, bool sorted,
                                sl_fsat_fn fn, void *ctx, const char *what);

/* Tests only: behave as on a kernel without openat2 (the per-component
 * fallback). */
void sl_fsat_test_no_openat2(bool on);

#endif
