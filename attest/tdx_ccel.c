/* TDX CCEL event log replay: the ACPI CCEL table's log area holds a TCG2
 * crypto-agile event log (first a SHA-1-format Spec ID event, then
 * TCG_PCR_EVENT2 records) whose "PCR index" is the TDX measurement register
 * index: 0 = MRTD, 1..4 = RTMR0..3. RTMR[i] = SHA-384(RTMR[i] || digest),
 * EV_NO_ACTION events excluded; the result must equal the quote's RTMRs. */
#include <openssl/evp.h>
#include <string.h>

#include "tdx_quote.h"
#include "seclaunch/buf.h"

#define ALG_SHA384 0x000C
#define EV_NO_ACTION 0x00000003
#define MAX_ALGS 8
#define MAX_EVENTS 65536

struct alg {
	uint16_t id, size;
};

static SL_RESULT spec_id(sl_reader *r, struct alg *algs, uint32_t *nalgs)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint32_t idx = 0, type = 0, size = 0;
	sl_reader ev;
	const uint8_t *sig = NULL;
	uint8_t vlen = 0;

	SL_GUARD(sl_read_u32le(r, &idx, "ccel.spec_id.pcr_index"));
	SL_GUARD(sl_read_u32le(r, &type, "ccel.spec_id.event_type"));
	SL_ENSURE(type == EV_NO_ACTION, SL_E_ATTEST_FORMAT,
	          "CCEL: the first event is not the Spec ID event (EV_NO_ACTION)");
	SL_GUARD(sl_read_skip(r, 20, "ccel.spec_id.digest"));
	SL_GUARD(sl_read_u32le(r, &size, "ccel.spec_id.event_size"));
	SL_GUARD(sl_read_sub(r, size, &ev, "ccel.spec_id.event"));
	SL_GUARD(sl_read_view(&ev, 16, &sig, "spec_id.signature"));
	SL_ENSURE(memcmp(sig, "Spec ID Event03", 16) == 0, SL_E_ATTEST_FORMAT,
	          "CCEL: not a crypto-agile log (Spec ID Event03)");
	SL_GUARD(sl_read_skip(&ev, 8, "spec_id.platform_class_version"));
	SL_GUARD(sl_read_u32le(&ev, nalgs, "spec_id.number_of_algorithms"));
	SL_ENSURE(*nalgs >= 1 && *nalgs <= MAX_ALGS, SL_E_ATTEST_FORMAT,
	          "CCEL: %u digest algorithms", *nalgs);
	for (uint32_t i = 0; i < *nalgs; i++) {
		SL_GUARD(sl_read_u16le(&ev, &algs[i].id, "spec_id.algorithm_id"));
		SL_GUARD(sl_read_u16le(&ev, &algs[i].size, "spec_id.digest_size"));
		SL_ENSURE(algs[i].size >= 1 && algs[i].size <= 64, SL_E_ATTEST_FORMAT,
		          "CCEL: digest size %u", algs[i].size);
	}
	SL_GUARD(sl_read_u8(&ev, &vlen, "spec_id.vendor_info_size"));
	SL_GUARD(sl_read_skip(&ev, vlen, "spec_id.vendor_info"));
	rc = SL_OK;
out:
	return rc;
}

static bool at_end(const sl_reader *r)
{
	/* the log area is padded with zeros (or 0xff) after the last event */
	const sl_reader *q = r;
	size_t left = sl_reader_left(q);
	if (left < 8)
		return true;
	sl_reader peek = *q;
	uint32_t a = 0, b = 0;
	if (sl_read_u32le(&peek, &a, "peek") != SL_OK || sl_read_u32le(&peek, &b, "peek") != SL_OK)
		return true;
	return (a == 0 && b == 0) || (a == 0xFFFFFFFFu && b == 0xFFFFFFFFu);
}

sl_err sl_tdx_ccel_replay(const uint8_t *log, size_t len, uint8_t rtmr[4][48], size_t *events)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	struct alg algs[MAX_ALGS];
	uint32_t nalgs = 0;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	memset(rtmr, 0, 4 * 48);
	*events = 0;
	SL_ENSURE(md != NULL, SL_E_NOMEM, "CCEL");
	sl_reader_init(&r, log, len, "CCEL event log");
	SL_GUARD(spec_id(&r, algs, &nalgs));
	while (!at_end(&r)) {
		uint32_t mr = 0, type = 0, count = 0, esize = 0;
		const uint8_t *sha384 = NULL;
		SL_ENSURE(++*events <= MAX_EVENTS, SL_E_ATTEST_FORMAT, "CCEL: too many events");
		SL_GUARD(sl_read_u32le(&r, &mr, "ccel.event.mr_index"));
		SL_GUARD(sl_read_u32le(&r, &type, "ccel.event.event_type"));
		SL_GUARD(sl_read_u32le(&r, &count, "ccel.event.digest_count"));
		SL_ENSURE(count >= 1 && count <= nalgs, SL_E_ATTEST_FORMAT,
		          "CCEL event %zu: %u digests", *events, count);
		for (uint32_t i = 0; i < count; i++) {
			uint16_t id = 0;
			uint32_t k = 0;
			const uint8_t *d = NULL;
			SL_GUARD(sl_read_u16le(&r, &id, "ccel.event.digest.algorithm_id"));
			while (k < nalgs && algs[k].id != id)
				k++;
			SL_ENSURE(
			    k < nalgs, SL_E_ATTEST_FORMAT,
			    "CCEL event %zu: digest algorithm 0x%04x not in the Spec ID event",
			    *events, id);
			SL_GUARD(sl_read_view(&r, algs[k].size, &d, "ccel.event.digest"));
			if (id == ALG_SHA384 && algs[k].size == 48)
				sha384 = d;
		}
		SL_GUARD(sl_read_u32le(&r, &esize, "ccel.event.event_size"));
		SL_GUARD(sl_read_skip(&r, esize, "ccel.event.event"));
		if (type == EV_NO_ACTION || mr == 0)
			continue;
		SL_ENSURE(mr <= 4, SL_E_ATTEST_FORMAT, "CCEL event %zu: MR index %u (0..4)",
		          *events, mr);
		SL_ENSURE(sha384 != NULL, SL_E_ATTEST_FORMAT, "CCEL event %zu: no SHA-384 digest",
		          *events);
		unsigned int n = 48;
		SL_GUARD_OSSL(EVP_DigestInit_ex(md, EVP_sha384(), NULL) == 1 &&
		                  EVP_DigestUpdate(md, rtmr[mr - 1], 48) == 1 &&
		                  EVP_DigestUpdate(md, sha384, 48) == 1 &&
		                  EVP_DigestFinal_ex(md, rtmr[mr - 1], &n) == 1,
		              SL_E_CRYPTO, "CCEL replay");
	}
	rc = SL_OK;
out:
	EVP_MD_CTX_free(md);
	if (rc == SL_E_FORMAT)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "CCEL");
	return rc;
}
