/* Cloud identity documents: GCP JWTs and AWS PKCS7/RSA documents signed by
 * test keys made here (accepted; wrong signer, expired, wrong audience,
 * alg none, unknown kid, bad issuer, tamper refused), the real vectors
 * (AWS 2016 PKCS7 DSA, 2024 RSA signatures, GCP Confidential Space token at
 * its pinned time), unsigned regions, and a region the policy denies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/identity.h"
#include "seclaunch/policy.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "testlib.h"

static char tmpdir[128];
static EVP_PKEY *key1, *key2;
static X509 *cert1, *cert2;
static char jwks_path[512], trust1[512], trust2[512];
static const uint8_t BINDING[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static char binding_hex[65];
static const time_t NOW = 1800000000; /* 2027-01-15 */

static char *b64url(const uint8_t *p, size_t n)
{
	size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *s = malloc(cap);
	sodium_bin2base64(s, cap, p, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return s;
}

static char *bn_b64url(EVP_PKEY *k, const char *name)
{
	BIGNUM *bn = NULL;
	assert_int_equal(EVP_PKEY_get_bn_param(k, name, &bn), 1);
	uint8_t buf[512];
	int n = BN_bn2bin(bn, buf);
	BN_free(bn);
	return b64url(buf, (size_t)n);
}

static X509 *self_signed(EVP_PKEY *k, const char *cn)
{
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 3650);
	X509_set_pubkey(x, k);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, nm);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	return x;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

static void write_cert(const char *dir, X509 *x)
{
	char p[600];
	mkdir(dir, 0700);
	snprintf(p, sizeof(p), "%s/aws.pem", dir);
	FILE *f = fopen(p, "w");
	PEM_write_X509(f, x);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	tl_tmpdir(tmpdir, sizeof(tmpdir), "identity");
	key1 = EVP_RSA_gen(2048);
	key2 = EVP_RSA_gen(2048);
	cert1 = self_signed(key1, "aws test 1");
	cert2 = self_signed(key2, "aws test 2");
	char *n = bn_b64url(key1, OSSL_PKEY_PARAM_RSA_N),
	     *e = bn_b64url(key1, OSSL_PKEY_PARAM_RSA_E);
	char jwks[4096];
	snprintf(jwks, sizeof(jwks),
	         "{\"keys\":[{\"kty\":\"RSA\",\"alg\":\"RS256\",\"use\":\"sig\",\"kid\":\"other\","
	         "\"n\":\"%s\",\"e\":\"%s\"},{\"kty\":\"RSA\",\"alg\":\"RS256\",\"kid\":\"k1\","
	         "\"n\":\"%s\",\"e\":\"%s\"},{\"kty\":\"RSA\",\"use\":\"enc\",\"kid\":\"k-enc\","
	         "\"n\":\"%s\",\"e\":\"%s\"}]}",
	         n, e, n, e, n, e);
	free(n);
	free(e);
	snprintf(jwks_path, sizeof(jwks_path), "%s/jwks.json", tmpdir);
	write_file(jwks_path, jwks, strlen(jwks));
	snprintf(trust1, sizeof(trust1), "%s/trust1", tmpdir);
	snprintf(trust2, sizeof(trust2), "%s/trust2", tmpdir);
	write_cert(trust1, cert1);
	write_cert(trust2, cert2);
	sl_hex_encode(BINDING, 32, binding_hex);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(tl_rmtree(tmpdir), 0);
	EVP_PKEY_free(key1);
	EVP_PKEY_free(key2);
	X509_free(cert1);
	X509_free(cert2);
	return 0;
}

/* A JWT with the given header/payload JSON, RS256-signed by k (NULL: no signature). */
static char *make_jwt(const char *header, const char *payload, EVP_PKEY *k)
{
	char *h = b64url((const uint8_t *)header, strlen(header));
	char *p = b64url((const uint8_t *)payload, strlen(payload));
	char *signing = NULL, *out = NULL, *s = strdup("");
	assert_true(asprintf(&signing, "%s.%s", h, p) > 0);
	if (k != NULL) {
		uint8_t sig[512];
		size_t sl = sizeof(sig);
		EVP_MD_CTX *c = EVP_MD_CTX_new();
		assert_int_equal(EVP_DigestSignInit(c, NULL, EVP_sha256(), NULL, k), 1);
		assert_int_equal(
		    EVP_DigestSign(c, sig, &sl, (const uint8_t *)signing, strlen(signing)), 1);
		EVP_MD_CTX_free(c);
		free(s);
		s = b64url(sig, sl);
	}
	assert_true(asprintf(&out, "%s.%s", signing, s) > 0);
	free(h);
	free(p);
	free(s);
	free(signing);
	return out;
}

static char *gcp_payload(const char *iss, const char *aud, long long iat, long long exp,
                         const char *zone)
{
	char *s = NULL;
	assert_true(
	    asprintf(&s,
	             "{\"iss\":\"%s\",\"aud\":\"%s\",\"azp\":\"1\",\"iat\":%lld,\"exp\":%lld,"
	             "\"google\":{\"compute_engine\":{\"project_id\":\"proj-1\","
	             "\"project_number\":12345,\"zone\":\"%s\",\"instance_id\":\"987\","
	             "\"instance_name\":\"vm\"}}}",
	             iss, aud, iat, exp, zone) > 0);
	return s;
}

static const char *HDR_K1 = "{\"alg\":\"RS256\",\"kid\":\"k1\",\"typ\":\"JWT\"}";

static sl_err verify_jwt(const char *tok, sl_claims **out)
{
	sl_identity_opts o = {
	    .gcp_jwks = jwks_path, .binding = BINDING, .binding_len = 32, .at = NOW};
	assert_int_equal(sl_claims_new(out), SL_OK);
	return sl_identity_verify_gcp_jwt(tok, strlen(tok), &o, *out);
}

static void test_gcp_jwt_accepted(void **state)
{
	(void)state;
	char *pl = gcp_payload("https://accounts.google.com", binding_hex, NOW - 10, NOW + 3590,
	                       "europe-west4-a");
	char *tok = make_jwt(HDR_K1, pl, key1);
	sl_claims *c = NULL;
	assert_int_equal(verify_jwt(tok, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.provider"), "gcp");
	assert_string_equal(sl_claims_get(c, "cloud.region"), "europe-west4");
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "europe-west4-a");
	assert_string_equal(sl_claims_get(c, "cloud.region_verified"), "true");
	assert_string_equal(sl_claims_get(c, "cloud.identity_fresh"), "true");
	assert_string_equal(sl_claims_get(c, "cloud.identity_kind"), "gcp-jwt");
	assert_string_equal(sl_claims_get(c, "cloud.project_id"), "proj-1");
	assert_string_equal(sl_claims_get(c, "cloud.project_number"), "12345");
	assert_string_equal(sl_claims_get(c, "cloud.instance_id"), "987");
	char iat[32];
	snprintf(iat, sizeof(iat), "%lld", (long long)NOW - 10);
	assert_string_equal(sl_claims_get(c, "cloud.identity_iat"), iat);
	sl_claims_free(c);
	/* without an expected binding the token proves the region, not freshness */
	sl_identity_opts o = {.gcp_jwks = jwks_path, .at = NOW};
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_gcp_jwt(tok, strlen(tok), &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.identity_fresh"), "false");
	sl_claims_free(c);
	/* the JSON form and a bare-JWT file */
	json_t *doc = json_pack("{s:s, s:s}", "kind", "gcp-jwt", "token", tok);
	o.binding = BINDING;
	o.binding_len = 32;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify(doc, &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.region"), "europe-west4");
	sl_claims_free(c);
	json_decref(doc);
	char path[600];
	snprintf(path, sizeof(path), "%s/token.jwt", tmpdir);
	write_file(path, tok, strlen(tok));
	write_file(path, "\n", 0);
	FILE *f = fopen(path, "w");
	fprintf(f, "%s\n", tok);
	fclose(f);
	assert_int_equal(sl_identity_load_file(path, &doc), SL_OK);
	assert_string_equal(json_string_value(json_object_get(doc, "token")), tok);
	json_decref(doc);
	free(tok);
	free(pl);
}

struct jcase {
	const char *name;
	const char *header;
	int signer; /* 1, 2, 0 = unsigned */
	const char *iss;
	const char *aud; /* NULL: the binding */
	long long iat_off, exp_off;
	sl_err code;
	const char *want;
};

static const struct jcase JCASES[] = {
    {"wrong signer", NULL, 2, "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_SIG,
     "GCP identity token: signature does not verify"},
    {"expired", NULL, 1, "https://accounts.google.com", NULL, -7200, -3600, SL_E_ATTEST,
     "GCP identity token: expired at"},
    {"issued in the future", NULL, 1, "https://accounts.google.com", NULL, 600, 4000, SL_E_ATTEST,
     "issued in the future"},
    {"wrong audience", NULL, 1, "https://accounts.google.com", "https://example.com", -10, 3590,
     SL_E_ATTEST_BINDING, "aud is not this request's binding (wrong audience)"},
    {"alg none", "{\"alg\":\"none\",\"kid\":\"k1\"}", 0, "https://accounts.google.com", NULL, -10,
     3590, SL_E_ATTEST_SIG, "alg 'none' refused"},
    {"alg none with a signature", "{\"alg\":\"none\",\"kid\":\"k1\"}", 1,
     "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_SIG, "alg 'none' refused"},
    {"alg HS256", "{\"alg\":\"HS256\",\"kid\":\"k1\"}", 1, "https://accounts.google.com", NULL, -10,
     3590, SL_E_ATTEST_SIG, "alg 'HS256' refused"},
    {"unsigned RS256", NULL, 0, "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_SIG,
     "no signature"},
    {"kid not in JWKS", "{\"alg\":\"RS256\",\"kid\":\"k9\"}", 1, "https://accounts.google.com",
     NULL, -10, 3590, SL_E_ATTEST_SIG, "key id 'k9' is not in the JWKS"},
    {"crit header", "{\"alg\":\"RS256\",\"kid\":\"k1\",\"crit\":[\"exp\"]}", 1,
     "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_SIG,
     "header 'crit' extensions are not supported"},
    {"JWKS key for encryption", "{\"alg\":\"RS256\",\"kid\":\"k-enc\"}", 1,
     "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_SIG,
     "key 'k-enc' is not an RS256 signing key"},
    {"no kid", "{\"alg\":\"RS256\"}", 1, "https://accounts.google.com", NULL, -10, 3590,
     SL_E_ATTEST_SIG, "header has no kid"},
    {"untrusted issuer", NULL, 1, "https://evil.example", NULL, -10, 3590, SL_E_ATTEST,
     "issuer 'https://evil.example' is not trusted"},
    {"x5c without a pinned root", "{\"alg\":\"RS256\",\"x5c\":[\"AAAA\"]}", 1,
     "https://accounts.google.com", NULL, -10, 3590, SL_E_ATTEST_UNTRUSTED, "no pinned root"},
};

static void test_gcp_jwt_refused(void **state)
{
	(void)state;
	int failed = 0;
	for (size_t i = 0; i < sizeof(JCASES) / sizeof(JCASES[0]); i++) {
		const struct jcase *t = &JCASES[i];
		char *pl = gcp_payload(t->iss, t->aud ? t->aud : binding_hex, NOW + t->iat_off,
		                       NOW + t->exp_off, "europe-west4-a");
		char *tok = make_jwt(t->header ? t->header : HDR_K1, pl,
		                     t->signer == 1   ? key1
		                     : t->signer == 2 ? key2
		                                      : NULL);
		sl_claims *c = NULL;
		sl_err rc = verify_jwt(tok, &c);
		if (rc != t->code || strstr(sl_err_detail(), t->want) == NULL) {
			fprintf(stderr, "jcase '%s': got %s '%s', want %s '%s'\n", t->name,
			        sl_err_name(rc), sl_err_detail(), sl_err_name(t->code), t->want);
			failed++;
		}
		/* a refused token adds no claim */
		assert_null(sl_claims_get(c, "cloud.region"));
		sl_claims_free(c);
		free(tok);
		free(pl);
	}
	assert_int_equal(failed, 0);
}

static void test_gcp_jwt_tamper_and_malformed(void **state)
{
	(void)state;
	char *pl = gcp_payload("https://accounts.google.com", binding_hex, NOW - 10, NOW + 3590,
	                       "europe-west4-a");
	char *tok = make_jwt(HDR_K1, pl, key1);
	sl_claims *c = NULL;
	/* swap the payload for one naming another zone, keep the signature */
	char *pl2 = gcp_payload("https://accounts.google.com", binding_hex, NOW - 10, NOW + 3590,
	                        "us-central1-a");
	char *tok2 = make_jwt(HDR_K1, pl2, key1);
	char *mix = NULL;
	assert_true(asprintf(&mix, "%.*s%s", (int)(strrchr(tok2, '.') - tok2), tok2,
	                     strrchr(tok, '.')) > 0);
	assert_int_equal(verify_jwt(mix, &c), SL_E_ATTEST_SIG);
	sl_claims_free(c);
	static const char *const bad[] = {"", "abc", "a.b", "a.b.c.d", "!!.e30.e30", "e30.!!.AAAA"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(verify_jwt(bad[i], &c), SL_E_ATTEST_FORMAT);
		sl_claims_free(c);
	}
	/* zone without a suffix */
	char *pl3 =
	    gcp_payload("https://accounts.google.com", binding_hex, NOW - 10, NOW + 3590, "nozone");
	char *tok3 = make_jwt(HDR_K1, pl3, key1);
	assert_int_equal(verify_jwt(tok3, &c), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "REGION-SUFFIX"));
	sl_claims_free(c);
	free(tok);
	free(tok2);
	free(tok3);
	free(pl);
	free(pl2);
	free(pl3);
	free(mix);
}

/* A region the policy denies: a perfectly good token, then the policy says no. */
static void test_region_policy_denies(void **state)
{
	(void)state;
	static const char pol[] =
	    "{\"version\":1,\"datasets\":[{\"id\":\"d\",\"allowed_regions\":[\"eu\"],"
	    "\"tee_kinds\":[\"tpm2\"],\"require_fresh_identity\":true}]}";
	sl_policy *p = NULL;
	sl_decision *d = NULL;
	assert_int_equal(sl_policy_load((const uint8_t *)pol, strlen(pol), &p), SL_OK);
	char *pl = gcp_payload("https://accounts.google.com", binding_hex, NOW - 10, NOW + 3590,
	                       "us-central1-a");
	char *tok = make_jwt(HDR_K1, pl, key1);
	sl_claims *c = NULL;
	assert_int_equal(verify_jwt(tok, &c), SL_OK);
	assert_int_equal(sl_claims_set(c, "tee.kind", "tpm2"), SL_OK);
	assert_int_equal(sl_claims_set(c, "binding", "verified"), SL_OK);
	sl_policy_request req = {"d", NULL, NULL, 0};
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	assert_int_equal(sl_decision_reason_count(d), 1);
	assert_string_equal(sl_decision_reason(d, 0), "$.datasets[0].allowed_regions: region "
	                                              "gcp:us-central1 is not in the allowed "
	                                              "regions [eu]");
	sl_decision_free(d);
	sl_claims_free(c);
	free(tok);
	free(pl);
	sl_policy_free(p);
}

static char *b64_of(const uint8_t *p, size_t n)
{
	char *s = NULL;
	assert_int_equal(sl_b64_encode(p, n, &s), SL_OK);
	return s;
}

static const char AWS_DOC[] =
    "{\n  \"accountId\" : \"111122223333\",\n  \"architecture\" : \"x86_64\",\n"
    "  \"availabilityZone\" : \"eu-west-1b\",\n  \"instanceId\" : \"i-0123456789abcdef0\",\n"
    "  \"pendingTime\" : \"2026-11-01T10:00:00Z\",\n  \"region\" : \"eu-west-1\",\n"
    "  \"version\" : \"2017-09-30\"\n}";

static char *pkcs7_b64(EVP_PKEY *k, X509 *x, const char *doc, int flags)
{
	BIO *in = BIO_new_mem_buf(doc, (int)strlen(doc));
	PKCS7 *p7 = PKCS7_sign(x, k, NULL, in, flags | PKCS7_BINARY | PKCS7_NOCERTS);
	assert_non_null(p7);
	uint8_t *der = NULL;
	int n = i2d_PKCS7(p7, &der);
	assert_true(n > 0);
	char *s = b64_of(der, (size_t)n);
	OPENSSL_free(der);
	PKCS7_free(p7);
	BIO_free(in);
	return s;
}

static void test_aws_test_keys(void **state)
{
	(void)state;
	sl_identity_opts o = {.aws_trust_dir = trust1, .at = NOW};
	sl_claims *c = NULL;
	char *p7 = pkcs7_b64(key1, cert1, AWS_DOC, 0);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(
	    sl_identity_verify_aws((const uint8_t *)AWS_DOC, strlen(AWS_DOC), p7, true, &o, c),
	    SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.provider"), "aws");
	assert_string_equal(sl_claims_get(c, "cloud.region"), "eu-west-1");
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "eu-west-1b");
	assert_string_equal(sl_claims_get(c, "cloud.account_id"), "111122223333");
	assert_string_equal(sl_claims_get(c, "cloud.instance_id"), "i-0123456789abcdef0");
	assert_string_equal(sl_claims_get(c, "cloud.region_verified"), "true");
	assert_string_equal(sl_claims_get(c, "cloud.identity_fresh"), "false");
	assert_string_equal(sl_claims_get(c, "cloud.identity_iat"), "1793527200");
	sl_claims_free(c);
	/* the embedded content alone is enough */
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws(NULL, 0, p7, true, &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.region"), "eu-west-1");
	sl_claims_free(c);
	/* a different document beside the signed one */
	char *other = strdup(AWS_DOC);
	memcpy(strstr(other, "eu-west-1\""), "us-east-1\"", 10);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(
	    sl_identity_verify_aws((const uint8_t *)other, strlen(other), p7, true, &o, c),
	    SL_E_ATTEST_SIG);
	assert_non_null(strstr(sl_err_detail(), "differs from the content"));
	assert_null(sl_claims_get(c, "cloud.region"));
	sl_claims_free(c);
	/* wrong signer: the trust directory holds another certificate */
	sl_identity_opts o2 = {.aws_trust_dir = trust2, .at = NOW};
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(
	    sl_identity_verify_aws((const uint8_t *)AWS_DOC, strlen(AWS_DOC), p7, true, &o2, c),
	    SL_E_ATTEST_SIG);
	assert_non_null(strstr(sl_err_detail(), "wrong signer"));
	sl_claims_free(c);
	free(p7);
	/* a zone outside the document's region */
	char *odd = strdup(AWS_DOC);
	memcpy(strstr(odd, "eu-west-1b"), "us-east-1b", 10);
	p7 = pkcs7_b64(key1, cert1, odd, 0);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws((const uint8_t *)odd, strlen(odd), p7, true, &o, c),
	                 SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "availabilityZone 'us-east-1b' is not in region"));
	sl_claims_free(c);
	free(p7);
	free(odd);
	/* detached PKCS7 */
	p7 = pkcs7_b64(key1, cert1, AWS_DOC, PKCS7_DETACHED);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(
	    sl_identity_verify_aws((const uint8_t *)AWS_DOC, strlen(AWS_DOC), p7, true, &o, c),
	    SL_OK);
	assert_int_equal(
	    sl_identity_verify_aws((const uint8_t *)other, strlen(other), p7, true, &o, c),
	    SL_E_ATTEST_SIG);
	sl_claims_free(c);
	free(p7);
	free(other);
	/* the JSON form: both signature fields at once is malformed */
	json_t *doc = json_pack("{s:s, s:s, s:s, s:s}", "kind", "aws-iid", "document", AWS_DOC,
	                        "pkcs7", "AAAA", "signature", "AAAA");
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify(doc, &o, c), SL_E_ATTEST_FORMAT);
	json_decref(doc);
	doc = json_pack("{s:s}", "kind", "azure-imds");
	assert_int_equal(sl_identity_verify(doc, &o, c), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "unknown kind 'azure-imds'"));
	json_decref(doc);
	sl_claims_free(c);
}

static void read_vec(const char *name, uint8_t **p, size_t *n)
{
	*p = tl_vector_load(n, "%s", name);
}

static void copy_to_dir(const char *name, const char *dir)
{
	uint8_t *p = NULL;
	size_t n = 0;
	char dst[1024];
	read_vec(name, &p, &n);
	mkdir(dir, 0700);
	snprintf(dst, sizeof(dst), "%s/cert.pem", dir);
	write_file(dst, p, n);
	free(p);
}

static void test_aws_real_vectors(void **state)
{
	(void)state;
	char dsa[600], rsa[600];
	snprintf(dsa, sizeof(dsa), "%s/aws-dsa", tmpdir);
	snprintf(rsa, sizeof(rsa), "%s/aws-rsa", tmpdir);
	copy_to_dir("aws-iid/aws_dsa_iid_cert.pem", dsa);
	copy_to_dir("aws-iid/aws_rsa_iid_cert_us-east-1.pem", rsa);
	/* 2016 PKCS7 (DSA/SHA-1, BER with indefinite lengths), pinned 2025-01-01 */
	time_t at = 1735689600;
	uint8_t *ber = NULL, *doc = NULL;
	size_t bl = 0, dl = 0;
	read_vec("aws-iid/fullsailor_ec2_iid_2016_us-east-1.p7.ber", &ber, &bl);
	read_vec("aws-iid/fullsailor_ec2_iid_2016_us-east-1.document.json", &doc, &dl);
	char *p7 = b64_of(ber, bl);
	sl_identity_opts o = {.aws_trust_dir = dsa, .at = at};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	sl_err rc = sl_identity_verify_aws(doc, dl, p7, true, &o, c);
	if (rc != SL_OK)
		fail_msg("2016 PKCS7: %s", sl_err_detail());
	assert_string_equal(sl_claims_get(c, "cloud.region"), "us-east-1");
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "us-east-1a");
	assert_string_equal(sl_claims_get(c, "cloud.account_id"), "121659014334");
	assert_string_equal(sl_claims_get(c, "cloud.instance_id"), "i-f79fe56c");
	sl_claims_free(c);
	/* the PEM text form works too (armour and line breaks are stripped) */
	uint8_t *pem = NULL;
	size_t pl = 0;
	read_vec("aws-iid/fullsailor_ec2_iid_2016_us-east-1.p7.pem", &pem, &pl);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws(NULL, 0, (const char *)pem, true, &o, c), SL_OK);
	sl_claims_free(c);
	/* with the RSA certificate instead: wrong signer */
	o.aws_trust_dir = rsa;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws(doc, dl, p7, true, &o, c), SL_E_ATTEST_SIG);
	sl_claims_free(c);
	free(p7);
	free(pem);
	free(ber);
	free(doc);

	/* 2024 documents with base64 RSA-SHA256 signatures */
	uint8_t *d0 = NULL, *s0 = NULL, *d1 = NULL, *s1 = NULL;
	size_t d0l = 0, s0l = 0, d1l = 0, s1l = 0;
	read_vec("aws-iid/rspamd_iid0.json", &d0, &d0l);
	read_vec("aws-iid/rspamd_iid0.sig", &s0, &s0l);
	read_vec("aws-iid/rspamd_iid1.json", &d1, &d1l);
	read_vec("aws-iid/rspamd_iid1.sig", &s1, &s1l);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws(d0, d0l, (char *)s0, false, &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "us-east-1b");
	assert_string_equal(sl_claims_get(c, "cloud.account_id"), "975050371289");
	assert_string_equal(sl_claims_get(c, "cloud.instance_id"), "i-0b02d936754a6d637");
	assert_int_equal(sl_identity_verify_aws(d1, d1l, (char *)s1, false, &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "us-east-1c");
	sl_claims_free(c);
	/* iid0's signature over iid1's document */
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_aws(d1, d1l, (char *)s0, false, &o, c),
	                 SL_E_ATTEST_SIG);
	/* the DSA certificate cannot verify the RSA form */
	o.aws_trust_dir = dsa;
	assert_int_equal(sl_identity_verify_aws(d0, d0l, (char *)s0, false, &o, c),
	                 SL_E_ATTEST_SIG);
	assert_null(sl_claims_get(c, "cloud.region"));
	sl_claims_free(c);
	free(d0);
	free(s0);
	free(d1);
	free(s1);
}

static void test_gcp_confidential_space_vector(void **state)
{
	(void)state;
	uint8_t *tok = NULL;
	size_t tl = 0;
	char root[1024];
	read_vec("gcp/oak_confidential_space_pki_token.jwt", &tok, &tl);
	tl_vector_path(root, sizeof(root), "gcp/confidential_space_root_ca.pem");
	/* pinned time 2025-06-23T15:00:00Z */
	sl_identity_opts o = {.gcp_cs_root = root, .at = 1750690800};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	sl_err rc = sl_identity_verify_gcp_jwt((const char *)tok, tl, &o, c);
	if (rc != SL_OK)
		fail_msg("CS token: %s", sl_err_detail());
	assert_string_equal(sl_claims_get(c, "cloud.provider"), "gcp");
	assert_string_equal(sl_claims_get(c, "cloud.region"), "us-west1");
	assert_string_equal(sl_claims_get(c, "cloud.zone"), "us-west1-b");
	assert_string_equal(sl_claims_get(c, "cloud.identity_kind"), "gcp-cs");
	assert_string_equal(sl_claims_get(c, "cloud.project_id"), "oak-ci");
	assert_string_equal(sl_claims_get(c, "cloud.instance_id"), "6256007950053693934");
	assert_string_equal(sl_claims_get(c, "cloud.cs.dbgstat"), "enabled");
	assert_string_equal(sl_claims_get(c, "cloud.identity_fresh"), "false");
	sl_claims_free(c);
	/* its nonce is not our binding */
	o.binding = BINDING;
	o.binding_len = 32;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_gcp_jwt((const char *)tok, tl, &o, c),
	                 SL_E_ATTEST_BINDING);
	sl_claims_free(c);
	/* today: the leaf certificate and the token have expired */
	o.binding = NULL;
	o.at = NOW;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	rc = sl_identity_verify_gcp_jwt((const char *)tok, tl, &o, c);
	assert_true(rc == SL_E_ATTEST_CHAIN || rc == SL_E_ATTEST);
	sl_claims_free(c);
	/* another root: the chain does not verify */
	tl_vector_path(root, sizeof(root), "aws-iid/aws_rsa_iid_cert_us-east-1.pem");
	o.at = 1750690800;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify_gcp_jwt((const char *)tok, tl, &o, c),
	                 SL_E_ATTEST_CHAIN);
	sl_claims_free(c);
	free(tok);
}

static void test_unsigned_region(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_unsigned_region("aws:eu-west-1", c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.provider"), "aws");
	assert_string_equal(sl_claims_get(c, "cloud.region"), "eu-west-1");
	assert_string_equal(sl_claims_get(c, "cloud.region_verified"), "false");
	assert_string_equal(sl_claims_get(c, "cloud.identity_kind"), "unsigned");
	static const char *const bad[] = {"eu-west-1", "mars:x", "aws:", "aws:EU-WEST-1",
	                                  "aws:a b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sl_identity_unsigned_region(bad[i], c), SL_E_INPUT);
	json_t *doc = NULL;
	assert_int_equal(sl_identity_unsigned_doc("gcp:europe-west4", &doc), SL_OK);
	sl_claims_free(c);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify(doc, NULL, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.region"), "europe-west4");
	assert_string_equal(sl_claims_get(c, "cloud.region_verified"), "false");
	json_decref(doc);
	sl_claims_free(c);
}

/* A member the verifier does not read is refused, naming it: an unsigned
 * document that also says "region_verified": true must not look as if that
 * had counted. Checked before any signature work, for every kind. */
static void test_identity_unknown_member(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	static const char *const docs[][2] = {
	    {"{\"kind\":\"unsigned\",\"region\":\"aws:eu-west-1\",\"region_verified\":true}",
	     "identity document (unsigned): unknown member \"region_verified\""},
	    {"{\"kind\":\"gcp-jwt\",\"token\":\"a.b.c\",\"region\":\"gcp:europe-west4\"}",
	     "identity document (gcp-jwt): unknown member \"region\""},
	    {"{\"kind\":\"aws-iid\",\"document\":\"{}\",\"pkcs7\":\"AAAA\","
	     "\"verified\":1}",
	     "identity document (aws-iid): unknown member \"verified\""},
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		json_t *doc = json_loads(docs[i][0], 0, NULL);
		assert_non_null(doc);
		assert_int_equal(sl_claims_new(&c), SL_OK);
		assert_int_equal(sl_identity_verify(doc, NULL, c), SL_E_ATTEST_FORMAT);
		if (strstr(sl_err_detail(), docs[i][1]) == NULL)
			fail_msg("detail '%s' lacks '%s'", sl_err_detail(), docs[i][1]);
		/* nothing from the refused document reached the claims */
		assert_null(sl_claims_get(c, "cloud.region"));
		sl_claims_free(c);
		json_decref(doc);
	}
	/* the same documents without the extra member are read as before */
	json_t *ok = json_loads("{\"kind\":\"unsigned\",\"region\":\"aws:eu-west-1\"}", 0, NULL);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify(ok, NULL, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "cloud.region_verified"), "false");
	sl_claims_free(c);
	json_decref(ok);
}

int main(void)
{
	if (sl_crypto_init() != SL_OK)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gcp_jwt_accepted),
	    cmocka_unit_test(test_gcp_jwt_refused),
	    cmocka_unit_test(test_gcp_jwt_tamper_and_malformed),
	    cmocka_unit_test(test_region_policy_denies),
	    cmocka_unit_test(test_aws_test_keys),
	    cmocka_unit_test(test_aws_real_vectors),
	    cmocka_unit_test(test_gcp_confidential_space_vector),
	    cmocka_unit_test(test_unsigned_region),
	    cmocka_unit_test(test_identity_unknown_member),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
