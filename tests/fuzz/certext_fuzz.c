/* Fuzz target: certificate extension parsing. The input is tried as a DER
 * certificate (AMD VCEK hwID / TCB SVN extensions, the Intel PCK SGX
 * extension), as the SGX extension's DER on its own, and as a PEM/DER blob. */
#include <stdint.h>

#include "../../attest/tdx_quote.h"
#include "../../attest/x509_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const amd_oids[] = {
    "1.3.6.1.4.1.3704.1.3.1", "1.3.6.1.4.1.3704.1.3.2", "1.3.6.1.4.1.3704.1.3.3",
    "1.3.6.1.4.1.3704.1.3.8", "1.3.6.1.4.1.3704.1.3.9",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_pck_ext e;
	(void)sl_pck_ext_parse_der(data, size, &e);
	X509 *x = NULL;
	if (sl_x509_from_der(data, size, &x, "fuzz") == SL_OK) {
		bool present = false;
		uint32_t v = 0;
		for (size_t i = 0; i < sizeof(amd_oids) / sizeof(amd_oids[0]); i++)
			(void)sl_x509_ext_uint(x, amd_oids[i], &present, &v, "fuzz");
		(void)sl_x509_ext(x, "1.3.6.1.4.1.3704.1.4");
		(void)sl_pck_ext_from_cert(x, &e);
		char cn[64];
		sl_x509_subject_cn(x, cn, sizeof(cn));
		X509_free(x);
	}
	STACK_OF(X509) *st = sk_X509_new_null();
	STACK_OF(X509_CRL) *crls = sk_X509_CRL_new_null();
	if (st != NULL && crls != NULL)
		(void)sl_x509_parse_blob(data, size, st, crls, "fuzz");
	sk_X509_pop_free(st, X509_free);
	sk_X509_CRL_pop_free(crls, X509_CRL_free);
	return 0;
}
