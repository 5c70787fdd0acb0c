/* seclaunch evidence import: raw report / quote -> evidence JSON. */
#include <ctype.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "azure_hcl.h"
#include "import_format.h"
#include "nitro.h"
#include "snp_report.h"
#include "tdx_quote.h"
#include "x509_util.h"
#include "seclaunch/util.h"

#define MAX_RAW (64 * 1024) /* a TDX quote with its PCK chain: ~5-8 KiB */

/* The evidence key for an AMD certificate, from its subject CN. */
static const char *amd_cert_key(const char *cn)
{
	if (strcmp(cn, "SEV-VCEK") == 0)
		return "vcek";
	if (strcmp(cn, "SEV-VLEK") == 0)
		return "vlek";
	if (strncmp(cn, "SEV-VLEK-", 9) == 0)
		return "asvk";
	if (strncmp(cn, "ARK-", 4) == 0)
		return "ark";
	if (strncmp(cn, "SEV-", 4) == 0)
		return "ask";
	return NULL;
}

static SL_RESULT add_certs(json_t *obj, const sl_blob *certs, size_t n)
{
	sl_err rc = SL_E_INPUT;
	STACK_OF(X509) *st = sk_X509_new_null();
	unsigned char *der = NULL;
	char *b64 = NULL;

	SL_ENSURE(st != NULL, SL_E_NOMEM, "certificates");
	for (size_t i = 0; i < n; i++)
		SL_GUARD(sl_x509_parse_blob(certs[i].p, certs[i].len, st, NULL, certs[i].name));
	for (int i = 0; i < sk_X509_num(st); i++) {
		char cn[64];
		sl_x509_subject_cn(sk_X509_value(st, i), cn, sizeof(cn));
		const char *key = amd_cert_key(cn);
		SL_ENSURE(key != NULL, SL_E_INPUT,
		          "certificate '%s' is not an AMD VCEK, VLEK, ASK, ASVK or ARK", cn);
		SL_ENSURE(json_object_get(obj, key) == NULL, SL_E_INPUT,
		          "two certificates for \"%s\" given", key);
		int dl = i2d_X509(sk_X509_value(st, i), &der);
		SL_ENSURE(dl > 0, SL_E_CRYPTO, "encoding certificate '%s'", cn);
		SL_GUARD(sl_b64_encode(der, (size_t)dl, &b64));
		SL_ENSURE(json_object_set_new(obj, key, json_string(b64)) == 0, SL_E_NOMEM,
		          "certificates");
		OPENSSL_free(der);
		der = NULL;
		free(b64);
		b64 = NULL;
	}
	rc = SL_OK;
out:
	OPENSSL_free(der);
	free(b64);
	sk_X509_pop_free(st, X509_free);
	return rc;
}

/* The raw bytes of a binary, hex or base64 report. */
static SL_RESULT decode_report(const char *kind, const uint8_t *p, size_t len, uint8_t **bin,
                               size_t *blen, const char **format)
{
	const char *dummy = NULL;
	return sl_import_decode(p, len, strcmp(kind, "aws-nitro") == 0 ? SL_NITRO_DOC_MAX : MAX_RAW,
	                        bin, blen, format != NULL ? format : &dummy,
	                        strcmp(kind, "tdx") == 0 ? "quote" : "report");
}

sl_err sl_evidence_import(const char *kind, const uint8_t *report, size_t len, const sl_blob *certs,
                          size_t ncerts, json_t **out, const char **format)
{
	sl_err rc = SL_E_USAGE;
	json_t *ev = NULL, *cj = NULL;
	char *b64 = NULL;
	uint8_t *bin = NULL;
	size_t blen = 0;
	const char *field = "report";

	*out = NULL;
	if (format != NULL)
		*format = NULL;
	if (strcmp(kind, "sev-snp") == 0 || strcmp(kind, "tdx") == 0 ||
	    strcmp(kind, "aws-nitro") == 0) {
		SL_GUARD(decode_report(kind, report, len, &bin, &blen, format));
		report = bin;
		len = blen;
	}
	if (strcmp(kind, "sev-snp") == 0) {
		sl_snp_report r;
		SL_GUARD(sl_snp_report_parse(report, len, &r));
		cj = json_object();
		SL_ENSURE(cj != NULL, SL_E_NOMEM, "evidence");
		SL_GUARD(add_certs(cj, certs, ncerts));
	} else if (strcmp(kind, "tdx") == 0) {
		sl_tdx_quote q;
		SL_ENSURE(ncerts == 0, SL_E_USAGE,
		          "--certs: a TDX quote carries its own PCK chain; put collateral in "
		          "the verifier's --collateral directory");
		SL_GUARD(sl_tdx_quote_parse(report, len, &q));
		field = "quote";
	} else if (strcmp(kind, "aws-nitro") == 0) {
		sl_nitro_doc d;
		SL_ENSURE(ncerts == 0, SL_E_USAGE,
		          "--certs: a Nitro attestation document carries its own certificate "
		          "chain (cabundle)");
		SL_GUARD(sl_nitro_doc_parse(report, len, &d));
		sl_nitro_doc_free(&d);
		field = "document";
	} else if (strcmp(kind, "azure-cvm") == 0) {
		json_t *in = json_loadb((const char *)report, len, 0, NULL);
		SL_ENSURE(in != NULL, SL_E_ATTEST_FORMAT,
		          "azure-cvm: the report file is not JSON (az-snp-vtpm / az-tdx-vtpm "
		          "evidence)");
		rc = sl_azure_import(in, &ev);
		json_decref(in);
		SL_GUARD(rc);
		if (ncerts > 0) {
			cj = json_object();
			SL_ENSURE(cj != NULL, SL_E_NOMEM, "evidence");
			SL_GUARD(add_certs(cj, certs, ncerts));
			json_t *had = json_object_get(ev, "certs");
			SL_ENSURE((had == NULL || json_object_update(cj, had) == 0) &&
			              json_object_set(ev, "certs", cj) == 0,
			          SL_E_NOMEM, "evidence");
		}
		*out = ev;
		ev = NULL;
		rc = SL_OK;
		goto out;
	} else {
		SL_FAIL(SL_E_USAGE, "--kind %s: want sev-snp, tdx, azure-cvm or aws-nitro", kind);
	}
	SL_GUARD(sl_b64_encode(report, len, &b64));
	ev = json_pack("{s:s, s:s}", "kind", kind, field, b64);
	SL_ENSURE(ev != NULL, SL_E_NOMEM, "evidence");
	if (cj != NULL && json_object_size(cj) > 0)
		SL_ENSURE(json_object_set(ev, "certs", cj) == 0, SL_E_NOMEM, "evidence");
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(cj);
	free(b64);
	free(bin);
	return rc;
}

sl_err sl_evidence_add_ccel(json_t *ev, const uint8_t *log, size_t len)
{
	char *b64 = NULL;
	uint8_t rtmr[4][48];
	size_t events = 0;
	sl_err rc = sl_tdx_ccel_replay(log, len, rtmr, &events);
	if (rc != SL_OK)
		return rc;
	rc = sl_b64_encode(log, len, &b64);
	if (rc != SL_OK)
		return rc;
	if (json_object_set_new(ev, "ccel", json_string(b64)) != 0)
		rc = sl_err_set(SL_E_NOMEM, "evidence");
	free(b64);
	return rc;
}
