/* The evidence kind table and the dispatch by "kind". */
#include <string.h>

#include "kinds.h"
#include "nvgpu_int.h"
#include "seclaunch/attest.h"
#include "seclaunch/json.h"
#include "seclaunch/workload.h"

/* Order matters for --tee auto: hardware TEE reports first, the TPM last. */
static const sl_evidence_kind *const kinds[] = {
    &sl_kind_snp,   &sl_kind_tdx,
    &sl_kind_tpm2,  &sl_kind_azure, /* verify only: never available for --tee auto */
    &sl_kind_nvgpu,                 /* accompanies CPU evidence: never available for --tee auto */
    &sl_kind_nitro,                 /* collected inside an enclave only: never for --tee auto */
    NULL,
};

const sl_evidence_kind *sl_evidence_kind_find(const char *name)
{
	for (size_t i = 0; kinds[i] != NULL; i++) {
		if (strcmp(kinds[i]->name, name) == 0)
			return kinds[i];
	}
	return NULL;
}

sl_err sl_evidence_collect(const char *kind, const sl_collect_opts *o, json_t **out)
{
	if (strcmp(kind, "auto") == 0) {
		for (size_t i = 0; kinds[i] != NULL; i++) {
			if (kinds[i]->available != NULL && kinds[i]->available(o))
				return kinds[i]->collect(o, out);
		}
		return sl_err_set(SL_E_ATTEST, "--tee auto: no TEE or TPM found on this machine");
	}
	const sl_evidence_kind *k = sl_evidence_kind_find(kind);
	if (k == NULL)
		return sl_err_set(SL_E_USAGE, "--tee %s: unknown evidence kind", kind);
	return k->collect(o, out);
}

sl_err sl_evidence_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	const char *kind = sl_json_getstr(ev, "kind");
	if (!json_is_object(ev) || kind == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "evidence: missing string field \"kind\"");
	const sl_evidence_kind *k = sl_evidence_kind_find(kind);
	if (k == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "evidence.kind: unknown kind '%.32s'", kind);
	sl_err rc = k->verify(ev, o, claims);
	/* the workload log replays against the register the evidence quoted */
	return rc == SL_OK ? sl_workload_verify(ev, claims) : rc;
}

sl_err sl_evidence_merge(sl_claims *dst, const sl_claims *src)
{
	/* GPU claims join as one set; everything else as sl_claims_merge */
	return sl_nvgpu_set_merge(dst, src);
}
