/* SLD v1 header: parse (every byte through sl_reader), build, key
 * derivation, chunk nonce/AAD, and the JSON view for `inspect`.
 * docs/format-sld.md is the specification. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seclaunch/buf.h"
#include "seclaunch/util.h"
#include "sld_internal.h"

const uint8_t sld_magic[SL_SLD_MAGIC_LEN] = {0x89, 'S', 'L', 'D', '\r', '\n', 0x1a, '\n'};

static const char info_file_key[] = "seclaunch sld1";
static const char info_key_check[] = "seclaunch sld1 key check";
static const char info_mac_key[] = "seclaunch sld1 header mac";

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF) without C0/C1 control characters: the id ends up in JSON,
 * audit records and terminal messages. */
bool sld_utf8_printable(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp, min;
		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return false;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i - 1 < k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
			return false;
		i += k + 1;
	}
	return true;
}

bool sld_ascii_printable(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	}
	return true;
}

uint64_t sld_chunk_count(uint64_t plaintext_len, uint32_t chunk_size)
{
	if (plaintext_len == 0)
		return 1;
	return (plaintext_len + chunk_size - 1) / chunk_size;
}

static bool chunk_size_ok(uint32_t cs)
{
	return cs >= SL_SLD_CHUNK_MIN && cs <= SL_SLD_CHUNK_MAX && (cs & (cs - 1)) == 0;
}

/* "SLD header damaged or altered" is the reader's name for messages. */
#define BAD(...) SL_FAIL(SL_E_INTEGRITY, "SLD header damaged or altered: " __VA_ARGS__)

static SL_RESULT parse_string(sl_reader *lp, char *out, bool utf8, const char *field)
{
	sl_err rc = SL_E_INTEGRITY;
	size_t n = sl_reader_left(lp);
	const uint8_t *v;

	SL_GUARD(sl_read_view(lp, n, &v, field));
	if (utf8 ? !sld_utf8_printable(v, n) : !sld_ascii_printable(v, n))
		BAD("%s: %s", field,
		    utf8 ? "not UTF-8 text (or holds control characters)" : "not printable ASCII");
	memcpy(out, v, n);
	out[n] = '\0';
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_extensions(sl_reader *r, sl_sld_header *h)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_reader area, val;

	SL_GUARD(sl_read_lp32be(r, &area, SL_SLD_HEADER_MAX, "header.extensions_len"));
	/* each TLV takes at least 6 bytes */
	h->ext = calloc(sl_reader_left(&area) / 6 + 1, sizeof(*h->ext));
	SL_ENSURE(h->ext != NULL, SL_E_NOMEM, "allocating the extension table");
	while (sl_reader_left(&area) > 0) {
		struct sld_ext *e = &h->ext[h->n_ext];
		SL_GUARD(sl_read_u16be(&area, &e->type, "header.extensions.type"));
		SL_GUARD(sl_read_u8(&area, &e->flags, "header.extensions.flags"));
		SL_GUARD(sl_read_u8(&area, &e->version, "header.extensions.version"));
		SL_GUARD(sl_read_lp16be(&area, &val, 0xffff, "header.extensions.length"));
		e->len = (uint16_t)sl_reader_left(&val);
		if ((e->flags & 0xfe) != 0)
			BAD("header.extensions: extension 0x%04x has reserved flag bits 0x%02x",
			    e->type, e->flags);
		for (size_t j = 0; j < h->n_ext; j++) {
			if (h->ext[j].type == e->type)
				BAD("header.extensions: extension 0x%04x appears twice", e->type);
		}
		/* v1 defines no extension types: every one is unknown here */
		if (e->flags & 1)
			SL_FAIL(SL_E_VERSION,
			        "SLD header: critical extension 0x%04x (version %u) is not "
			        "understood by this build; a newer seclaunch is needed",
			        e->type, e->version);
		h->n_ext++;
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_body(sl_reader *r, sl_sld_header *h)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t aead, flags;
	sl_reader lp;

	SL_GUARD(sl_read_u8(r, &aead, "header.aead"));
	if (sl_aead_name((sl_aead_id)aead) == NULL)
		BAD("header.aead: unknown AEAD id %u", aead);
	h->aead = (sl_aead_id)aead;
	SL_GUARD(sl_read_u8(r, &flags, "header.flags"));
	if (flags != 0)
		BAD("header.flags: reserved value 0x%02x, must be 0", flags);
	SL_GUARD(sl_read_u32be(r, &h->chunk_size, "header.chunk_size"));
	if (!chunk_size_ok(h->chunk_size))
		BAD("header.chunk_size: %u is not a power of two in 64 KiB..64 MiB", h->chunk_size);
	SL_GUARD(sl_read_u64be(r, &h->plaintext_len, "header.plaintext_len"));
	if (h->plaintext_len >= SLD_PLAINTEXT_MAX)
		BAD("header.plaintext_len: %llu exceeds 2^60",
		    (unsigned long long)h->plaintext_len);
	SL_GUARD(sl_read_u64be(r, &h->chunk_count, "header.chunk_count"));
	if (h->chunk_count != sld_chunk_count(h->plaintext_len, h->chunk_size))
		BAD("header.chunk_count: %llu, but plaintext_len %llu in chunks of %u makes %llu",
		    (unsigned long long)h->chunk_count, (unsigned long long)h->plaintext_len,
		    h->chunk_size,
		    (unsigned long long)sld_chunk_count(h->plaintext_len, h->chunk_size));
	SL_GUARD(sl_read_bytes(r, h->salt, sizeof(h->salt), "header.salt"));
	SL_GUARD(sl_read_lp8(r, &lp, "header.dataset_id"));
	if (sl_reader_left(&lp) == 0)
		BAD("header.dataset_id: empty");
	SL_GUARD(parse_string(&lp, h->dataset_id, true, "header.dataset_id"));
	SL_GUARD(sl_read_lp16be(r, &lp, SL_SLD_KMS_URL_MAX, "header.kms_url"));
	SL_GUARD(parse_string(&lp, h->kms_url, false, "header.kms_url"));
	SL_GUARD(sl_read_lp8(r, &lp, "header.key_id"));
	SL_GUARD(parse_string(&lp, h->key_id, false, "header.key_id"));
	SL_GUARD(sl_read_lp16be(r, &lp, SL_SLD_WRAPPED_DEK_MAX, "header.wrapped_dek"));
	h->wrapped_dek_len = sl_reader_left(&lp);
	SL_GUARD(sl_read_bytes(&lp, h->wrapped_dek, h->wrapped_dek_len, "header.wrapped_dek"));
	{
		bool u = h->kms_url[0] != '\0', k = h->key_id[0] != '\0',
		     w = h->wrapped_dek_len > 0;
		if (!((u && k && w) || (!u && !k && !w)))
			BAD("header.key_reference: kms_url, key_id and wrapped_dek must be all "
			    "present or all empty");
	}
	SL_GUARD(parse_extensions(r, h));
	SL_GUARD(sl_read_bytes(r, h->key_check, sizeof(h->key_check), "header.key_check"));
	SL_GUARD(sl_read_bytes(r, h->mac, sizeof(h->mac), "header.header_mac"));
	if (sl_reader_left(r) != 0)
		BAD("header.header_len: %zu bytes left over after header.header_mac",
		    sl_reader_left(r));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sld_header_parse(const uint8_t *p, size_t len, sl_sld_header **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_sld_header *h = NULL;
	sl_reader r, body;
	const uint8_t *magic;
	uint16_t version;
	uint32_t hlen;

	sl_reader_init(&r, p, len, "SLD header damaged or altered");
	if (sl_reader_left(&r) < SL_SLD_MAGIC_LEN ||
	    sl_read_view(&r, SL_SLD_MAGIC_LEN, &magic, "header.magic") != SL_OK ||
	    memcmp(magic, sld_magic, SL_SLD_MAGIC_LEN) != 0)
		SL_FAIL(SL_E_FORMAT, "not an SLD file (header.magic does not match)");
	if (sl_read_u16be(&r, &version, "header.version") != SL_OK ||
	    sl_read_u32be(&r, &hlen, "header.header_len") != SL_OK)
		SL_FAIL(SL_E_TRUNCATED,
		        "truncated: the file ends inside the SLD header (%zu bytes)", len);
	if (version != SL_SLD_VERSION)
		SL_FAIL(SL_E_VERSION,
		        "header.version: SLD version %u is not supported (this build "
		        "reads version %u)",
		        version, SL_SLD_VERSION);
	if (hlen < SLD_MIN_HEADER || hlen > SL_SLD_HEADER_MAX)
		BAD("header.header_len: %u is outside %u..%zu", hlen, SLD_MIN_HEADER,
		    SL_SLD_HEADER_MAX);
	if (hlen > len)
		SL_FAIL(SL_E_TRUNCATED,
		        "truncated: header.header_len says %u bytes, the file has only %zu", hlen,
		        len);
	h = calloc(1, sizeof(*h));
	SL_ENSURE(h != NULL, SL_E_NOMEM, "allocating an SLD header");
	h->raw = malloc(hlen);
	SL_ENSURE(h->raw != NULL, SL_E_NOMEM, "allocating an SLD header");
	memcpy(h->raw, p, hlen);
	h->len = hlen;
	h->version = version;
	sl_reader_init(&body, h->raw, hlen, "SLD header damaged or altered");
	SL_GUARD(sl_read_skip(&body, SL_SLD_MAGIC_LEN + 2 + 4, "header"));
	rc = parse_body(&body, h);
	/* a short field in a v1 header is damage, not a foreign format */
	if (rc == SL_E_FORMAT)
		rc = SL_E_INTEGRITY;
	if (rc != SL_OK)
		goto out;
	sl_sha256(h->raw, h->len, h->digest);
	*out = h;
	h = NULL;
	rc = SL_OK;
out:
	sl_sld_header_free(h);
	return rc;
}

sl_err sl_sld_header_read_fd(int fd, const char *name, sl_sld_header **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *buf = malloc(SL_SLD_HEADER_MAX);
	size_t got = 0;

	SL_ENSURE(buf != NULL, SL_E_NOMEM, "allocating a header buffer");
	while (got < SL_SLD_HEADER_MAX) {
		ssize_t n = pread(fd, buf + got, SL_SLD_HEADER_MAX - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		SL_ENSURE(n >= 0, SL_E_IO, "%s: read: %s", name, strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	rc = sl_sld_header_parse(buf, got, out);
	if (rc != SL_OK)
		sl_err_wrap(rc, "%s", name);
out:
	free(buf);
	return rc;
}

sl_err sl_sld_header_read_file(const char *path, sl_sld_header **out)
{
	sl_err rc = SL_E_IO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot open: %s", path, strerror(errno));
	SL_GUARD(sl_sld_header_read_fd(fd, path, out));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

void sl_sld_header_free(sl_sld_header *h)
{
	if (h == NULL)
		return;
	free(h->raw);
	free(h->ext);
	free(h);
}

size_t sl_sld_header_len(const sl_sld_header *h)
{
	return h->len;
}
sl_aead_id sl_sld_header_aead(const sl_sld_header *h)
{
	return h->aead;
}
uint32_t sl_sld_header_chunk_size(const sl_sld_header *h)
{
	return h->chunk_size;
}
uint64_t sl_sld_header_plaintext_len(const sl_sld_header *h)
{
	return h->plaintext_len;
}
uint64_t sl_sld_header_chunk_count(const sl_sld_header *h)
{
	return h->chunk_count;
}
const char *sl_sld_header_dataset_id(const sl_sld_header *h)
{
	return h->dataset_id;
}
const char *sl_sld_header_kms_url(const sl_sld_header *h)
{
	return h->kms_url;
}
const char *sl_sld_header_key_id(const sl_sld_header *h)
{
	return h->key_id;
}
const uint8_t *sl_sld_header_wrapped_dek(const sl_sld_header *h, size_t *len)
{
	*len = h->wrapped_dek_len;
	return h->wrapped_dek;
}
const uint8_t *sl_sld_header_salt(const sl_sld_header *h)
{
	return h->salt;
}
const uint8_t *sl_sld_header_bytes(const sl_sld_header *h)
{
	return h->raw;
}
void sl_sld_header_digest(const sl_sld_header *h, uint8_t out[static 32])
{
	memcpy(out, h->digest, 32);
}

uint64_t sl_sld_header_file_size(const sl_sld_header *h)
{
	/* bounded by the parser: < 2^60 + 2^60/2^16*16 + 2^16 */
	return h->len + h->plaintext_len + SL_AEAD_TAG_LEN * h->chunk_count;
}

size_t sl_sld_chunk_plain_len(const sl_sld_header *h, uint64_t i)
{
	if (i + 1 < h->chunk_count)
		return h->chunk_size;
	return (size_t)(h->plaintext_len - (h->chunk_count - 1) * (uint64_t)h->chunk_size);
}

static json_t *hex_json(const uint8_t *p, size_t n)
{
	char buf[2 * 64 + 1];
	sl_hex_encode(p, n, buf);
	return json_string(buf);
}

json_t *sl_sld_header_json(const sl_sld_header *h)
{
	json_t *o = NULL, *key = NULL, *exts = NULL;
	char *b64 = NULL;

	exts = json_array();
	if (exts == NULL)
		goto fail;
	for (size_t i = 0; i < h->n_ext; i++) {
		if (json_array_append_new(
		        exts, json_pack("{s:i,s:b,s:i,s:i}", "type", h->ext[i].type, "critical",
		                        h->ext[i].flags & 1, "version", h->ext[i].version, "length",
		                        h->ext[i].len)) != 0)
			goto fail;
	}
	if (h->key_id[0] == '\0') {
		key = json_pack("{s:s}", "source", "key-file");
	} else {
		if (sl_b64_encode(h->wrapped_dek, h->wrapped_dek_len, &b64) != SL_OK)
			goto fail;
		key = json_pack("{s:s,s:s,s:s,s:s}", "source", "kms", "kms_url", h->kms_url,
		                "key_id", h->key_id, "wrapped_dek", b64);
	}
	if (key == NULL)
		goto fail;
	o = json_pack("{s:s,s:i,s:I,s:s,s:I,s:I,s:I,s:I,s:s,s:O,s:o,s:o,s:o,s:o,s:O,s:b}", "format",
	              "SLD", "version", h->version, "header_len", (json_int_t)h->len, "aead",
	              sl_aead_name(h->aead), "chunk_size", (json_int_t)h->chunk_size,
	              "plaintext_len", (json_int_t)h->plaintext_len, "chunk_count",
	              (json_int_t)h->chunk_count, "file_size",
	              (json_int_t)sl_sld_header_file_size(h), "dataset_id", h->dataset_id, "key",
	              key, "salt", hex_json(h->salt, sizeof(h->salt)), "key_check",
	              hex_json(h->key_check, sizeof(h->key_check)), "header_mac",
	              hex_json(h->mac, sizeof(h->mac)), "header_sha256", hex_json(h->digest, 32),
	              "extensions", exts, "authenticated", 0);
fail:
	json_decref(key);
	json_decref(exts);
	free(b64);
	return o;
}

/* ---- keys, nonces, associated data ------------------------------------ */

static SL_RESULT derive(sl_secret *dek, const uint8_t *salt, const char *info, uint8_t *out)
{
	return sl_hkdf_sha256(sl_secret_data(dek), sl_secret_len(dek), salt, SL_SLD_SALT_LEN,
	                      (const uint8_t *)info, strlen(info), out, 32);
}

sl_err sld_derive_keys(sl_secret *dek, const uint8_t salt[static SL_SLD_SALT_LEN],
                       struct sld_keys *out)
{
	sl_err rc = SL_E_INPUT;
	struct sld_keys k = {0};

	SL_ENSURE(sl_secret_len(dek) == SL_SLD_DEK_LEN, SL_E_INPUT,
	          "the data key is %zu bytes; SLD keys are exactly %d bytes", sl_secret_len(dek),
	          SL_SLD_DEK_LEN);
	SL_GUARD(sl_secret_new(32, &k.file_key));
	SL_GUARD(sl_secret_new(32, &k.mac_key));
	SL_GUARD(derive(dek, salt, info_file_key, sl_secret_data(k.file_key)));
	SL_GUARD(derive(dek, salt, info_mac_key, sl_secret_data(k.mac_key)));
	SL_GUARD(derive(dek, salt, info_key_check, k.key_check));
	*out = k;
	k = (struct sld_keys){0};
	rc = SL_OK;
out:
	sld_keys_free(&k);
	return rc;
}

void sld_keys_free(struct sld_keys *k)
{
	sl_secret_free(k->file_key);
	sl_secret_free(k->mac_key);
	sl_wipe(k->key_check, sizeof(k->key_check));
	k->file_key = k->mac_key = NULL;
}

static void put_u64be(uint8_t *p, uint64_t v)
{
	for (int b = 0; b < 8; b++)
		p[b] = (uint8_t)(v >> (56 - 8 * b));
}

void sld_chunk_nonce(sl_aead_id id, uint64_t i, uint8_t out[static SL_AEAD_MAX_NONCE_LEN])
{
	size_t n = sl_aead_nonce_len(id);
	memset(out, 0, SL_AEAD_MAX_NONCE_LEN);
	put_u64be(out + n - 8, i);
}

void sld_chunk_aad(const uint8_t digest[static 32], uint64_t i, bool final,
                   uint8_t out[static SLD_AAD_LEN])
{
	memcpy(out, digest, 32);
	put_u64be(out + 32, i);
	out[40] = final ? 1 : 0;
}

/* ---- building --------------------------------------------------------- */

static SL_RESULT check_params(const sl_sld_encrypt_params *p)
{
	sl_err rc = SL_E_INPUT;
	const char *url = p->kms_url != NULL ? p->kms_url : "";
	const char *kid = p->key_id != NULL ? p->key_id : "";
	size_t n;

	SL_ENSURE(p->dataset_id != NULL, SL_E_INPUT, "a dataset id is required");
	n = strlen(p->dataset_id);
	SL_ENSURE(n >= 1 && n <= SL_SLD_DATASET_ID_MAX, SL_E_INPUT,
	          "dataset id: %zu bytes, must be 1..%d", n, SL_SLD_DATASET_ID_MAX);
	SL_ENSURE(sld_utf8_printable((const uint8_t *)p->dataset_id, n), SL_E_INPUT,
	          "dataset id: must be UTF-8 text without control characters");
	SL_ENSURE(chunk_size_ok(p->chunk_size), SL_E_INPUT,
	          "chunk size %u: must be a power of two from 64K to 64M", p->chunk_size);
	SL_ENSURE(strlen(url) <= SL_SLD_KMS_URL_MAX &&
	              sld_ascii_printable((const uint8_t *)url, strlen(url)),
	          SL_E_INPUT, "KMS URL: at most %d printable ASCII characters", SL_SLD_KMS_URL_MAX);
	SL_ENSURE(strlen(kid) <= SL_SLD_KEY_ID_MAX &&
	              sld_ascii_printable((const uint8_t *)kid, strlen(kid)),
	          SL_E_INPUT, "key id: at most %d printable ASCII characters", SL_SLD_KEY_ID_MAX);
	SL_ENSURE(p->wrapped_dek_len <= SL_SLD_WRAPPED_DEK_MAX, SL_E_INPUT,
	          "wrapped DEK: %zu bytes, at most %d", p->wrapped_dek_len, SL_SLD_WRAPPED_DEK_MAX);
	{
		bool u = url[0] != '\0', k = kid[0] != '\0', w = p->wrapped_dek_len > 0;
		SL_ENSURE((u && k && w) || (!u && !k && !w), SL_E_INPUT,
		          "key reference: KMS URL, key id and wrapped DEK go together");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_params_resolve(const sl_sld_encrypt_params *p, sl_sld_encrypt_params *out)
{
	sl_err rc = SL_E_INPUT;
	*out = *p;
	if (out->aead == SL_AEAD_NONE)
		out->aead = SL_AEAD_AES_256_GCM;
	if (out->chunk_size == 0)
		out->chunk_size = SL_SLD_CHUNK_DEFAULT;
	if (out->threads == 0)
		out->threads = sl_sld_default_threads();
	SL_ENSURE(sl_aead_name(out->aead) != NULL, SL_E_INPUT, "unknown AEAD id %d",
	          (int)out->aead);
	SL_ENSURE(out->threads <= SL_SLD_THREADS_MAX, SL_E_INPUT, "threads: %u, at most %d",
	          out->threads, SL_SLD_THREADS_MAX);
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_header_build(const sl_sld_encrypt_params *p, uint64_t plaintext_len,
                        const uint8_t salt[static SL_SLD_SALT_LEN], const struct sld_keys *keys,
                        sl_sld_header **out)
{
	sl_err rc = SL_E_INPUT;
	sl_writer w;
	const char *url = p->kms_url != NULL ? p->kms_url : "";
	const char *kid = p->key_id != NULL ? p->key_id : "";
	uint8_t mac[SLD_MAC_LEN];

	sl_writer_init(&w, SL_SLD_HEADER_MAX);
	SL_GUARD(check_params(p));
	SL_ENSURE(plaintext_len < SLD_PLAINTEXT_MAX, SL_E_TOO_LARGE,
	          "plaintext of %llu bytes exceeds the SLD limit of 2^60",
	          (unsigned long long)plaintext_len);
	SL_GUARD(sl_write_bytes(&w, sld_magic, SL_SLD_MAGIC_LEN));
	SL_GUARD(sl_write_u16be(&w, SL_SLD_VERSION));
	SL_GUARD(sl_write_u32be(&w, 0)); /* header_len, patched below */
	SL_GUARD(sl_write_u8(&w, (uint8_t)p->aead));
	SL_GUARD(sl_write_u8(&w, 0));
	SL_GUARD(sl_write_u32be(&w, p->chunk_size));
	SL_GUARD(sl_write_u64be(&w, plaintext_len));
	SL_GUARD(sl_write_u64be(&w, sld_chunk_count(plaintext_len, p->chunk_size)));
	SL_GUARD(sl_write_bytes(&w, salt, SL_SLD_SALT_LEN));
	SL_GUARD(sl_write_u8(&w, (uint8_t)strlen(p->dataset_id)));
	SL_GUARD(sl_write_bytes(&w, p->dataset_id, strlen(p->dataset_id)));
	SL_GUARD(sl_write_u16be(&w, (uint16_t)strlen(url)));
	SL_GUARD(sl_write_bytes(&w, url, strlen(url)));
	SL_GUARD(sl_write_u8(&w, (uint8_t)strlen(kid)));
	SL_GUARD(sl_write_bytes(&w, kid, strlen(kid)));
	SL_GUARD(sl_write_u16be(&w, (uint16_t)p->wrapped_dek_len));
	SL_GUARD(sl_write_bytes(&w, p->wrapped_dek, p->wrapped_dek_len));
	SL_GUARD(sl_write_u32be(&w, 0)); /* no extensions in v1 */
	SL_GUARD(sl_write_bytes(&w, keys->key_check, SLD_KEY_CHECK_LEN));
	{
		uint32_t total = (uint32_t)(w.len + SLD_MAC_LEN);
		for (int b = 0; b < 4; b++)
			w.data[10 + b] = (uint8_t)(total >> (24 - 8 * b));
	}
	SL_GUARD(sl_hmac_sha256(sl_secret_data(keys->mac_key), 32, w.data, w.len, mac));
	SL_GUARD(sl_write_bytes(&w, mac, sizeof(mac)));
	/* parsing our own output keeps writer and reader in agreement */
	rc = sl_sld_header_parse(w.data, w.len, out);
	if (rc != SL_OK)
		rc = sl_err_wrap(SL_E_INTERNAL, "re-parsing a fresh header");
out:
	sl_writer_free(&w);
	return rc;
}
