/* The "tdx" evidence kind: {"kind":"tdx","quote":b64}. Collected through
 * configfs-tsm (provider tdx_guest); the quote carries its PCK chain. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinds.h"
#include "snp_tsm.h"
#include "tdx_quote.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define MAX_QUOTE (64 * 1024)
#define MAX_CCEL (4 * 1024 * 1024)
#define CCEL_DATA "/sys/firmware/acpi/tables/data/CCEL"

static bool tdx_available(const sl_collect_opts *o)
{
	(void)o;
	return access("/dev/tdx_guest", F_OK) == 0;
}

static SL_RESULT tdx_collect(const sl_collect_opts *o, json_t **out)
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
	/* the firmware's event log, when readable, lets the verifier replay the RTMRs */
	uint8_t *log = NULL;
	size_t loglen = 0;
	if (sl_file_read(CCEL_DATA, MAX_CCEL, &log, &loglen) == SL_OK && loglen > 0) {
		char *lb = NULL;
		rc = sl_b64_encode(log, loglen, &lb);
		free(log);
		SL_GUARD(rc);
		rc = json_object_set_new(ev, "ccel", json_string(lb)) == 0 ? SL_OK : SL_E_NOMEM;
		free(lb);
		SL_GUARD(rc);
	} else {
		free(log);
		sl_err_clear();
	}
	*out = ev;
	rc = SL_OK;
out:
	free(quote);
	free(b64);
	return rc;
}

/* The optional "ccel" event log must replay to the quote's RTMRs. */
static SL_RESULT check_ccel(const json_t *ev, const uint8_t *quote, size_t qlen, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const char *s = sl_json_getstr(ev, "ccel");
	uint8_t *log = NULL, rtmr[4][48];
	size_t len = 0, events = 0;
	sl_tdx_quote q;

	if (json_object_get(ev, "ccel") == NULL)
		return sl_claims_set(claims, "tdx.ccel", "absent");
	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "evidence.ccel: not a string");
	rc = sl_b64_decode_public(s, MAX_CCEL, &log, &len, "evidence.ccel");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "tdx evidence");
		goto out;
	}
	SL_GUARD(sl_tdx_quote_parse(quote, qlen, &q));
	SL_GUARD(sl_tdx_ccel_replay(log, len, rtmr, &events));
	for (int i = 0; i < 4; i++)
		SL_ENSURE(memcmp(rtmr[i], q.body.rtmr[i], 48) == 0, SL_E_ATTEST,
		          "TDX CCEL event log does not replay to the quote's RTMR%d", i);
	SL_GUARD(sl_claims_set(claims, "tdx.ccel", "replayed"));
	SL_GUARD(sl_claims_setf(claims, "tdx.ccel.events", "%zu", events));
	rc = SL_OK;
out:
	free(log);
	return rc;
}

static SL_RESULT tdx_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *quote = NULL;
	size_t qlen = 0;
	const char *s = sl_json_getstr(ev, "quote");

	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "evidence.quote: missing or not a string");
	rc = sl_b64_decode_public(s, MAX_QUOTE, &quote, &qlen, "evidence.quote");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "tdx evidence");
		goto out;
	}
	SL_GUARD(sl_tdx_verify_quote(quote, qlen, o, true, claims));
	SL_GUARD(check_ccel(ev, quote, qlen, claims));
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
