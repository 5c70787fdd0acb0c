/* AK and EK certificates: chains to a directory of CA certificates. */
#include <dirent.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/util.h"
#include "tpm2_int.h"

#define CA_FILE_MAX (1u << 20)

sl_err sl_tpm2_x509_parse(const uint8_t *p, size_t len, X509 **out, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const unsigned char *q = p;
	BIO *bio = NULL;

	*out = NULL;
	SL_ENSURE(len > 0 && len <= SL_TPM2_CERT_MAX * 2, SL_E_ATTEST_FORMAT,
	          "%s: %zu bytes is not a certificate", what, len);
	*out = d2i_X509(NULL, &q, (long)len);
	if (*out != NULL) {
		SL_ENSURE((size_t)(q - p) == len, SL_E_ATTEST_FORMAT,
		          "%s: trailing bytes after the DER certificate", what);
	} else {
		ERR_clear_error();
		bio = BIO_new_mem_buf(p, (int)len);
		SL_GUARD_OSSL(bio != NULL, SL_E_NOMEM, "%s", what);
		*out = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		SL_GUARD_OSSL(*out != NULL, SL_E_ATTEST_FORMAT, "%s: not a DER or PEM certificate",
		              what);
	}
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		X509_free(*out);
		*out = NULL;
	}
	BIO_free(bio);
	return rc;
}

/* Adds every certificate of one file (PEM bundle or a DER certificate). */
static size_t add_file(X509_STORE *store, const char *path)
{
	uint8_t *data = NULL;
	size_t len = 0, n = 0;
	X509 *x = NULL;
	BIO *bio;
	const unsigned char *q;

	if (sl_file_read(path, CA_FILE_MAX, &data, &len) != SL_OK) {
		sl_err_clear();
		return 0;
	}
	q = data;
	x = d2i_X509(NULL, &q, (long)len);
	if (x != NULL) {
		n += X509_STORE_add_cert(store, x) == 1;
		X509_free(x);
	} else if ((bio = BIO_new_mem_buf(data, (int)len)) != NULL) {
		while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
			n += X509_STORE_add_cert(store, x) == 1;
			X509_free(x);
		}
		BIO_free(bio);
	}
	ERR_clear_error();
	free(data);
	return n;
}

static SL_RESULT load_dir(X509_STORE *store, const char *dir)
{
	sl_err rc = SL_E_IO;
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;
	char path[4096];

	SL_ENSURE(d != NULL, SL_E_IO, "trust directory %s: cannot open", dir);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n += add_file(store, path);
	}
	SL_ENSURE(n > 0, SL_E_IO, "trust directory %s: no CA certificates (PEM or DER) in it", dir);
	rc = SL_OK;
out:
	if (d != NULL)
		closedir(d);
	return rc;
}

sl_err sl_tpm2_cert_verify(X509 *cert, const char *ca_dir, time_t at, EVP_PKEY *key,
                           const char *what)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *param;
	int err;

	SL_ENSURE(store != NULL && ctx != NULL, SL_E_NOMEM, "%s", what);
	SL_GUARD(load_dir(store, ca_dir));
	SL_GUARD_OSSL(X509_STORE_CTX_init(ctx, store, cert, NULL) == 1, SL_E_CRYPTO, "%s", what);
	param = X509_STORE_CTX_get0_param(ctx);
	/* Every certificate in the directory is a trust anchor: an operator may
	 * trust a cloud's intermediate CA without its root. */
	X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
	if (at != 0)
		X509_VERIFY_PARAM_set_time(param, at);
	if (X509_verify_cert(ctx) != 1) {
		err = X509_STORE_CTX_get_error(ctx);
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_CHAIN, "%s: certificate chain to %s: %s (depth %d)", what,
		        ca_dir, X509_verify_cert_error_string(err),
		        X509_STORE_CTX_get_error_depth(ctx));
	}
	if (key != NULL) {
		EVP_PKEY *ck = X509_get0_pubkey(cert);
		SL_ENSURE(ck != NULL && EVP_PKEY_eq(ck, key) == 1, SL_E_ATTEST_UNTRUSTED,
		          "%s: the certificate's public key is not this key", what);
	}
	rc = SL_OK;
out:
	ERR_clear_error();
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return rc;
}

sl_err sl_tpm2_ek_cert_verify(const uint8_t *cert, size_t cert_len, const char *ca_dir, time_t at,
                              const uint8_t *ek_pub, size_t ek_pub_len)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	X509 *x = NULL;
	EVP_PKEY *key = NULL;
	TPM2B_PUBLIC p;

	SL_GUARD(sl_tpm2_x509_parse(cert, cert_len, &x, "EK certificate"));
	if (ek_pub != NULL) {
		SL_GUARD(sl_tpm2_mu_public(ek_pub, ek_pub_len, &p, "EK public"));
		SL_GUARD(sl_tpm2_public_pkey(&p.publicArea, &key));
	}
	SL_GUARD(sl_tpm2_cert_verify(x, ca_dir, at, key, "EK certificate"));
	rc = SL_OK;
out:
	EVP_PKEY_free(key);
	X509_free(x);
	return rc;
}
