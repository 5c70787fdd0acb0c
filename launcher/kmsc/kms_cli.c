/* KMS paths of `seclaunch encrypt --kms` and `seclaunch decrypt --kms`. */
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "kms_cli.h"
#include "seclaunch/attest.h"

int sl_kms_cli_key_source(const char *cmd, const char *key_file, const char *kms)
{
	if ((key_file == NULL) == (kms == NULL))
		return sl_cli_usage(cmd, "give exactly one of --key-file F and --kms URL");
	return 0;
}

sl_err sl_kms_cli_new_dek(const sl_kms_opts *ko, const char *key_id, const char *dataset_id,
                          sl_secret **dek, uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                          size_t *wrapped_len)
{
	sl_err rc = SL_E_USAGE;
	sl_kms *k = NULL;
	sl_secret *d = NULL;
	uint8_t *w = NULL;
	size_t wl = 0;
	SL_ENSURE(key_id != NULL, SL_E_USAGE, "--kms needs --key-id ID");
	SL_ENSURE(ko->admin_token_file != NULL, SL_E_USAGE,
	          "--kms needs --admin-token-file F (wrapping needs a token of scope wrap "
	          "or admin)");
	SL_GUARD(sl_kms_new(ko, &k));
	SL_GUARD(sl_secret_random(SL_KMS_DEK_LEN, &d));
	SL_GUARD(sl_kms_wrap(k, key_id, dataset_id, d, &w, &wl));
	memcpy(wrapped, w, wl);
	*wrapped_len = wl;
	*dek = d;
	d = NULL;
	rc = SL_OK;
out:
	free(w);
	sl_secret_free(d);
	sl_kms_free(k);
	return rc;
}

sl_err sl_kms_cli_release_dek(const sl_kms_opts *ko, const char *tcti,
                              const struct sl_region_id *rid, const sl_sld_header *h,
                              sl_secret **dek)
{
	size_t wl = 0;
	const uint8_t *w = sl_sld_header_wrapped_dek(h, &wl);
	sl_kms_key_req kr = {.key_id = sl_sld_header_key_id(h),
	                     .dataset_id = sl_sld_header_dataset_id(h),
	                     .wrapped_dek = w,
	                     .wrapped_dek_len = wl};
	return sl_kms_cli_release_ref(ko, tcti, rid, &kr, dek);
}

sl_err sl_kms_cli_release_ref(const sl_kms_opts *ko, const char *tcti,
                              const struct sl_region_id *rid, const sl_kms_key_req *ref,
                              sl_secret **dek)
{
	sl_err rc = SL_E_INPUT;
	sl_kms *k = NULL;
	sl_claims *claims = NULL;
	json_t *idoc = NULL, *ids = json_array();
	sl_kms_challenge ch;
	uint8_t eph_pub[SL_EPH_PUB_LEN], binding[SL_BINDING_LEN];
	sl_secret *eph_sk = NULL, *deks[1] = {NULL};
	json_t *ev = NULL, *arr = json_array();
	SL_ENSURE(arr != NULL && ids != NULL, SL_E_NOMEM, "evidence");
	SL_ENSURE(ref->key_id != NULL && ref->key_id[0] != '\0' && ref->wrapped_dek != NULL &&
	              ref->wrapped_dek_len > 0,
	          SL_E_INPUT,
	          "the dataset has no KMS key reference (it was encrypted with a key file: "
	          "use --key-file)");
	SL_GUARD(sl_kms_new(ko, &k));
	SL_GUARD(sl_kms_challenge_get(k, &ch));
	SL_GUARD(sl_kms_eph_keypair(eph_pub, &eph_sk));
	/* no local policy here: the server's digest from the challenge goes in the binding */
	sl_binding_compute(ch.nonce, eph_pub, ch.policy_digest, binding);
	sl_collect_opts co = {.tcti = tcti, .nonce = binding, .nonce_len = sizeof(binding)};
	SL_GUARD(sl_evidence_collect("auto", &co, &ev));
	json_t *e = ev;
	ev = NULL; /* append_new takes it either way */
	SL_ENSURE(json_array_append_new(arr, e) == 0, SL_E_NOMEM, "evidence");
	/* the same region identity as `run` sends, checked here first */
	SL_GUARD(sl_claims_new(&claims));
	SL_GUARD(sl_region_id_collect(rid, binding, claims, &idoc));
	if (idoc != NULL) {
		json_t *d = idoc;
		idoc = NULL; /* append_new takes it either way */
		SL_ENSURE(json_array_append_new(ids, d) == 0, SL_E_NOMEM, "identity");
	}
	sl_kms_key_req kr = *ref;
	sl_kms_release_req rq = {.nonce = ch.nonce,
	                         .eph_pub = eph_pub,
	                         .policy_digest = ch.policy_digest,
	                         .evidence = arr,
	                         .identity = ids,
	                         .keys = &kr,
	                         .nkeys = 1};
	SL_GUARD(sl_kms_release(k, &rq, eph_sk, deks));
	*dek = deks[0];
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(arr);
	json_decref(idoc);
	json_decref(ids);
	sl_claims_free(claims);
	sl_secret_free(eph_sk);
	sl_kms_free(k);
	return rc;
}
