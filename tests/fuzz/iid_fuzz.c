/* Fuzz target: cloud identity documents. Byte 0 picks the path: the JSON
 * document form (dispatch by kind), a PKCS7 (DER, base64-encoded here), or
 * an AWS document with an RSA signature. A throwaway self-signed certificate
 * is the trust directory, so the signature paths run to the end. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/identity.h"
#include "seclaunch/util.h"

static char dir[64], pem[128];

static void cleanup(void)
{
	unlink(pem);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/sl_iid_fuzz_%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(pem, sizeof(pem), "%s/aws.pem", dir);
	EVP_PKEY *k = EVP_RSA_gen(2048);
	X509 *x = X509_new();
	X509_set_pubkey(x, k);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_sign(x, k, EVP_sha256());
	FILE *f = fopen(pem, "w");
	if (f == NULL)
		abort();
	PEM_write_X509(f, x);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(k);
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_identity_opts o = {.aws_trust_dir = dir, .at = 1735689600};
	sl_claims *c = NULL;
	char *b64 = NULL;
	if (size < 1 || sl_claims_new(&c) != SL_OK)
		goto out;
	uint8_t mode = data[0] % 3;
	data++;
	size--;
	if (mode == 0) {
		json_error_t je;
		json_t *j = json_loadb((const char *)data, size, 0, &je);
		if (j != NULL)
			(void)sl_identity_verify(j, &o, c);
		json_decref(j);
	} else if (sl_b64_encode(data, size, &b64) == SL_OK) {
		if (mode == 1)
			(void)sl_identity_verify_aws(NULL, 0, b64, true, &o, c);
		else
			(void)sl_identity_verify_aws(data, size, "AAAA", false, &o, c);
	}
out:
	free(b64);
	sl_claims_free(c);
	return 0;
}
