/* Loading and authenticating PCS collateral JSON from the collateral
 * directory. Intel signs the exact bytes of the "tcbInfo" /
 * "enclaveIdentity" member's value as served, and a JSON round trip would
 * change them, so the value's byte range is located by walking the top-level
 * object with jansson itself (each key and value parsed in place, its length
 * taken from what the parser consumed), and the value is then parsed again
 * from exactly those bytes: what is evaluated is what was signed. Duplicate
 * keys anywhere and members other than the signed one and "signature" are
 * refused, so no second copy can hide behind the signed one. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coll_dir.h"
#include "tdx_quote.h"
#include "vcache.h"
#include "x509_util.h"
#include "seclaunch/buf.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

#define MAX_JSON_FILES 64
#define MAX_JSON_BYTES (1024 * 1024)
#define JSON_FLAGS (JSON_REJECT_DUPLICATES)
#define JSON_PART_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK)

static void skip_ws(sl_reader *r)
{
	sl_reader t = *r;
	uint8_t c;
	while (sl_read_u8(&t, &c, "whitespace") == SL_OK &&
	       (c == ' ' || c == '\t' || c == '\n' || c == '\r'))
		*r = t;
}

static SL_RESULT expect_char(sl_reader *r, char want, const char *what)
{
	uint8_t c = 0;
	skip_ws(r);
	sl_err rc = sl_read_u8(r, &c, what);
	if (rc != SL_OK || c != (uint8_t)want)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: want '%c' at offset %zu", what, want,
		                  sl_reader_offset(r) - (rc == SL_OK));
	return SL_OK;
}

/* Parses one JSON value in place at the reader and advances past exactly
 * the bytes jansson consumed; *raw, *rawlen are those bytes. */
static SL_RESULT part(sl_reader *r, const char *what, json_t **out, const uint8_t **raw,
                      size_t *rawlen)
{
	sl_reader t;
	const uint8_t *p = NULL;
	json_error_t je;

	*out = NULL;
	skip_ws(r);
	t = *r;
	sl_err rc = sl_read_view(&t, sl_reader_left(&t), &p, what);
	if (rc != SL_OK)
		return rc;
	*out = json_loadb((const char *)p, sl_reader_left(r), JSON_PART_FLAGS, &je);
	if (*out == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: %s at offset %zu", what, je.text,
		                  sl_reader_offset(r) +
		                      (size_t)(je.position > 0 ? je.position : 0));
	size_t n = (size_t)je.position;
	rc = sl_read_view(r, n, raw, what);
	if (rc != SL_OK) {
		json_decref(*out);
		*out = NULL;
		return rc;
	}
	*rawlen = n;
	return SL_OK;
}

sl_err sl_tdx_pcs_parse(const uint8_t *text, size_t len, const char *key, const char *file,
                        json_t **body, const uint8_t **signed_bytes, size_t *signed_len,
                        uint8_t sig[static 64])
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	json_t *doc = NULL, *k = NULL, *v = NULL, *again = NULL;
	const uint8_t *raw = NULL, *sv = NULL;
	size_t rawlen = 0, svlen = 0;
	json_error_t je;
	char what[600];
	const char *const allowed[] = {key, "signature", NULL};
	sl_reader r;

	*body = NULL;
	*signed_bytes = NULL;
	*signed_len = 0;
	snprintf(what, sizeof(what), "%s (%s)", file, key);
	doc = json_loadb((const char *)text, len, JSON_FLAGS, &je);
	SL_ENSURE(doc != NULL, SL_E_ATTEST_FORMAT, "%s: not JSON: %s at offset %d", what, je.text,
	          je.position);
	SL_GUARD(sl_json_only(doc, allowed, SL_E_ATTEST_FORMAT, what));
	SL_ENSURE(json_is_object(json_object_get(doc, key)), SL_E_ATTEST_FORMAT,
	          "%s: no \"%s\" object", what, key);
	SL_GUARD(sl_json_hex(doc, "signature", sig, 64, SL_E_ATTEST_FORMAT, what));

	/* the byte range of the signed member's value */
	sl_reader_init(&r, text, len, what);
	SL_GUARD(expect_char(&r, '{', what));
	for (bool first = true;; first = false) {
		skip_ws(&r);
		uint8_t c = 0;
		sl_reader peek = r;
		SL_GUARD(sl_read_u8(&peek, &c, what));
		if (c == '}')
			break;
		if (!first) {
			SL_GUARD(expect_char(&r, ',', what));
		}
		SL_GUARD(part(&r, what, &k, &raw, &rawlen));
		SL_ENSURE(json_is_string(k), SL_E_ATTEST_FORMAT, "%s: member name is not a string",
		          what);
		SL_GUARD(expect_char(&r, ':', what));
		SL_GUARD(part(&r, what, &v, &raw, &rawlen));
		if (sl_json_strval(k) != NULL && strcmp(json_string_value(k), key) == 0) {
			sv = raw;
			svlen = rawlen;
		}
		json_decref(k);
		json_decref(v);
		k = v = NULL;
	}
	SL_ENSURE(sv != NULL, SL_E_ATTEST_FORMAT, "%s: no \"%s\" member", what, key);

	/* what is evaluated is parsed from exactly the signed bytes */
	again = json_loadb((const char *)sv, svlen, JSON_FLAGS, &je);
	SL_ENSURE(json_is_object(again) && json_equal(again, json_object_get(doc, key)),
	          SL_E_ATTEST_FORMAT, "%s: the signed bytes do not parse to the member", what);
	*body = again;
	again = NULL;
	*signed_bytes = sv;
	*signed_len = svlen;
	rc = SL_OK;
out:
	json_decref(doc);
	json_decref(k);
	json_decref(v);
	json_decref(again);
	return rc;
}

/* The collateral's signature by signer over its signed bytes, remembered
 * by those exact bytes (and the signer's) until the collateral's
 * nextUpdate: past it, verified again. */
static SL_RESULT signed_by(X509 *signer, const uint8_t sig[static 64], const uint8_t *v,
                           size_t vlen, const char *key, time_t issued, const json_t *b, time_t at,
                           const char *what)
{
	uint8_t fp[32];
	sl_vcache_key k;
	time_t next = 0;
	const char *nu = sl_json_getstr(b, "nextUpdate");
	bool keyed = nu != NULL && sl_time_parse_rfc3339(nu, &next, "nextUpdate") == SL_OK;
	sl_err_clear();
	if (keyed) {
		sl_vcache_hasher *h = sl_vcache_begin("tdx collateral signature");
		sl_vcache_add(h, key, strlen(key));
		sl_x509_fingerprint(signer, fp);
		sl_vcache_add(h, fp, 32);
		sl_vcache_add(h, sig, 64);
		sl_vcache_add(h, v, vlen);
		keyed = sl_vcache_end(h, &k);
	}
	if (keyed && sl_vcache_get(&k, at, NULL, NULL))
		return SL_OK;
	sl_err rc = sl_p256_verify(X509_get0_pubkey(signer), sig, v, vlen, what);
	if (rc == SL_OK && keyed)
		sl_vcache_put(&k, issued, next, NULL, 0);
	return rc;
}

/* Collateral files as parsed, keyed by the SHA-256 of their bytes (as
 * x509_util.c's certificate parse cache): which collateral a file is (for
 * scan) and, once the strict parse passed, the signed member, its byte
 * range and the signature. Only parses are kept here; the signature is
 * checked by check_signed (its verdict in vcache.c, bounded by nextUpdate). */
#define DOC_SLOTS 32
enum doc_kind { DOC_OTHER, DOC_TCBINFO, DOC_QEID };

struct doc {
	bool used, parsed;
	uint8_t key[32];
	enum doc_kind kind;
	char fmspc[13];
	char issued[32];
	json_t *body; /* read only once here: shared by every verifier thread */
	size_t off, len;
	uint8_t sig[64];
};

static struct doc docs[DOC_SLOTS];
static unsigned doc_next;
static pthread_mutex_t doc_mu = PTHREAD_MUTEX_INITIALIZER;

static struct doc *doc_find(const uint8_t key[static 32])
{
	for (int i = 0; i < DOC_SLOTS; i++)
		if (docs[i].used && memcmp(docs[i].key, key, 32) == 0)
			return &docs[i];
	return NULL;
}

/* The classification of the file whose bytes hash to key (false: unknown). */
static bool doc_kind_get(const uint8_t key[static 32], struct doc *out)
{
	pthread_mutex_lock(&doc_mu);
	struct doc *d = doc_find(key);
	if (d != NULL) {
		*out = *d;
		out->body = NULL;
	}
	pthread_mutex_unlock(&doc_mu);
	return d != NULL;
}

static void doc_kind_put(const struct doc *in)
{
	pthread_mutex_lock(&doc_mu);
	if (doc_find(in->key) == NULL) {
		struct doc *d = &docs[doc_next++ % DOC_SLOTS];
		json_decref(d->body);
		*d = *in;
		d->used = true;
		d->parsed = false;
		d->body = NULL;
	}
	pthread_mutex_unlock(&doc_mu);
}

struct found {
	bool have;
	uint8_t *text;
	size_t len;
	uint8_t key[32];
	char file[512];
	char issued[32];
};

static void keep_newest(struct found *f, uint8_t **text, size_t len, const uint8_t key[static 32],
                        const char *file, const char *issued)
{
	if (f->have && strcmp(issued, f->issued) <= 0)
		return;
	free(f->text);
	f->have = true;
	f->text = *text;
	*text = NULL;
	f->len = len;
	memcpy(f->key, key, 32);
	snprintf(f->file, sizeof(f->file), "%s", file);
	snprintf(f->issued, sizeof(f->issued), "%s", issued);
}

/* What collateral text is, leniently: a malformed copy of the platform's
 * collateral is chosen and then refused by the strict parse, not passed
 * over. */
static void classify(const uint8_t *text, size_t len, struct doc *d)
{
	json_t *doc = json_loadb((const char *)text, len, 0, NULL);
	const json_t *t = json_object_get(doc, "tcbInfo");
	const json_t *q = json_object_get(doc, "enclaveIdentity");
	const char *f = sl_json_getstr(t, "fmspc");
	const char *tid = sl_json_getstr(t, "id");
	const char *qid = sl_json_getstr(q, "id");
	d->kind = DOC_OTHER;
	if (f != NULL && tid != NULL && strcmp(tid, "TDX") == 0 && strlen(f) < sizeof(d->fmspc)) {
		d->kind = DOC_TCBINFO;
		snprintf(d->fmspc, sizeof(d->fmspc), "%s", f);
		snprintf(d->issued, sizeof(d->issued), "%s", sl_json_getstr(t, "issueDate") ?: "");
	} else if (qid != NULL && strcmp(qid, "TD_QE") == 0) {
		d->kind = DOC_QEID;
		snprintf(d->issued, sizeof(d->issued), "%s", sl_json_getstr(q, "issueDate") ?: "");
	}
	json_decref(doc);
}

/* Picks the newest TDX TCB info for the platform's FMSPC and the newest TD_QE
 * identity. Files that are not such collateral are passed over; the chosen
 * ones are authenticated afterwards (check_signed). */
/* One JSON file of the directory: classified (once per content) and kept
 * when it is the newest of its kind so far; *text is taken when kept. */
static void consider(const char *path, uint8_t **text, size_t len, const uint8_t key[static 32],
                     const char *fm, struct found *ti, struct found *qi)
{
	struct doc k = {0};
	memcpy(k.key, key, 32);
	if (!doc_kind_get(k.key, &k)) {
		classify(*text, len, &k);
		doc_kind_put(&k);
	}
	if (k.kind == DOC_TCBINFO && strcasecmp(k.fmspc, fm) == 0)
		keep_newest(ti, text, len, k.key, path, k.issued);
	else if (k.kind == DOC_QEID)
		keep_newest(qi, text, len, k.key, path, k.issued);
}

/* scan over a snapshot of the directory (coll_dir.h): the same files in
 * the same order, read once while they are unchanged. */
static SL_RESULT scan_snapshot(const char *dir, const sl_coll_dir *snap, const char *fm,
                               struct found *ti, struct found *qi)
{
	sl_err rc = SL_E_IO;
	int files = 0;
	char path[4096];
	uint8_t *text = NULL;

	for (size_t i = 0; i < sl_coll_dir_count(snap); i++) {
		const sl_coll_file *f = sl_coll_dir_file(snap, i);
		const char *dot = strrchr(f->name, '.');
		if (f->name[0] == '.' || dot == NULL || strcmp(dot, ".json") != 0)
			continue;
		SL_ENSURE(++files <= MAX_JSON_FILES, SL_E_TOO_LARGE,
		          "collateral %s: more than %d JSON files", dir, MAX_JSON_FILES);
		snprintf(path, sizeof(path), "%s/%s", dir, f->name);
		/* NUL-terminated like sl_file_read's, owned like it */
		text = malloc(f->len + 1);
		SL_ENSURE(text != NULL, SL_E_NOMEM, "%s: allocating", path);
		memcpy(text, f->data, f->len);
		text[f->len] = '\0';
		consider(path, &text, f->len, f->sha256, fm, ti, qi);
		free(text);
		text = NULL;
	}
	rc = SL_OK;
out:
	free(text);
	return rc;
}

static SL_RESULT scan(const char *dir, const sl_pck_ext *pck, struct found *ti, struct found *qi)
{
	sl_err rc = SL_E_IO;
	DIR *d = NULL;
	uint8_t *text = NULL, key[32];
	size_t len = 0;
	int files = 0;
	char path[4096], fm[13];
	sl_coll_dir *snap = sl_coll_dir_get(dir);

	sl_hex_encode(pck->fmspc, 6, fm);
	if (snap != NULL) {
		rc = scan_snapshot(dir, snap, fm, ti, qi);
		sl_coll_dir_release(snap);
		return rc;
	}
	d = opendir(dir);
	SL_ENSURE(d != NULL, SL_E_IO, "collateral %s: cannot open directory", dir);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		const char *dot = strrchr(e->d_name, '.');
		if (e->d_name[0] == '.' || dot == NULL || strcmp(dot, ".json") != 0)
			continue;
		SL_ENSURE(++files <= MAX_JSON_FILES, SL_E_TOO_LARGE,
		          "collateral %s: more than %d JSON files", dir, MAX_JSON_FILES);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		SL_GUARD(sl_file_read(path, MAX_JSON_BYTES, &text, &len));
		sl_sha256(text, len, key);
		consider(path, &text, len, key, fm, ti, qi);
		free(text);
		text = NULL;
	}
	rc = SL_OK;
out:
	free(text);
	if (d != NULL)
		closedir(d);
	return rc;
}

/* sl_tdx_pcs_parse of a chosen file, served from docs when these bytes
 * parsed before. */
static SL_RESULT parse_doc(const struct found *f, const char *key, json_t **body, const uint8_t **v,
                           size_t *vlen, uint8_t sig[static 64])
{
	bool hit = false;
	pthread_mutex_lock(&doc_mu);
	struct doc *d = doc_find(f->key);
	if (d != NULL && d->parsed && d->off + d->len <= f->len) {
		*body = json_incref(d->body);
		*v = f->text + d->off;
		*vlen = d->len;
		memcpy(sig, d->sig, 64);
		hit = true;
	}
	pthread_mutex_unlock(&doc_mu);
	if (hit)
		return SL_OK;
	sl_err rc = sl_tdx_pcs_parse(f->text, f->len, key, f->file, body, v, vlen, sig);
	if (rc != SL_OK)
		return rc;
	pthread_mutex_lock(&doc_mu);
	d = doc_find(f->key);
	if (d != NULL && !d->parsed) {
		d->parsed = true;
		d->body = json_incref(*body);
		d->off = (size_t)(*v - f->text);
		d->len = *vlen;
		memcpy(d->sig, sig, 64);
	}
	pthread_mutex_unlock(&doc_mu);
	return SL_OK;
}

/* Verifies the signature over the signed member; *body is that member. */
static SL_RESULT check_signed(const struct found *f, const char *key, STACK_OF(X509) * certs,
                              STACK_OF(X509) * roots, time_t at, json_t **body)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	const uint8_t *v = NULL;
	size_t vlen = 0;
	uint8_t sig[64];
	time_t issued = 0;
	X509 *signer = NULL;
	json_t *b = NULL;
	const char *id = NULL;
	char what[600];

	snprintf(what, sizeof(what), "%s (%s)", f->file, key);
	SL_GUARD(parse_doc(f, key, &b, &v, &vlen, sig));
	SL_GUARD(sl_json_str(b, "issueDate", 64, SL_E_ATTEST_FORMAT, what, &id));
	SL_GUARD(sl_time_parse_rfc3339(id, &issued, "issueDate"));
	for (int i = 0; i < sk_X509_num(certs) && signer == NULL; i++) {
		char cn[64];
		sl_x509_subject_cn(sk_X509_value(certs, i), cn, sizeof(cn));
		if (strcmp(cn, "Intel SGX TCB Signing") == 0)
			signer = sk_X509_value(certs, i);
	}
	SL_ENSURE(signer != NULL, SL_E_ATTEST_UNTRUSTED,
	          "%s: no 'Intel SGX TCB Signing' certificate in the collateral", what);
	/* the collateral must have been signed while the signing certificate was valid */
	SL_GUARD(sl_x509_verify_chain(signer, certs, roots, issued, NULL, what));
	SL_GUARD(signed_by(signer, sig, v, vlen, key, issued, b, at, what));
	*body = b;
	b = NULL;
	rc = SL_OK;
out:
	json_decref(b);
	return rc;
}

static bool stale(const json_t *obj, time_t at, char *next, size_t n)
{
	const char *s = sl_json_getstr(obj, "nextUpdate");
	time_t t = 0;
	if (s == NULL || sl_time_parse_rfc3339(s, &t, "nextUpdate") != SL_OK)
		return true;
	snprintf(next, n, "%s", s);
	return (at != 0 ? at : time(NULL)) > t;
}

sl_err sl_tdx_collateral_eval(const char *dir, STACK_OF(X509) * certs, STACK_OF(X509) * roots,
                              time_t at, const sl_pck_ext *pck, const sl_tdx_body *b,
                              const sl_tdx_qe_report *qe, bool *found, sl_tdx_tcb *out)
{
	sl_err rc = SL_E_ATTEST;
	struct found ti = {0}, qi = {0};
	json_t *t = NULL, *q = NULL;

	*found = false;
	memset(out, 0, sizeof(*out));
	SL_GUARD(scan(dir, pck, &ti, &qi));
	if (!ti.have) {
		rc = SL_OK;
		goto out;
	}
	SL_GUARD(check_signed(&ti, "tcbInfo", certs, roots, at, &t));
	SL_GUARD(sl_tdx_tcb_eval(t, pck, b, out));
	out->stale = stale(t, at, out->next_update, sizeof(out->next_update));
	if (qi.have) {
		SL_GUARD(check_signed(&qi, "enclaveIdentity", certs, roots, at, &q));
		SL_GUARD(sl_tdx_qe_eval(q, qe, out->qe_status));
		char next[32];
		out->stale = stale(q, at, next, sizeof(next)) || out->stale;
		if (sl_tdx_status_worse(out->qe_status, out->status))
			snprintf(out->status, sizeof(out->status), "%s", out->qe_status);
	}
	*found = true;
	rc = SL_OK;
out:
	json_decref(t);
	json_decref(q);
	free(ti.text);
	free(qi.text);
	return rc;
}
