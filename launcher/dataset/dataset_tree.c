/* Sharded datasets on local disk (docs/format-sld.md part II): files,
 * folders or a stream encrypted into a dataset folder, and a dataset
 * folder restored into a tree. Both outputs are built in a temporary folder
 * beside the target and renamed into place only once complete. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset_tree.h"
#include "seclaunch/fsat.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

/* ---- what to encrypt -------------------------------------------------- */

struct entry {
	char *src; /* a file named as an input: its path; NULL for one found in a folder */
	char *rel; /* path in the dataset; for a file found in a folder also its path
	            * below that folder (root) */
	uint32_t root;
	uint64_t size;
	uint32_t mode;
};

/* A folder given as an input, opened once: what was found in it is opened
 * beneath this descriptor at read time (seclaunch/fsat.h). */
struct root {
	int fd;
	char *name; /* for messages */
};

struct entries {
	struct entry *v;
	size_t n, cap;
	struct root *roots;
	uint32_t n_roots;
	uint32_t skipped;
	bool quiet;
	unsigned how; /* sl_fsat_openat's, for files found in a folder */
	bool owner_set;
	uid_t owner;
};

static SL_RESULT add_entry(struct entries *l, const char *src, const char *rel, uint32_t root,
                           uint64_t size, uint32_t mode)
{
	sl_err rc = SL_E_NOMEM;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct entry *v = realloc(l->v, cap * sizeof(*v));
		SL_ENSURE(v != NULL, SL_E_NOMEM, "listing the input files");
		l->v = v;
		l->cap = cap;
	}
	SL_ENSURE(l->n < SL_SLDM_FILES_MAX, SL_E_TOO_LARGE, "more than %u input files",
	          SL_SLDM_FILES_MAX);
	struct entry *e = &l->v[l->n];
	e->src = src != NULL ? strdup(src) : NULL;
	e->rel = strdup(rel);
	SL_ENSURE(e->rel != NULL && (src == NULL || e->src != NULL), SL_E_NOMEM,
	          "listing the input files");
	e->root = root;
	e->size = size;
	e->mode = mode & 0777;
	l->n++;
	SL_GUARD(sl_sldm_path_check(rel));
	rc = SL_OK;
out:
	return rc;
}

static void free_entries(struct entries *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].src);
		free(l->v[i].rel);
	}
	free(l->v);
	for (uint32_t i = 0; i < l->n_roots; i++) {
		if (l->roots[i].fd >= 0)
			close(l->roots[i].fd);
		free(l->roots[i].name);
	}
	free(l->roots);
}

/* What to call entry e in messages: the path it was found at. */
static const char *src_name(const struct entries *l, const struct entry *e, char *buf, size_t cap)
{
	if (e->src != NULL)
		return e->src;
	snprintf(buf, cap, "%s/%s", l->roots[e->root].name, e->rel);
	return buf;
}

static void skip_note(struct entries *l, const char *what, const char *rel, const char *why)
{
	l->skipped++;
	if (!l->quiet)
		fprintf(stderr, "seclaunch encrypt: skipped %s%s%s (%s)\n", what, rel ? "/" : "",
		        rel ? rel : "", why);
}

struct collecting {
	struct entries *l;
	uint32_t root;
};

/* One entry of a folder given as an input (sl_fsat_walk: byte order, so
 * the same tree always makes the same file table). */
static SL_RESULT collect_one(void *ctx, sl_fsat_ent *e)
{
	struct collecting *c = ctx;
	struct entries *l = c->l;
	const char *name = l->roots[c->root].name;

	switch (e->kind) {
	case SL_FSAT_REG:
		if (l->owner_set && e->st.st_uid != l->owner) {
			skip_note(l, name, e->rel, "not owned by the tree's user");
			return SL_OK;
		}
		return add_entry(l, NULL, e->rel, c->root, (uint64_t)e->st.st_size, e->st.st_mode);
	case SL_FSAT_DIR:
	case SL_FSAT_DIR_POST:
		return SL_OK;
	case SL_FSAT_LINK:
		skip_note(l, name, e->rel, "a symbolic link; --follow-symlinks follows links");
		return SL_OK;
	case SL_FSAT_MOUNT:
		skip_note(l, name, e->rel, "a folder on another file system");
		return SL_OK;
	case SL_FSAT_OTHER:
		skip_note(l, name, e->rel, "not a regular file or folder");
		return SL_OK;
	}
	return SL_OK;
}

static SL_RESULT add_root(struct entries *l, int fd, const char *name, uint32_t *idx)
{
	struct root *v = realloc(l->roots, (l->n_roots + 1) * sizeof(*v));
	char *n = strdup(name);
	if (v != NULL)
		l->roots = v;
	if (v == NULL || n == NULL) {
		free(n);
		close(fd);
		return sl_err_set(SL_E_NOMEM, "listing the input files");
	}
	l->roots[l->n_roots].fd = fd;
	l->roots[l->n_roots].name = n;
	*idx = l->n_roots++;
	return SL_OK;
}

static int cmp_entry_rel(const void *a, const void *b)
{
	return strcmp((*(const struct entry *const *)a)->rel,
	              (*(const struct entry *const *)b)->rel);
}

/* Two inputs that land on one dataset path are refused before any work. */
static SL_RESULT check_collisions(const struct entries *l)
{
	sl_err rc = SL_E_NOMEM;
	const struct entry **s = malloc((l->n + 1) * sizeof(*s));
	char a[PATH_MAX], b[PATH_MAX];

	SL_ENSURE(s != NULL, SL_E_NOMEM, "sorting the input files");
	for (size_t i = 0; i < l->n; i++)
		s[i] = &l->v[i];
	qsort(s, l->n, sizeof(*s), cmp_entry_rel);
	for (size_t i = 0; i + 1 < l->n; i++)
		SL_ENSURE(strcmp(s[i]->rel, s[i + 1]->rel) != 0, SL_E_INPUT,
		          "%s and %s would both be \"%s\" in the dataset",
		          src_name(l, s[i], a, sizeof(a)), src_name(l, s[i + 1], b, sizeof(b)),
		          s[i]->rel);
	rc = SL_OK;
out:
	free(s);
	return rc;
}

/* An input folder of the caller's own, named on its command line. */
static SL_RESULT open_input(const sl_tree_encrypt_opts *o, const char *p, struct stat *st, int *fd)
{
	*fd = -1;
	if ((o->follow_symlinks ? stat(p, st) : lstat(p, st)) != 0) /* lint: trusted path (the
	                                                               caller's own input) */
		return sl_err_set(SL_E_IO, "%s: %s", p, strerror(errno));
	if (!S_ISDIR(st->st_mode))
		return SL_OK;
	*fd = open(p, /* lint: trusted path (the caller's own input) */
	           O_RDONLY | O_DIRECTORY | O_CLOEXEC | (o->follow_symlinks ? 0 : O_NOFOLLOW));
	if (*fd < 0 || fstat(*fd, st) != 0)
		return sl_err_set(SL_E_IO, "%s: cannot open the folder: %s", p, strerror(errno));
	return SL_OK;
}

static SL_RESULT collect(const sl_tree_encrypt_opts *o, struct entries *l)
{
	sl_err rc = SL_E_INPUT;
	char name[PATH_MAX];

	for (size_t i = 0; i < o->n_paths; i++) {
		const char *p = o->paths[i];
		struct stat st;
		int fd = -1;
		uint32_t root = 0;
		if (strcmp(p, "-") == 0)
			continue;
		if (o->beneath) {
			snprintf(name, sizeof(name), "%s/%s", o->beneath_name, p);
			SL_GUARD(sl_fsat_open_dir(o->beneath_fd, p, 0, o->beneath_name, &fd));
			st.st_mode = S_IFDIR;
		} else {
			snprintf(name, sizeof(name), "%s", p);
			SL_GUARD(open_input(o, p, &st, &fd));
		}
		if (S_ISDIR(st.st_mode)) {
			/* a folder's contents, relative to the folder */
			struct collecting c = {.l = l};
			SL_GUARD(add_root(l, fd, name, &root));
			c.root = root;
			SL_GUARD(sl_fsat_walk(l->roots[root].fd, l->how, 128, true, collect_one, &c,
			                      name));
		} else if (S_ISREG(st.st_mode)) {
			const char *base = strrchr(p, '/');
			base = base != NULL ? base + 1 : p;
			SL_GUARD(add_entry(l, p, base, 0, (uint64_t)st.st_size, st.st_mode));
		} else {
			SL_FAIL(SL_E_INPUT, "%s: not a regular file or folder%s", p,
			        S_ISLNK(st.st_mode) ? " (a symbolic link: --follow-symlinks)" : "");
		}
	}
	SL_GUARD(check_collisions(l));
	rc = SL_OK;
out:
	return rc;
}

/* ---- shard plan ------------------------------------------------------- */

struct piece {
	size_t entry;
	uint64_t off, len;
	uint64_t at; /* where it starts in its shard */
};

struct plan {
	struct piece *p;
	size_t n, cap;
	size_t *first; /* first piece of each shard; first[n_shards] = n */
	uint32_t n_shards, cap_shards;
	uint64_t *shard_len;
	uint32_t *file_shard; /* per entry: where its bytes start */
	uint64_t *file_off;
};

static SL_RESULT plan_close_shard(struct plan *pl, uint64_t len)
{
	sl_err rc = SL_E_NOMEM;

	SL_ENSURE(pl->n_shards + 1 < SL_SLDM_SHARDS_MAX, SL_E_TOO_LARGE,
	          "more than %u shards: use a larger --shard-size", SL_SLDM_SHARDS_MAX);
	if (pl->n_shards + 2 > pl->cap_shards) {
		uint32_t cap = pl->cap_shards ? 2 * pl->cap_shards : 16;
		size_t *f = realloc(pl->first, (size_t)cap * sizeof(*f));
		SL_ENSURE(f != NULL, SL_E_NOMEM, "planning shards");
		pl->first = f;
		uint64_t *sl = realloc(pl->shard_len, (size_t)cap * sizeof(*sl));
		SL_ENSURE(sl != NULL, SL_E_NOMEM, "planning shards");
		pl->shard_len = sl;
		pl->cap_shards = cap;
	}
	pl->shard_len[pl->n_shards] = len;
	pl->n_shards++;
	pl->first[pl->n_shards] = pl->n;
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT plan_piece(struct plan *pl, size_t e, uint64_t off, uint64_t len, uint64_t at)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 64;
		struct piece *v = realloc(pl->p, cap * sizeof(*v));
		if (v == NULL)
			return sl_err_set(SL_E_NOMEM, "planning shards");
		pl->p = v;
		pl->cap = cap;
	}
	pl->p[pl->n++] = (struct piece){e, off, len, at};
	return SL_OK;
}

static bool all_tar(const struct entries *l)
{
	if (l->n == 0)
		return false;
	for (size_t i = 0; i < l->n; i++) {
		size_t k = strlen(l->v[i].rel);
		if (k < 4 || strcmp(l->v[i].rel + k - 4, ".tar") != 0)
			return false;
	}
	return true;
}

/* Files in order; a file that does not fit in what is left of the current
 * shard starts the next one; only a file larger than a shard is split. */
static SL_RESULT make_plan(const struct entries *l, uint64_t S, struct plan *pl)
{
	sl_err rc = SL_E_NOMEM;
	bool tar = all_tar(l);
	uint64_t cur = 0;

	pl->file_shard = calloc(l->n + 1, sizeof(*pl->file_shard));
	pl->file_off = calloc(l->n + 1, sizeof(*pl->file_off));
	pl->first = calloc(2, sizeof(*pl->first));
	SL_ENSURE(pl->file_shard != NULL && pl->file_off != NULL && pl->first != NULL, SL_E_NOMEM,
	          "planning shards");
	pl->cap_shards = 0;
	for (size_t i = 0; i < l->n; i++) {
		uint64_t size = l->v[i].size, off = 0;
		if (cur > 0 && (tar || (size > 0 && (cur >= S || size > S - cur)))) {
			SL_GUARD(plan_close_shard(pl, cur));
			cur = 0;
		}
		pl->file_shard[i] = pl->n_shards;
		pl->file_off[i] = cur;
		while (size > 0) {
			uint64_t room = tar ? size : S - cur;
			if (room == 0) {
				SL_GUARD(plan_close_shard(pl, cur));
				cur = 0;
				room = S;
			}
			uint64_t take = size < room ? size : room;
			SL_GUARD(plan_piece(pl, i, off, take, cur));
			cur += take, off += take, size -= take;
		}
	}
	SL_GUARD(plan_close_shard(pl, cur));
	rc = SL_OK;
out:
	return rc;
}

static void free_plan(struct plan *pl)
{
	free(pl->p);
	free(pl->first);
	free(pl->shard_len);
	free(pl->file_shard);
	free(pl->file_off);
}

/* ---- temporary output folders ----------------------------------------- */

/* Removes what a temporary folder holds (files and folders we made). */
static void remove_tree_at(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		struct dirent *de;
		if (d == NULL) {
			close(fd);
		} else {
			while ((de = readdir(d)) != NULL) {
				if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
					continue;
				if (unlinkat(dirfd(d), de->d_name, 0) != 0 && errno == EISDIR)
					remove_tree_at(dirfd(d), de->d_name);
			}
			closedir(d);
		}
	}
	(void)unlinkat(parent, name, AT_REMOVEDIR);
}

static void remove_tree(const char *path)
{
	remove_tree_at(AT_FDCWD, path);
}

/* A new private folder beside target: target.partial-XXXXXX. */
static SL_RESULT make_temp_dir(const char *target, char *out, size_t cap)
{
	if (snprintf(out, cap, "%s.partial-XXXXXX", target) >= (int)cap)
		return sl_err_set(SL_E_INPUT, "%s: path too long", target);
	if (mkdtemp(out) == NULL)
		return sl_err_set(SL_E_IO, "%s: cannot create a folder beside it: %s", target,
		                  strerror(errno));
	return SL_OK;
}

static SL_RESULT check_target(const char *target, bool force)
{
	struct stat st;

	if (lstat(target, &st) != 0) /* lint: trusted path (the caller's -o, DEST) */
		return errno == ENOENT ? SL_OK
		                       : sl_err_set(SL_E_IO, "%s: %s", target, strerror(errno));
	if (!force)
		return sl_err_set(SL_E_EXISTS,
		                  "%s: already exists (not overwritten; --force replaces it)",
		                  target);
	if (!S_ISDIR(st.st_mode))
		return sl_err_set(SL_E_EXISTS, "%s: exists and is not a folder; not replaced",
		                  target);
	return SL_OK;
}

static SL_RESULT fsync_path(const char *path)
{
	int fd = open(path, /* lint: trusted path (a folder the output is made in) */
	              O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sl_err_set(SL_E_IO, "%s: fsync: %s", path, strerror(e));
	}
	close(fd);
	return SL_OK;
}

/* Renames the complete temporary folder onto target (an existing target is
 * moved aside first and removed after: force only). */
static SL_RESULT put_in_place(const char *tmp, const char *target, bool force)
{
	sl_err rc = SL_E_IO;
	char old[PATH_MAX + 32] = "", parent[PATH_MAX];
	struct stat st;

	if (force && lstat(target, &st) == 0) { /* lint: trusted path (the caller's -o) */
		SL_ENSURE(snprintf(old, sizeof(old), "%s.old-XXXXXX", target) < (int)sizeof(old),
		          SL_E_INPUT, "%s: path too long", target);
		SL_ENSURE(mkdtemp(old) != NULL, SL_E_IO, "%s: %s", target, strerror(errno));
		SL_ENSURE(rename(target, old) == 0, /* lint: trusted path (the caller's -o) */
		          SL_E_IO, "%s: cannot move aside: %s", target, strerror(errno));
	}
	SL_ENSURE(rename(tmp, target) == 0, /* lint: trusted path (the caller's -o) */
	          SL_E_IO, "%s: cannot rename into place: %s", target, strerror(errno));
	snprintf(parent, sizeof(parent), "%s", target);
	char *slash = strrchr(parent, '/');
	if (slash == NULL)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	SL_GUARD(fsync_path(parent));
	rc = SL_OK;
out:
	if (old[0] != '\0')
		remove_tree(old);
	return rc;
}

/* ---- encryption ------------------------------------------------------- */

/* Shards encrypted side by side: enough to keep every worker writing to a
 * different file, few enough to bound open descriptors and key state. */
#define GROUP_SHARDS 8

/* The plaintext of a group of shards, read straight from the input files
 * by each worker (sl_sld_source). */
struct tree_src {
	const struct entries *l;
	const struct plan *pl;
	uint32_t shard0; /* the group's first shard */
	bool follow;
};

/* Opens entry e for reading: a file found in a folder beneath that
 * folder's descriptor (no link followed unless the caller's own tree says
 * so); checked on the descriptor: a regular file, of the size listed, of
 * the owner asked for. */
static SL_RESULT entry_open(const struct entries *l, const struct entry *en, bool follow,
                            int *fd_out)
{
	char nb[PATH_MAX];
	struct stat st;
	int fd;

	*fd_out = -1;
	if (en->src != NULL)
		fd = open(en->src, /* lint: trusted path (a file the caller named) */
		          O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
	else
		fd = sl_fsat_openat(l->roots[en->root].fd, en->rel, O_RDONLY | O_NONBLOCK, 0,
		                    l->how);
	if (fd < 0)
		return sl_err_set(SL_E_IO, "%s: %s", src_name(l, en, nb, sizeof(nb)),
		                  errno == ELOOP   ? "a symbolic link on the way (not followed)"
		                  : errno == EXDEV ? "another file system on the way (not entered)"
		                                   : strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != en->size ||
	    (l->owner_set && st.st_uid != l->owner)) {
		close(fd);
		return sl_err_set(SL_E_IO, "%s: changed size while it was being encrypted",
		                  src_name(l, en, nb, sizeof(nb)));
	}
	*fd_out = fd;
	return SL_OK;
}

struct tree_tls {
	size_t entry; /* open file's entry; SIZE_MAX: none */
	int fd;
};

static void tree_tls_free(void *ctx, void *tls)
{
	struct tree_tls *t = tls;
	(void)ctx;
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

/* Opens entry e (a file that changed size since it was listed fails). */
static SL_RESULT tls_open(const struct tree_src *s, struct tree_tls *t, size_t e)
{
	const struct entry *en = &s->l->v[e];

	if (t->entry == e)
		return SL_OK;
	if (t->fd >= 0)
		close(t->fd);
	t->entry = SIZE_MAX;
	t->fd = -1;
	sl_err rc = entry_open(s->l, en, s->follow, &t->fd);
	if (rc == SL_OK)
		t->entry = e;
	return rc;
}

static SL_RESULT tree_read_at(void *ctx, void **tlsp, uint32_t file, uint64_t off, uint8_t *buf,
                              size_t len)
{
	sl_err rc = SL_E_IO;
	const struct tree_src *s = ctx;
	const struct plan *pl = s->pl;
	uint32_t shard = s->shard0 + file;
	size_t lo = pl->first[shard], hi = pl->first[shard + 1];
	struct tree_tls *t = *tlsp;

	if (t == NULL) {
		t = calloc(1, sizeof(*t));
		SL_ENSURE(t != NULL, SL_E_NOMEM, "read state");
		t->entry = SIZE_MAX;
		t->fd = -1;
		*tlsp = t;
	}
	/* the last piece that starts at or before off */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (pl->p[mid].at <= off)
			lo = mid;
		else
			hi = mid;
	}
	for (size_t k = lo; len > 0; k++) {
		SL_ENSURE(k < pl->first[shard + 1], SL_E_INTERNAL, "shard %u: read past its end",
		          shard);
		const struct piece *pc = &pl->p[k];
		if (off >= pc->at + pc->len)
			continue;
		uint64_t in = off - pc->at, avail = pc->len - in;
		size_t want = avail < len ? (size_t)avail : len;
		SL_GUARD(tls_open(s, t, pc->entry));
		size_t got = 0;
		char nb[PATH_MAX];
		const char *nm = src_name(s->l, &s->l->v[pc->entry], nb, sizeof(nb));
		SL_GUARD(sl_pread_full(t->fd, buf, want, pc->off + in, &got, nm));
		SL_ENSURE(got == want, SL_E_IO, "%s: shorter than when it was listed", nm);
		buf += want, off += want, len -= want;
	}
	rc = SL_OK;
out:
	return rc;
}

/* The plaintext of one shard held in a memory file (a stream's shard). */
static SL_RESULT fd_read_at(void *ctx, void **tls, uint32_t file, uint64_t off, uint8_t *buf,
                            size_t len)
{
	const int *fd = ctx;
	size_t got = 0;
	(void)tls;
	(void)file;
	sl_err rc = sl_pread_full(*fd, buf, len, off, &got, "stream buffer");
	if (rc == SL_OK && got < len)
		rc = sl_err_set(SL_E_IO, "stream buffer: shorter than written");
	return rc;
}

/* Encrypts shards index .. index + n - 1 (plaintext lengths lens) from src
 * into dir, side by side; fsyncs them (durable outputs) and adds them to
 * the manifest in order. */
static SL_RESULT write_shards(sl_secret *dek, const sl_tree_encrypt_opts *o,
                              const sl_sld_encrypt_params *p, const sl_sld_source *src,
                              const uint64_t *lens, uint32_t n, const char *dir, uint32_t index,
                              sl_sldm_builder *b)
{
	sl_err rc = SL_E_IO;
	char name[GROUP_SHARDS][32], path[PATH_MAX];
	sl_sld_header *h[GROUP_SHARDS] = {0};
	int fd[GROUP_SHARDS];

	SL_ENSURE(n > 0 && n <= GROUP_SHARDS, SL_E_INTERNAL, "shard group of %u", n);
	for (uint32_t k = 0; k < n; k++)
		fd[k] = -1;
	for (uint32_t k = 0; k < n; k++) {
		snprintf(name[k], sizeof(name[k]), "shard-%05u.sld", index + k);
		SL_ENSURE(snprintf(path, sizeof(path), "%s/%s", dir, name[k]) < (int)sizeof(path),
		          SL_E_INPUT, "%s: path too long", dir);
		if (o->mem_shards)
			fd[k] = memfd_create(name[k], MFD_CLOEXEC);
		else
			fd[k] = open(path, /* lint: trusted path (the new dataset folder) */
			             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		SL_ENSURE(fd[k] >= 0, SL_E_IO, "%s: %s", path, strerror(errno));
	}
	SL_GUARD(sl_sld_encrypt_files(dek, p, n, lens, fd, src,
	                              o->no_fsync ? 0 : SL_SLD_WRITE_BEHIND, h));
	for (uint32_t k = 0; k < n && !o->no_fsync && !o->mem_shards; k++)
		SL_ENSURE(fsync(fd[k]) == 0, SL_E_IO, "%s/%s: fsync: %s", dir, name[k],
		          strerror(errno));
	for (uint32_t k = 0; k < n; k++) {
		uint64_t size = sl_sld_header_file_size(h[k]);
		SL_GUARD(sl_sldm_builder_add_shard(b, name[k], h[k], size));
		if (o->shard_done != NULL)
			SL_GUARD(o->shard_done(o->shard_ctx, o->mem_shards ? NULL : dir, name[k],
			                       fd[k], size));
	}
	rc = SL_OK;
out:
	for (uint32_t k = 0; k < n; k++) {
		sl_sld_header_free(h[k]);
		if (fd[k] >= 0)
			close(fd[k]);
	}
	return rc;
}

static SL_RESULT encrypt_files(sl_secret *dek, const sl_tree_encrypt_opts *o,
                               const sl_sld_encrypt_params *p, const struct entries *l,
                               const char *tmp, sl_sldm_builder *b, sl_tree_stats *st)
{
	sl_err rc = SL_E_IO;
	struct plan pl = {0};
	uint64_t S = o->shard_size ? o->shard_size : SL_TREE_SHARD_DEFAULT;
	/* a shard handed on as it is done is sealed alone, by every thread */
	uint32_t group = o->shard_done != NULL ? 1 : GROUP_SHARDS;

	SL_GUARD(make_plan(l, S, &pl));
	for (uint32_t s = 0; s < pl.n_shards; s += group) {
		uint32_t n = pl.n_shards - s < group ? pl.n_shards - s : group;
		struct tree_src ts = {
		    .l = l, .pl = &pl, .shard0 = s, .follow = o->follow_symlinks && !o->beneath};
		sl_sld_source src = {
		    .ctx = &ts, .read_at = tree_read_at, .tls_free = tree_tls_free};
		SL_GUARD(write_shards(dek, o, p, &src, pl.shard_len + s, n, tmp, s, b));
		for (uint32_t k = 0; k < n; k++)
			st->bytes += pl.shard_len[s + k];
	}
	/* a file that grew after it was listed: its new bytes would be lost */
	for (size_t i = 0; i < l->n; i++) {
		int fd = -1;
		SL_GUARD(entry_open(l, &l->v[i], o->follow_symlinks, &fd));
		close(fd);
	}
	for (size_t i = 0; i < l->n; i++)
		SL_GUARD(sl_sldm_builder_add_file(b, l->v[i].rel, l->v[i].mode, l->v[i].size,
		                                  pl.file_shard[i], pl.file_off[i]));
	st->shards = pl.n_shards;
	st->files = (uint32_t)l->n;
	rc = SL_OK;
out:
	free_plan(&pl);
	return rc;
}

/* A stream of unknown length: each shard is read into memory first (its
 * length goes into its header), then encrypted from there. */
static SL_RESULT encrypt_stream(sl_secret *dek, const sl_tree_encrypt_opts *o,
                                const sl_sld_encrypt_params *p, const char *tmp, sl_sldm_builder *b,
                                sl_tree_stats *st)
{
	sl_err rc = SL_E_IO;
	uint64_t S = o->shard_size ? o->shard_size : SL_TREE_SHARD_DEFAULT;
	uint8_t *buf = malloc(1 << 20);
	int mfd = memfd_create("seclaunch-stream", MFD_CLOEXEC);
	bool eof = false;
	const char *name = o->stream_name != NULL ? o->stream_name : "stdin";

	SL_ENSURE(buf != NULL && mfd >= 0, SL_E_NOMEM, "stream buffer");
	SL_GUARD(sl_sldm_path_check(name));
	for (uint32_t s = 0; !eof || s == 0; s++) {
		uint64_t got = 0;
		SL_ENSURE(ftruncate(mfd, 0) == 0 && lseek(mfd, 0, SEEK_SET) == 0, SL_E_SYSTEM,
		          "stream buffer: %s", strerror(errno));
		while (got < S) {
			size_t want = S - got < (1 << 20) ? (size_t)(S - got) : (1 << 20);
			ssize_t n = read(STDIN_FILENO, buf, want);
			if (n < 0 && errno == EINTR)
				continue;
			SL_ENSURE(n >= 0, SL_E_IO, "-: read: %s", strerror(errno));
			if (n == 0) {
				eof = true;
				break;
			}
			SL_GUARD(sl_write_all(mfd, buf, (size_t)n, "stream buffer"));
			got += (uint64_t)n;
		}
		if (got == 0 && s > 0)
			break;
		sl_sld_source src = {.ctx = &mfd, .read_at = fd_read_at};
		SL_GUARD(write_shards(dek, o, p, &src, &got, 1, tmp, s, b));
		st->bytes += got;
		st->shards = s + 1;
	}
	SL_GUARD(sl_sldm_builder_add_file(b, name, 0644, st->bytes, 0, 0));
	st->files = 1;
	rc = SL_OK;
out:
	if (buf != NULL)
		sl_wipe(buf, 1 << 20);
	free(buf);
	if (mfd >= 0)
		close(mfd);
	return rc;
}

sl_err sl_tree_encrypt(sl_secret *dek, const sl_tree_encrypt_opts *o, sl_tree_stats *st)
{
	sl_err rc = SL_E_INPUT;
	struct entries l = {.quiet = o->quiet,
	                    .how = o->beneath           ? 0
	                           : o->follow_symlinks ? SL_FSAT_CROSS_MOUNTS | SL_FSAT_FOLLOW
	                                                : SL_FSAT_CROSS_MOUNTS,
	                    .owner_set = o->owner_set,
	                    .owner = o->owner};
	sl_sldm_builder *b = NULL;
	sl_sld_encrypt_params p = o->p;
	char tmp[PATH_MAX] = "", mpath[PATH_MAX + 16];
	uint8_t *man = NULL;
	size_t man_len = 0;
	bool stream = false;
	sl_sldm *m = NULL;

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < o->n_paths; i++)
		stream |= strcmp(o->paths[i], "-") == 0;
	SL_ENSURE(o->n_paths > 0, SL_E_USAGE, "no input given");
	SL_ENSURE(!stream || o->n_paths == 1, SL_E_USAGE,
	          "'-' (a stream on standard input) cannot be mixed with other inputs");
	SL_ENSURE(o->shard_size == 0 || o->shard_size >= SL_SLD_CHUNK_MIN, SL_E_USAGE,
	          "--shard-size: at least 64K");
	SL_ENSURE(!o->mem_shards || o->shard_done != NULL, SL_E_INTERNAL,
	          "memory shards with no one to hand them to");
	SL_GUARD(check_target(o->out_dir, o->force));
	if (!stream)
		SL_GUARD(collect(o, &l));
	st->skipped = l.skipped;
	/* shards carry no key reference: the manifest holds it once */
	p.kms_url = p.key_id = NULL;
	p.wrapped_dek = NULL;
	p.wrapped_dek_len = 0;
	SL_GUARD(sl_sldm_builder_new(p.dataset_id, p.aead, p.chunk_size, o->sequence, &b));
	SL_GUARD(make_temp_dir(o->out_dir, tmp, sizeof(tmp)));
	if (stream)
		SL_GUARD(encrypt_stream(dek, o, &p, tmp, b, st));
	else
		SL_GUARD(encrypt_files(dek, o, &p, &l, tmp, b, st));
	SL_GUARD(sl_sldm_builder_finish(b, dek, o->p.kms_url, o->p.key_id, o->p.wrapped_dek,
	                                o->p.wrapped_dek_len, &man, &man_len));
	SL_GUARD(sl_sldm_parse(man, man_len, &m));
	sl_sldm_root(m, st->root);
	snprintf(mpath, sizeof(mpath), "%s/" SL_SLDM_NAME, tmp);
	SL_GUARD(sl_file_write_atomic(mpath, man, man_len, 0644, false));
	SL_GUARD(put_in_place(tmp, o->out_dir, o->force));
	tmp[0] = '\0';
	rc = SL_OK;
out:
	if (tmp[0] != '\0')
		remove_tree(tmp);
	sl_sldm_free(m);
	free(man);
	sl_sldm_builder_free(b);
	free_entries(&l);
	return rc;
}

/* ---- reading ---------------------------------------------------------- */

bool sl_tree_is_dataset(const char *path)
{
	char m[PATH_MAX];
	struct stat st;
	if (stat(path, &st) != 0 || /* lint: trusted path (a dataset the caller names) */
	    !S_ISDIR(st.st_mode))
		return false;
	if (snprintf(m, sizeof(m), "%s/" SL_SLDM_NAME, path) >= (int)sizeof(m))
		return false;
	return stat(m, &st) == 0; /* lint: trusted path (a dataset the caller names) */
}

/* A local dataset folder, as the descriptor of the folder. */
static SL_RESULT open_dir(const char *dir, int *dfd)
{
	*dfd = open(dir, /* lint: trusted path (a dataset the caller names) */
	            O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*dfd < 0)
		return sl_err_set(SL_E_IO, "%s: cannot open: %s", dir, strerror(errno));
	return SL_OK;
}

sl_err sl_tree_manifest_at(int dfd, const char *dir, sl_sldm **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *data = NULL;
	size_t got = 0;
	struct stat st;
	int fd = openat(dfd, SL_SLDM_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	SL_ENSURE(fd >= 0, SL_E_IO, "%s/" SL_SLDM_NAME ": cannot open: %s", dir, strerror(errno));
	SL_ENSURE(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), SL_E_INPUT,
	          "%s/" SL_SLDM_NAME ": not a regular file", dir);
	SL_ENSURE((uint64_t)st.st_size <= (uint64_t)SL_SLDM_MAX, SL_E_TOO_LARGE,
	          "%s/" SL_SLDM_NAME ": larger than the %llu-byte limit", dir,
	          (unsigned long long)SL_SLDM_MAX);
	data = malloc((size_t)st.st_size + 1);
	SL_ENSURE(data != NULL, SL_E_NOMEM, "%s/" SL_SLDM_NAME, dir);
	SL_GUARD(sl_read_full(fd, data, (size_t)st.st_size, &got, SL_SLDM_NAME));
	SL_ENSURE(got == (size_t)st.st_size, SL_E_IO, "%s/" SL_SLDM_NAME ": changed while read",
	          dir);
	rc = sl_sldm_parse(data, got, out);
	if (rc != SL_OK)
		rc = sl_err_wrap(rc, "%s/" SL_SLDM_NAME, dir);
out:
	free(data);
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_tree_manifest(const char *dir, sl_remote *remote, sl_sldm **out)
{
	uint8_t *data = NULL;
	size_t len = 0;
	sl_err rc;

	if (remote == NULL) {
		int dfd = -1;
		rc = open_dir(dir, &dfd);
		if (rc == SL_OK)
			rc = sl_tree_manifest_at(dfd, dir, out);
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	rc = sl_remote_get(remote, SL_SLDM_NAME, SL_SLDM_MAX, &data, &len);
	if (rc == SL_OK) {
		rc = sl_sldm_parse(data, len, out);
		if (rc != SL_OK)
			rc = sl_err_wrap(rc, "%s" SL_SLDM_NAME, sl_remote_name(remote));
	}
	free(data);
	return rc;
}

struct restore {
	const sl_sldm *m;
	int root;        /* the temporary output folder */
	uint64_t g;      /* dataset offset of the next plaintext byte */
	uint32_t next;   /* next file to open */
	int fd;          /* the open file, or -1 */
	uint32_t cur;    /* its index */
	uint64_t *start; /* dataset offset of each file */
};

/* Opens dir components one by one (no link followed), creating them. */
static SL_RESULT open_parent(int root, const char *path, int *dfd, const char **leaf)
{
	sl_err rc = SL_E_IO;
	char comp[SL_SLDM_PATH_MAX + 1];
	const char *p = path, *slash;
	int d = dup(root);

	SL_ENSURE(d >= 0, SL_E_SYSTEM, "dup: %s", strerror(errno));
	while ((slash = strchr(p, '/')) != NULL) {
		size_t n = (size_t)(slash - p);
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (mkdirat(d, comp, 0700) != 0 && errno != EEXIST)
			SL_FAIL(SL_E_IO, "%s: cannot create folder %s: %s", path, comp,
			        strerror(errno));
		int nd = openat(d, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		SL_ENSURE(nd >= 0, SL_E_IO, "%s: %s: %s", path, comp, strerror(errno));
		close(d);
		d = nd;
		p = slash + 1;
	}
	*dfd = d;
	d = -1;
	*leaf = p;
	rc = SL_OK;
out:
	if (d >= 0)
		close(d);
	return rc;
}

static SL_RESULT close_file(struct restore *r)
{
	sl_err rc = SL_E_IO;
	const sl_sldm_file f = sl_sldm_file_at(r->m, r->cur);

	SL_ENSURE(fchmod(r->fd, f.mode) == 0 && fsync(r->fd) == 0, SL_E_IO, "%s: %s", f.path,
	          strerror(errno));
	rc = SL_OK;
out:
	close(r->fd);
	r->fd = -1;
	return rc;
}

static SL_RESULT open_file(struct restore *r, uint32_t i)
{
	sl_err rc = SL_E_IO;
	const sl_sldm_file f = sl_sldm_file_at(r->m, i);
	const char *leaf;
	int d = -1;

	/* the manifest was authenticated; the rule is checked again anyway
	 * before anything is created from a name it gives */
	SL_GUARD(sl_sldm_path_check(f.path));
	SL_GUARD(open_parent(r->root, f.path, &d, &leaf));
	r->fd = openat(d, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	SL_ENSURE(r->fd >= 0, SL_E_IO, "%s: %s", f.path, strerror(errno));
	r->cur = i;
	rc = SL_OK;
out:
	if (d >= 0)
		close(d);
	return rc;
}

/* Opens (and for empty files also closes) every file that starts at or
 * before dataset offset g and is not open yet. */
static SL_RESULT open_due(struct restore *r, uint64_t g)
{
	sl_err rc = SL_OK;
	while (r->fd < 0 && r->next < sl_sldm_file_count(r->m) && r->start[r->next] <= g) {
		SL_GUARD(open_file(r, r->next));
		r->next++;
		if (sl_sldm_file_at(r->m, r->cur).size == 0)
			SL_GUARD(close_file(r));
	}
out:
	return rc;
}

static SL_RESULT restore_sink(void *ctx, uint64_t chunk, const uint8_t *plain, size_t len)
{
	sl_err rc = SL_OK;
	struct restore *r = ctx;
	(void)chunk;

	while (len > 0) {
		SL_GUARD(open_due(r, r->g));
		if (r->fd < 0) {
			/* bytes outside every file: skip up to the next file's start */
			uint64_t next =
			    r->next < sl_sldm_file_count(r->m) ? r->start[r->next] : UINT64_MAX;
			uint64_t skip = next - r->g < len ? next - r->g : len;
			r->g += skip, plain += skip, len -= (size_t)skip;
			continue;
		}
		const sl_sldm_file f = sl_sldm_file_at(r->m, r->cur);
		uint64_t left = r->start[r->cur] + f.size - r->g;
		size_t n = left < len ? (size_t)left : len;
		SL_GUARD(sl_write_all(r->fd, plain, n, f.path));
		r->g += n, plain += n, len -= n;
		if (r->g == r->start[r->cur] + f.size)
			SL_GUARD(close_file(r));
	}
out:
	return rc;
}

/* A shard from the store: its ciphertext fetched into a memory file. */
static SL_RESULT fetch_shard(sl_remote *remote, const sl_sldm_shard *s, uint32_t i, int *fd)
{
	sl_err rc = SL_E_NOMEM;
	int f = memfd_create("seclaunch-shard", MFD_CLOEXEC);

	SL_ENSURE(f >= 0, SL_E_NOMEM, "shard %u (%s): memory file: %s", i, s->name,
	          strerror(errno));
	rc = sl_remote_fetch(remote, s->name, s->file_size, f);
	if (rc != SL_OK)
		goto out;
	*fd = f;
	f = -1;
out:
	if (f >= 0)
		close(f);
	return rc;
}

/* The one check of shard i's header against the manifest: rc and h are what
 * parsing it gave (the parse names the file in its error), size the length
 * of the shard's file. */
static SL_RESULT check_parsed(const sl_sldm *m, uint32_t i, sl_err rc, const sl_sld_header *h,
                              uint64_t size)
{
	if (rc != SL_OK && rc != SL_E_NOMEM)
		return sl_err_wrap(SL_E_INTEGRITY, "shard %u (%s)", i, sl_sldm_shard_at(m, i).name);
	if (rc != SL_OK)
		return rc;
	return sl_sldm_check_shard(m, i, h, size);
}

sl_err sl_tree_check_shard_mem(const sl_sldm *m, uint32_t i, const char *name, const uint8_t *p,
                               uint64_t size)
{
	sl_sld_header *h = NULL;
	sl_err rc =
	    sl_sld_header_parse(p, size < SL_SLD_HEADER_MAX ? (size_t)size : SL_SLD_HEADER_MAX, &h);
	if (rc != SL_OK)
		sl_err_wrap(rc, "%s", name);
	rc = check_parsed(m, i, rc, h, size);
	sl_sld_header_free(h);
	return rc;
}

sl_err sl_tree_open_shard_at(int dfd, const char *dir, sl_remote *remote, const sl_sldm *m,
                             uint32_t i, int *fd_out, char *name, size_t name_cap)
{
	sl_err rc = SL_E_IO;
	sl_sldm_shard s = sl_sldm_shard_at(m, i);
	sl_sld_header *h = NULL;
	struct stat st;
	int fd = -1;

	if (remote != NULL) {
		snprintf(name, name_cap, "%s%s", sl_remote_name(remote), s.name);
		SL_GUARD(fetch_shard(remote, &s, i, &fd));
	} else {
		SL_ENSURE(snprintf(name, name_cap, "%s/%s", dir, s.name) < (int)name_cap,
		          SL_E_INPUT, "%s: path too long", dir);
		/* the manifest named it: a plain name, checked again; no link followed */
		SL_ENSURE(s.name[0] != '\0' && strchr(s.name, '/') == NULL &&
		              strcmp(s.name, ".") != 0 && strcmp(s.name, "..") != 0,
		          SL_E_INTEGRITY, "shard %u: name '%s' is not a plain file name", i,
		          s.name);
		fd = openat(dfd, s.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			SL_FAIL(errno == ENOENT ? SL_E_TRUNCATED : SL_E_IO, "shard %u (%s): %s", i,
			        s.name,
			        errno == ENOENT ? "missing from the dataset folder"
			                        : strerror(errno));
	}
	SL_ENSURE(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), SL_E_INTEGRITY,
	          "shard %u (%s): not a regular file", i, s.name);
	rc = sl_sld_header_read_fd(fd, name, &h);
	SL_GUARD(check_parsed(m, i, rc, h, (uint64_t)st.st_size));
	*fd_out = fd;
	fd = -1;
	rc = SL_OK;
out:
	sl_sld_header_free(h);
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_tree_open_shard(const char *dir, sl_remote *remote, const sl_sldm *m, uint32_t i,
                          int *fd_out, char *name, size_t name_cap)
{
	int dfd = -1;
	sl_err rc = remote != NULL ? SL_OK : open_dir(dir, &dfd);
	if (rc == SL_OK)
		rc = sl_tree_open_shard_at(dfd, dir, remote, m, i, fd_out, name, name_cap);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

static void *ahead_main(void *arg)
{
	sl_shards *a = arg;
	a->ahead_rc = sl_tree_open_shard_at(-1, a->dir, a->remote, a->m, a->ahead_i, &a->ahead_fd,
	                                    a->ahead_name, sizeof(a->ahead_name));
	if (a->ahead_rc != SL_OK)
		snprintf(a->ahead_err, sizeof(a->ahead_err), "%s", sl_err_detail());
	return NULL;
}

/* Waits for the fetch ahead and drops what it fetched. */
static void ahead_drop(sl_shards *a)
{
	if (a->running)
		pthread_join(a->thr, NULL);
	a->running = false;
	if (a->ahead_fd >= 0)
		close(a->ahead_fd);
	a->ahead_fd = -1;
}

void sl_shards_begin(sl_shards *a, int dfd, const char *dir, sl_remote *remote, const sl_sldm *m)
{
	*a = (sl_shards){.dfd = dfd, .dir = dir, .remote = remote, .m = m, .ahead_fd = -1};
	atomic_init(&a->stop, false);
	if (remote != NULL)
		sl_remote_set_abort(remote, &a->stop);
}

sl_err sl_shards_open(sl_shards *a, uint32_t i, int *fd, char *name, size_t cap)
{
	sl_err rc;

	*fd = -1;
	if (a->running && a->ahead_i == i) {
		pthread_join(a->thr, NULL);
		a->running = false;
		if (a->ahead_rc != SL_OK)
			return sl_err_set(a->ahead_rc, "%s", a->ahead_err);
		*fd = a->ahead_fd;
		a->ahead_fd = -1;
		snprintf(name, cap, "%s", a->ahead_name);
		rc = SL_OK;
	} else {
		ahead_drop(a);
		rc = a->remote != NULL || a->dfd >= 0
		         ? sl_tree_open_shard_at(a->dfd, a->dir, a->remote, a->m, i, fd, name, cap)
		         : sl_err_set(SL_E_INTERNAL, "%s: shards from neither a folder nor a store",
		                      a->dir);
	}
	if (rc == SL_OK && a->remote != NULL && i + 1 < sl_sldm_shard_count(a->m)) {
		a->ahead_i = i + 1;
		a->running = pthread_create(&a->thr, NULL, ahead_main, a) == 0;
	}
	return rc;
}

void sl_shards_end(sl_shards *a)
{
	atomic_store(&a->stop, true);
	ahead_drop(a);
	if (a->remote != NULL)
		sl_remote_set_abort(a->remote, NULL);
}

static SL_RESULT decrypt_shard(sl_shards *a, uint32_t i, sl_secret *dek, unsigned threads,
                               sl_sld_bufs *bufs, struct restore *r)
{
	sl_err rc = SL_E_IO;
	char path[PATH_MAX];
	sl_sld_reader *rd = NULL;
	int fd = -1;

	SL_GUARD(sl_shards_open(a, i, &fd, path, sizeof(path)));
	SL_GUARD(sl_sld_open(fd, path, dek, &rd));
	SL_GUARD(sl_sld_decrypt_bufs(rd, threads, bufs, restore_sink, r, NULL, NULL));
	rc = SL_OK;
out:
	sl_sld_close(rd);
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_tree_decrypt(const char *dir, sl_remote *remote, const sl_sldm *m, sl_secret *dek,
                       const char *out_dir, bool force, unsigned threads, sl_tree_stats *st)
{
	sl_err rc = SL_E_INPUT;
	char tmp[PATH_MAX] = "";
	struct restore r = {.m = m, .root = -1, .fd = -1};
	uint32_t nf = sl_sldm_file_count(m), ns = sl_sldm_shard_count(m);
	uint64_t *sstart = NULL;
	sl_shards shards;
	sl_sld_bufs *bufs = NULL;

	memset(st, 0, sizeof(*st));
	sl_shards_begin(&shards, -1, dir, remote, m);
	if (remote == NULL)
		SL_GUARD(open_dir(dir, &shards.dfd));
	SL_GUARD(sl_sldm_authenticate(m, dek));
	SL_GUARD(check_target(out_dir, force));
	r.start = calloc((size_t)nf + 1, sizeof(*r.start));
	sstart = calloc((size_t)ns + 1, sizeof(*sstart));
	SL_ENSURE(r.start != NULL && sstart != NULL, SL_E_NOMEM, "file offsets");
	for (uint32_t i = 0; i < ns; i++)
		sstart[i + 1] = sstart[i] + sl_sldm_shard_at(m, i).plaintext_len;
	for (uint32_t i = 0; i < nf; i++) {
		sl_sldm_file f = sl_sldm_file_at(m, i);
		r.start[i] = sstart[f.shard] + f.offset;
	}
	SL_GUARD(make_temp_dir(out_dir, tmp, sizeof(tmp)));
	/* the folder mkdtemp made, checked on its descriptor to be that one
	 * (--resume restores beside the job's files, in a folder it owns) */
	r.root = open(tmp, /* lint: trusted path (ours, owner checked on the descriptor) */
	              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	SL_ENSURE(r.root >= 0, SL_E_IO, "%s: %s", tmp, strerror(errno));
	{
		struct stat rs;
		SL_ENSURE(fstat(r.root, &rs) == 0 && rs.st_uid == geteuid() &&
		              (rs.st_mode & 07777) == 0700,
		          SL_E_IO, "%s: replaced while it was being made; nothing restored", tmp);
	}
	SL_GUARD(sl_sld_bufs_new(&bufs));
	for (uint32_t i = 0; i < ns; i++)
		SL_GUARD(decrypt_shard(&shards, i, dek, threads, bufs, &r));
	/* empty files at the very end */
	SL_GUARD(open_due(&r, r.g));
	SL_ENSURE(r.fd < 0 && r.next == nf, SL_E_INTEGRITY,
	          "the shards end before the manifest's files do");
	SL_GUARD(fsync_path(tmp));
	SL_GUARD(put_in_place(tmp, out_dir, force));
	tmp[0] = '\0';
	st->bytes = r.g;
	st->files = nf;
	st->shards = ns;
	sl_sldm_root(m, st->root);
	rc = SL_OK;
out:
	sl_shards_end(&shards);
	if (remote == NULL && shards.dfd >= 0)
		close(shards.dfd);
	sl_sld_bufs_free(bufs);
	if (r.fd >= 0)
		close(r.fd);
	if (r.root >= 0)
		close(r.root);
	if (tmp[0] != '\0')
		remove_tree(tmp);
	free(r.start);
	free(sstart);
	return rc;
}
