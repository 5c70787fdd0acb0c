/* Collateral directory snapshots (coll_dir.h): a few directories, each
 * snapshot immutable and reference-counted, one mutex around the table. */
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "coll_dir.h"
#include "seclaunch/util.h"

#define DIRS 4
#define MAX_FILES 64
#define MAX_BYTES (4 * 1024 * 1024)
#define MAX_FILE_BYTES (1024 * 1024) /* the readers' own limit: a larger file fails there */
#define RACY_NS 2000000000LL

struct ident {
	mode_t mode;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

struct sl_coll_dir {
	char path[4096];
	struct ident dir;
	size_t n;
	sl_coll_file f[MAX_FILES];
	struct ident id[MAX_FILES];
	char names[MAX_FILES][256];
	unsigned refs;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static sl_coll_dir *table[DIRS];
static unsigned next_slot;
static uint64_t served, reads;

static bool ident_of(const char *path, struct ident *out)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return false;
	*out = (struct ident){st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
	return true;
}

static bool same(const struct ident *a, const struct ident *b)
{
	return a->mode == b->mode && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static long long ns(struct timespec t)
{
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Changed no later than two seconds before start. */
static bool settled(const struct ident *id, long long start)
{
	return ns(id->mtime) < start - RACY_NS && ns(id->ctime) < start - RACY_NS;
}

static bool wanted(const char *n)
{
	const char *dot = strrchr(n, '.');
	return n[0] != '.' && dot != NULL &&
	       (strcmp(dot, ".pem") == 0 || strcmp(dot, ".crt") == 0 || strcmp(dot, ".cer") == 0 ||
	        strcmp(dot, ".der") == 0 || strcmp(dot, ".json") == 0);
}

static void snap_free(sl_coll_dir *d)
{
	if (d == NULL)
		return;
	for (size_t i = 0; i < d->n; i++)
		free((void *)d->f[i].data);
	free(d);
}

/* A fresh snapshot of dir, or NULL where one cannot be trusted. */
static sl_coll_dir *snap_read(const char *dir)
{
	struct timespec now;
	sl_coll_dir *d = calloc(1, sizeof(*d));
	DIR *dh = NULL;
	size_t total = 0;
	bool ok = false;
	struct ident again;

	if (d == NULL || clock_gettime(CLOCK_REALTIME, &now) != 0 ||
	    snprintf(d->path, sizeof(d->path), "%s", dir) >= (int)sizeof(d->path) ||
	    !ident_of(dir, &d->dir) || !settled(&d->dir, ns(now)) || (dh = opendir(dir)) == NULL)
		goto out;
	for (struct dirent *e; (e = readdir(dh)) != NULL;) {
		char p[4096 + 256];
		uint8_t *b = NULL;
		size_t len = 0;
		if (!wanted(e->d_name))
			continue;
		if (d->n == MAX_FILES || strlen(e->d_name) >= sizeof(d->names[0]))
			goto out;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		struct ident *id = &d->id[d->n];
		if (!ident_of(p, id) || !S_ISREG(id->mode) || !settled(id, ns(now)) ||
		    id->size > MAX_FILE_BYTES || total + (size_t)id->size > MAX_BYTES)
			goto out;
		if (sl_file_read(p, MAX_FILE_BYTES, &b, &len) != SL_OK) {
			sl_err_clear();
			goto out;
		}
		sl_coll_file *f = &d->f[d->n++];
		f->data = b;
		f->len = len;
		total += len;
		if (!ident_of(p, &again) || !same(id, &again) || (off_t)len != id->size)
			goto out;
		snprintf(d->names[d->n - 1], sizeof(d->names[0]), "%s", e->d_name);
		f->name = d->names[d->n - 1];
		sl_sha256(b, len, f->sha256);
	}
	ok = ident_of(dir, &again) && same(&d->dir, &again);
out:
	if (dh != NULL)
		closedir(dh);
	if (!ok) {
		snap_free(d);
		return NULL;
	}
	d->refs = 1;
	return d;
}

/* The snapshot still describes the directory. */
static bool current(const sl_coll_dir *d)
{
	struct ident now;
	char p[4096 + 256];
	if (!ident_of(d->path, &now) || !same(&d->dir, &now))
		return false;
	for (size_t i = 0; i < d->n; i++) {
		snprintf(p, sizeof(p), "%s/%s", d->path, d->f[i].name);
		if (!ident_of(p, &now) || !same(&d->id[i], &now))
			return false;
	}
	return true;
}

sl_coll_dir *sl_coll_dir_get(const char *dir)
{
	sl_coll_dir *d = NULL, *old = NULL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < DIRS && d == NULL; i++)
		if (table[i] != NULL && strcmp(table[i]->path, dir) == 0) {
			d = table[i];
			d->refs++;
		}
	pthread_mutex_unlock(&mu);
	if (d != NULL && current(d)) {
		pthread_mutex_lock(&mu);
		served++;
		pthread_mutex_unlock(&mu);
		return d;
	}
	sl_coll_dir_release(d);
	d = snap_read(dir);
	pthread_mutex_lock(&mu);
	reads++;
	int slot = -1;
	for (int i = 0; i < DIRS && slot < 0; i++)
		if (table[i] != NULL && strcmp(table[i]->path, dir) == 0)
			slot = i;
	if (slot < 0 && d != NULL)
		slot = (int)(next_slot++ % DIRS);
	if (slot >= 0) {
		/* the table's reference to what it held goes; a stale entry is
		 * dropped even when no new snapshot could be made */
		old = table[slot];
		table[slot] = d;
		if (d != NULL)
			d->refs++;
	}
	pthread_mutex_unlock(&mu);
	sl_coll_dir_release(old);
	return d;
}

void sl_coll_dir_release(sl_coll_dir *d)
{
	if (d == NULL)
		return;
	pthread_mutex_lock(&mu);
	bool last = --d->refs == 0;
	pthread_mutex_unlock(&mu);
	if (last)
		snap_free(d);
}

size_t sl_coll_dir_count(const sl_coll_dir *d)
{
	return d->n;
}

const sl_coll_file *sl_coll_dir_file(const sl_coll_dir *d, size_t i)
{
	return &d->f[i];
}

void sl_coll_dir_stats(uint64_t *s, uint64_t *r)
{
	pthread_mutex_lock(&mu);
	*s = served;
	*r = reads;
	pthread_mutex_unlock(&mu);
}
