/* SLDM v1 manifest of a sharded dataset: parse (every byte through
 * sl_reader), authenticate, build, re-key, JSON view.
 * docs/format-sld.md part II is the specification. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seclaunch/buf.h"
#include "seclaunch/sldm.h"
#include "seclaunch/util.h"
#include "sld_internal.h"

static const uint8_t sldm_magic[8] = {0x89, 'S', 'L', 'M', '\r', '\n', 0x1a, '\n'};
static const char info_key_check[] = "seclaunch sldm1 key check";
static const char info_mac_key[] = "seclaunch sldm1 manifest mac";

#define PRE_LEN 14 /* magic, version, body_len */
#define CHECK_LEN 32
#define MAC_LEN 32

struct sl_sldm {
	uint8_t *raw;
	size_t len;
	size_t auth_len; /* bytes [0, auth_len) are under the MAC; the MAC follows */
	sl_aead_id aead;
	uint32_t chunk_size;
	uint8_t salt[SL_SLD_SALT_LEN];
	uint64_t sequence;
	uint64_t created;
	char dataset_id[SL_SLD_DATASET_ID_MAX + 1];
	char kms_url[SL_SLD_KMS_URL_MAX + 1];
	char key_id[SL_SLD_KEY_ID_MAX + 1];
	uint8_t wrapped_dek[SL_SLD_WRAPPED_DEK_MAX];
	size_t wrapped_dek_len;
	uint32_t n_shards;
	uint32_t n_files;
	sl_sldm_shard *shards;
	sl_sldm_file *files;
	char *strings; /* every name and path, NUL-terminated, back to back */
	uint64_t plaintext_len;
	const uint8_t *key_check; /* into raw */
	const uint8_t *mac;       /* into raw */
	uint8_t root[SL_SLDM_ROOT_LEN];
};

#define BAD(...) SL_FAIL(SL_E_INTEGRITY, "manifest damaged or altered: " __VA_ARGS__)

/* True when p starts with the manifest magic. */
static bool sl_sldm_is_manifest(const uint8_t *p, size_t len)
{
	return len >= sizeof(sldm_magic) && memcmp(p, sldm_magic, sizeof(sldm_magic)) == 0;
}

sl_err sl_sldm_path_check(const char *path)
{
	sl_err rc = SL_E_INPUT;
	size_t n = strlen(path), start = 0;

	SL_ENSURE(n > 0 && n <= SL_SLDM_PATH_MAX, SL_E_INPUT,
	          "path \"%.64s\": %zu bytes, a dataset path has 1..%d", path, n, SL_SLDM_PATH_MAX);
	SL_ENSURE(sld_utf8_printable((const uint8_t *)path, n), SL_E_INPUT,
	          "path \"%.64s\": not UTF-8 text, or holds control characters", path);
	SL_ENSURE(path[0] != '/', SL_E_INPUT, "path \"%s\": absolute; dataset paths are relative",
	          path);
	for (size_t i = 0; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		size_t len = i - start;
		SL_ENSURE(len > 0, SL_E_INPUT,
		          "path \"%s\": empty component (\"//\" or a trailing /)", path);
		SL_ENSURE(!(len == 1 && path[start] == '.') &&
		              !(len == 2 && path[start] == '.' && path[start + 1] == '.'),
		          SL_E_INPUT, "path \"%s\": \".\" and \"..\" components are not allowed",
		          path);
		start = i + 1;
	}
	rc = SL_OK;
out:
	return rc;
}

/* A shard name is a plain file name beside the manifest. */
static bool shard_name_ok(const uint8_t *s, size_t n)
{
	if (n == 0 || n > SL_SLDM_SHARD_NAME_MAX)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	if (n == strlen(SL_SLDM_NAME) && memcmp(s, SL_SLDM_NAME, n) == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Copies the rest of a length-prefixed field into the string area. */
static SL_RESULT take_string(sl_reader *lp, char **area, const char **out, const uint8_t **v,
                             size_t *n, const char *field)
{
	sl_err rc = SL_E_FORMAT;

	*n = sl_reader_left(lp);
	SL_GUARD(sl_read_view(lp, *n, v, field));
	memcpy(*area, *v, *n);
	(*area)[*n] = '\0';
	*out = *area;
	*area += *n + 1;
	rc = SL_OK;
out:
	return rc;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two files share a path, and no file's path is a directory of another's
 * ("a" and "a/b"): either would make a restored tree ambiguous. */
static SL_RESULT check_paths_unique(const sl_sldm *m)
{
	sl_err rc = SL_E_NOMEM;
	const char **sorted = NULL;
	char *buf = NULL;

	if (m->n_files == 0)
		return SL_OK;
	sorted = malloc((size_t)m->n_files * sizeof(*sorted));
	buf = malloc(SL_SLDM_PATH_MAX + 1);
	SL_ENSURE(sorted != NULL && buf != NULL, SL_E_NOMEM, "sorting the manifest's paths");
	for (uint32_t i = 0; i < m->n_files; i++)
		sorted[i] = m->files[i].path;
	qsort(sorted, m->n_files, sizeof(*sorted), cmp_path);
	for (uint32_t i = 0; i + 1 < m->n_files; i++) {
		if (strcmp(sorted[i], sorted[i + 1]) == 0)
			BAD("manifest.files: path \"%s\" appears twice", sorted[i]);
	}
	for (uint32_t i = 0; i < m->n_files; i++) {
		const char *p = sorted[i];
		for (const char *s = strchr(p, '/'); s != NULL; s = strchr(s + 1, '/')) {
			const char *key = buf;
			memcpy(buf, p, (size_t)(s - p));
			buf[s - p] = '\0';
			if (bsearch(&key, sorted, m->n_files, sizeof(*sorted), cmp_path) != NULL)
				BAD("manifest.files: \"%s\" is a file and also the directory of "
				    "\"%s\"",
				    buf, p);
		}
	}
	rc = SL_OK;
out:
	free(sorted);
	free(buf);
	return rc;
}

static SL_RESULT parse_shards(sl_reader *r, sl_sldm *m, char **area)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_reader lp;
	const uint8_t *v;
	size_t n;

	for (uint32_t i = 0; i < m->n_shards; i++) {
		sl_sldm_shard *s = &m->shards[i];
		SL_GUARD(sl_read_u32be(r, &s->index, "manifest.shards.index"));
		if (s->index != i)
			BAD("manifest.shards[%u].index: %u, shards are listed in index order", i,
			    s->index);
		SL_GUARD(sl_read_lp8(r, &lp, "manifest.shards.name"));
		SL_GUARD(take_string(&lp, area, &s->name, &v, &n, "manifest.shards.name"));
		if (!shard_name_ok(v, n))
			BAD("manifest.shards[%u].name: not a plain file name ([A-Za-z0-9._-], "
			    "1..255, "
			    "not \".\", \"..\" or \"" SL_SLDM_NAME "\")",
			    i);
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(m->shards[j].name, s->name) == 0)
				BAD("manifest.shards[%u].name: \"%s\" is also shard %u", i, s->name,
				    j);
		}
		SL_GUARD(sl_read_u64be(r, &s->plaintext_len, "manifest.shards.plaintext_len"));
		SL_GUARD(sl_read_u64be(r, &s->file_size, "manifest.shards.file_size"));
		if (s->plaintext_len >= ((uint64_t)1 << 60) ||
		    s->file_size < s->plaintext_len + SLD_MIN_HEADER + SL_AEAD_TAG_LEN)
			BAD("manifest.shards[%u]: plaintext_len %llu and file_size %llu cannot "
			    "belong to one SLD file",
			    i, (unsigned long long)s->plaintext_len,
			    (unsigned long long)s->file_size);
		if (m->plaintext_len + s->plaintext_len < m->plaintext_len)
			BAD("manifest.shards[%u].plaintext_len: the total overflows", i);
		m->plaintext_len += s->plaintext_len;
		SL_GUARD(sl_read_view(r, 32, &s->header_sha256, "manifest.shards.header_sha256"));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_files(sl_reader *r, sl_sldm *m, char **area)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_reader lp;
	const uint8_t *v;
	size_t n;
	uint64_t prev_end = 0, *start = NULL;

	/* a file's bytes start in its shard and may run on into the next ones:
	 * offsets are checked on the dataset's concatenated plaintext */
	start = malloc(((size_t)m->n_shards + 1) * sizeof(*start));
	SL_ENSURE(start != NULL, SL_E_NOMEM, "allocating the manifest's shard offsets");
	start[0] = 0;
	for (uint32_t i = 0; i < m->n_shards; i++)
		start[i + 1] = start[i] + m->shards[i].plaintext_len;
	for (uint32_t i = 0; i < m->n_files; i++) {
		sl_sldm_file *f = &m->files[i];
		SL_GUARD(sl_read_lp16be(r, &lp, SL_SLDM_PATH_MAX, "manifest.files.path"));
		SL_GUARD(take_string(&lp, area, &f->path, &v, &n, "manifest.files.path"));
		if (memchr(v, 0, n) != NULL)
			BAD("manifest.files[%u].path: holds a NUL byte", i);
		if (sl_sldm_path_check(f->path) != SL_OK) {
			rc = sl_err_wrap(SL_E_INTEGRITY,
			                 "manifest damaged or altered: manifest.files[%u].path", i);
			goto out;
		}
		SL_GUARD(sl_read_u32be(r, &f->mode, "manifest.files.mode"));
		if ((f->mode & ~(uint32_t)0777) != 0)
			BAD("manifest.files[%u].mode: 0%o has bits beyond 0777", i, f->mode);
		SL_GUARD(sl_read_u64be(r, &f->size, "manifest.files.size"));
		SL_GUARD(sl_read_u32be(r, &f->shard, "manifest.files.shard"));
		SL_GUARD(sl_read_u64be(r, &f->offset, "manifest.files.offset"));
		if (f->shard >= m->n_shards)
			BAD("manifest.files[%u].shard: %u, the dataset has %u shards", i, f->shard,
			    m->n_shards);
		const sl_sldm_shard *s = &m->shards[f->shard];
		/* a file starts inside its shard (an empty one may sit at its end) */
		if (f->offset > s->plaintext_len || (f->size > 0 && f->offset == s->plaintext_len))
			BAD("manifest.files[%u] (\"%s\").offset: %llu does not start inside shard "
			    "%u "
			    "(%llu bytes)",
			    i, f->path, (unsigned long long)f->offset, f->shard,
			    (unsigned long long)s->plaintext_len);
		uint64_t g = start[f->shard] + f->offset;
		if (f->size > m->plaintext_len - g)
			BAD("manifest.files[%u] (\"%s\"): %llu bytes from shard %u offset %llu run "
			    "past the end of the dataset",
			    i, f->path, (unsigned long long)f->size, f->shard,
			    (unsigned long long)f->offset);
		/* in byte order: no overlaps, nothing listed twice */
		if (g < prev_end)
			BAD("manifest.files[%u] (\"%s\"): not after the previous file's bytes", i,
			    f->path);
		prev_end = g + f->size;
	}
	rc = SL_OK;
out:
	free(start);
	return rc;
}

static SL_RESULT parse_key_ref(sl_reader *r, sl_sldm *m)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_reader lp;
	const uint8_t *v;
	size_t n;

	SL_GUARD(sl_read_lp16be(r, &lp, SL_SLD_KMS_URL_MAX, "manifest.kms_url"));
	n = sl_reader_left(&lp);
	SL_GUARD(sl_read_view(&lp, n, &v, "manifest.kms_url"));
	if (!sld_ascii_printable(v, n))
		BAD("manifest.kms_url: not printable ASCII");
	memcpy(m->kms_url, v, n);
	SL_GUARD(sl_read_lp8(r, &lp, "manifest.key_id"));
	n = sl_reader_left(&lp);
	SL_GUARD(sl_read_view(&lp, n, &v, "manifest.key_id"));
	if (!sld_ascii_printable(v, n))
		BAD("manifest.key_id: not printable ASCII");
	memcpy(m->key_id, v, n);
	SL_GUARD(sl_read_lp16be(r, &lp, SL_SLD_WRAPPED_DEK_MAX, "manifest.wrapped_dek"));
	m->wrapped_dek_len = sl_reader_left(&lp);
	SL_GUARD(sl_read_bytes(&lp, m->wrapped_dek, m->wrapped_dek_len, "manifest.wrapped_dek"));
	bool u = m->kms_url[0] != '\0', k = m->key_id[0] != '\0', w = m->wrapped_dek_len > 0;
	if (!((u && k && w) || (!u && !k && !w)))
		BAD("manifest.key_reference: kms_url, key_id and wrapped_dek must be all present "
		    "or all empty");
	SL_GUARD(sl_reader_expect_end(r));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_body(sl_reader *b, sl_sldm *m, size_t body_len)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t aead, flags;
	sl_reader lp;
	const uint8_t *id;
	size_t id_len;
	char *area;

	SL_GUARD(sl_read_u8(b, &aead, "manifest.aead"));
	if (sl_aead_name((sl_aead_id)aead) == NULL)
		BAD("manifest.aead: unknown AEAD id %u", aead);
	m->aead = (sl_aead_id)aead;
	SL_GUARD(sl_read_u8(b, &flags, "manifest.flags"));
	if (flags != 0)
		BAD("manifest.flags: reserved value 0x%02x, must be 0", flags);
	SL_GUARD(sl_read_zeros(b, 2, "manifest.reserved"));
	SL_GUARD(sl_read_u32be(b, &m->chunk_size, "manifest.chunk_size"));
	if (m->chunk_size < SL_SLD_CHUNK_MIN || m->chunk_size > SL_SLD_CHUNK_MAX ||
	    (m->chunk_size & (m->chunk_size - 1)) != 0)
		BAD("manifest.chunk_size: %u is not a power of two in 64 KiB..64 MiB",
		    m->chunk_size);
	SL_GUARD(sl_read_bytes(b, m->salt, sizeof(m->salt), "manifest.salt"));
	SL_GUARD(sl_read_u64be(b, &m->sequence, "manifest.sequence"));
	SL_GUARD(sl_read_u64be(b, &m->created, "manifest.created"));
	SL_GUARD(sl_read_lp8(b, &lp, "manifest.dataset_id"));
	id_len = sl_reader_left(&lp);
	SL_GUARD(sl_read_view(&lp, id_len, &id, "manifest.dataset_id"));
	if (id_len == 0 || !sld_utf8_printable(id, id_len))
		BAD("manifest.dataset_id: empty, not UTF-8 text, or holds control characters");
	memcpy(m->dataset_id, id, id_len);
	SL_GUARD(sl_read_u32be(b, &m->n_shards, "manifest.shard_count"));
	if (m->n_shards == 0 || m->n_shards > SL_SLDM_SHARDS_MAX)
		BAD("manifest.shard_count: %u is outside 1..%u", m->n_shards, SL_SLDM_SHARDS_MAX);
	SL_GUARD(sl_read_u32be(b, &m->n_files, "manifest.file_count"));
	if (m->n_files > SL_SLDM_FILES_MAX)
		BAD("manifest.file_count: %u exceeds %u", m->n_files, SL_SLDM_FILES_MAX);
	/* each shard entry takes at least 54 bytes and each file entry 27: a
	 * count the body cannot hold is refused before anything is allocated */
	if ((uint64_t)m->n_shards * 54 + (uint64_t)m->n_files * 27 > sl_reader_left(b))
		BAD("manifest: %u shards and %u files cannot fit in %zu bytes", m->n_shards,
		    m->n_files, sl_reader_left(b));
	m->shards = calloc(m->n_shards, sizeof(*m->shards));
	m->files = calloc(m->n_files + 1, sizeof(*m->files));
	m->strings = malloc(body_len + (size_t)m->n_shards + m->n_files + 1);
	SL_ENSURE(m->shards != NULL && m->files != NULL && m->strings != NULL, SL_E_NOMEM,
	          "allocating the manifest's tables");
	area = m->strings;
	SL_GUARD(parse_shards(b, m, &area));
	SL_GUARD(parse_files(b, m, &area));
	SL_GUARD(sl_reader_expect_end(b));
	SL_GUARD(check_paths_unique(m));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sldm_parse(const uint8_t *p, size_t len, sl_sldm **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_sldm *m = NULL;
	sl_reader r, body;
	uint16_t version;
	uint32_t body_len;

	*out = NULL;
	if (!sl_sldm_is_manifest(p, len))
		SL_FAIL(SL_E_FORMAT, "not an SLD manifest (manifest.magic does not match)");
	SL_ENSURE(len <= SL_SLDM_MAX, SL_E_TOO_LARGE, "manifest: %zu bytes exceed the %zu limit",
	          len, SL_SLDM_MAX);
	sl_reader_init(&r, p, len, "SLD manifest");
	SL_GUARD(sl_read_skip(&r, sizeof(sldm_magic), "manifest.magic"));
	if (sl_read_u16be(&r, &version, "manifest.version") != SL_OK ||
	    sl_read_u32be(&r, &body_len, "manifest.body_len") != SL_OK)
		SL_FAIL(SL_E_TRUNCATED, "truncated: the file ends inside the manifest (%zu bytes)",
		        len);
	if (version != SL_SLDM_VERSION)
		SL_FAIL(SL_E_VERSION,
		        "manifest.version: manifest version %u is not supported (this build reads "
		        "version %u)",
		        version, SL_SLDM_VERSION);
	if ((uint64_t)PRE_LEN + body_len + CHECK_LEN + MAC_LEN > len)
		SL_FAIL(SL_E_TRUNCATED,
		        "truncated: manifest.body_len says %u bytes, the manifest has only %zu",
		        body_len, len);
	m = calloc(1, sizeof(*m));
	SL_ENSURE(m != NULL, SL_E_NOMEM, "allocating a manifest");
	m->raw = malloc(len);
	SL_ENSURE(m->raw != NULL, SL_E_NOMEM, "allocating a manifest");
	memcpy(m->raw, p, len);
	m->len = len;
	m->auth_len = PRE_LEN + (size_t)body_len + CHECK_LEN;
	sl_reader_init(&r, m->raw, len, "SLD manifest");
	SL_GUARD(sl_read_skip(&r, PRE_LEN, "manifest"));
	SL_GUARD(sl_read_sub(&r, body_len, &body, "manifest.body"));
	rc = parse_body(&body, m, body_len);
	if (rc == SL_OK) {
		rc = sl_read_view(&r, CHECK_LEN, &m->key_check, "manifest.key_check");
		if (rc == SL_OK)
			rc = sl_read_view(&r, MAC_LEN, &m->mac, "manifest.mac");
		if (rc == SL_OK)
			rc = parse_key_ref(&r, m);
	}
	/* a short field after a valid magic and version is damage */
	if (rc == SL_E_FORMAT)
		rc = SL_E_INTEGRITY;
	if (rc != SL_OK)
		goto out;
	sl_sha256(m->raw, m->auth_len + MAC_LEN, m->root);
	*out = m;
	m = NULL;
	rc = SL_OK;
out:
	sl_sldm_free(m);
	return rc;
}

sl_err sl_sldm_read_file(const char *path, sl_sldm **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *buf = NULL;
	size_t len = 0;

	SL_GUARD(sl_file_read(path, SL_SLDM_MAX, &buf, &len));
	rc = sl_sldm_parse(buf, len, out);
	if (rc != SL_OK)
		sl_err_wrap(rc, "%s", path);
out:
	free(buf);
	return rc;
}

void sl_sldm_free(sl_sldm *m)
{
	if (m == NULL)
		return;
	free(m->raw);
	free(m->shards);
	free(m->files);
	free(m->strings);
	free(m);
}

static SL_RESULT derive(sl_secret *dek, const uint8_t *salt, const char *info, uint8_t *out)
{
	return sl_hkdf_sha256(sl_secret_data(dek), sl_secret_len(dek), salt, SL_SLD_SALT_LEN,
	                      (const uint8_t *)info, strlen(info), out, 32);
}

/* key check and MAC key of a manifest salt; mac_key is secret memory */
static SL_RESULT manifest_keys(sl_secret *dek, const uint8_t *salt, uint8_t check[static 32],
                               sl_secret **mac_key)
{
	sl_err rc = SL_E_INPUT;

	*mac_key = NULL;
	SL_ENSURE(sl_secret_len(dek) == SL_SLD_DEK_LEN, SL_E_INPUT,
	          "the data key is %zu bytes; dataset keys are exactly %d bytes",
	          sl_secret_len(dek), SL_SLD_DEK_LEN);
	SL_GUARD(sl_secret_new(32, mac_key));
	SL_GUARD(derive(dek, salt, info_mac_key, sl_secret_data(*mac_key)));
	SL_GUARD(derive(dek, salt, info_key_check, check));
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		sl_secret_free(*mac_key);
		*mac_key = NULL;
	}
	return rc;
}

sl_err sl_sldm_authenticate(const sl_sldm *m, sl_secret *dek)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_secret *mac_key = NULL;
	uint8_t check[32], mac[32];

	SL_GUARD(manifest_keys(dek, m->salt, check, &mac_key));
	SL_ENSURE(sl_ct_eq(check, m->key_check, 32), SL_E_WRONG_KEY,
	          "manifest of dataset \"%s\": the key does not match manifest.key_check (wrong "
	          "key, or the salt or key check was altered)",
	          m->dataset_id);
	SL_GUARD(sl_hmac_sha256(sl_secret_data(mac_key), 32, m->raw, m->auth_len, mac));
	SL_ENSURE(sl_ct_eq(mac, m->mac, 32), SL_E_INTEGRITY,
	          "manifest of dataset \"%s\": authentication failed (manifest.mac): the "
	          "manifest was altered",
	          m->dataset_id);
	rc = SL_OK;
out:
	sl_secret_free(mac_key);
	sl_wipe(check, sizeof(check));
	return rc;
}

const char *sl_sldm_dataset_id(const sl_sldm *m)
{
	return m->dataset_id;
}
const char *sl_sldm_kms_url(const sl_sldm *m)
{
	return m->kms_url;
}
const char *sl_sldm_key_id(const sl_sldm *m)
{
	return m->key_id;
}
const uint8_t *sl_sldm_wrapped_dek(const sl_sldm *m, size_t *len)
{
	*len = m->wrapped_dek_len;
	return m->wrapped_dek;
}
sl_aead_id sl_sldm_aead(const sl_sldm *m)
{
	return m->aead;
}
uint32_t sl_sldm_chunk_size(const sl_sldm *m)
{
	return m->chunk_size;
}
uint64_t sl_sldm_sequence(const sl_sldm *m)
{
	return m->sequence;
}
uint32_t sl_sldm_shard_count(const sl_sldm *m)
{
	return m->n_shards;
}
uint32_t sl_sldm_file_count(const sl_sldm *m)
{
	return m->n_files;
}
uint64_t sl_sldm_plaintext_len(const sl_sldm *m)
{
	return m->plaintext_len;
}
sl_sldm_shard sl_sldm_shard_at(const sl_sldm *m, uint32_t i)
{
	return m->shards[i];
}
sl_sldm_file sl_sldm_file_at(const sl_sldm *m, uint32_t i)
{
	return m->files[i];
}
void sl_sldm_root(const sl_sldm *m, uint8_t out[static SL_SLDM_ROOT_LEN])
{
	memcpy(out, m->root, SL_SLDM_ROOT_LEN);
}

sl_err sl_sldm_find_file(const sl_sldm *m, const char *path, uint32_t *idx)
{
	for (uint32_t i = 0; i < m->n_files; i++) {
		if (strcmp(m->files[i].path, path) == 0) {
			*idx = i;
			return SL_OK;
		}
	}
	return sl_err_set(SL_E_INPUT, "dataset \"%s\" has no file \"%s\"", m->dataset_id, path);
}

sl_err sl_sldm_check_shard(const sl_sldm *m, uint32_t i, const sl_sld_header *h, uint64_t file_size)
{
	sl_err rc = SL_E_INTEGRITY;
	const sl_sldm_shard *s;
	uint8_t d[32];

	SL_ENSURE(i < m->n_shards, SL_E_INTEGRITY, "shard %u: the manifest lists %u shards", i,
	          m->n_shards);
	s = &m->shards[i];
	sl_sld_header_digest(h, d);
	SL_ENSURE(sl_ct_eq(d, s->header_sha256, 32), SL_E_INTEGRITY,
	          "shard %u (%s): its SLD header is not the one the manifest lists (a shard of "
	          "another dataset, another position or an older version)",
	          i, s->name);
	SL_ENSURE(
	    strcmp(sl_sld_header_dataset_id(h), m->dataset_id) == 0 &&
	        sl_sld_header_aead(h) == m->aead && sl_sld_header_chunk_size(h) == m->chunk_size &&
	        sl_sld_header_plaintext_len(h) == s->plaintext_len &&
	        sl_sld_header_key_id(h)[0] == '\0',
	    SL_E_INTEGRITY, "shard %u (%s): header fields differ from the manifest's", i, s->name);
	SL_ENSURE(file_size == s->file_size && file_size == sl_sld_header_file_size(h),
	          SL_E_INTEGRITY, "shard %u (%s): %llu bytes, the manifest says %llu", i, s->name,
	          (unsigned long long)file_size, (unsigned long long)s->file_size);
	rc = SL_OK;
out:
	return rc;
}

static json_t *hex_json(const uint8_t *p, size_t n)
{
	char buf[2 * 64 + 1];
	sl_hex_encode(p, n, buf);
	return json_string(buf);
}

json_t *sl_sldm_json(const sl_sldm *m)
{
	json_t *o = NULL, *shards = json_array(), *files = json_array(), *key = NULL;
	char *b64 = NULL;

	if (shards == NULL || files == NULL)
		goto fail;
	for (uint32_t i = 0; i < m->n_shards; i++) {
		const sl_sldm_shard *s = &m->shards[i];
		if (json_array_append_new(
		        shards,
		        json_pack("{s:I,s:s,s:I,s:I,s:o}", "index", (json_int_t)s->index, "name",
		                  s->name, "plaintext_len", (json_int_t)s->plaintext_len,
		                  "file_size", (json_int_t)s->file_size, "header_sha256",
		                  hex_json(s->header_sha256, 32))) != 0)
			goto fail;
	}
	for (uint32_t i = 0; i < m->n_files; i++) {
		const sl_sldm_file *f = &m->files[i];
		char mode[8];
		snprintf(mode, sizeof(mode), "0%03o", f->mode);
		if (json_array_append_new(
		        files, json_pack("{s:s,s:s,s:I,s:I,s:I}", "path", f->path, "mode", mode,
		                         "size", (json_int_t)f->size, "shard", (json_int_t)f->shard,
		                         "offset", (json_int_t)f->offset)) != 0)
			goto fail;
	}
	if (m->key_id[0] == '\0') {
		key = json_pack("{s:s}", "source", "key-file");
	} else {
		if (sl_b64_encode(m->wrapped_dek, m->wrapped_dek_len, &b64) != SL_OK)
			goto fail;
		key = json_pack("{s:s,s:s,s:s,s:s}", "source", "kms", "kms_url", m->kms_url,
		                "key_id", m->key_id, "wrapped_dek", b64);
	}
	if (key == NULL)
		goto fail;
	o = json_pack("{s:s,s:i,s:s,s:s,s:I,s:I,s:I,s:I,s:o,s:O,s:O,s:O,s:b}", "format", "SLDM",
	              "version", SL_SLDM_VERSION, "dataset_id", m->dataset_id, "aead",
	              sl_aead_name(m->aead), "chunk_size", (json_int_t)m->chunk_size, "sequence",
	              (json_int_t)m->sequence, "created", (json_int_t)m->created, "plaintext_len",
	              (json_int_t)m->plaintext_len, "root", hex_json(m->root, 32), "key", key,
	              "shards", shards, "files", files, "authenticated", 0);
fail:
	json_decref(key);
	json_decref(shards);
	json_decref(files);
	free(b64);
	return o;
}

/* ---- writing ---------------------------------------------------------- */

struct sl_sldm_builder {
	char dataset_id[SL_SLD_DATASET_ID_MAX + 1];
	sl_aead_id aead;
	uint32_t chunk_size;
	uint64_t sequence;
	uint32_t n_shards, n_files;
	sl_writer shards, files;
};

sl_err sl_sldm_builder_new(const char *dataset_id, sl_aead_id aead, uint32_t chunk_size,
                           uint64_t sequence, sl_sldm_builder **out)
{
	sl_err rc = SL_E_INPUT;
	sl_sldm_builder *b = NULL;
	size_t n = strlen(dataset_id);

	SL_ENSURE(n > 0 && n <= SL_SLD_DATASET_ID_MAX &&
	              sld_utf8_printable((const uint8_t *)dataset_id, n),
	          SL_E_INPUT, "dataset id: 1..%d bytes of UTF-8 text without control characters",
	          SL_SLD_DATASET_ID_MAX);
	b = calloc(1, sizeof(*b));
	SL_ENSURE(b != NULL, SL_E_NOMEM, "allocating a manifest builder");
	memcpy(b->dataset_id, dataset_id, n);
	b->aead = aead == SL_AEAD_NONE ? SL_AEAD_AES_256_GCM : aead;
	b->chunk_size = chunk_size == 0 ? SL_SLD_CHUNK_DEFAULT : chunk_size;
	b->sequence = sequence;
	sl_writer_init(&b->shards, SL_SLDM_MAX);
	sl_writer_init(&b->files, SL_SLDM_MAX);
	*out = b;
	b = NULL;
	rc = SL_OK;
out:
	free(b);
	return rc;
}

void sl_sldm_builder_free(sl_sldm_builder *b)
{
	if (b == NULL)
		return;
	sl_writer_free(&b->shards);
	sl_writer_free(&b->files);
	free(b);
}

sl_err sl_sldm_builder_add_shard(sl_sldm_builder *b, const char *name, const sl_sld_header *h,
                                 uint64_t file_size)
{
	sl_err rc = SL_E_INPUT;
	size_t n = strlen(name);
	uint8_t d[32];

	SL_ENSURE(shard_name_ok((const uint8_t *)name, n), SL_E_INPUT,
	          "shard name \"%s\": not a plain file name", name);
	SL_ENSURE(b->n_shards < SL_SLDM_SHARDS_MAX, SL_E_TOO_LARGE,
	          "dataset \"%s\": more than %u shards", b->dataset_id, SL_SLDM_SHARDS_MAX);
	SL_ENSURE(
	    strcmp(sl_sld_header_dataset_id(h), b->dataset_id) == 0 &&
	        sl_sld_header_aead(h) == b->aead && sl_sld_header_chunk_size(h) == b->chunk_size &&
	        sl_sld_header_key_id(h)[0] == '\0',
	    SL_E_INTERNAL, "shard %s: its header does not match the dataset's parameters", name);
	sl_sld_header_digest(h, d);
	SL_GUARD(sl_write_u32be(&b->shards, b->n_shards));
	SL_GUARD(sl_write_u8(&b->shards, (uint8_t)n));
	SL_GUARD(sl_write_bytes(&b->shards, name, n));
	SL_GUARD(sl_write_u64be(&b->shards, sl_sld_header_plaintext_len(h)));
	SL_GUARD(sl_write_u64be(&b->shards, file_size));
	SL_GUARD(sl_write_bytes(&b->shards, d, sizeof(d)));
	b->n_shards++;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sldm_builder_add_file(sl_sldm_builder *b, const char *path, uint32_t mode, uint64_t size,
                                uint32_t shard, uint64_t offset)
{
	sl_err rc = SL_E_INPUT;

	SL_GUARD(sl_sldm_path_check(path));
	SL_ENSURE(b->n_files < SL_SLDM_FILES_MAX, SL_E_TOO_LARGE,
	          "dataset \"%s\": more than %u files", b->dataset_id, SL_SLDM_FILES_MAX);
	SL_GUARD(sl_write_u16be(&b->files, (uint16_t)strlen(path)));
	SL_GUARD(sl_write_bytes(&b->files, path, strlen(path)));
	SL_GUARD(sl_write_u32be(&b->files, mode & 0777));
	SL_GUARD(sl_write_u64be(&b->files, size));
	SL_GUARD(sl_write_u32be(&b->files, shard));
	SL_GUARD(sl_write_u64be(&b->files, offset));
	b->n_files++;
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT write_key_ref(sl_writer *w, const char *kms_url, const char *key_id,
                               const uint8_t *wrapped, size_t wrapped_len)
{
	sl_err rc = SL_E_INPUT;
	size_t ul = kms_url != NULL ? strlen(kms_url) : 0, kl = key_id != NULL ? strlen(key_id) : 0;

	SL_ENSURE(ul <= SL_SLD_KMS_URL_MAX && sld_ascii_printable((const uint8_t *)kms_url, ul),
	          SL_E_INPUT, "KMS URL: at most %d printable ASCII characters", SL_SLD_KMS_URL_MAX);
	SL_ENSURE(kl <= SL_SLD_KEY_ID_MAX && sld_ascii_printable((const uint8_t *)key_id, kl),
	          SL_E_INPUT, "key id: at most %d printable ASCII characters", SL_SLD_KEY_ID_MAX);
	SL_ENSURE(wrapped_len <= SL_SLD_WRAPPED_DEK_MAX, SL_E_INPUT,
	          "wrapped DEK: %zu bytes exceed %d", wrapped_len, SL_SLD_WRAPPED_DEK_MAX);
	SL_ENSURE((ul && kl && wrapped_len) || (!ul && !kl && !wrapped_len), SL_E_INPUT,
	          "key reference: KMS URL, key id and wrapped DEK go together");
	SL_GUARD(sl_write_u16be(w, (uint16_t)ul));
	SL_GUARD(sl_write_bytes(w, kms_url, ul));
	SL_GUARD(sl_write_u8(w, (uint8_t)kl));
	SL_GUARD(sl_write_bytes(w, key_id, kl));
	SL_GUARD(sl_write_u16be(w, (uint16_t)wrapped_len));
	SL_GUARD(sl_write_bytes(w, wrapped, wrapped_len));
	rc = SL_OK;
out:
	return rc;
}

/* Hands the writer's bytes to the caller after parsing them back. */
static SL_RESULT hand_over(sl_writer *w, uint8_t **out, size_t *out_len)
{
	sl_err rc = SL_E_INTERNAL;
	sl_sldm *check = NULL;

	rc = sl_sldm_parse(w->data, w->len, &check);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc == SL_E_TOO_LARGE ? rc : SL_E_INPUT,
		                 "the manifest built is refused");
		goto out;
	}
	*out = w->data;
	*out_len = w->len;
	w->data = NULL;
	w->len = w->cap = 0;
	rc = SL_OK;
out:
	sl_sldm_free(check);
	return rc;
}

sl_err sl_sldm_builder_finish(sl_sldm_builder *b, sl_secret *dek, const char *kms_url,
                              const char *key_id, const uint8_t *wrapped_dek,
                              size_t wrapped_dek_len, uint8_t **out, size_t *out_len)
{
	sl_err rc = SL_E_INPUT;
	sl_writer w;
	sl_secret *mac_key = NULL;
	uint8_t salt[SL_SLD_SALT_LEN], check[32], mac[32];
	size_t id_len = strlen(b->dataset_id);
	size_t body_len = 1 + 1 + 2 + 4 + sizeof(salt) + 8 + 8 + 1 + id_len + 4 + 4 +
	                  b->shards.len + b->files.len;

	sl_writer_init(&w, SL_SLDM_MAX);
	SL_ENSURE(b->n_shards > 0, SL_E_INPUT, "dataset \"%s\": no shard", b->dataset_id);
	SL_ENSURE(body_len <= UINT32_MAX, SL_E_TOO_LARGE, "dataset \"%s\": manifest too large",
	          b->dataset_id);
	sl_random(salt, sizeof(salt));
	SL_GUARD(manifest_keys(dek, salt, check, &mac_key));
	SL_GUARD(sl_write_bytes(&w, sldm_magic, sizeof(sldm_magic)));
	SL_GUARD(sl_write_u16be(&w, SL_SLDM_VERSION));
	SL_GUARD(sl_write_u32be(&w, (uint32_t)body_len));
	SL_GUARD(sl_write_u8(&w, (uint8_t)b->aead));
	SL_GUARD(sl_write_zeros(&w, 3));
	SL_GUARD(sl_write_u32be(&w, b->chunk_size));
	SL_GUARD(sl_write_bytes(&w, salt, sizeof(salt)));
	SL_GUARD(sl_write_u64be(&w, b->sequence));
	SL_GUARD(sl_write_u64be(&w, (uint64_t)time(NULL)));
	SL_GUARD(sl_write_u8(&w, (uint8_t)id_len));
	SL_GUARD(sl_write_bytes(&w, b->dataset_id, id_len));
	SL_GUARD(sl_write_u32be(&w, b->n_shards));
	SL_GUARD(sl_write_u32be(&w, b->n_files));
	SL_GUARD(sl_write_bytes(&w, b->shards.data, b->shards.len));
	SL_GUARD(sl_write_bytes(&w, b->files.data, b->files.len));
	SL_GUARD(sl_write_bytes(&w, check, sizeof(check)));
	SL_GUARD(sl_hmac_sha256(sl_secret_data(mac_key), 32, w.data, w.len, mac));
	SL_GUARD(sl_write_bytes(&w, mac, sizeof(mac)));
	SL_GUARD(write_key_ref(&w, kms_url, key_id, wrapped_dek, wrapped_dek_len));
	SL_GUARD(hand_over(&w, out, out_len));
	rc = SL_OK;
out:
	sl_secret_free(mac_key);
	sl_wipe(check, sizeof(check));
	sl_writer_free(&w);
	return rc;
}

sl_err sl_sldm_rekey(const sl_sldm *m, const char *kms_url, const char *key_id,
                     const uint8_t *wrapped_dek, size_t wrapped_dek_len, uint8_t **out,
                     size_t *out_len)
{
	sl_err rc = SL_E_INPUT;
	sl_writer w;

	sl_writer_init(&w, SL_SLDM_MAX);
	SL_GUARD(sl_write_bytes(&w, m->raw, m->auth_len + MAC_LEN));
	SL_GUARD(write_key_ref(&w, kms_url, key_id, wrapped_dek, wrapped_dek_len));
	SL_GUARD(hand_over(&w, out, out_len));
	rc = SL_OK;
out:
	sl_writer_free(&w);
	return rc;
}
