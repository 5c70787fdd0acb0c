/* Fuzz target: a GCP identity token (compact JWS) through the JWT parser,
 * header checks and JWKS lookup (a small JWKS written once at start). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "seclaunch/identity.h"

static char jwks[64];

static void cleanup(void)
{
	unlink(jwks);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(jwks, sizeof(jwks), "/tmp/sl_jwt_fuzz_%d.json", (int)getpid());
	FILE *f = fopen(jwks, "w");
	if (f == NULL)
		abort();
	/* a 2048-bit modulus of 0x80 00.. 01 bytes: parses, never verifies */
	fputs("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"k1\",\"e\":\"AQAB\",\"n\":\"gA", f);
	for (int i = 0; i < 338; i++)
		fputc('A', f);
	fputs("AB\"}]}", f);
	fclose(f);
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t binding[32] = {1};
	sl_identity_opts o = {
	    .gcp_jwks = jwks, .binding = binding, .binding_len = 32, .at = 1750690800};
	sl_claims *c = NULL;
	if (sl_claims_new(&c) != SL_OK)
		abort();
	(void)sl_identity_verify_gcp_jwt((const char *)data, size, &o, c);
	sl_claims_free(c);
	return 0;
}
