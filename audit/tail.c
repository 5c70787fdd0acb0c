/* Finding where a log ends (for writers, under the lock) and which files
 * make up a rotated log. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_int.h"

#define TAIL_CHUNK 4096

static SL_RESULT pread_full(int fd, void *buf, size_t n, off_t off, const char *path)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sl_err_set(SL_E_IO, "%s: read at offset %lld: %s", path,
			                  (long long)off, r < 0 ? strerror(errno) : "file shrank");
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return SL_OK;
}

/* Offset of the first byte of the line that ends at end (exclusive). */
static SL_RESULT line_start(int fd, const char *path, off_t end, off_t *start)
{
	sl_err rc = SL_E_IO;
	uint8_t chunk[TAIL_CHUNK];
	off_t pos = end;

	while (pos > 0) {
		size_t n = pos < TAIL_CHUNK ? (size_t)pos : TAIL_CHUNK;
		SL_GUARD(pread_full(fd, chunk, n, pos - (off_t)n, path));
		uint8_t *nl = memrchr(chunk, '\n', n);
		if (nl != NULL) {
			*start = pos - (off_t)n + (nl - chunk) + 1;
			return SL_OK;
		}
		pos -= (off_t)n;
		SL_ENSURE(end - pos <= (off_t)SL_AUDIT_MAX_LINE, SL_E_TOO_LARGE,
		          "%s: the last line is longer than %u bytes; the log's tail is damaged, "
		          "refusing to append",
		          path, SL_AUDIT_MAX_LINE);
	}
	*start = 0;
	rc = SL_OK;
out:
	return rc;
}

sl_err audit_scan_tail(int fd, const char *path, audit_tail *t)
{
	sl_err rc = SL_E_IO;
	struct stat st;
	off_t end, start = 0;
	uint8_t last, *buf = NULL;
	json_t *rec = NULL;
	size_t nrev = 0;
	struct {
		char sha[AUDIT_HEX_LEN + 1];
		size_t bytes;
	} rev[AUDIT_MAX_TORN];

	memset(t, 0, sizeof(*t));
	audit_genesis_hex(t->hash);
	SL_ENSURE(fstat(fd, &st) == 0, SL_E_IO, "%s: stat: %s", path, strerror(errno));
	if (st.st_size == 0)
		return SL_OK;
	SL_GUARD(pread_full(fd, &last, 1, st.st_size - 1, path));
	end = st.st_size;
	if (last == '\n')
		end--;
	else
		t->need_newline = true;
	for (;;) {
		SL_GUARD(line_start(fd, path, end, &start));
		size_t len = (size_t)(end - start);
		free(buf);
		buf = malloc(len > 0 ? len : 1);
		SL_ENSURE(buf != NULL, SL_E_NOMEM, "%s: tail buffer", path);
		if (len > 0)
			SL_GUARD(pread_full(fd, buf, len, start, path));
		if (sl_audit_parse_line(buf, len, &rec) == SL_OK) {
			t->have = true;
			t->seq = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
			audit_line_hash(buf, len, t->hash);
			break;
		}
		sl_err_clear();
		SL_ENSURE(nrev < AUDIT_MAX_TORN, SL_E_FORMAT,
		          "%s: more than %d unparsable lines at the end; the log's tail is "
		          "damaged, refusing to append",
		          path, AUDIT_MAX_TORN);
		audit_line_hash(buf, len, rev[nrev].sha);
		rev[nrev].bytes = len;
		nrev++;
		if (start == 0)
			break;
		end = start - 1;
	}
	for (size_t i = 0; i < nrev; i++) {
		memcpy(t->torn[i].sha, rev[nrev - 1 - i].sha, sizeof(t->torn[i].sha));
		t->torn[i].bytes = rev[nrev - 1 - i].bytes;
	}
	t->ntorn = nrev;
	rc = SL_OK;
out:
	json_decref(rec);
	free(buf);
	return rc;
}

sl_err audit_first_seq(const char *path, uint64_t *seq)
{
	sl_err rc = SL_E_IO;
	audit_lines l;
	bool got = false;
	json_t *rec = NULL;

	*seq = 0;
	SL_GUARD(audit_lines_open(&l, path));
	for (int i = 0; i <= AUDIT_MAX_TORN; i++) {
		SL_GUARD(audit_lines_next(&l, &got));
		if (!got)
			break;
		if (sl_audit_parse_line(l.buf, l.len, &rec) == SL_OK) {
			*seq = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
			break;
		}
		sl_err_clear();
	}
	rc = SL_OK;
out:
	json_decref(rec);
	audit_lines_close(&l);
	return rc;
}

static bool rotated_name(const char *name, const char *base, size_t blen)
{
	if (strncmp(name, base, blen) != 0 || name[blen] != '.')
		return false;
	const char *d = name + blen + 1;
	if (strlen(d) != 20)
		return false;
	for (size_t i = 0; i < 20; i++)
		if (d[i] < '0' || d[i] > '9')
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

sl_err sl_audit_files(const char *path, char ***out, size_t *n)
{
	sl_err rc = SL_E_IO;
	char dir[4096];
	const char *slash = strrchr(path, '/');
	const char *base = slash != NULL ? slash + 1 : path;
	size_t blen = strlen(base), count = 0, cap = 0;
	char **v = NULL;
	DIR *d = NULL;
	struct dirent *e;
	struct stat st;

	*out = NULL;
	*n = 0;
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	d = opendir(dir);
	SL_ENSURE(d != NULL, SL_E_IO, "%s: cannot list: %s", dir, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		if (!rotated_name(e->d_name, base, blen))
			continue;
		if (count + 2 > cap) {
			cap = cap == 0 ? 8 : cap * 2;
			char **nv = realloc(v, cap * sizeof(*v));
			SL_ENSURE(nv != NULL, SL_E_NOMEM, "listing %s", dir);
			v = nv;
		}
		if (slash == NULL)
			v[count] = strdup(e->d_name);
		else
			SL_ENSURE(asprintf(&v[count], "%.*s/%s", (int)(slash - path), path,
			                   e->d_name) > 0,
			          SL_E_NOMEM, "listing %s", dir);
		SL_ENSURE(v[count] != NULL, SL_E_NOMEM, "listing %s", dir);
		count++;
	}
	if (count > 0)
		qsort(v, count, sizeof(*v), cmp_str);
	if (lstat(path, &st) == 0) {
		if (count + 1 > cap) {
			char **nv = realloc(v, (count + 1) * sizeof(*v));
			SL_ENSURE(nv != NULL, SL_E_NOMEM, "listing %s", dir);
			v = nv;
		}
		v[count] = strdup(path);
		SL_ENSURE(v[count] != NULL, SL_E_NOMEM, "listing %s", dir);
		count++;
	}
	SL_ENSURE(count > 0, SL_E_IO, "%s: no such audit log", path);
	*out = v;
	*n = count;
	v = NULL;
	count = 0;
	rc = SL_OK;
out:
	if (d != NULL)
		closedir(d);
	sl_audit_files_free(v, count);
	return rc;
}

void sl_audit_files_free(char **files, size_t n)
{
	if (files == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
}
