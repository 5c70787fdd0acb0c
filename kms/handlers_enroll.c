/* TPM enrollment by credential activation (TPM 2.0 Part 1, 24):
 *   POST /v1/enroll {ek_pub, ek_cert?, ak_pub}: the AK must be a restricted
 *     signing key; the EK certificate must chain to the configured EK CA dir
 *     (or, where allowed, may be absent). The server makes a credential (32
 *     random bytes) for the AK's name protected to the EK and remembers it
 *     under a session id for 60 s.
 *   POST /v1/enroll/activate {session, secret}: only the TPM that holds both
 *     the EK and the AK can recover the credential, so a match proves the AK
 *     lives in that TPM: the AK's name goes into the registry.
 * Sessions are single-use and bounded in number. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"
#include "seclaunch/audit.h"
#include "seclaunch/tpm2.h"

#define ENROLL_TTL_NS (60ull * 1000000000ull)
#define CRED_LEN 32

struct pending {
	bool used;
	uint8_t session[16];
	uint8_t ak_name[SL_TPM2_NAME_MAX];
	size_t ak_name_len;
	uint8_t ek_digest[32];
	uint64_t expires_ns;
	sl_secret *cred;
};

struct kmsd_enroll_table {
	pthread_mutex_t mu;
	struct pending *p;
	size_t cap;
};

sl_err kmsd_enroll_table_new(size_t cap, kmsd_enroll_table **out)
{
	kmsd_enroll_table *t = calloc(1, sizeof(*t));
	if (t == NULL || (t->p = calloc(cap, sizeof(*t->p))) == NULL) {
		free(t);
		return sl_err_set(SL_E_NOMEM, "enrollment table");
	}
	pthread_mutex_init(&t->mu, NULL);
	t->cap = cap;
	*out = t;
	return SL_OK;
}

void kmsd_enroll_table_free(kmsd_enroll_table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->cap; i++)
		sl_secret_free(t->p[i].cred);
	free(t->p);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static bool table_put(kmsd_enroll_table *t, struct pending *in)
{
	uint64_t now = sl_now_ns();
	bool ok = false;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->cap; i++) {
		struct pending *e = &t->p[i];
		if (e->used && e->expires_ns > now)
			continue;
		sl_secret_free(e->cred);
		*e = *in;
		e->used = true;
		in->cred = NULL;
		ok = true;
		break;
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* Removes and returns the session (single use). */
static bool table_take(kmsd_enroll_table *t, const uint8_t session[16], struct pending *out)
{
	uint64_t now = sl_now_ns();
	bool ok = false;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->cap; i++) {
		struct pending *e = &t->p[i];
		if (!e->used || !sl_ct_eq(e->session, session, 16))
			continue;
		e->used = false;
		if (e->expires_ns > now) {
			*out = *e;
			e->cred = NULL;
			ok = true;
		}
		break;
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* A refused enrollment is recorded before it is answered, like every
 * decision; 503 when it cannot be. */
static void refuse(kmsd_ctx *ctx, kmsd_response *res, const char *step, const char *why_text)
{
	char detail[512]; /* why_text may be sl_err_detail(), which the audit write reuses */
	snprintf(detail, sizeof(detail), "%s", why_text);
	json_t *why = json_pack("[s]", detail);
	bool ok = kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_DENY, why, NULL,
	                     json_pack("{s:s}", "step", step));
	json_decref(why);
	if (!ok)
		kmsd_audit_failed(ctx, res, "enrollment refusal");
	else
		kmsd_problem(res, 403, "enroll-refused", "Forbidden", detail, NULL);
}

void kmsd_handle_enroll(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	kmsd_enroll_req er;
	struct pending p = {0};
	uint8_t *blob = NULL, *secret = NULL;
	size_t blob_len = 0, secret_len = 0;
	char *s64 = NULL, *b64 = NULL, *e64 = NULL, hex[2 * SL_TPM2_NAME_MAX + 1];
	if (kmsd_parse_enroll(req->body, req->len, &er) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (sl_tpm2_ak_check(er.ak_pub, er.ak_pub_len) != SL_OK ||
	    sl_tpm2_public_name(er.ak_pub, er.ak_pub_len, p.ak_name, &p.ak_name_len) != SL_OK) {
		refuse(ctx, res, "challenge", sl_err_detail());
		goto out;
	}
	if (er.ek_cert != NULL && ctx->cfg->ek_ca_dir != NULL) {
		if (sl_tpm2_ek_cert_verify(er.ek_cert, er.ek_cert_len, ctx->cfg->ek_ca_dir, 0,
		                           er.ek_pub, er.ek_pub_len) != SL_OK) {
			refuse(ctx, res, "challenge", sl_err_detail());
			goto out;
		}
	} else if (!ctx->cfg->accept_ek_without_cert) {
		refuse(ctx, res, "challenge",
		       "ek_cert: an EK certificate that chains to the EK CA is required");
		goto out;
	}
	if (sl_secret_random(CRED_LEN, &p.cred) != SL_OK ||
	    sl_tpm2_make_credential(er.ek_pub, er.ek_pub_len, p.ak_name, p.ak_name_len,
	                            sl_secret_data(p.cred), CRED_LEN, &blob, &blob_len, &secret,
	                            &secret_len) != SL_OK) {
		kmsd_problem(res, 400, "bad-request", "Bad Request", sl_err_detail(), NULL);
		goto out;
	}
	sl_sha256(er.ek_pub, er.ek_pub_len, p.ek_digest);
	sl_random(p.session, sizeof(p.session));
	p.expires_ns = sl_now_ns() + ENROLL_TTL_NS;
	if (sl_b64_encode(p.session, sizeof(p.session), &s64) != SL_OK ||
	    sl_b64_encode(blob, blob_len, &b64) != SL_OK ||
	    sl_b64_encode(secret, secret_len, &e64) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
		goto out;
	}
	if (!table_put(ctx->enroll, &p)) {
		kmsd_problem(res, 429, "busy", "Too Many Requests",
		             "too many enrollments in progress", NULL);
		goto out;
	}
	sl_hex_encode(p.ak_name, p.ak_name_len, hex);
	if (!kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, NULL, NULL, NULL,
	                json_pack("{s:s, s:s, s:b}", "step", "challenge", "ak_name", hex, "ek_cert",
	                          er.ek_cert != NULL))) {
		/* the session stays unknown to the client and expires */
		kmsd_audit_failed(ctx, res, "enrollment");
		goto out;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:s, s:s, s:s}", "session", s64, "credential_blob", b64,
	                      "encrypted_secret", e64, "ak_name", hex);
out:
	sl_secret_free(p.cred);
	free(s64);
	free(b64);
	free(e64);
	free(blob);
	free(secret);
	kmsd_enroll_req_clear(&er);
}

void kmsd_handle_activate(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	kmsd_activate_req ar;
	struct pending p = {0};
	char hex[2 * SL_TPM2_NAME_MAX + 1];
	if (kmsd_parse_activate(req->body, req->len, &ar) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (!table_take(ctx->enroll, ar.session, &p)) {
		refuse(ctx, res, "activate",
		       "session: unknown, already answered, or expired; start again with "
		       "/v1/enroll");
		goto out;
	}
	sl_hex_encode(p.ak_name, p.ak_name_len, hex);
	if (sl_secret_len(ar.secret) != CRED_LEN ||
	    !sl_ct_eq(sl_secret_data(ar.secret), sl_secret_data(p.cred), CRED_LEN)) {
		json_t *why = json_pack("[s]", "activated credential does not match");
		bool ok = kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_DENY, why, NULL,
		                     json_pack("{s:s, s:s}", "step", "activate", "ak_name", hex));
		json_decref(why);
		if (!ok) {
			kmsd_audit_failed(ctx, res, "enrollment refusal");
			goto out;
		}
		kmsd_problem(
		    res, 403, "enroll-refused", "Forbidden",
		    "secret: the activated credential does not match (the AK and EK are not "
		    "in the same TPM)",
		    NULL);
		goto out;
	}
	if (kmsd_registry_add(ctx->registry, p.ak_name, p.ak_name_len, p.ek_digest) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
		goto out;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s, s:s}", "step", "activate", "ak_name", hex))) {
		kmsd_audit_failed(ctx, res, "enrollment");
		goto out;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:b}", "ak_name", hex, "enrolled", 1);
out:
	sl_secret_free(p.cred);
	sl_secret_free(ar.secret);
}
