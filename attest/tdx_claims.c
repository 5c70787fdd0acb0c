/* The claims of a verified TDX quote (docs/evidence-tdx.md). */
#include <stdio.h>

#include "tdx_quote.h"

/* TD ATTRIBUTES bits (Intel TDX module ABI): name and bit number. */
static const struct {
	const char *key;
	int bit;
} td_attr_bits[] = {
    {"tdx.attributes.debug", 0},       {"tdx.attributes.sept_ve_disable", 28},
    {"tdx.attributes.migratable", 29}, {"tdx.attributes.pks", 30},
    {"tdx.attributes.kl", 31},         {"tdx.attributes.perfmon", 63},
};

sl_err sl_tdx_claims(const sl_tdx_quote *q, const sl_pck_ext *pck, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	const sl_tdx_body *b = &q->body;
	uint64_t attr = 0;
	char key[32];

	for (int i = 0; i < 8; i++)
		attr |= (uint64_t)b->td_attributes[i] << (8 * i);
	SL_GUARD(sl_claims_set(c, "tee.kind", "tdx"));
	SL_GUARD(sl_claims_setf(c, "tdx.version", "%u", q->version));
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrtd", b->mrtd, 48));
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "tdx.rtmr%d", i);
		SL_GUARD(sl_claims_set_hex(c, key, b->rtmr[i], 48));
	}
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrconfigid", b->mrconfigid, 48));
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrowner", b->mrowner, 48));
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrownerconfig", b->mrownerconfig, 48));
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrseam", b->mrseam, 48));
	SL_GUARD(sl_claims_set_hex(c, "tdx.mrsignerseam", b->mrsignerseam, 48));
	SL_GUARD(sl_claims_set_hex(c, "tdx.tee_tcb_svn", b->tee_tcb_svn, 16));
	SL_GUARD(sl_claims_set_hex(c, "tdx.td_attributes", b->td_attributes, 8));
	SL_GUARD(sl_claims_set_hex(c, "tdx.seam_attributes", b->seam_attributes, 8));
	SL_GUARD(sl_claims_set_hex(c, "tdx.xfam", b->xfam, 8));
	SL_GUARD(sl_claims_set_hex(c, "tdx.report_data", b->report_data, 64));
	if (b->v15) {
		SL_GUARD(sl_claims_set_hex(c, "tdx.tee_tcb_svn2", b->tee_tcb_svn2, 16));
		SL_GUARD(sl_claims_set_hex(c, "tdx.mrservicetd", b->mrservicetd, 48));
	}
	for (size_t i = 0; i < sizeof(td_attr_bits) / sizeof(td_attr_bits[0]); i++)
		SL_GUARD(sl_claims_set(c, td_attr_bits[i].key,
		                       (attr >> td_attr_bits[i].bit & 1) ? "true" : "false"));
	SL_GUARD(sl_claims_set_hex(c, "tdx.fmspc", pck->fmspc, 6));
	SL_GUARD(sl_claims_set_hex(c, "tdx.pce_id", pck->pceid, 2));
	SL_GUARD(sl_claims_setf(c, "tdx.pce_svn", "%u", pck->pcesvn));
	SL_GUARD(sl_claims_setf(c, "tdx.qe.isvsvn", "%u", q->qe_report.isvsvn));
	SL_GUARD(sl_claims_set_hex(c, "tdx.qe.mrsigner", q->qe_report.mrsigner, 32));
	rc = SL_OK;
out:
	return rc;
}
