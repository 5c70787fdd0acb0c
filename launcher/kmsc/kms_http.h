/* The KMS client's HTTPS transport (private to launcher/kms_*.c). */
#ifndef SECLAUNCH_LAUNCHER_KMS_HTTP_H
#define SECLAUNCH_LAUNCHER_KMS_HTTP_H

#include <jansson.h>
#include <stdbool.h>

#include "seclaunch/kms_client.h"

struct sl_kms {
	sl_kms_opts o;
	char *url, *ca_file, *pinned;
	sl_secret *admin_token; /* NUL-terminated, trailing newline stripped */
	void *curl;             /* CURL *, kept for connection reuse */
	json_t *problem;        /* last error answer */
	json_t *lease;          /* the lease of the last release answer (NULL: none) */
};

enum kms_retry {
	KMS_RETRY_ALL,        /* connection failures, 429, 5xx */
	KMS_RETRY_UNPROCESSED /* only when the server cannot have acted: refused connection, 429,
	                         503 */
};

/* The members of every attested request (docs/protocol.md): nonce, eph_pub
 * and policy_digest in base64, evidence, identity ([] when NULL), job ({}). */
SL_MUST_USE sl_err sl_kms_attested_members(json_t *req, const uint8_t *nonce,
                                           const uint8_t *eph_pub, const uint8_t *policy_digest,
                                           const json_t *evidence, const json_t *identity,
                                           const json_t *job);
/* "keys": [{"key_id", "dataset_id", "wrapped_dek"}] of a release or renewal. */
SL_MUST_USE sl_err sl_kms_key_members(json_t *req, const struct sl_kms_release_req *rq);

/* POSTs body (or GETs when body is NULL) to path; on 2xx *out is the JSON
 * object answered. admin adds the Bearer token. Errors: SL_E_KMS_UNREACHABLE,
 * SL_E_KMS_REFUSED (with the problem's detail), SL_E_KMS_PROTOCOL; a 403 to
 * a release is SL_E_POLICY_DENIED listing every reason. */
SL_MUST_USE sl_err sl_kms_call(sl_kms *k, const char *path, const json_t *body, bool admin,
                               enum kms_retry retry, json_t **out);

#endif
