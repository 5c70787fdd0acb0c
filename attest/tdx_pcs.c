/* Loading and authenticating PCS collateral JSON from the collateral
 * directory: the signature covers the exact bytes of the "tcbInfo" /
 * "enclaveIdentity" member as served, so that member is cut out of the raw
 * text (a JSON round trip would change the bytes). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tdx_quote.h"
#include "x509_util.h"
#include "seclaunch/buf.h"
#include "seclaunch/util.h"

#define MAX_JSON_FILES 64
#define MAX_JSON_BYTES (1024 * 1024)

/* The raw value (an object) of top-level member key in a JSON text. */
static sl_err raw_member(const uint8_t *text, size_t len, const char *key, const uint8_t **v,
                         size_t *vlen)
{
	sl_reader r;
	int depth = 0;
	bool in_str = false, esc = false;
	size_t klen = strlen(key), str_start = 0, start = 0;
	bool want_value = false;

	sl_reader_init(&r, text, len, "collateral JSON");
	while (sl_reader_left(&r) > 0) {
		uint8_t c = 0;
		size_t pos = sl_reader_offset(&r);
		if (sl_read_u8(&r, &c, "json") != SL_OK)
			break;
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"') {
				in_str = false;
				/* a key at depth 1 equal to key, followed by ':' */
				if (depth == 1 && pos - str_start == klen &&
				    memcmp(text + str_start, key, klen) == 0)
					want_value = true;
			}
			continue;
		}
		if (c == '"') {
			in_str = true;
			str_start = pos + 1;
		} else if (c == '{' || c == '[') {
			if (want_value && depth == 1 && c == '{')
				start = pos;
			depth++;
		} else if (c == '}' || c == ']') {
			depth--;
			if (want_value && depth == 1 && start != 0) {
				*v = text + start;
				*vlen = pos + 1 - start;
				return SL_OK;
			}
			if (depth < 0)
				break;
		} else if (c == ',' && depth == 1) {
			want_value = false;
		}
	}
	return sl_err_set(SL_E_ATTEST_FORMAT, "collateral JSON: no \"%s\" object", key);
}

static sl_err check_signed(const uint8_t *text, size_t len, const char *key, const json_t *doc,
                           STACK_OF(X509) * certs, STACK_OF(X509) * roots, const char *file)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	const uint8_t *v = NULL;
	size_t vlen = 0;
	uint8_t sig[64];
	time_t issued = 0;
	X509 *signer = NULL;
	char what[512];

	snprintf(what, sizeof(what), "%s (%s)", file, key);
	SL_GUARD(raw_member(text, len, key, &v, &vlen));
	const char *hs = json_string_value(json_object_get(doc, "signature"));
	SL_ENSURE(hs != NULL && sl_hex_decode(hs, sig, 64, "signature") == SL_OK,
	          SL_E_ATTEST_FORMAT, "%s: signature is not 64 bytes of hex", what);
	const char *id = json_string_value(json_object_get(json_object_get(doc, key), "issueDate"));
	SL_ENSURE(id != NULL, SL_E_ATTEST_FORMAT, "%s: no issueDate", what);
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
	SL_GUARD(sl_p256_verify(X509_get0_pubkey(signer), sig, v, vlen, what));
	rc = SL_OK;
out:
	return rc;
}

struct found {
	json_t *doc;
	uint8_t *text;
	size_t len;
	char file[512];
	char issued[32];
};

static void keep_newest(struct found *f, json_t *doc, uint8_t **text, size_t len, const char *file,
                        const char *issued)
{
	if (f->doc != NULL && strcmp(issued, f->issued) <= 0)
		return;
	json_decref(f->doc);
	free(f->text);
	f->doc = json_incref(doc);
	f->text = *text;
	*text = NULL;
	f->len = len;
	snprintf(f->file, sizeof(f->file), "%s", file);
	snprintf(f->issued, sizeof(f->issued), "%s", issued);
}

static sl_err scan(const char *dir, const sl_pck_ext *pck, struct found *ti, struct found *qi)
{
	sl_err rc = SL_E_IO;
	DIR *d = opendir(dir);
	uint8_t *text = NULL;
	size_t len = 0;
	json_t *doc = NULL;
	int files = 0;
	char path[4096], fm[13];

	sl_hex_encode(pck->fmspc, 6, fm);
	SL_ENSURE(d != NULL, SL_E_IO, "collateral %s: cannot open directory", dir);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		const char *dot = strrchr(e->d_name, '.');
		if (e->d_name[0] == '.' || dot == NULL || strcmp(dot, ".json") != 0)
			continue;
		SL_ENSURE(++files <= MAX_JSON_FILES, SL_E_TOO_LARGE,
		          "collateral %s: more than %d JSON files", dir, MAX_JSON_FILES);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		SL_GUARD(sl_file_read(path, MAX_JSON_BYTES, &text, &len));
		doc = json_loadb((const char *)text, len, 0, NULL);
		if (doc != NULL) {
			json_t *t = json_object_get(doc, "tcbInfo");
			json_t *q = json_object_get(doc, "enclaveIdentity");
			const char *f = json_string_value(json_object_get(t, "fmspc"));
			const char *tid = json_string_value(json_object_get(t, "id"));
			const char *qid = json_string_value(json_object_get(q, "id"));
			if (f != NULL && tid != NULL && strcmp(tid, "TDX") == 0 &&
			    strcasecmp(f, fm) == 0)
				keep_newest(ti, doc, &text, len, path,
				            json_string_value(json_object_get(t, "issueDate"))
				                ?: "");
			else if (qid != NULL && strcmp(qid, "TD_QE") == 0)
				keep_newest(qi, doc, &text, len, path,
				            json_string_value(json_object_get(q, "issueDate"))
				                ?: "");
		}
		json_decref(doc);
		doc = NULL;
		free(text);
		text = NULL;
	}
	rc = SL_OK;
out:
	json_decref(doc);
	free(text);
	if (d != NULL)
		closedir(d);
	return rc;
}

static bool stale(const json_t *obj, time_t at, char *next, size_t n)
{
	const char *s = json_string_value(json_object_get(obj, "nextUpdate"));
	time_t t = 0;
	if (s == NULL || sl_time_parse_rfc3339(s, &t, "nextUpdate") != SL_OK)
		return true;
	snprintf(next, n, "%s", s);
	return (at != 0 ? at : time(NULL)) > t;
}

sl_err sl_tdx_collateral_eval(const char *dir, STACK_OF(X509) * roots, time_t at,
                              const sl_pck_ext *pck, const sl_tdx_body *b,
                              const sl_tdx_qe_report *qe, bool *found, sl_tdx_tcb *out)
{
	sl_err rc = SL_E_ATTEST;
	struct found ti = {0}, qi = {0};
	STACK_OF(X509) *certs = sk_X509_new_null();
	STACK_OF(X509_CRL) *crls = sk_X509_CRL_new_null();

	*found = false;
	memset(out, 0, sizeof(*out));
	SL_ENSURE(certs != NULL && crls != NULL, SL_E_NOMEM, "collateral");
	SL_GUARD(scan(dir, pck, &ti, &qi));
	if (ti.doc == NULL) {
		rc = SL_OK;
		goto out;
	}
	SL_GUARD(sl_x509_load_dir(dir, certs, crls));
	SL_GUARD(check_signed(ti.text, ti.len, "tcbInfo", ti.doc, certs, roots, ti.file));
	json_t *t = json_object_get(ti.doc, "tcbInfo");
	SL_GUARD(sl_tdx_tcb_eval(t, pck, b, out));
	out->stale = stale(t, at, out->next_update, sizeof(out->next_update));
	if (qi.doc != NULL) {
		SL_GUARD(check_signed(qi.text, qi.len, "enclaveIdentity", qi.doc, certs, roots,
		                      qi.file));
		json_t *q = json_object_get(qi.doc, "enclaveIdentity");
		SL_GUARD(sl_tdx_qe_eval(q, qe, out->qe_status));
		char next[32];
		out->stale = stale(q, at, next, sizeof(next)) || out->stale;
		if (sl_tdx_status_worse(out->qe_status, out->status))
			snprintf(out->status, sizeof(out->status), "%s", out->qe_status);
	}
	*found = true;
	rc = SL_OK;
out:
	json_decref(ti.doc);
	json_decref(qi.doc);
	free(ti.text);
	free(qi.text);
	sk_X509_pop_free(certs, X509_free);
	sk_X509_CRL_pop_free(crls, X509_CRL_free);
	return rc;
}
