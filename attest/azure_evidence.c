/* The "azure-cvm" evidence kind (verify only):
 * {"kind":"azure-cvm", "hcl_report":b64, "certs":{"vcek":b64,...} (SNP),
 *  "td_quote":b64 (TDX), "tpm_quote":{"message":b64 TPMS_ATTEST,
 *  "signature":b64 (RSASSA-PKCS1-v1_5), "pcrs":[24 x b64 SHA-256 PCR]}}
 * and the import of the CoCo attestation agent's az-snp-vtpm / az-tdx-vtpm
 * evidence (v0: byte arrays; v1, v2: hex quote fields, base64url blobs). */
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "azure_hcl.h"
#include "kinds.h"
#include "x509_util.h"
#include "seclaunch/util.h"

#define MAX_BLOB (64 * 1024)

static bool azure_available(const sl_collect_opts *o)
{
	(void)o;
	return false;
}

static SL_RESULT azure_collect(const sl_collect_opts *o, json_t **out)
{
	(void)o;
	*out = NULL;
	return sl_err_set(SL_E_ATTEST,
	                  "azure-cvm: collection (vTPM NV index 0x01400001 + a TPM quote) is not "
	                  "implemented; use `seclaunch evidence import --kind azure-cvm`");
}

enum enc { ENC_HEX, ENC_B64URL };

/* A field as bytes: an array of byte integers, or a string in enc. */
static SL_RESULT bytes_of(const json_t *v, enum enc enc, uint8_t **out, size_t *len,
                          const char *what)
{
	*out = NULL;
	*len = 0;
	if (json_is_array(v)) {
		size_t n = json_array_size(v), i;
		json_t *x = NULL;
		if (n > MAX_BLOB)
			return sl_err_set(SL_E_ATTEST_FORMAT, "%s: too long", what);
		uint8_t *b = malloc(n + 1);
		if (b == NULL)
			return sl_err_set(SL_E_NOMEM, "%s", what);
		json_array_foreach (v, i, x) {
			json_int_t k = json_integer_value(x);
			if (!json_is_integer(x) || k < 0 || k > 255) {
				free(b);
				return sl_err_set(SL_E_ATTEST_FORMAT, "%s[%zu]: not a byte", what,
				                  i);
			}
			b[i] = (uint8_t)k;
		}
		*out = b;
		*len = n;
		return SL_OK;
	}
	const char *s = json_string_value(v);
	if (s == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: missing", what);
	/* the agent pads its base64url in some versions: padding is ignored */
	size_t n = strlen(s);
	while (enc == ENC_B64URL && n > 0 && s[n - 1] == '=')
		n--;
	sl_err rc = enc == ENC_HEX ? sl_hex_decode_alloc(s, MAX_BLOB, out, len, what)
	                           : sl_b64url_decode(s, n, MAX_BLOB, out, len, what);
	return rc == SL_OK ? SL_OK : sl_err_wrap(SL_E_ATTEST_FORMAT, "azure evidence");
}

static SL_RESULT put_b64(json_t *obj, const char *key, const uint8_t *p, size_t n)
{
	char *s = NULL;
	sl_err rc = sl_b64_encode(p, n, &s);
	if (rc != SL_OK)
		return rc;
	int r = json_is_array(obj) ? json_array_append_new(obj, json_string(s))
	                           : json_object_set_new(obj, key, json_string(s));
	free(s);
	return r == 0 ? SL_OK : sl_err_set(SL_E_NOMEM, "azure evidence");
}

static SL_RESULT field(json_t *dst, const char *dkey, const json_t *v, enum enc enc,
                       const char *what)
{
	uint8_t *b = NULL;
	size_t n = 0;
	sl_err rc = bytes_of(v, enc, &b, &n, what);
	if (rc == SL_OK)
		rc = put_b64(dst, dkey, b, n);
	free(b);
	return rc;
}

/* The VCEK: a PEM string, or base64url DER. */
static SL_RESULT vcek_field(json_t *certs, const json_t *v)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const char *s = json_string_value(v);
	STACK_OF(X509) *st = sk_X509_new_null();
	unsigned char *der = NULL;

	SL_ENSURE(s != NULL && st != NULL, SL_E_ATTEST_FORMAT, "azure evidence: vcek missing");
	if (strncmp(s, "-----BEGIN", 10) == 0) {
		SL_GUARD(sl_x509_parse_blob((const uint8_t *)s, strlen(s), st, NULL, "vcek"));
		int dl = i2d_X509(sk_X509_value(st, 0), &der);
		SL_ENSURE(dl > 0, SL_E_CRYPTO, "vcek");
		SL_GUARD(put_b64(certs, "vcek", der, (size_t)dl));
	} else {
		SL_GUARD(field(certs, "vcek", v, ENC_B64URL, "vcek"));
	}
	rc = SL_OK;
out:
	OPENSSL_free(der);
	sk_X509_pop_free(st, X509_free);
	return rc;
}

sl_err sl_azure_import(const json_t *in, json_t **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	json_t *ev = json_object(), *tq = json_object(), *pcrs = json_array(),
	       *certs = json_object();
	size_t i;
	json_t *p = NULL;

	*out = NULL;
	SL_ENSURE(ev != NULL && tq != NULL && pcrs != NULL && certs != NULL, SL_E_NOMEM,
	          "azure evidence");
	SL_ENSURE(json_is_object(in), SL_E_ATTEST_FORMAT, "azure evidence: not a JSON object");
	const json_t *hcl = json_object_get(in, "hcl_report");
	if (hcl == NULL)
		hcl = json_object_get(in, "report"); /* v0 SNP */
	const json_t *q = json_object_get(in, "tpm_quote");
	if (q == NULL)
		q = json_object_get(in, "quote"); /* v0 SNP */
	SL_ENSURE(hcl != NULL && json_is_object(q), SL_E_ATTEST_FORMAT,
	          "azure evidence: want hcl_report (or report) and tpm_quote (or quote)");
	SL_ENSURE(json_object_set_new(ev, "kind", json_string("azure-cvm")) == 0, SL_E_NOMEM,
	          "azure evidence");
	SL_GUARD(field(ev, "hcl_report", hcl, ENC_B64URL, "hcl_report"));
	if (json_object_get(in, "td_quote") != NULL)
		SL_GUARD(
		    field(ev, "td_quote", json_object_get(in, "td_quote"), ENC_B64URL, "td_quote"));
	if (json_object_get(in, "vcek") != NULL) {
		SL_GUARD(vcek_field(certs, json_object_get(in, "vcek")));
		SL_ENSURE(json_object_set(ev, "certs", certs) == 0, SL_E_NOMEM, "azure evidence");
	}
	SL_GUARD(field(tq, "message", json_object_get(q, "message"), ENC_HEX, "tpm_quote.message"));
	SL_GUARD(field(tq, "signature", json_object_get(q, "signature"), ENC_HEX,
	               "tpm_quote.signature"));
	json_array_foreach (json_object_get(q, "pcrs"), i, p)
		SL_GUARD(field(pcrs, NULL, p, ENC_HEX, "tpm_quote.pcrs"));
	SL_ENSURE(json_object_set(tq, "pcrs", pcrs) == 0 &&
	              json_object_set(ev, "tpm_quote", tq) == 0,
	          SL_E_NOMEM, "azure evidence");
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(tq);
	json_decref(pcrs);
	json_decref(certs);
	return rc;
}

const sl_evidence_kind sl_kind_azure = {
    .name = "azure-cvm",
    .available = azure_available,
    .collect = azure_collect,
    .verify = sl_azure_verify,
};
