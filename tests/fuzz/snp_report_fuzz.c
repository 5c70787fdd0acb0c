/* Fuzz target: the SEV-SNP ATTESTATION_REPORT parser and claims, the GHCB
 * certificate table (auxblob) parser, and the verifier up to its certificate
 * lookup (no collateral: it must fail cleanly, never crash). */
#include <stdint.h>
#include <stdlib.h>

#include "../../attest/snp_report.h"
#include "../../attest/snp_tsm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_snp_report r;
	if (sl_snp_report_parse(data, size, &r) == SL_OK) {
		sl_claims *c = NULL;
		if (sl_claims_new(&c) == SL_OK) {
			for (int p = 0; p <= SL_SNP_PRODUCT_TURIN; p++)
				(void)sl_snp_claims(&r, (enum sl_snp_product)p, c);
			sl_verify_opts o = {.no_binding = true, .at = 1704067200};
			(void)sl_snp_verify_report(data, size, NULL, &o, true, c);
			sl_claims_free(c);
		}
	}
	json_t *certs = json_object();
	if (certs != NULL) {
		(void)sl_snp_cert_table_to_json(data, size, certs);
		json_decref(certs);
	}
	return 0;
}
