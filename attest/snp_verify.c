/* SEV-SNP report verification: VCEK/VLEK -> ASK/ASVK -> pinned ARK, the
 * VEK's hwID and TCB extensions against the report, the ECDSA P-384
 * signature, the binding, then the claims (snp_claims.c). */
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "snp_report.h"
#include "x509_util.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

/* SHA-256 fingerprints (DER) of the AMD Root Keys. Source: the ARK (second
 * certificate) of AMD KDS https://kdsintf.amd.com/vcek/v1/<product>/cert_chain,
 * as copied in google/go-sev-guest verify/trust/ask_ark_{milan,genoa,turin_vcek}.pem
 * (commit af1c107a648f47253da23a9de7a7c82ec073cfdb); the VLEK chains
 * (/vlek/v1/...) end at the same ARKs. */
static const struct {
	enum sl_snp_product product;
	uint8_t sha256[32];
} pinned_arks[] = {
    {SL_SNP_PRODUCT_MILAN, {0x69, 0xd0, 0x63, 0xb4, 0x53, 0x44, 0xd2, 0x6a, 0x2e, 0x94, 0xe1,
                            0xf4, 0x21, 0x0d, 0xe4, 0x9e, 0xf5, 0x55, 0x30, 0x82, 0x87, 0xd4,
                            0xc1, 0x74, 0x44, 0x5c, 0x95, 0x63, 0x9a, 0x54, 0x0b, 0xcd}},
    {SL_SNP_PRODUCT_GENOA, {0x4c, 0x65, 0x98, 0xd1, 0x9c, 0x18, 0x71, 0x9c, 0x5d, 0xfd, 0x4a,
                            0x7d, 0x33, 0x5f, 0x67, 0x4e, 0x5b, 0xfe, 0x1d, 0x8f, 0x80, 0x0c,
                            0xea, 0x2c, 0xf2, 0x70, 0xc1, 0x0d, 0x10, 0x3d, 0xb2, 0xf1}},
    {SL_SNP_PRODUCT_TURIN, {0x1f, 0x08, 0x41, 0x61, 0xa4, 0x4b, 0xb6, 0xd9, 0x37, 0x78, 0xa9,
                            0x04, 0x87, 0x7d, 0x48, 0x19, 0xca, 0xfa, 0x5d, 0x05, 0xef, 0x41,
                            0x93, 0xb2, 0xde, 0xd9, 0xdd, 0x9c, 0x73, 0xdd, 0x3f, 0x6a}},
};

#define OID_HWID "1.3.6.1.4.1.3704.1.4"
#define OID_BL "1.3.6.1.4.1.3704.1.3.1"
#define OID_TEE "1.3.6.1.4.1.3704.1.3.2"
#define OID_SNP "1.3.6.1.4.1.3704.1.3.3"
#define OID_UCODE "1.3.6.1.4.1.3704.1.3.8"
#define OID_FMC "1.3.6.1.4.1.3704.1.3.9"

static enum sl_snp_product pinned_product(X509 *x)
{
	uint8_t fp[32];
	sl_x509_fingerprint(x, fp);
	for (size_t i = 0; i < sizeof(pinned_arks) / sizeof(pinned_arks[0]); i++) {
		if (memcmp(fp, pinned_arks[i].sha256, 32) == 0)
			return pinned_arks[i].product;
	}
	return SL_SNP_PRODUCT_UNKNOWN;
}

/* The hwID extension: 64 raw octets (legacy) or 8 (Turin), or the same
 * wrapped in a DER OCTET STRING. */
static SL_RESULT vek_hwid(const X509 *x, const uint8_t **id, size_t *len, ASN1_OCTET_STRING **tmp)
{
	const ASN1_OCTET_STRING *os = sl_x509_ext(x, OID_HWID);
	*tmp = NULL;
	if (os == NULL)
		return sl_err_set(SL_E_ATTEST_CHAIN, "VCEK: no hwID extension (%s)", OID_HWID);
	const unsigned char *p = ASN1_STRING_get0_data(os);
	long n = ASN1_STRING_length(os);
	if (n == 64 || n == 8) {
		*id = p;
		*len = (size_t)n;
		return SL_OK;
	}
	const unsigned char *q = p;
	*tmp = d2i_ASN1_OCTET_STRING(NULL, &q, n);
	if (*tmp == NULL || q - p != n ||
	    (ASN1_STRING_length(*tmp) != 64 && ASN1_STRING_length(*tmp) != 8)) {
		ERR_clear_error();
		return sl_err_set(SL_E_ATTEST_CHAIN, "VCEK: hwID extension is malformed");
	}
	*id = ASN1_STRING_get0_data(*tmp);
	*len = (size_t)ASN1_STRING_length(*tmp);
	return SL_OK;
}

/* product UNKNOWN (before the chain names it) accepts either hwID length;
 * afterwards only Turin's VCEKs may carry the 8-byte form. */
static bool hwid_matches(const X509 *x, const sl_snp_report *r, enum sl_snp_product p)
{
	const uint8_t *id = NULL;
	size_t len = 0;
	ASN1_OCTET_STRING *tmp = NULL;
	bool ok = vek_hwid(x, &id, &len, &tmp) == SL_OK &&
	          (p == SL_SNP_PRODUCT_UNKNOWN || len == (p == SL_SNP_PRODUCT_TURIN ? 8u : 64u)) &&
	          sl_ct_eq(id, r->chip_id, len); /* Turin: the first 8 bytes */
	ASN1_OCTET_STRING_free(tmp);
	return ok;
}

static SL_RESULT check_tcb_ext(const X509 *vek, const char *oid, const char *name, uint8_t want,
                               const char *kind)
{
	bool present = false;
	uint32_t v = 0;
	sl_err rc = sl_x509_ext_uint(vek, oid, &present, &v, kind);
	if (rc != SL_OK)
		return sl_err_wrap(SL_E_ATTEST_CHAIN, "%s TCB", kind);
	if (!present)
		return sl_err_set(SL_E_ATTEST_CHAIN, "%s: no %s SVN extension (%s)", kind, name,
		                  oid);
	if (v != want)
		return sl_err_set(SL_E_ATTEST_CHAIN,
		                  "TCB mismatch: report reported_tcb.%s=%u, %s certifies %u", name,
		                  want, kind, v);
	return SL_OK;
}

static SL_RESULT check_tcb(const X509 *vek, const sl_snp_report *r, enum sl_snp_product p,
                           const char *kind)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	sl_snp_tcb t;

	sl_snp_tcb_decode(r->reported_tcb, p, &t);
	SL_GUARD(check_tcb_ext(vek, OID_BL, "bootloader", t.bootloader, kind));
	SL_GUARD(check_tcb_ext(vek, OID_TEE, "tee", t.tee, kind));
	SL_GUARD(check_tcb_ext(vek, OID_SNP, "snp", t.snp, kind));
	SL_GUARD(check_tcb_ext(vek, OID_UCODE, "microcode", t.microcode, kind));
	if (p == SL_SNP_PRODUCT_TURIN)
		SL_GUARD(check_tcb_ext(vek, OID_FMC, "fmc", t.fmc, kind));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_signature(const uint8_t *report, const sl_snp_report *r, X509 *vek,
                                 const char *kind)
{
	sl_err rc = SL_E_ATTEST_SIG;
	EVP_PKEY *pk = X509_get0_pubkey(vek);
	ECDSA_SIG *sig = NULL;
	BIGNUM *br = NULL, *bs = NULL;
	unsigned char *der = NULL;
	EVP_MD_CTX *md = NULL;
	char curve[32] = "";
	size_t clen = 0;

	SL_ENSURE(pk != NULL && EVP_PKEY_is_a(pk, "EC") &&
	              EVP_PKEY_get_utf8_string_param(pk, "group", curve, sizeof(curve), &clen) ==
	                  1 &&
	              strcmp(curve, "secp384r1") == 0,
	          SL_E_ATTEST_CHAIN, "%s: public key is not ECDSA P-384", kind);
	br = BN_lebin2bn(r->sig_r, sizeof(r->sig_r), NULL);
	bs = BN_lebin2bn(r->sig_s, sizeof(r->sig_s), NULL);
	sig = ECDSA_SIG_new();
	SL_GUARD_OSSL(br != NULL && bs != NULL && sig != NULL, SL_E_NOMEM, "SNP signature");
	SL_GUARD_OSSL(ECDSA_SIG_set0(sig, br, bs) == 1, SL_E_CRYPTO, "SNP signature");
	br = bs = NULL;
	int dlen = i2d_ECDSA_SIG(sig, &der);
	SL_GUARD_OSSL(dlen > 0, SL_E_CRYPTO, "SNP signature encoding");
	md = EVP_MD_CTX_new();
	SL_GUARD_OSSL(md != NULL, SL_E_NOMEM, "SNP signature");
	SL_GUARD_OSSL(EVP_DigestVerifyInit(md, NULL, EVP_sha384(), NULL, pk) == 1, SL_E_CRYPTO,
	              "SNP signature");
	if (EVP_DigestVerify(md, der, (size_t)dlen, report, SL_SNP_SIGNED_LEN) != 1) {
		ERR_clear_error();
		SL_FAIL(
		    SL_E_ATTEST_SIG,
		    "SNP report signature (ECDSA P-384 over bytes 0x000..0x29f) does not verify "
		    "with the %s",
		    kind);
	}
	rc = SL_OK;
out:
	BN_free(br);
	BN_free(bs);
	ECDSA_SIG_free(sig);
	OPENSSL_free(der);
	EVP_MD_CTX_free(md);
	return rc;
}

sl_err sl_tee_check_report_data(const uint8_t rd[static 64], const sl_verify_opts *o,
                                const char *what, sl_claims *claims)
{
	uint8_t want[64] = {0};
	if (o->no_binding)
		return sl_claims_set(claims, "binding", "unchecked");
	if (o->expect == NULL || o->expect_len == 0 || o->expect_len > 64)
		return sl_err_set(SL_E_ATTEST_BINDING,
		                  "%s: no expected binding given (1..64 bytes; or no_binding)",
		                  what);
	memcpy(want, o->expect, o->expect_len);
	if (!sl_ct_eq(rd, want, 64))
		return sl_err_set(
		    SL_E_ATTEST_BINDING,
		    "%s does not equal the expected binding (zero-padded to 64 bytes)", what);
	return sl_claims_set(claims, "binding", "verified");
}

/* Sorts the candidate certificates: pinned ARKs, intermediates (ASK/ASVK),
 * and the VEKs of the wanted kind, in the order seen. */
struct pool {
	STACK_OF(X509) * roots, *mids, *veks;
	int unpinned_arks;
	uint8_t unpinned_fp[32];
};

static SL_RESULT sort_certs(STACK_OF(X509) * in, bool vlek, struct pool *pl)
{
	for (int i = 0; i < sk_X509_num(in); i++) {
		X509 *x = sk_X509_value(in, i);
		char cn[64];
		STACK_OF(X509) *dst = NULL;
		sl_x509_subject_cn(x, cn, sizeof(cn));
		if (strncmp(cn, "ARK-", 4) == 0) {
			if (pinned_product(x) != SL_SNP_PRODUCT_UNKNOWN) {
				dst = pl->roots;
			} else {
				if (pl->unpinned_arks++ == 0)
					sl_x509_fingerprint(x, pl->unpinned_fp);
				continue;
			}
		} else if (strcmp(cn, vlek ? "SEV-VLEK" : "SEV-VCEK") == 0) {
			dst = pl->veks;
		} else if (strncmp(cn, "SEV-", 4) == 0 && strcmp(cn, "SEV-VCEK") != 0 &&
		           strcmp(cn, "SEV-VLEK") != 0) {
			dst = pl->mids;
		} else {
			continue;
		}
		if (X509_up_ref(x) != 1 || sk_X509_push(dst, x) <= 0)
			return sl_err_set(SL_E_NOMEM, "SNP certificates");
	}
	return SL_OK;
}

/* The product a VEK names in its productName extension ("Milan-B0", "Genoa"...). */
static enum sl_snp_product vek_product(const X509 *x)
{
	static const struct {
		const char *prefix;
		enum sl_snp_product p;
	} names[] = {{"Milan", SL_SNP_PRODUCT_MILAN},
	             {"Genoa", SL_SNP_PRODUCT_GENOA},
	             {"Turin", SL_SNP_PRODUCT_TURIN}};
	const ASN1_OCTET_STRING *os = sl_x509_ext(x, "1.3.6.1.4.1.3704.1.2");
	if (os == NULL)
		return SL_SNP_PRODUCT_UNKNOWN;
	const unsigned char *p = ASN1_STRING_get0_data(os), *q = p;
	ASN1_IA5STRING *s = d2i_ASN1_IA5STRING(NULL, &q, ASN1_STRING_length(os));
	enum sl_snp_product out = SL_SNP_PRODUCT_UNKNOWN;
	for (size_t i = 0; s != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i].prefix);
		if ((size_t)ASN1_STRING_length(s) >= n &&
		    memcmp(ASN1_STRING_get0_data(s), names[i].prefix, n) == 0)
			out = names[i].p;
	}
	ASN1_IA5STRING_free(s);
	ERR_clear_error();
	return out;
}

/* A KDS cache holds one VCEK per chip and TCB (and VLEKs per TCB): prefer
 * the candidate whose hwID (VCEK) and TCB extensions both match the report,
 * else the first whose hwID matches, so the failure names the TCB. */
static SL_RESULT pick_vek(struct pool *pl, const sl_snp_report *r, bool vlek, X509 **out)
{
	*out = NULL;
	if (sk_X509_num(pl->veks) == 0)
		return sl_err_set(SL_E_ATTEST_UNTRUSTED,
		                  "SNP report signed by a %s, but none is in the collateral "
		                  "directory or the evidence",
		                  vlek ? "VLEK" : "VCEK");
	for (int i = 0; i < sk_X509_num(pl->veks); i++) {
		X509 *x = sk_X509_value(pl->veks, i);
		if (!vlek && !hwid_matches(x, r, SL_SNP_PRODUCT_UNKNOWN))
			continue;
		if (*out == NULL)
			*out = x;
		enum sl_snp_product p = sl_snp_product_from_cpuid(r);
		if (p == SL_SNP_PRODUCT_UNKNOWN)
			p = vek_product(x);
		if (check_tcb(x, r, p, "VEK") == SL_OK) {
			*out = x;
			break;
		}
	}
	sl_err_clear();
	if (*out != NULL)
		return SL_OK;
	const uint8_t *id = NULL;
	size_t len = 0;
	ASN1_OCTET_STRING *tmp = NULL;
	sl_err rc = vek_hwid(sk_X509_value(pl->veks, 0), &id, &len, &tmp);
	ASN1_OCTET_STRING_free(tmp);
	if (rc != SL_OK)
		return rc;
	return sl_err_set(SL_E_ATTEST_CHAIN,
	                  "VCEK hwID extension does not equal the report chip_id (%d VCEK(s) "
	                  "tried)%s",
	                  sk_X509_num(pl->veks),
	                  (r->key_info & 2) ? "; the report masks chip_id (MASK_CHIP_ID)" : "");
}

sl_err sl_snp_verify_report(const uint8_t *report, size_t len, STACK_OF(X509) * ev_certs,
                            const sl_verify_opts *o, bool check_binding, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST;
	sl_snp_report r;
	STACK_OF(X509) *coll = sk_X509_new_null();
	STACK_OF(X509_CRL) *crls = sk_X509_CRL_new_null();
	STACK_OF(X509) *chain = NULL;
	struct pool pl = {sk_X509_new_null(), sk_X509_new_null(), sk_X509_new_null(), 0, {0}};
	X509 *vek = NULL;
	char cn[64], want[64];

	SL_ENSURE(coll != NULL && crls != NULL && pl.roots != NULL && pl.mids != NULL &&
	              pl.veks != NULL,
	          SL_E_NOMEM, "SNP verify");
	SL_GUARD(sl_snp_report_parse(report, len, &r));
	uint32_t key = r.key_info >> 2 & 7;
	SL_ENSURE(key != SL_SNP_KEY_NONE, SL_E_ATTEST_UNTRUSTED,
	          "SNP report is not signed (signing_key = none)");
	bool vlek = key == SL_SNP_KEY_VLEK;
	const char *kind = vlek ? "VLEK" : "VCEK";

	if (o->collateral_dir != NULL && !vlek && !(r.key_info & 2))
		SL_GUARD(sl_snp_kds_fetch(o->collateral_dir, &r));
	if (o->collateral_dir != NULL)
		SL_GUARD(sl_x509_load_dir(o->collateral_dir, coll, crls));
	SL_GUARD(sort_certs(coll, vlek, &pl));
	if (ev_certs != NULL)
		SL_GUARD(sort_certs(ev_certs, vlek, &pl));
	if (sk_X509_num(pl.roots) == 0 && pl.unpinned_arks > 0) {
		char fp[65];
		sl_hex_encode(pl.unpinned_fp, 32, fp);
		SL_FAIL(
		    SL_E_ATTEST_UNTRUSTED,
		    "SNP chain: ARK fingerprint %s is not a pinned AMD root (Milan, Genoa, Turin)",
		    fp);
	}
	SL_ENSURE(sk_X509_num(pl.roots) > 0, SL_E_ATTEST_UNTRUSTED,
	          "SNP chain: no AMD ARK in the collateral directory or the evidence");
	SL_GUARD(pick_vek(&pl, &r, vlek, &vek));
	SL_GUARD(sl_x509_verify_chain(vek, pl.mids, pl.roots, o->at, &chain, kind));
	SL_ENSURE(sk_X509_num(chain) == 3, SL_E_ATTEST_CHAIN,
	          "%s chain: %d certificates, want VEK, ASK/ASVK, ARK", kind, sk_X509_num(chain));
	enum sl_snp_product prod = pinned_product(sk_X509_value(chain, 2));
	snprintf(want, sizeof(want), "SEV-%s%s", vlek ? "VLEK-" : "", sl_snp_product_name(prod));
	sl_x509_subject_cn(sk_X509_value(chain, 1), cn, sizeof(cn));
	SL_ENSURE(strcmp(cn, want) == 0, SL_E_ATTEST_CHAIN,
	          "%s chain: intermediate is '%s', want '%s'", kind, cn, want);
	enum sl_snp_product cpu = sl_snp_product_from_cpuid(&r);
	SL_ENSURE(cpu == SL_SNP_PRODUCT_UNKNOWN || cpu == prod, SL_E_ATTEST_CHAIN,
	          "SNP report CPUID says %s, but the %s chains to ARK-%s", sl_snp_product_name(cpu),
	          kind, sl_snp_product_name(prod));
	if (!vlek && !hwid_matches(vek, &r, prod))
		SL_FAIL(SL_E_ATTEST_CHAIN, "VCEK hwID extension does not equal the report chip_id");
	SL_GUARD(check_tcb(vek, &r, prod, kind));
	SL_GUARD(check_signature(report, &r, vek, kind));
	if (check_binding)
		SL_GUARD(sl_tee_check_report_data(r.report_data, o, "SNP report_data", claims));
	SL_GUARD(sl_claims_set(claims, "snp.signing_key", vlek ? "vlek" : "vcek"));
	SL_GUARD(sl_snp_claims(&r, prod, claims));
	rc = SL_OK;
out:
	sk_X509_pop_free(chain, X509_free);
	sk_X509_pop_free(coll, X509_free);
	sk_X509_CRL_pop_free(crls, X509_CRL_free);
	sk_X509_pop_free(pl.roots, X509_free);
	sk_X509_pop_free(pl.mids, X509_free);
	sk_X509_pop_free(pl.veks, X509_free);
	return rc;
}
