/* The KMS client's lease calls (POST /v1/renew) and the admin calls over
 * enrolled AKs (GET /v1/aks, POST /v1/aks/revoke). docs/protocol.md. */
#include <stdlib.h>
#include <string.h>

#include "kms_http.h"
#include "seclaunch/json.h"

const json_t *sl_kms_last_lease(const sl_kms *k)
{
	return k->lease;
}

sl_err sl_kms_renew(sl_kms *k, const sl_kms_release_req *rq, json_t **lease)
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_object(), *res = NULL, *l;
	*lease = NULL;
	SL_ENSURE(req != NULL, SL_E_NOMEM, "renew request");
	SL_ENSURE((rq->nkeys >= 1 || rq->noutputs >= 1) && rq->nkeys <= 64, SL_E_USAGE,
	          "renew: 1..64 keys (0 with outputs)");
	SL_GUARD(sl_kms_attested_members(req, rq->nonce, rq->eph_pub, rq->policy_digest,
	                                 rq->evidence, rq->identity, rq->job));
	SL_GUARD(sl_kms_key_members(req, rq));
	SL_GUARD(sl_kms_call(k, "/v1/renew", req, false, KMS_RETRY_UNPROCESSED, &res));
	l = json_object_get(res, "lease");
	SL_ENSURE(l != NULL && (json_is_null(l) || json_is_object(l)), SL_E_KMS_PROTOCOL,
	          "KMS answer: \"lease\" must be an object or null");
	if (json_is_object(l)) {
		json_t *e = json_object_get(l, "expires_unix"), *t = json_object_get(l, "ttl");
		SL_ENSURE(json_is_integer(e) && json_is_integer(t) && json_integer_value(t) > 0,
		          SL_E_KMS_PROTOCOL, "KMS answer: lease.expires_unix / lease.ttl");
		*lease = json_incref(l);
	}
	rc = SL_OK;
out:
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_aks_list(sl_kms *k, json_t **aks)
{
	sl_err rc = SL_E_KMS_PROTOCOL;
	json_t *res = NULL;
	*aks = NULL;
	SL_GUARD(sl_kms_call(k, "/v1/aks", NULL, true, KMS_RETRY_ALL, &res));
	SL_ENSURE(json_is_array(json_object_get(res, "aks")), SL_E_KMS_PROTOCOL,
	          "KMS answer: \"aks\" must be an array");
	*aks = json_incref(res);
	rc = SL_OK;
out:
	json_decref(res);
	return rc;
}

sl_err sl_kms_ek_readmit(sl_kms *k, const char *ek_hex)
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_pack("{s:s}", "ek_sha256", ek_hex), *res = NULL;
	SL_ENSURE(req != NULL, SL_E_NOMEM, "readmit request");
	SL_GUARD(sl_kms_call(k, "/v1/eks/readmit", req, true, KMS_RETRY_UNPROCESSED, &res));
	rc = SL_OK;
out:
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_ak_revoke(sl_kms *k, const char *name_hex, bool *already)
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_pack("{s:s}", "name", name_hex), *res = NULL;
	SL_ENSURE(req != NULL, SL_E_NOMEM, "revoke request");
	SL_GUARD(sl_kms_call(k, "/v1/aks/revoke", req, true, KMS_RETRY_UNPROCESSED, &res));
	*already = json_is_true(json_object_get(res, "already"));
	rc = SL_OK;
out:
	json_decref(req);
	json_decref(res);
	return rc;
}
