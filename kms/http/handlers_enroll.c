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
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/tpm2.h"

#define ENROLL_TTL_S 60
#define CRED_LEN 32
#define MAX_PENDING 4096

struct pending {
	uint8_t session[16];
	uint8_t ak_name[SL_TPM2_NAME_MAX];
	size_t ak_name_len;
	uint8_t ek_digest[32];
	sl_secret *cred;
};

/* Pending sessions live in the state store, so /v1/enroll on one replica
 * and /v1/enroll/activate on another complete. The store keeps only the
 * SHA-256 of the credential: reading the database does not let anyone
 * answer the challenge for an AK outside the TPM. */
static SL_RESULT table_put(kmsd_ctx *ctx, const struct pending *in, bool *full)
{
	kmsd_pending_row row = {.expires = (int64_t)time(NULL) + ENROLL_TTL_S};
	size_t live = 0;
	sl_err rc = kmsd_store_pending_purge(ctx->store, (int64_t)time(NULL), &live);
	*full = false;
	if (rc != SL_OK)
		return rc;
	if (live >= MAX_PENDING) {
		*full = true;
		return SL_OK;
	}
	memcpy(row.ak_name, in->ak_name, in->ak_name_len);
	row.ak_name_len = in->ak_name_len;
	memcpy(row.ek_sha256, in->ek_digest, 32);
	sl_sha256(sl_secret_data(in->cred), CRED_LEN, row.cred_sha256);
	/* under the row MAC: a row written into the database by anyone else
	 * (a chosen credential for a chosen AK) answers nothing */
	return kmsd_registry_pending_put(ctx->registry, in->session, &row);
}

/* A refused enrollment is recorded before it is answered, like every
 * decision; 503 when it cannot be. */
static void refuse(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res, const char *step,
                   const char *why_text)
{
	char detail[512]; /* why_text may be sl_err_detail(), which the audit write reuses */
	snprintf(detail, sizeof(detail), "%s", why_text);
	json_t *why = json_pack("[s]", detail);
	bool ok = kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_DENY, why, NULL,
	                     json_pack("{s:s, s:{s:[s], s:s?}}", "step", step, "subject",
	                               "tee_kinds", "tpm2", "client", req->source));
	json_decref(why);
	if (!ok)
		kmsd_audit_failed(ctx, res, "enrollment refusal");
	else
		kmsd_problem(res, 403, "enroll-refused", "Forbidden", detail, NULL);
}

/* Revocation names the machine: no AK enrolls through a revoked EK until
 * an admin re-admits it (POST /v1/eks/readmit). False: answered. */
static bool ek_admitted(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                        const char *step, const uint8_t ek[static 32])
{
	bool revoked = true;
	char hex[65], d[400];
	if (kmsd_registry_ek_revoked(ctx->registry, ek, &revoked) != SL_OK) {
		kmsd_store_failed(ctx, res, "enrollment");
		return false;
	}
	if (!revoked)
		return true;
	sl_hex_encode(ek, 32, hex);
	snprintf(d, sizeof(d),
	         "ek_revoked: the machine with EK sha256:%s was revoked; no AK enrolls through "
	         "it until an admin re-admits it (seclaunch enroll readmit)",
	         hex);
	refuse(ctx, req, res, step, d);
	return false;
}

void kmsd_handle_enroll(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	kmsd_enroll_req er;
	struct pending p = {0};
	const char *vouched = NULL;
	unsigned retry = 0;
	uint8_t *blob = NULL, *secret = NULL;
	size_t blob_len = 0, secret_len = 0;
	char *s64 = NULL, *b64 = NULL, *e64 = NULL, hex[2 * SL_TPM2_NAME_MAX + 1];
	/* per source, before anything is parsed or verified */
	if (ctx->enroll_limit != NULL) {
		if (!kmsd_refusals_admit(ctx->enroll_limit, req->source, &retry)) {
			char d[200];
			snprintf(d, sizeof(d),
			         "too many enrollments from %s (limit %u a minute); retry in %u s",
			         req->source ? req->source : "this address",
			         ctx->cfg->enroll_rate_per_min, retry);
			kmsd_problem(res, 429, "rate-limited", "Too Many Requests", d, NULL);
			res->retry_after = retry;
			return;
		}
		kmsd_refusals_charge(ctx->enroll_limit, req->source);
	}
	if (kmsd_parse_enroll(req->body, req->len, &er) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (sl_tpm2_ak_check(er.ak_pub, er.ak_pub_len) != SL_OK ||
	    sl_tpm2_public_name(er.ak_pub, er.ak_pub_len, p.ak_name, &p.ak_name_len) != SL_OK) {
		refuse(ctx, req, res, "challenge", sl_err_detail());
		goto out;
	}
	sl_sha256(er.ek_pub, er.ek_pub_len, p.ek_digest);
	if (!ek_admitted(ctx, req, res, "challenge", p.ek_digest))
		goto out;
	/* what vouches for the TPM: its EK certificate (chaining to the
	 * manufacturer CA directory), or a single-use token an admin issued */
	if (er.ek_cert != NULL && ctx->cfg->ek_ca_dir != NULL) {
		if (sl_tpm2_ek_cert_verify(er.ek_cert, er.ek_cert_len, ctx->cfg->ek_ca_dir, 0,
		                           er.ek_pub, er.ek_pub_len) != SL_OK) {
			refuse(ctx, req, res, "challenge", sl_err_detail());
			goto out;
		}
		vouched = "ek_cert";
	} else if (er.has_token) {
		uint8_t th[32];
		enum kmsd_grant g = KMSD_GRANT_NONE;
		sl_sha256((const uint8_t *)er.enroll_token, strlen(er.enroll_token), th);
		if (kmsd_registry_token_use(ctx->registry, th, (int64_t)time(NULL), &g) != SL_OK) {
			kmsd_store_failed(ctx, res, "enrollment");
			goto out;
		}
		if (g == KMSD_GRANT_FORGED) {
			kmsd_log(KMSD_LOG_ERR,
			         "state store: an enrollment token row does not verify "
			         "under the registry key (added or edited outside "
			         "seclaunchd); refused");
			refuse(
			    ctx, req, res, "challenge",
			    "enroll_token: its row in the state store does not verify under the "
			    "registry key (added or edited outside seclaunchd); ask an admin for "
			    "a token");
			goto out;
		}
		if (g != KMSD_GRANT_OK) {
			refuse(ctx, req, res, "challenge",
			       "enroll_token: unknown, already used or expired (tokens are "
			       "single-use; "
			       "ask an admin for a new one)");
			goto out;
		}
		vouched = "enroll_token";
	} else if (!ctx->cfg->accept_ek_without_cert) {
		refuse(ctx, req, res, "challenge",
		       "ek_cert: an EK certificate that chains to the EK CA is required (or an "
		       "enroll_token issued by an admin)");
		goto out;
	} else {
		vouched = "none (accept_ek_without_cert)";
	}
	if (sl_secret_random(CRED_LEN, &p.cred) != SL_OK ||
	    sl_tpm2_make_credential(er.ek_pub, er.ek_pub_len, p.ak_name, p.ak_name_len,
	                            sl_secret_data(p.cred), CRED_LEN, &blob, &blob_len, &secret,
	                            &secret_len) != SL_OK) {
		kmsd_problem(res, 400, "bad-request", "Bad Request", sl_err_detail(), NULL);
		goto out;
	}
	sl_random(p.session, sizeof(p.session));
	if (sl_b64_encode(p.session, sizeof(p.session), &s64) != SL_OK ||
	    sl_b64_encode(blob, blob_len, &b64) != SL_OK ||
	    sl_b64_encode(secret, secret_len, &e64) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
		goto out;
	}
	bool full = false;
	if (table_put(ctx, &p, &full) != SL_OK) {
		kmsd_store_failed(ctx, res, "enrollment");
		goto out;
	}
	if (full) {
		kmsd_problem(res, 429, "busy", "Too Many Requests",
		             "too many enrollments in progress", NULL);
		goto out;
	}
	sl_hex_encode(p.ak_name, p.ak_name_len, hex);
	if (!kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, NULL, NULL, NULL,
	                json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:[s], s:s?}}", "step", "challenge",
	                          "ak_name", hex, "ek_cert", er.ek_cert != NULL, "vouched_by",
	                          vouched, "subject", "ak_name", hex, "tee_kinds", "tpm2", "client",
	                          req->source))) {
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
	kmsd_pending_row p = {0};
	uint8_t got[32] = {0};
	enum kmsd_grant g = KMSD_GRANT_NONE;
	char hex[2 * SL_TPM2_NAME_MAX + 1];
	if (kmsd_parse_activate(req->body, req->len, &ar) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (kmsd_registry_pending_take(ctx->registry, ar.session, &p, &g) != SL_OK) {
		kmsd_store_failed(ctx, res, "enrollment");
		goto out;
	}
	if (g == KMSD_GRANT_FORGED) {
		kmsd_log(KMSD_LOG_ERR, "state store: a pending enrollment row does not verify "
		                       "under the registry key (added or edited outside "
		                       "seclaunchd); refused");
		refuse(ctx, req, res, "activate",
		       "session: its row in the state store does not verify under the registry "
		       "key (added or edited outside seclaunchd); start again with /v1/enroll");
		goto out;
	}
	if (g != KMSD_GRANT_OK) {
		refuse(ctx, req, res, "activate",
		       "session: unknown, already answered, or expired; start again with "
		       "/v1/enroll");
		goto out;
	}
	sl_hex_encode(p.ak_name, p.ak_name_len, hex);
	if (sl_secret_len(ar.secret) == CRED_LEN)
		sl_sha256(sl_secret_data(ar.secret), CRED_LEN, got);
	if (sl_secret_len(ar.secret) != CRED_LEN || !sl_ct_eq(got, p.cred_sha256, 32)) {
		json_t *why = json_pack("[s]", "activated credential does not match");
		bool rec = kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_DENY, why, NULL,
		                      json_pack("{s:s, s:s, s:{s:s, s:[s], s:s?}}", "step",
		                                "activate", "ak_name", hex, "subject", "ak_name",
		                                hex, "tee_kinds", "tpm2", "client", req->source));
		json_decref(why);
		if (!rec) {
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
	/* revoked between the challenge and the answer */
	if (!ek_admitted(ctx, req, res, "activate", p.ek_sha256))
		goto out;
	if (kmsd_registry_add(ctx->registry, p.ak_name, p.ak_name_len, p.ek_sha256) != SL_OK) {
		kmsd_store_failed(ctx, res, "enrollment");
		goto out;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_ENROLL, NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s, s:s, s:{s:s, s:[s], s:s?}}", "step", "activate", "ak_name",
	                          hex, "subject", "ak_name", hex, "tee_kinds", "tpm2", "client",
	                          req->source))) {
		kmsd_audit_failed(ctx, res, "enrollment");
		goto out;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:b}", "ak_name", hex, "enrolled", 1);
out:
	sl_secret_free(ar.secret);
}

/* POST /v1/enroll/tokens (scope operate): kmsd_parse_enroll_token's body ->
 * {"token", "expires"}. The store keeps only the token's SHA-256. */
void kmsd_handle_enroll_token(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t raw[32], h[32];
	char tok[64], when[32];
	int64_t t = KMSD_ETOKEN_TTL_DEFAULT;
	size_t n = 0;
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_OPERATE, "POST /v1/enroll/tokens",
	                    "kms.enroll.token", NULL))
		return;
	if (kmsd_parse_enroll_token(req->body, req->len, &t) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	sl_random(raw, sizeof(raw));
	/* URL-safe, no padding: 43 characters */
	n = sodium_bin2base64(tok, sizeof(tok), raw, sizeof(raw),
	                      sodium_base64_VARIANT_URLSAFE_NO_PADDING) != NULL
	        ? strlen(tok)
	        : 0;
	sl_wipe(raw, sizeof(raw));
	sl_sha256((const uint8_t *)tok, n, h);
	if (kmsd_registry_token_put(ctx->registry, h, (int64_t)time(NULL) + t) != SL_OK) {
		sl_wipe(tok, sizeof(tok));
		kmsd_store_failed(ctx, res, "enrollment token");
		return;
	}
	sl_time_rfc3339(time(NULL) + t, when, sizeof(when));
	if (!kmsd_audit(ctx, "kms.enroll.token", NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s, s:I}", "expires", when, "ttl_s", (json_int_t)t))) {
		sl_wipe(tok, sizeof(tok));
		kmsd_audit_failed(ctx, res, "enrollment token");
		return;
	}
	res->status = 201;
	res->json = json_pack("{s:s, s:s}", "token", tok, "expires", when);
	sl_wipe(tok, sizeof(tok));
}
