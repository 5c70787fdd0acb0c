/* AWS Nitro Enclaves attestation document verification and the "aws-nitro"
 * evidence kind: {"kind":"aws-nitro","document":b64 COSE_Sign1}
 * (docs/evidence-aws-nitro.md).
 *
 * Checked, in order: the form (nitro_doc.c); cabundle[0] is the pinned AWS
 * Nitro Enclaves root G1; the leaf certificate chains through exactly the
 * cabundle to it at the verification time; the document's timestamp lies in
 * the leaf's validity; the ES384 signature over the COSE Sig_structure with
 * the leaf's P-384 key; the nonce field equals the binding. Debug-mode
 * enclaves (PCR0 all zeros) verify and say so (nitro.debug=true): policy
 * refuses them unless a rule sets debug_allowed. */
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinds.h"
#include "nitro.h"
#include "x509_util.h"
#include "seclaunch/buf.h"
#include "seclaunch/json.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define NSM_DEV "/dev/nsm"
#define MAX_DOC_B64 (SL_NITRO_DOC_MAX * 4 / 3 + 8)

/* SHA-256 of the AWS Nitro Enclaves root G1 certificate (DER), "CN=aws.nitro-enclaves",
 * 2019-10-28..2049-10-28, the fingerprint AWS documents
 * (docs.aws.amazon.com/enclaves/latest/user/verify-root.html); copy in
 * tests/vectors/aws-nitro/aws_nitro_enclaves_root_g1.pem. */
const uint8_t sl_nitro_root_sha256[32] = {
    0x64, 0x1a, 0x03, 0x21, 0xa3, 0xe2, 0x44, 0xef, 0xe4, 0x56, 0x46, 0x31, 0x95, 0xd6, 0x06, 0x31,
    0x7e, 0xd7, 0xcd, 0xcc, 0x3c, 0x17, 0x56, 0xe0, 0x98, 0x93, 0xf3, 0xc6, 0x8f, 0x79, 0xbb, 0x5b};

static bool is_p384(EVP_PKEY *k)
{
	char curve[32] = "";
	size_t n = 0;
	return k != NULL && EVP_PKEY_is_a(k, "EC") &&
	       EVP_PKEY_get_utf8_string_param(k, "group", curve, sizeof(curve), &n) == 1 &&
	       strcmp(curve, "secp384r1") == 0;
}

/* A CBOR byte-string head for n bytes. */
static SL_RESULT write_bstr(sl_writer *w, const uint8_t *p, size_t n)
{
	sl_err rc = SL_E_INTERNAL;
	if (n < 24) {
		SL_GUARD(sl_write_u8(w, (uint8_t)(0x40 | n)));
	} else if (n <= 0xff) {
		SL_GUARD(sl_write_u8(w, 0x58));
		SL_GUARD(sl_write_u8(w, (uint8_t)n));
	} else if (n <= 0xffff) {
		SL_GUARD(sl_write_u8(w, 0x59));
		SL_GUARD(sl_write_u16be(w, (uint16_t)n));
	} else {
		SL_GUARD(sl_write_u8(w, 0x5a));
		SL_GUARD(sl_write_u32be(w, (uint32_t)n));
	}
	SL_GUARD(sl_write_bytes(w, p, n));
	rc = SL_OK;
out:
	return rc;
}

/* ECDSA P-384 / SHA-384 over Sig_structure = ["Signature1", protected, h'', payload]. */
static SL_RESULT check_signature(const sl_nitro_doc *d, EVP_PKEY *key)
{
	sl_err rc = SL_E_ATTEST_SIG;
	static const uint8_t context[] = {0x84, 0x6a, 'S', 'i', 'g', 'n',
	                                  'a',  't',  'u', 'r', 'e', '1'};
	sl_writer w;
	ECDSA_SIG *s = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(d->sig, 48, NULL), *ss = BN_bin2bn(d->sig + 48, 48, NULL);
	unsigned char *der = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	sl_writer_init(&w, 2 * SL_NITRO_DOC_MAX);
	SL_GUARD_OSSL(s != NULL && r != NULL && ss != NULL && md != NULL, SL_E_NOMEM,
	              "Nitro signature");
	SL_GUARD(sl_write_bytes(&w, context, sizeof(context)));
	SL_GUARD(write_bstr(&w, d->protected_hdr.p, d->protected_hdr.len));
	SL_GUARD(sl_write_u8(&w, 0x40)); /* external_aad: empty */
	SL_GUARD(write_bstr(&w, d->payload.p, d->payload.len));
	SL_GUARD_OSSL(ECDSA_SIG_set0(s, r, ss) == 1, SL_E_CRYPTO, "Nitro signature");
	r = ss = NULL;
	int dl = i2d_ECDSA_SIG(s, &der);
	SL_GUARD_OSSL(dl > 0, SL_E_CRYPTO, "Nitro signature");
	SL_GUARD_OSSL(EVP_DigestVerifyInit(md, NULL, EVP_sha384(), NULL, key) == 1, SL_E_CRYPTO,
	              "Nitro signature");
	if (EVP_DigestVerify(md, der, (size_t)dl, w.data, w.len) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG,
		        "Nitro document: the COSE_Sign1 ES384 signature (over the protected header "
		        "and the payload) does not verify with the leaf certificate's key");
	}
	rc = SL_OK;
out:
	sl_writer_free(&w);
	BN_free(r);
	BN_free(ss);
	ECDSA_SIG_free(s);
	OPENSSL_free(der);
	EVP_MD_CTX_free(md);
	return rc;
}

/* certificate <- cabundle[n-1] <- ... <- cabundle[0] = the pinned root, at o->at. */
static SL_RESULT check_chain(const sl_nitro_doc *d, const uint8_t root_fp[static 32], time_t at,
                             X509 **leaf_out)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(X509) *mids = sk_X509_new_null(), *roots = sk_X509_new_null(), *chain = NULL;
	X509 *leaf = NULL, *x = NULL;
	uint8_t fp[32];
	char what[48];

	*leaf_out = NULL;
	SL_ENSURE(mids != NULL && roots != NULL, SL_E_NOMEM, "Nitro chain");
	SL_GUARD(
	    sl_x509_from_der(d->certificate.p, d->certificate.len, &leaf, "document.certificate"));
	for (size_t i = 0; i < d->ncabundle; i++) {
		snprintf(what, sizeof(what), "document.cabundle[%zu]", i);
		SL_GUARD(sl_x509_from_der(d->cabundle[i].p, d->cabundle[i].len, &x, what));
		if (i == 0) {
			sl_x509_fingerprint(x, fp);
			SL_ENSURE(
			    memcmp(fp, root_fp, 32) == 0, SL_E_ATTEST_UNTRUSTED,
			    "document.cabundle[0] is not the pinned AWS Nitro Enclaves root G1 "
			    "(SHA-256 %02x%02x%02x%02x...)",
			    fp[0], fp[1], fp[2], fp[3]);
		}
		SL_ENSURE(sk_X509_push(i == 0 ? roots : mids, x) > 0, SL_E_NOMEM, "Nitro chain");
		x = NULL;
	}
	SL_ENSURE(is_p384(X509_get0_pubkey(leaf)), SL_E_ATTEST_CHAIN,
	          "document.certificate: the key is not ECDSA P-384");
	SL_GUARD(sl_x509_verify_chain(leaf, mids, roots, at, &chain, "Nitro document.certificate"));
	SL_ENSURE((size_t)sk_X509_num(chain) == d->ncabundle + 1, SL_E_ATTEST_CHAIN,
	          "Nitro chain: %d certificates from the leaf to the root, but the cabundle holds "
	          "%zu besides the leaf",
	          sk_X509_num(chain), d->ncabundle);
	*leaf_out = leaf;
	leaf = NULL;
	rc = SL_OK;
out:
	X509_free(leaf);
	X509_free(x);
	sk_X509_pop_free(mids, X509_free);
	sk_X509_pop_free(roots, X509_free);
	sk_X509_pop_free(chain, X509_free);
	return rc;
}

/* The document was made while its leaf certificate was valid. */
static SL_RESULT check_timestamp(const sl_nitro_doc *d, X509 *leaf)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	struct tm nb, na;
	SL_ENSURE(d->timestamp_ms / 1000 <= (uint64_t)INT64_MAX, SL_E_ATTEST_FORMAT,
	          "document.timestamp: out of range");
	time_t ts = (time_t)(d->timestamp_ms / 1000);
	SL_ENSURE(ASN1_TIME_to_tm(X509_get0_notBefore(leaf), &nb) == 1 &&
	              ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &na) == 1,
	          SL_E_ATTEST_CHAIN, "document.certificate: unreadable validity dates");
	SL_ENSURE(ts >= timegm(&nb) && ts <= timegm(&na), SL_E_ATTEST_CHAIN,
	          "document.timestamp (%llu ms) is outside the leaf certificate's validity",
	          (unsigned long long)d->timestamp_ms);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_binding(const sl_nitro_doc *d, const sl_verify_opts *o, sl_claims *claims)
{
	if (o->no_binding)
		return sl_claims_set(claims, "binding", "unchecked");
	if (o->expect == NULL || o->expect_len == 0)
		return sl_err_set(SL_E_ATTEST_BINDING,
		                  "Nitro document: no expected binding given (or no_binding)");
	if (!d->nonce.present)
		return sl_err_set(SL_E_ATTEST_BINDING,
		                  "Nitro document.nonce is absent: the document is not bound to "
		                  "this request (the binding goes in the nonce field)");
	if (d->nonce.len != o->expect_len || !sl_ct_eq(d->nonce.p, o->expect, o->expect_len))
		return sl_err_set(SL_E_ATTEST_BINDING,
		                  "Nitro document.nonce (%zu bytes) does not equal the expected "
		                  "binding (%zu bytes)",
		                  d->nonce.len, o->expect_len);
	return sl_claims_set(claims, "binding", "verified");
}

static SL_RESULT set_opt_hex(sl_claims *c, const char *key, const sl_nitro_bytes *b)
{
	return b->present ? sl_claims_set_hex(c, key, b->p, b->len) : SL_OK;
}

static SL_RESULT doc_claims(const sl_nitro_doc *d, X509 *leaf, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	static const uint8_t zero[SL_NITRO_PCR_LEN] = {0};
	char key[32], cn[128], when[32];
	time_t ts = (time_t)(d->timestamp_ms / 1000);

	SL_ENSURE(d->pcr_present[0], SL_E_ATTEST_FORMAT,
	          "document.pcrs: PCR0 (the enclave image) is missing");
	SL_GUARD(sl_claims_set(c, "tee.kind", "aws-nitro"));
	SL_GUARD(sl_claims_set(c, "nitro.module_id", d->module_id));
	SL_GUARD(sl_claims_setf(c, "nitro.timestamp", "%llu", (unsigned long long)d->timestamp_ms));
	sl_time_rfc3339(ts, when, sizeof(when));
	SL_GUARD(sl_claims_set(c, "nitro.time", when));
	SL_GUARD(sl_claims_set(c, "nitro.digest", "SHA384"));
	for (int i = 0; i < SL_NITRO_PCRS; i++) {
		if (!d->pcr_present[i])
			continue;
		snprintf(key, sizeof(key), "nitro.pcr%d", i);
		SL_GUARD(sl_claims_set_hex(c, key, d->pcr[i], SL_NITRO_PCR_LEN));
	}
	/* NSM reports all-zero PCRs for an enclave started with --debug-mode */
	SL_GUARD(sl_claims_set(c, "nitro.debug",
	                       sl_ct_eq(d->pcr[0], zero, SL_NITRO_PCR_LEN) ? "true" : "false"));
	SL_GUARD(set_opt_hex(c, "nitro.nonce", &d->nonce));
	SL_GUARD(set_opt_hex(c, "nitro.user_data", &d->user_data));
	SL_GUARD(set_opt_hex(c, "nitro.public_key", &d->public_key));
	sl_x509_subject_cn(leaf, cn, sizeof(cn));
	SL_GUARD(sl_claims_set(c, "nitro.cert.cn", cn));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_nitro_verify_doc(const uint8_t *p, size_t len, const uint8_t root_fp[static 32],
                           const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST;
	sl_nitro_doc d;
	X509 *leaf = NULL;

	SL_GUARD(sl_nitro_doc_parse(p, len, &d));
	SL_GUARD(check_chain(&d, root_fp, o->at, &leaf));
	SL_GUARD(check_timestamp(&d, leaf));
	SL_GUARD(check_signature(&d, X509_get0_pubkey(leaf)));
	SL_GUARD(check_binding(&d, o, claims));
	SL_GUARD(doc_claims(&d, leaf, claims));
	rc = SL_OK;
out:
	X509_free(leaf);
	sl_nitro_doc_free(&d);
	return rc;
}

static bool nitro_available(const sl_collect_opts *o)
{
	(void)o;
	return false; /* never picked by --tee auto: collection is not built in */
}

static SL_RESULT nitro_collect(const sl_collect_opts *o, json_t **out)
{
	(void)o;
	*out = NULL;
	if (access(NSM_DEV, F_OK) != 0)
		return sl_err_set(SL_E_SYSTEM,
		                  "--tee aws-nitro: no Nitro Secure Module here (%s is missing: "
		                  "documents are made only inside a Nitro Enclave); import one "
		                  "made there with `seclaunch evidence import --kind aws-nitro`",
		                  NSM_DEV);
	return sl_err_set(SL_E_SYSTEM,
	                  "--tee aws-nitro: collection through %s is not built in; get the "
	                  "document with the NSM API (nonce = the binding) and import it with "
	                  "`seclaunch evidence import --kind aws-nitro`",
	                  NSM_DEV);
}

static SL_RESULT nitro_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *doc = NULL;
	size_t len = 0;
	const char *s = sl_json_getstr(ev, "document");
	static const char *const fields[] = {"kind", "document", NULL};
	const char *bad = sl_json_unknown(ev, fields);

	SL_ENSURE(bad == NULL, SL_E_ATTEST_FORMAT, "evidence.%.32s: unknown field for aws-nitro",
	          bad);
	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "evidence.document: missing or not a string");
	rc = sl_b64_decode(s, MAX_DOC_B64, &doc, &len, "evidence.document");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "aws-nitro evidence");
		goto out;
	}
	SL_GUARD(sl_nitro_verify_doc(doc, len, sl_nitro_root_sha256, o, claims));
	rc = SL_OK;
out:
	free(doc);
	return rc;
}

const sl_evidence_kind sl_kind_nitro = {
    .name = "aws-nitro",
    .available = nitro_available,
    .collect = nitro_collect,
    .verify = nitro_verify,
};
