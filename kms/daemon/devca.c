/* --dev TLS material: a self-signed CA and a server certificate for
 * 127.0.0.1 / ::1 / localhost signed by it (ECDSA P-256, 30 days). The CA's
 * private key is not kept: nothing else is ever signed with it. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

static SL_RESULT add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	sl_err rc = SL_E_CRYPTO;
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	SL_GUARD_OSSL(ext != NULL && X509_add_ext(cert, ext, -1) == 1, SL_E_CRYPTO,
	              "dev CA: extension %s", value);
	rc = SL_OK;
out:
	X509_EXTENSION_free(ext);
	return rc;
}

static SL_RESULT make_cert(EVP_PKEY *key, EVP_PKEY *signer, X509 *issuer, const char *cn, bool ca,
                           X509 **out)
{
	sl_err rc = SL_E_CRYPTO;
	X509 *c = X509_new();
	X509_NAME *name;
	uint8_t serial[16];
	BIGNUM *bn = NULL;
	SL_GUARD_OSSL(c != NULL, SL_E_NOMEM, "dev CA: certificate");
	SL_GUARD_OSSL(X509_set_version(c, 2) == 1, SL_E_CRYPTO, "dev CA: version");
	sl_random(serial, sizeof(serial));
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	SL_GUARD_OSSL(bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) != NULL,
	              SL_E_CRYPTO, "dev CA: serial");
	SL_GUARD_OSSL(X509_gmtime_adj(X509_getm_notBefore(c), -3600) != NULL &&
	                  X509_gmtime_adj(X509_getm_notAfter(c), 30L * 86400) != NULL,
	              SL_E_CRYPTO, "dev CA: validity");
	name = X509_get_subject_name(c);
	SL_GUARD_OSSL(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const uint8_t *)cn, -1,
	                                         -1, 0) == 1,
	              SL_E_CRYPTO, "dev CA: name");
	SL_GUARD_OSSL(
	    X509_set_issuer_name(c, issuer != NULL ? X509_get_subject_name(issuer) : name) == 1,
	    SL_E_CRYPTO, "dev CA: issuer");
	SL_GUARD_OSSL(X509_set_pubkey(c, key) == 1, SL_E_CRYPTO, "dev CA: key");
	if (ca) {
		SL_GUARD(add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
		SL_GUARD(add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"));
		SL_GUARD(add_ext(c, c, NID_subject_key_identifier, "hash"));
	} else {
		SL_GUARD(add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE"));
		SL_GUARD(add_ext(c, issuer, NID_key_usage, "critical,digitalSignature"));
		SL_GUARD(add_ext(c, issuer, NID_ext_key_usage, "serverAuth"));
		SL_GUARD(
		    add_ext(c, issuer, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost"));
		SL_GUARD(add_ext(c, issuer, NID_authority_key_identifier, "keyid:always"));
	}
	SL_GUARD_OSSL(X509_sign(c, signer, EVP_sha256()) > 0, SL_E_CRYPTO, "dev CA: sign");
	*out = c;
	c = NULL;
	rc = SL_OK;
out:
	BN_free(bn);
	X509_free(c);
	return rc;
}

static SL_RESULT write_pem(const char *path, X509 *cert, EVP_PKEY *key)
{
	sl_err rc = SL_E_IO;
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;
	SL_GUARD_OSSL(b != NULL, SL_E_NOMEM, "PEM buffer");
	if (cert != NULL)
		SL_GUARD_OSSL(PEM_write_bio_X509(b, cert) == 1, SL_E_CRYPTO, "%s", path);
	else
		SL_GUARD_OSSL(PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) == 1,
		              SL_E_CRYPTO, "%s", path);
	n = BIO_get_mem_data(b, &p);
	SL_GUARD(sl_file_write_atomic(path, p, (size_t)n, cert != NULL ? 0644 : 0600, true));
	rc = SL_OK;
out:
	BIO_free(b);
	return rc;
}

sl_err kmsd_devca_create(const char *ca_pem, const char *cert_pem, const char *key_pem)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_PKEY *cakey = EVP_EC_gen("P-256"), *key = EVP_EC_gen("P-256");
	X509 *ca = NULL, *cert = NULL;
	SL_GUARD_OSSL(cakey != NULL && key != NULL, SL_E_CRYPTO, "dev CA: key generation");
	SL_GUARD(make_cert(cakey, cakey, NULL, "seclaunchd dev CA", true, &ca));
	SL_GUARD(make_cert(key, cakey, ca, "127.0.0.1", false, &cert));
	SL_GUARD(write_pem(key_pem, NULL, key));
	SL_GUARD(write_pem(cert_pem, cert, NULL));
	SL_GUARD(write_pem(ca_pem, ca, NULL));
	rc = SL_OK;
out:
	X509_free(ca);
	X509_free(cert);
	EVP_PKEY_free(cakey);
	EVP_PKEY_free(key);
	return rc;
}
