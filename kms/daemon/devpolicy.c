/* --dev without --policy: the built-in development policy, signed for
 * clients. `seclaunch run` needs a signed policy file whose digest is the
 * one the service enforces; the service writes its development policy
 * (STATE/policy.json, exactly sl_policy_dev_text()), a signature under a key
 * of its own (STATE/policy.json.minisig) and that key's public half
 * (STATE/policy.pub), so that
 *   seclaunch run --policy STATE/policy.json --policy-pubkey STATE/policy.pub
 * works against a bare --dev service. The secret key is not kept (nothing
 * else is ever signed with it); files that still verify are kept as they
 * are, so a client's copy of policy.pub stays valid across restarts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "seclaunch/minisign.h"
#include "seclaunch/policy.h"

#define DEV_TRUSTED_COMMENT "seclaunchd --dev built-in development policy (NOT for production)"

static SL_RESULT write_signed(const char *pol, const char *sig, const char *pub)
{
	sl_err rc = SL_E_CRYPTO;
	char *sk_text = NULL, *pk_text = NULL, *sig_text = NULL;
	sl_minisign_pubkey pk;
	sl_minisign_seckey *sk = NULL;
	const char *text = sl_policy_dev_text();
	SL_GUARD(sl_minisign_keygen(NULL, 0, 0, &sk_text, &pk_text, &pk));
	SL_GUARD(sl_minisign_seckey_parse((const uint8_t *)sk_text, strlen(sk_text), NULL, &sk));
	SL_GUARD(sl_minisign_sign(sk, (const uint8_t *)text, strlen(text), DEV_TRUSTED_COMMENT,
	                          false, &sig_text));
	/* the signature and key first: a policy.json without them is never seen */
	SL_GUARD(sl_file_write_atomic(pub, pk_text, strlen(pk_text), 0644, true));
	SL_GUARD(sl_file_write_atomic(sig, sig_text, strlen(sig_text), 0644, true));
	SL_GUARD(sl_file_write_atomic(pol, text, strlen(text), 0644, true));
	rc = SL_OK;
out:
	if (sk_text != NULL) {
		sl_wipe(sk_text, strlen(sk_text));
		free(sk_text);
	}
	sl_minisign_seckey_free(sk);
	free(pk_text);
	free(sig_text);
	return rc;
}

sl_err kmsd_devpolicy(const char *state_dir, sl_policy **out)
{
	sl_err rc = SL_E_NOMEM;
	char *pol = NULL, *sig = NULL, *pub = NULL;
	sl_policy *p = NULL;
	SL_ENSURE(asprintf(&pol, "%s/policy.json", state_dir) >= 0 &&
	              asprintf(&sig, "%s/policy.json.minisig", state_dir) >= 0 &&
	              asprintf(&pub, "%s/policy.pub", state_dir) >= 0,
	          SL_E_NOMEM, "development policy paths");
	if (sl_policy_load_signed(pol, sig, pub, &p) != SL_OK || !sl_policy_is_dev(p)) {
		sl_policy_free(p);
		p = NULL;
		SL_GUARD(write_signed(pol, sig, pub));
		rc = sl_policy_load_signed(pol, sig, pub, &p);
		if (rc != SL_OK) {
			rc = sl_err_wrap(SL_E_INTERNAL, "%s: the development policy just written",
			                 pol);
			goto out;
		}
	}
	SL_ENSURE(sl_policy_is_dev(p), SL_E_INTERNAL, "%s: not the development policy", pol);
	*out = p;
	p = NULL;
	rc = SL_OK;
out:
	sl_policy_free(p);
	free(pol);
	free(sig);
	free(pub);
	return rc;
}
