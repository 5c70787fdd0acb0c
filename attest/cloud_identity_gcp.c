/* GCP identity tokens: the instance identity JWT (RS256, key from a JWKS
 * cache file) and the Confidential Space PKI token (RS256, x5c chain to a
 * pinned root). Both name the VM's zone, signed by Google. */
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_identity_int.h"
#include "seclaunch/buf.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"
#include "x509_util.h"

#define JWKS_MAX (256 * 1024)
#define CS_ISSUER "https://confidentialcomputing.googleapis.com"
#define MAX_X5C 4

struct jwt {
	json_t *header, *payload;
	const uint8_t *signed_part; /* "header.payload" */
	size_t signed_len;
	uint8_t *sig;
	size_t sig_len;
};

static void jwt_free(struct jwt *j)
{
	json_decref(j->header);
	json_decref(j->payload);
	free(j->sig);
}

static SL_RESULT decode_json_part(const uint8_t *p, size_t n, const char *field, json_t **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *raw = NULL;
	size_t len = 0;
	json_error_t je;
	rc = sl_b64url_decode((const char *)p, n, SL_IDENTITY_MAX_BYTES, &raw, &len, field);
	if (rc != SL_OK)
		SL_FAIL(SL_E_ATTEST_FORMAT, "JWT %s: not base64url", field);
	*out = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(json_is_object(*out), SL_E_ATTEST_FORMAT, "JWT %s: not a JSON object%s%s", field,
	          *out == NULL ? ": " : "", *out == NULL ? je.text : "");
	rc = SL_OK;
out:
	free(raw);
	return rc;
}

/* Splits and decodes a compact JWS "h.p.s" (every byte through sl_reader). */
static SL_RESULT jwt_parse(const char *token, size_t len, struct jwt *j)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	const uint8_t *part[3];
	size_t plen[3];
	while (len > 0 &&
	       (token[len - 1] == '\n' || token[len - 1] == '\r' || token[len - 1] == ' '))
		len--;
	SL_ENSURE(len > 0 && len <= SL_IDENTITY_MAX_BYTES, SL_E_ATTEST_FORMAT,
	          "JWT: empty or larger than %d bytes", SL_IDENTITY_MAX_BYTES);
	sl_reader_init(&r, token, len, "JWT");
	for (int i = 0; i < 3; i++) {
		sl_reader p;
		SL_ENSURE(i < 2 ? sl_read_until(&r, '.', &p, "JWT part") == SL_OK
		                : sl_read_sub(&r, sl_reader_left(&r), &p, "JWT part") == SL_OK,
		          SL_E_ATTEST_FORMAT, "JWT: want three base64url parts separated by '.'");
		plen[i] = sl_reader_left(&p);
		SL_GUARD(sl_read_view(&p, plen[i], &part[i], "JWT part"));
	}
	SL_ENSURE(memchr(part[2], '.', plen[2]) == NULL, SL_E_ATTEST_FORMAT,
	          "JWT: want three base64url parts separated by '.'");
	SL_GUARD(decode_json_part(part[0], plen[0], "header", &j->header));
	SL_GUARD(decode_json_part(part[1], plen[1], "payload", &j->payload));
	j->signed_part = (const uint8_t *)token;
	j->signed_len = plen[0] + 1 + plen[1];
	if (plen[2] > 0) {
		rc = sl_b64url_decode((const char *)part[2], plen[2], 1024, &j->sig, &j->sig_len,
		                      "JWT signature");
		if (rc != SL_OK)
			SL_FAIL(SL_E_ATTEST_FORMAT, "JWT signature: not base64url");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_identity_rs256_verify(EVP_PKEY *key, const uint8_t *msg, size_t len, const uint8_t *sig,
                                size_t sig_len, const char *what)
{
	sl_err rc = SL_E_ATTEST_SIG;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	SL_GUARD_OSSL(ctx != NULL, SL_E_NOMEM, "%s", what);
	SL_GUARD_OSSL(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1,
	              SL_E_ATTEST_SIG, "%s: key cannot verify RS256", what);
	if (EVP_DigestVerify(ctx, sig, sig_len, msg, len) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG, "%s: signature does not verify", what);
	}
	rc = SL_OK;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

static SL_RESULT b64url_bn(const json_t *v, const char *field, BIGNUM **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *raw = NULL;
	size_t len = 0;
	SL_ENSURE(json_is_string(v), SL_E_ATTEST_FORMAT, "JWKS key: %s missing", field);
	SL_GUARD(
	    sl_b64url_decode(json_string_value(v), json_string_length(v), 1024, &raw, &len, field));
	*out = BN_bin2bn(raw, (int)len, NULL);
	SL_GUARD_OSSL(*out != NULL, SL_E_NOMEM, "JWKS key %s", field);
	rc = SL_OK;
out:
	free(raw);
	return rc;
}

/* The RSA key with kid from the JWKS file. */
static SL_RESULT jwks_key(const char *path, const char *kid, EVP_PKEY **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *data = NULL;
	size_t len = 0;
	json_t *root = NULL;
	json_error_t je;
	BIGNUM *n = NULL, *e = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *pctx = NULL;
	json_t *k = NULL, *found = NULL;
	size_t i;

	SL_ENSURE(path != NULL, SL_E_USAGE, "GCP identity token: no JWKS file given (--gcp-jwks)");
	SL_GUARD(sl_file_read(path, JWKS_MAX, &data, &len));
	root = json_loadb((const char *)data, len, 0, &je);
	SL_ENSURE(json_is_array(json_object_get(root, "keys")), SL_E_FORMAT,
	          "%s: not a JWKS ({\"keys\": [...]})", path);
	json_array_foreach (json_object_get(root, "keys"), i, k) {
		if (sl_json_getstr(k, "kid") != NULL && strcmp(sl_json_getstr(k, "kid"), kid) == 0)
			found = k;
	}
	SL_ENSURE(found != NULL, SL_E_ATTEST_SIG,
	          "GCP identity token: key id '%s' is not in the JWKS %s (unknown or rotated key)",
	          kid, path);
	SL_ENSURE(sl_json_getstr(found, "kty") != NULL &&
	              strcmp(sl_json_getstr(found, "kty"), "RSA") == 0,
	          SL_E_ATTEST_SIG, "%s: key '%s' is not an RSA key", path, kid);
	/* a key published for another algorithm or use is not a signing key for RS256 */
	const char *kalg = sl_json_getstr(found, "alg");
	const char *use = sl_json_getstr(found, "use");
	SL_ENSURE((kalg == NULL || strcmp(kalg, "RS256") == 0) &&
	              (use == NULL || strcmp(use, "sig") == 0),
	          SL_E_ATTEST_SIG, "%s: key '%s' is not an RS256 signing key (alg %s, use %s)",
	          path, kid, kalg ? kalg : "-", use ? use : "-");
	SL_GUARD(b64url_bn(json_object_get(found, "n"), "n", &n));
	SL_GUARD(b64url_bn(json_object_get(found, "e"), "e", &e));
	SL_ENSURE(BN_num_bits(n) >= 2048, SL_E_ATTEST_SIG, "%s: key '%s' is shorter than 2048 bits",
	          path, kid);
	bld = OSSL_PARAM_BLD_new();
	SL_GUARD_OSSL(bld != NULL && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) == 1 &&
	                  OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) == 1 &&
	                  (params = OSSL_PARAM_BLD_to_param(bld)) != NULL,
	              SL_E_CRYPTO, "JWKS key '%s'", kid);
	pctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
	SL_GUARD_OSSL(pctx != NULL && EVP_PKEY_fromdata_init(pctx) == 1 &&
	                  EVP_PKEY_fromdata(pctx, out, EVP_PKEY_PUBLIC_KEY, params) == 1,
	              SL_E_ATTEST_SIG, "JWKS key '%s'", kid);
	rc = SL_OK;
out:
	EVP_PKEY_CTX_free(pctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	BN_free(n);
	BN_free(e);
	json_decref(root);
	free(data);
	return rc;
}

/* The leaf key of the header's x5c chain, verified to the pinned root. */
static SL_RESULT x5c_key(const json_t *x5c, const sl_identity_opts *o, EVP_PKEY **out)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(X509) *untrusted = sk_X509_new_null(), *roots = sk_X509_new_null();
	X509 *leaf = NULL;
	uint8_t *der = NULL, *rootpem = NULL;
	size_t len = 0, rlen = 0;
	size_t i;
	json_t *c;

	SL_ENSURE(o->gcp_cs_root != NULL, SL_E_ATTEST_UNTRUSTED,
	          "GCP token with an x5c chain: no pinned root given (--gcp-cs-root)");
	SL_GUARD_OSSL(untrusted != NULL && roots != NULL, SL_E_NOMEM, "x5c");
	SL_ENSURE(json_is_array(x5c) && json_array_size(x5c) >= 1 &&
	              json_array_size(x5c) <= MAX_X5C,
	          SL_E_ATTEST_FORMAT, "JWT header x5c: want 1..%d certificates", MAX_X5C);
	json_array_foreach (x5c, i, c) {
		X509 *x = NULL;
		SL_ENSURE(json_is_string(c), SL_E_ATTEST_FORMAT,
		          "JWT header x5c[%zu]: not a string", i);
		SL_GUARD(sl_b64_decode(json_string_value(c), 16384, &der, &len, "JWT header x5c"));
		SL_GUARD(sl_x509_from_der(der, len, &x, "JWT header x5c"));
		free(der);
		der = NULL;
		if (i == 0)
			leaf = x;
		else if (sk_X509_push(untrusted, x) == 0) {
			X509_free(x);
			SL_FAIL(SL_E_NOMEM, "x5c");
		}
	}
	SL_GUARD(sl_file_read(o->gcp_cs_root, 1 << 20, &rootpem, &rlen));
	SL_GUARD(sl_x509_parse_blob(rootpem, rlen, roots, NULL, o->gcp_cs_root));
	SL_GUARD(sl_x509_verify_chain(leaf, untrusted, roots, sl_identity_now(o), NULL,
	                              "GCP token x5c chain"));
	*out = X509_get_pubkey(leaf);
	SL_GUARD_OSSL(*out != NULL, SL_E_ATTEST_CHAIN, "x5c leaf key");
	rc = SL_OK;
out:
	free(der);
	free(rootpem);
	X509_free(leaf);
	sk_X509_pop_free(untrusted, X509_free);
	sk_X509_pop_free(roots, X509_free);
	return rc;
}

static const char *str(const json_t *o, const char *k)
{
	return sl_json_getstr(o, k);
}

/* aud or eat_nonce (string or array of strings) contains want. */
static bool json_has_string(const json_t *v, const char *want)
{
	if (json_is_string(v))
		return strcmp(json_string_value(v), want) == 0;
	size_t i;
	json_t *e;
	json_array_foreach (v, i, e) {
		if (json_is_string(e) && strcmp(json_string_value(e), want) == 0)
			return true;
	}
	return false;
}

static SL_RESULT check_times(const json_t *pl, const sl_identity_opts *o)
{
	sl_err rc = SL_E_ATTEST;
	time_t now = sl_identity_now(o);
	long long skew = o->skew_s ? o->skew_s : SL_IDENTITY_DEFAULT_SKEW;
	json_t *exp = json_object_get(pl, "exp"), *iat = json_object_get(pl, "iat");
	json_t *nbf = json_object_get(pl, "nbf");
	char t[32];
	SL_ENSURE(json_is_integer(exp) && json_is_integer(iat), SL_E_ATTEST_FORMAT,
	          "GCP identity token: exp and iat must be integers");
	if ((long long)now > json_integer_value(exp) + skew) {
		sl_time_rfc3339((time_t)json_integer_value(exp), t, sizeof(t));
		SL_FAIL(SL_E_ATTEST, "GCP identity token: expired at %s", t);
	}
	SL_ENSURE(json_integer_value(iat) <= (long long)now + skew, SL_E_ATTEST,
	          "GCP identity token: issued in the future (iat)");
	SL_ENSURE(nbf == NULL || (json_is_integer(nbf) && json_integer_value(nbf) <= now + skew),
	          SL_E_ATTEST, "GCP identity token: not valid yet (nbf)");
	SL_ENSURE(json_integer_value(exp) - json_integer_value(iat) <= 24 * 3600, SL_E_ATTEST,
	          "GCP identity token: lifetime longer than a day");
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_identity_verify_gcp_jwt(const char *token, size_t len, const sl_identity_opts *o,
                                  sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	struct jwt j = {0};
	EVP_PKEY *key = NULL;
	char hex[2 * 64 + 1];
	static const sl_identity_opts none = {0};
	if (o == NULL)
		o = &none;

	SL_GUARD(jwt_parse(token, len, &j));
	const char *alg = str(j.header, "alg");
	SL_ENSURE(alg != NULL && strcmp(alg, "RS256") == 0, SL_E_ATTEST_SIG,
	          "GCP identity token: alg '%s' refused (only RS256)", alg ? alg : "(missing)");
	/* RFC 7515 4.1.11: extensions we do not understand must not be ignored */
	SL_ENSURE(json_object_get(j.header, "crit") == NULL, SL_E_ATTEST_SIG,
	          "GCP identity token: header 'crit' extensions are not supported");
	SL_ENSURE(j.sig_len > 0, SL_E_ATTEST_SIG,
	          "GCP identity token: no signature (unsigned tokens are refused)");
	json_t *x5c = json_object_get(j.header, "x5c");
	bool cs = x5c != NULL;
	if (cs) {
		SL_GUARD(x5c_key(x5c, o, &key));
	} else {
		const char *kid = str(j.header, "kid");
		SL_ENSURE(kid != NULL, SL_E_ATTEST_SIG, "GCP identity token: header has no kid");
		SL_GUARD(jwks_key(o->gcp_jwks, kid, &key));
	}
	SL_GUARD(sl_identity_rs256_verify(key, j.signed_part, j.signed_len, j.sig, j.sig_len,
	                                  "GCP identity token"));
	/* only now, with the signature good, do the claims mean anything */
	SL_GUARD(check_times(j.payload, o));
	const char *iss = str(j.payload, "iss");
	bool iss_ok =
	    iss != NULL && (cs ? strcmp(iss, CS_ISSUER) == 0
	                       : (o->gcp_issuer ? strcmp(iss, o->gcp_issuer) == 0
	                                        : strcmp(iss, "https://accounts.google.com") == 0 ||
	                                              strcmp(iss, "accounts.google.com") == 0));
	SL_ENSURE(iss_ok, SL_E_ATTEST, "GCP identity token: issuer '%s' is not trusted",
	          iss ? iss : "(missing)");
	const json_t *gce =
	    cs ? json_object_get(json_object_get(j.payload, "submods"), "gce")
	       : json_object_get(json_object_get(j.payload, "google"), "compute_engine");
	const char *zone = str(gce, "zone");
	SL_ENSURE(zone != NULL, SL_E_ATTEST_FORMAT,
	          "GCP identity token: no %s.zone (request format=full)",
	          cs ? "submods.gce" : "google.compute_engine");
	const char *dash = strrchr(zone, '-');
	SL_ENSURE(dash != NULL && dash != zone && dash[1] != '\0' &&
	              strspn(zone, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(zone),
	          SL_E_ATTEST_FORMAT, "GCP identity token: zone '%s' is not REGION-SUFFIX", zone);
	bool fresh = false;
	if (o->binding != NULL) {
		SL_ENSURE(o->binding_len <= 64, SL_E_USAGE, "binding longer than 64 bytes");
		sl_hex_encode(o->binding, o->binding_len, hex);
		json_t *bound = cs ? json_object_get(j.payload, "eat_nonce")
		                   : json_object_get(j.payload, "aud");
		SL_ENSURE(json_has_string(bound, hex), SL_E_ATTEST_BINDING,
		          "GCP identity token: %s is not this request's binding (wrong audience)",
		          cs ? "eat_nonce" : "aud");
		fresh = true;
	}
	SL_GUARD(sl_claims_set(claims, "cloud.provider", "gcp"));
	SL_GUARD(sl_claims_setf(claims, "cloud.region", "%.*s", (int)(dash - zone), zone));
	SL_GUARD(sl_claims_set(claims, "cloud.zone", zone));
	SL_GUARD(sl_claims_set(claims, "cloud.region_verified", "true"));
	SL_GUARD(sl_claims_set(claims, "cloud.identity_fresh", fresh ? "true" : "false"));
	SL_GUARD(sl_claims_set(claims, "cloud.identity_kind", cs ? "gcp-cs" : "gcp-jwt"));
	SL_GUARD(sl_claims_setf(claims, "cloud.identity_iat", "%lld",
	                        (long long)json_integer_value(json_object_get(j.payload, "iat"))));
	static const char *const ids[][2] = {{"project_id", "cloud.project_id"},
	                                     {"project_number", "cloud.project_number"},
	                                     {"instance_id", "cloud.instance_id"}};
	for (size_t i = 0; i < 3; i++) {
		json_t *v = json_object_get(gce, ids[i][0]);
		if (json_is_string(v))
			SL_GUARD(sl_claims_set(claims, ids[i][1], json_string_value(v)));
		else if (json_is_integer(v))
			SL_GUARD(sl_claims_setf(claims, ids[i][1], "%lld",
			                        (long long)json_integer_value(v)));
	}
	if (cs) {
		if (str(j.payload, "dbgstat") != NULL)
			SL_GUARD(
			    sl_claims_set(claims, "cloud.cs.dbgstat", str(j.payload, "dbgstat")));
		const char *dg =
		    str(json_object_get(json_object_get(j.payload, "submods"), "container"),
		        "image_digest");
		if (dg != NULL)
			SL_GUARD(sl_claims_set(claims, "cloud.cs.image_digest", dg));
	}
	rc = SL_OK;
out:
	EVP_PKEY_free(key);
	jwt_free(&j);
	return rc;
}
