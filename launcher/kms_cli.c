/* KMS paths of `seclaunch encrypt --kms` and `seclaunch decrypt --kms`. */
#include <stdlib.h>
#include <string.h>

#include "kms_cli.h"
#include "seclaunch/attest.h"

sl_err sl_kms_cli_new_dek(const char *url, const char *ca, const char *token_file,
                          const char *key_id, const char *dataset_id, sl_secret **dek,
                          uint8_t wrapped[static SL_KMS_WRAPPED_DEK_LEN])
{
	sl_err rc = SL_E_USAGE;
	sl_kms_opts ko = {.url = url,
	                  .ca_file = ca != NULL ? ca : getenv("SECLAUNCH_KMS_CA"),
	                  .admin_token_file = token_file};
	sl_kms *k = NULL;
	sl_secret *d = NULL;
	uint8_t *w = NULL;
	size_t wl = 0;
	SL_ENSURE(key_id != NULL, SL_E_USAGE, "--kms needs --key-id ID");
	SL_ENSURE(token_file != NULL, SL_E_USAGE,
	          "--kms needs --admin-token-file F (wrapping is an admin call)");
	SL_GUARD(sl_kms_new(&ko, &k));
	SL_GUARD(sl_secret_random(SL_KMS_DEK_LEN, &d));
	SL_GUARD(sl_kms_wrap(k, key_id, dataset_id, d, &w, &wl));
	memcpy(wrapped, w, SL_KMS_WRAPPED_DEK_LEN);
	*dek = d;
	d = NULL;
	rc = SL_OK;
out:
	free(w);
	sl_secret_free(d);
	sl_kms_free(k);
	return rc;
}

sl_err sl_kms_cli_release_dek(const char *url, const char *ca, const sl_sld_header *h,
                              sl_secret **dek)
{
	sl_err rc = SL_E_INPUT;
	sl_kms_opts ko = {.url = url, .ca_file = ca != NULL ? ca : getenv("SECLAUNCH_KMS_CA")};
	sl_kms *k = NULL;
	sl_kms_challenge ch;
	uint8_t eph_pub[SL_EPH_PUB_LEN], binding[SL_BINDING_LEN];
	sl_secret *eph_sk = NULL, *deks[1] = {NULL};
	json_t *ev = NULL, *arr = json_array();
	size_t wl = 0;
	const uint8_t *w = sl_sld_header_wrapped_dek(h, &wl);
	const char *key_id = sl_sld_header_key_id(h);
	SL_ENSURE(arr != NULL, SL_E_NOMEM, "evidence");
	SL_ENSURE(key_id != NULL && w != NULL && wl > 0, SL_E_INPUT,
	          "the file has no KMS key reference (it was encrypted with a key file: use "
	          "--key-file)");
	SL_GUARD(sl_kms_new(&ko, &k));
	SL_GUARD(sl_kms_challenge_get(k, &ch));
	SL_GUARD(sl_kms_eph_keypair(eph_pub, &eph_sk));
	/* no local policy here: the server's digest from the challenge goes in the binding */
	sl_binding_compute(ch.nonce, eph_pub, ch.policy_digest, binding);
	sl_collect_opts co = {.nonce = binding, .nonce_len = sizeof(binding)};
	SL_GUARD(sl_evidence_collect("auto", &co, &ev));
	SL_ENSURE(json_array_append_new(arr, ev) == 0, SL_E_NOMEM, "evidence");
	ev = NULL;
	sl_kms_key_req kr = {.key_id = key_id,
	                     .dataset_id = sl_sld_header_dataset_id(h),
	                     .wrapped_dek = w,
	                     .wrapped_dek_len = wl};
	sl_kms_release_req rq = {.nonce = ch.nonce,
	                         .eph_pub = eph_pub,
	                         .policy_digest = ch.policy_digest,
	                         .evidence = arr,
	                         .keys = &kr,
	                         .nkeys = 1};
	SL_GUARD(sl_kms_release(k, &rq, eph_sk, deks));
	*dek = deks[0];
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(arr);
	sl_secret_free(eph_sk);
	sl_kms_free(k);
	return rc;
}
