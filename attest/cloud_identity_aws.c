/* AWS instance identity documents: PKCS7 (CMS SignedData, DSA or RSA) or
 * the base64 RSA-SHA256 "signature", verified against the AWS certificates
 * in a trust directory. AWS certificates are pinned, self-signed, and AWS
 * does not date-check them, so neither do we. */
#include <ctype.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_identity_int.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"
#include "x509_util.h"

/* Copies base64 text without whitespace and PEM armour lines into a new
 * string (for the AWS pkcs7/signature bodies, which come wrapped). */
static SL_RESULT sl_identity_b64_clean(const char *in, char **out)
{
	sl_err rc = SL_E_NOMEM;
	size_t n = strlen(in), o = 0;
	char *s = malloc(n + 1);
	SL_ENSURE(s != NULL, SL_E_NOMEM, "allocating");
	for (size_t i = 0; i < n;) {
		/* skip "-----BEGIN ...-----" / "-----END ...-----" lines */
		if (in[i] == '-') {
			while (i < n && in[i] != '\n')
				i++;
			continue;
		}
		if (!isspace((unsigned char)in[i]))
			s[o++] = in[i];
		i++;
	}
	s[o] = '\0';
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	free(s);
	return rc;
}

static SL_RESULT load_trust(const sl_identity_opts *o, STACK_OF(X509) * *out)
{
	sl_err rc = SL_E_NOMEM;
	STACK_OF(X509) *certs = sk_X509_new_null();
	SL_GUARD_OSSL(certs != NULL, SL_E_NOMEM, "certificates");
	SL_ENSURE(o->aws_trust_dir != NULL, SL_E_USAGE,
	          "AWS identity document: no trust directory given (--aws-trust)");
	SL_GUARD(sl_x509_load_dir(o->aws_trust_dir, certs, NULL));
	SL_ENSURE(sk_X509_num(certs) > 0, SL_E_ATTEST_UNTRUSTED, "%s: holds no AWS certificate",
	          o->aws_trust_dir);
	*out = certs;
	certs = NULL;
	rc = SL_OK;
out:
	sk_X509_pop_free(certs, X509_free);
	return rc;
}

/* Verifies the PKCS7 and returns the signed content (embedded, or the
 * document when the signature is detached). */
static SL_RESULT verify_pkcs7(const uint8_t *der, size_t len, const uint8_t *doc, size_t doc_len,
                              STACK_OF(X509) * certs, uint8_t **content, size_t *content_len)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const unsigned char *q = der;
	PKCS7 *p7 = NULL;
	X509_STORE *store = X509_STORE_new();
	BIO *in = NULL, *outb = BIO_new(BIO_s_mem());
	char *mem = NULL;

	SL_GUARD_OSSL(store != NULL && outb != NULL, SL_E_NOMEM, "PKCS7");
	SL_ENSURE(len <= SL_IDENTITY_MAX_BYTES, SL_E_ATTEST_FORMAT, "AWS pkcs7: too large");
	p7 = d2i_PKCS7(NULL, &q, (long)len);
	SL_GUARD_OSSL(p7 != NULL, SL_E_ATTEST_FORMAT, "AWS pkcs7: not a DER/BER PKCS7");
	SL_ENSURE(PKCS7_type_is_signed(p7), SL_E_ATTEST_FORMAT, "AWS pkcs7: not SignedData");
	bool detached = PKCS7_get_detached(p7);
	if (detached) {
		SL_ENSURE(doc != NULL, SL_E_ATTEST_FORMAT,
		          "AWS pkcs7: detached signature and no document");
		in = BIO_new_mem_buf(doc, (int)doc_len);
		SL_GUARD_OSSL(in != NULL, SL_E_NOMEM, "PKCS7");
	}
	/* NOINTERN: the signer must be one of the pinned AWS certificates, never
	 * one the message carries; NOVERIFY: those are self-signed anchors. */
	if (PKCS7_verify(p7, certs, store, in, outb,
	                 PKCS7_NOINTERN | PKCS7_NOVERIFY | PKCS7_BINARY) != 1) {
		rc = sl_err_ossl(
		    SL_E_ATTEST_SIG,
		    "AWS identity document: the PKCS7 signature does not verify with any "
		    "certificate of the trust directory (wrong signer?)");
		goto out;
	}
	long n = BIO_get_mem_data(outb, &mem);
	SL_ENSURE(n > 0, SL_E_ATTEST_FORMAT, "AWS pkcs7: no signed content");
	*content = malloc((size_t)n + 1);
	SL_ENSURE(*content != NULL, SL_E_NOMEM, "PKCS7");
	memcpy(*content, mem, (size_t)n);
	(*content)[n] = '\0';
	*content_len = (size_t)n;
	rc = SL_OK;
out:
	BIO_free(in);
	BIO_free(outb);
	X509_STORE_free(store);
	PKCS7_free(p7);
	return rc;
}

/* The base64 RSA-SHA256 form: any pinned certificate's key may have signed it. */
static SL_RESULT verify_rsa_sig(const uint8_t *sig, size_t sig_len, const uint8_t *doc,
                                size_t doc_len, STACK_OF(X509) * certs)
{
	for (int i = 0; i < sk_X509_num(certs); i++) {
		EVP_PKEY *k = X509_get0_pubkey(sk_X509_value(certs, i));
		if (k == NULL || EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA)
			continue;
		if (sl_identity_rs256_verify(k, doc, doc_len, sig, sig_len, "AWS") == SL_OK)
			return SL_OK;
	}
	ERR_clear_error();
	return sl_err_set(
	    SL_E_ATTEST_SIG,
	    "AWS identity document: the RSA-SHA256 signature does not verify with any "
	    "certificate of the trust directory (wrong signer?)");
}

static SL_RESULT doc_claims(const uint8_t *doc, size_t len, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	json_error_t je;
	json_t *d = json_loadb((const char *)doc, len, JSON_REJECT_DUPLICATES, &je);
	time_t t = 0;
	SL_ENSURE(json_is_object(d), SL_E_ATTEST_FORMAT,
	          "AWS identity document: not a JSON object (%s)", je.text);
	static const char *const need[][2] = {{"region", "cloud.region"},
	                                      {"availabilityZone", "cloud.zone"},
	                                      {"accountId", "cloud.account_id"},
	                                      {"instanceId", "cloud.instance_id"}};
	for (size_t i = 0; i < 4; i++) {
		json_t *v = json_object_get(d, need[i][0]);
		SL_ENSURE(json_is_string(v) && json_string_length(v) > 0, SL_E_ATTEST_FORMAT,
		          "AWS identity document: %s missing", need[i][0]);
		SL_GUARD(sl_claims_set(claims, need[i][1], json_string_value(v)));
	}
	const char *region = sl_json_getstr(d, "region");
	const char *zone = sl_json_getstr(d, "availabilityZone");
	SL_ENSURE(strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(region) &&
	              strncmp(zone, region, strlen(region)) == 0,
	          SL_E_ATTEST_FORMAT,
	          "AWS identity document: availabilityZone '%s' is not in region '%s'", zone,
	          region);
	json_t *pt = json_object_get(d, "pendingTime");
	SL_ENSURE(json_is_string(pt), SL_E_ATTEST_FORMAT,
	          "AWS identity document: pendingTime missing");
	SL_GUARD(
	    sl_time_parse_rfc3339(json_string_value(pt), &t, "AWS identity document pendingTime"));
	SL_GUARD(sl_claims_set(claims, "cloud.provider", "aws"));
	SL_GUARD(sl_claims_set(claims, "cloud.region_verified", "true"));
	/* no nonce in the document: it proves where, not when */
	SL_GUARD(sl_claims_set(claims, "cloud.identity_fresh", "false"));
	SL_GUARD(sl_claims_set(claims, "cloud.identity_kind", "aws-iid"));
	SL_GUARD(sl_claims_setf(claims, "cloud.identity_iat", "%lld", (long long)t));
	rc = SL_OK;
out:
	json_decref(d);
	return rc;
}

sl_err sl_identity_verify_aws(const uint8_t *doc, size_t doc_len, const char *sig_b64, bool pkcs7,
                              const sl_identity_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	char *clean = NULL;
	uint8_t *raw = NULL, *content = NULL;
	size_t raw_len = 0, content_len = 0;
	STACK_OF(X509) *certs = NULL;
	sl_claims *tmp = NULL;
	static const sl_identity_opts none = {0};
	if (o == NULL)
		o = &none;

	SL_ENSURE(sig_b64 != NULL, SL_E_ATTEST_FORMAT, "AWS identity document: no signature");
	SL_ENSURE(doc != NULL || pkcs7, SL_E_ATTEST_FORMAT, "AWS identity document: missing");
	SL_ENSURE(doc_len <= SL_IDENTITY_MAX_BYTES, SL_E_ATTEST_FORMAT,
	          "AWS identity document: too large");
	SL_GUARD(sl_identity_b64_clean(sig_b64, &clean));
	rc = sl_b64_decode(clean, SL_IDENTITY_MAX_BYTES, &raw, &raw_len,
	                   pkcs7 ? "AWS pkcs7" : "AWS signature");
	if (rc != SL_OK)
		SL_FAIL(SL_E_ATTEST_FORMAT, "AWS %s: not base64", pkcs7 ? "pkcs7" : "signature");
	SL_GUARD(load_trust(o, &certs));
	if (pkcs7) {
		SL_GUARD(verify_pkcs7(raw, raw_len, doc, doc_len, certs, &content, &content_len));
		/* a document given beside an embedded one must be the signed bytes */
		SL_ENSURE(doc == NULL ||
		              (content_len == doc_len && memcmp(content, doc, doc_len) == 0),
		          SL_E_ATTEST_SIG,
		          "AWS identity document: differs from the content the PKCS7 signs");
		doc = content;
		doc_len = content_len;
	} else {
		SL_GUARD(verify_rsa_sig(raw, raw_len, doc, doc_len, certs));
	}
	/* claims go in only when the whole document is good */
	SL_GUARD(sl_claims_new(&tmp));
	SL_GUARD(doc_claims(doc, doc_len, tmp));
	SL_GUARD(sl_claims_merge(claims, tmp));
	rc = SL_OK;
out:
	sl_claims_free(tmp);
	sk_X509_pop_free(certs, X509_free);
	free(content);
	free(raw);
	free(clean);
	return rc;
}
