/* Signed policies: the signature is checked before a single rule is parsed,
 * and the built-in development policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"
#include "seclaunch/minisign.h"
#include "seclaunch/util.h"

#define SIG_FILE_MAX (16 * 1024)
#define PUBKEY_FILE_MAX 4096

sl_err sl_policy_load_signed_mem(const uint8_t *data, size_t len, const uint8_t *sig,
                                 size_t sig_len, const uint8_t *pubkey, size_t pubkey_len,
                                 sl_policy **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_minisign_pubkey pk;
	sl_minisign_sig *s = NULL;
	sl_policy *p = NULL;

	SL_GUARD(sl_minisign_pubkey_parse(pubkey, pubkey_len, &pk));
	SL_GUARD(sl_minisign_sig_parse(sig, sig_len, &s));
	rc = sl_minisign_verify(&pk, s, data, len);
	if (rc == SL_E_INTEGRITY)
		rc = sl_err_wrap(SL_E_POLICY_SIG, "policy signature");
	SL_GUARD(rc);
	/* the development policy's exact text, signed (seclaunchd --dev writes it
	 * so for its clients): the built-in policy it names */
	if (len == strlen(sl_policy_dev_text()) && memcmp(data, sl_policy_dev_text(), len) == 0)
		SL_GUARD(sl_policy_dev(&p));
	else
		SL_GUARD(sl_policy_load(data, len, &p));
	p->trusted_comment = strdup(sl_minisign_sig_trusted_comment(s));
	SL_ENSURE(p->trusted_comment != NULL, SL_E_NOMEM, "allocating");
	*out = p;
	p = NULL;
	rc = SL_OK;
out:
	sl_policy_free(p);
	sl_minisign_sig_free(s);
	return rc;
}

sl_err sl_policy_load_signed(const char *policy_path, const char *sig_path, const char *pubkey_path,
                             sl_policy **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *data = NULL, *sig = NULL, *pk = NULL;
	size_t len = 0, sig_len = 0, pk_len = 0;
	char *defsig = NULL;

	if (sig_path == NULL) {
		SL_ENSURE(asprintf(&defsig, "%s.minisig", policy_path) >= 0, SL_E_NOMEM,
		          "allocating");
		sig_path = defsig;
	}
	SL_GUARD(sl_file_read(policy_path, SL_POLICY_MAX_BYTES, &data, &len));
	SL_GUARD(sl_file_read(sig_path, SIG_FILE_MAX, &sig, &sig_len));
	SL_GUARD(sl_file_read(pubkey_path, PUBKEY_FILE_MAX, &pk, &pk_len));
	rc = sl_policy_load_signed_mem(data, len, sig, sig_len, pk, pk_len, out);
	if (rc != SL_OK) {
		/* name the file: the signature, the key or the policy */
		const char *d = sl_err_detail();
		const char *what = strncmp(d, "minisign public key", 19) == 0  ? pubkey_path
		                   : strncmp(d, "minisign signature", 18) == 0 ? sig_path
		                   : strncmp(d, "policy signature", 16) == 0   ? sig_path
		                                                               : policy_path;
		rc = sl_err_wrap(rc, "%s", what);
	}
out:
	free(defsig);
	free(data);
	free(sig);
	free(pk);
	return rc;
}

/* its digest binds every release: a change here makes seclaunchd --dev sign
 * and write its STATE/policy.json again (kmsd_devpolicy) */
static const char DEV_TEXT[] =
    "{\"version\": 1, \"description\": \"seclaunch built-in development policy: releases any "
    "key for any dataset to any verified evidence, in any region, verified or not; seals "
    "every output, to any destination, under the key " SL_POLICY_DEV_OUTPUT_KEY
    ", which seclaunchd --dev creates at start\"}\n";

const char *sl_policy_dev_text(void)
{
	return DEV_TEXT;
}

sl_err sl_policy_dev(sl_policy **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_policy *p = calloc(1, sizeof(*p));
	SL_ENSURE(p != NULL, SL_E_NOMEM, "allocating a policy");
	p->dev = true;
	p->allow_unverified = true;
	sl_sha256(DEV_TEXT, strlen(DEV_TEXT), p->digest);
	sl_hex_encode(p->digest, sizeof(p->digest), p->digest_hex);
	*out = p;
	rc = SL_OK;
out:
	return rc;
}
