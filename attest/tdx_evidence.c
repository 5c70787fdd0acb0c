/* The "tdx" evidence kind: {"kind":"tdx","quote":b64}. Collected through
 * configfs-tsm (provider tdx_guest); the quote carries its PCK chain. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinds.h"
#include "snp_tsm.h"
#include "tdx_quote.h"
#include "seclaunch/util.h"

#define MAX_QUOTE (64 * 1024)

static bool tdx_available(const sl_collect_opts *o)
{
	(void)o;
	return access("/dev/tdx_guest", F_OK) == 0;
}

static sl_err tdx_collect(const sl_collect_opts *o, json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	uint8_t rd[64] = {0};
	uint8_t *quote = NULL;
	size_t qlen = 0;
	char *b64 = NULL;
	json_t *ev = NULL;
	const char *root = o->tsm_root != NULL ? o->tsm_root : SL_TSM_DEFAULT_ROOT;

	*out = NULL;
	SL_ENSURE(o->nonce != NULL && o->nonce_len >= 1 && o->nonce_len <= 64, SL_E_USAGE,
	          "tdx: the binding must be 1..64 bytes");
	memcpy(rd, o->nonce, o->nonce_len);
	SL_GUARD(sl_tsm_report(root, "tdx_guest", rd, &quote, &qlen, NULL, NULL));
	SL_GUARD(sl_b64_encode(quote, qlen, &b64));
	ev = json_pack("{s:s, s:s}", "kind", "tdx", "quote", b64);
	SL_ENSURE(ev != NULL, SL_E_NOMEM, "tdx evidence");
	*out = ev;
	rc = SL_OK;
out:
	free(quote);
	free(b64);
	return rc;
}

static sl_err tdx_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *quote = NULL;
	size_t qlen = 0;
	const char *s = json_string_value(json_object_get(ev, "quote"));

	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "evidence.quote: missing or not a string");
	rc = sl_b64_decode(s, MAX_QUOTE, &quote, &qlen, "evidence.quote");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "tdx evidence");
		goto out;
	}
	SL_GUARD(sl_tdx_verify_quote(quote, qlen, o, true, claims));
	rc = SL_OK;
out:
	free(quote);
	return rc;
}

const sl_evidence_kind sl_kind_tdx = {
    .name = "tdx",
    .available = tdx_available,
    .collect = tdx_collect,
    .verify = tdx_verify,
};
