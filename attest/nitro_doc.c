/* The AWS Nitro Enclaves attestation document parser (nitro.h).
 *
 * Every byte is untrusted. A first pass over the bounds-checked reader
 * checks that the CBOR is well formed, definite-length only, at most 8 deep,
 * and that no declared count or length exceeds the bytes that are left (so
 * libcbor, which decodes it next, never allocates more than the input
 * justifies). Then each field is checked for type, size and bounds, naming
 * it on failure. */
#include <cbor.h>
#include <string.h>

#include "nitro.h"
#include "seclaunch/buf.h"

#define CBOR_DEPTH_MAX 8
#define COSE_SIGN1_TAG 18
#define COSE_HDR_ALG 1
#define COSE_HDR_CRIT 2
#define COSE_ALG_ES384 (-35)

static SL_RESULT wf_head(sl_reader *r, uint8_t *major, uint64_t *val, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t ib = 0, ai = 0, v8 = 0;
	uint16_t v16 = 0;
	uint32_t v32 = 0;

	SL_GUARD(sl_read_u8(r, &ib, what));
	*major = ib >> 5;
	ai = ib & 0x1f;
	if (ai < 24) {
		*val = ai;
	} else if (ai == 24) {
		SL_GUARD(sl_read_u8(r, &v8, what));
		*val = v8;
	} else if (ai == 25) {
		SL_GUARD(sl_read_u16be(r, &v16, what));
		*val = v16;
	} else if (ai == 26) {
		SL_GUARD(sl_read_u32be(r, &v32, what));
		*val = v32;
	} else if (ai == 27) {
		SL_GUARD(sl_read_u64be(r, val, what));
	} else {
		SL_FAIL(SL_E_ATTEST_FORMAT,
		        "%s: CBOR %s at offset %zu (only definite lengths are accepted)", what,
		        ai == 31 ? "indefinite length" : "reserved additional information",
		        sl_reader_offset(r) - 1);
	}
	rc = SL_OK;
out:
	return rc;
}

/* One well-formed CBOR item, whose counts and lengths fit in what is left. */
static SL_RESULT wf_item(sl_reader *r, int depth, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t major = 0;
	uint64_t val = 0;

	SL_ENSURE(depth <= CBOR_DEPTH_MAX, SL_E_ATTEST_FORMAT,
	          "%s: CBOR nested deeper than %d at offset %zu", what, CBOR_DEPTH_MAX,
	          sl_reader_offset(r));
	SL_GUARD(wf_head(r, &major, &val, what));
	switch (major) {
	case 0: /* unsigned */
	case 1: /* negative */
	case 7: /* simple values and floats: the head held them */
		break;
	case 2:
	case 3:
		SL_ENSURE(val <= sl_reader_left(r), SL_E_ATTEST_FORMAT,
		          "%s: CBOR string of %llu bytes at offset %zu, %zu left", what,
		          (unsigned long long)val, sl_reader_offset(r), sl_reader_left(r));
		SL_GUARD(sl_read_skip(r, (size_t)val, what));
		break;
	case 4:
	case 5: {
		uint64_t items = major == 5 ? 2 * (val & (UINT64_MAX >> 1)) : val;
		/* every item takes at least one byte */
		SL_ENSURE(val <= sl_reader_left(r) && items <= sl_reader_left(r),
		          SL_E_ATTEST_FORMAT,
		          "%s: CBOR %s of %llu entries at offset %zu, %zu bytes left", what,
		          major == 5 ? "map" : "array", (unsigned long long)val,
		          sl_reader_offset(r), sl_reader_left(r));
		for (uint64_t i = 0; i < items; i++)
			SL_GUARD(wf_item(r, depth + 1, what));
		break;
	}
	default: /* 6: tag */
		SL_GUARD(wf_item(r, depth + 1, what));
		break;
	}
	rc = SL_OK;
out:
	return rc;
}

/* Exactly one well-formed item, then decoded by libcbor (new reference). */
static SL_RESULT decode(const uint8_t *p, size_t len, cbor_item_t **out, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	struct cbor_load_result res;

	*out = NULL;
	sl_reader_init(&r, p, len, what);
	SL_ENSURE(len > 0, SL_E_ATTEST_FORMAT, "%s: empty", what);
	SL_GUARD(wf_item(&r, 0, what));
	SL_ENSURE(sl_reader_left(&r) == 0, SL_E_ATTEST_FORMAT,
	          "%s: %zu trailing bytes after the CBOR item", what, sl_reader_left(&r));
	memset(&res, 0, sizeof(res));
	*out = cbor_load(p, len, &res);
	if (*out == NULL || res.error.code != CBOR_ERR_NONE || res.read != len) {
		if (*out != NULL)
			cbor_decref(out);
		*out = NULL;
		SL_FAIL(res.error.code == CBOR_ERR_MEMERROR ? SL_E_NOMEM : SL_E_ATTEST_FORMAT,
		        "%s: CBOR not decodable (libcbor error %d at offset %zu)", what,
		        (int)res.error.code, res.error.position);
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT get_bstr(const cbor_item_t *v, size_t min, size_t max, bool nullable,
                          sl_nitro_bytes *out, const char *what)
{
	memset(out, 0, sizeof(*out));
	if (nullable && cbor_is_null(v))
		return SL_OK;
	if (!cbor_isa_bytestring(v) || !cbor_bytestring_is_definite(v))
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: not a byte string%s", what,
		                  nullable ? " or null" : "");
	size_t n = cbor_bytestring_length(v);
	if (n < min || n > max)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: %zu bytes, want %zu..%zu", what, n, min,
		                  max);
	out->p = cbor_bytestring_handle(v);
	out->len = n;
	out->present = true;
	return SL_OK;
}

static bool str_is(const cbor_item_t *v, const char *s)
{
	size_t n = strlen(s);
	return cbor_isa_string(v) && cbor_string_is_definite(v) && cbor_string_length(v) == n &&
	       memcmp(cbor_string_handle(v), s, n) == 0;
}

/* The protected header: a serialized map holding alg ES384 and no crit. */
static SL_RESULT check_protected(const sl_nitro_bytes *h)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	cbor_item_t *m = NULL;
	bool alg = false;

	SL_GUARD(decode(h->p, h->len, &m, "COSE protected header"));
	SL_ENSURE(cbor_isa_map(m), SL_E_ATTEST_FORMAT, "COSE protected header: not a map");
	struct cbor_pair *pairs = cbor_map_handle(m);
	for (size_t i = 0; i < cbor_map_size(m); i++) {
		const cbor_item_t *k = pairs[i].key, *v = pairs[i].value;
		if (!cbor_isa_uint(k))
			continue;
		uint64_t label = cbor_get_int(k);
		SL_ENSURE(label != COSE_HDR_CRIT, SL_E_ATTEST_FORMAT,
		          "COSE protected header: critical headers (crit) are not supported");
		if (label != COSE_HDR_ALG)
			continue;
		SL_ENSURE(!alg, SL_E_ATTEST_FORMAT, "COSE protected header: alg given twice");
		SL_ENSURE(cbor_isa_negint(v) && cbor_get_int(v) == (uint64_t)(-1 - COSE_ALG_ES384),
		          SL_E_ATTEST_FORMAT, "COSE protected header: alg is not ES384 (-35)");
		alg = true;
	}
	SL_ENSURE(alg, SL_E_ATTEST_FORMAT, "COSE protected header: no alg");
	rc = SL_OK;
out:
	if (m != NULL)
		cbor_decref(&m);
	return rc;
}

static SL_RESULT parse_pcrs(const cbor_item_t *v, sl_nitro_doc *d)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_nitro_bytes b;

	SL_ENSURE(cbor_isa_map(v) && cbor_map_size(v) >= 1 && cbor_map_size(v) <= SL_NITRO_PCRS,
	          SL_E_ATTEST_FORMAT, "document.pcrs: not a map of 1..%d PCRs", SL_NITRO_PCRS);
	struct cbor_pair *pairs = cbor_map_handle(v);
	for (size_t i = 0; i < cbor_map_size(v); i++) {
		SL_ENSURE(cbor_isa_uint(pairs[i].key) && cbor_get_int(pairs[i].key) < SL_NITRO_PCRS,
		          SL_E_ATTEST_FORMAT, "document.pcrs: an index is not an integer 0..%d",
		          SL_NITRO_PCRS - 1);
		size_t idx = (size_t)cbor_get_int(pairs[i].key);
		SL_ENSURE(!d->pcr_present[idx], SL_E_ATTEST_FORMAT,
		          "document.pcrs: PCR%zu given twice", idx);
		SL_GUARD(get_bstr(pairs[i].value, SL_NITRO_PCR_LEN, SL_NITRO_PCR_LEN, false, &b,
		                  "document.pcrs value (SHA-384)"));
		d->pcr_present[idx] = true;
		d->pcr[idx] = b.p;
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_cabundle(const cbor_item_t *v, sl_nitro_doc *d)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	SL_ENSURE(cbor_isa_array(v) && cbor_array_size(v) >= 1 &&
	              cbor_array_size(v) <= SL_NITRO_CABUNDLE_MAX,
	          SL_E_ATTEST_FORMAT, "document.cabundle: not an array of 1..%d certificates",
	          SL_NITRO_CABUNDLE_MAX);
	cbor_item_t **items = cbor_array_handle(v);
	for (size_t i = 0; i < cbor_array_size(v); i++)
		SL_GUARD(get_bstr(items[i], 1, SL_NITRO_CERT_MAX, false, &d->cabundle[i],
		                  "document.cabundle[]"));
	d->ncabundle = cbor_array_size(v);
	rc = SL_OK;
out:
	return rc;
}

enum {
	F_MODULE_ID,
	F_DIGEST,
	F_TIMESTAMP,
	F_PCRS,
	F_CERTIFICATE,
	F_CABUNDLE,
	F_PUBLIC_KEY,
	F_USER_DATA,
	F_NONCE,
	F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "module_id", "digest",     "timestamp", "pcrs",  "certificate",
    "cabundle",  "public_key", "user_data", "nonce",
};
#define F_REQUIRED 6 /* the first six */

static SL_RESULT parse_field(int f, const cbor_item_t *v, sl_nitro_doc *d)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	switch (f) {
	case F_MODULE_ID: {
		SL_ENSURE(cbor_isa_string(v) && cbor_string_is_definite(v) &&
		              cbor_string_length(v) >= 1 &&
		              cbor_string_length(v) <= SL_NITRO_MODULE_ID_MAX,
		          SL_E_ATTEST_FORMAT, "document.module_id: not a text of 1..%d bytes",
		          SL_NITRO_MODULE_ID_MAX);
		const uint8_t *s = cbor_string_handle(v);
		size_t n = cbor_string_length(v);
		for (size_t i = 0; i < n; i++)
			SL_ENSURE(s[i] > 0x20 && s[i] < 0x7f, SL_E_ATTEST_FORMAT,
			          "document.module_id: byte %zu is not printable ASCII", i);
		memcpy(d->module_id, s, n);
		d->module_id[n] = '\0';
		break;
	}
	case F_DIGEST:
		SL_ENSURE(str_is(v, "SHA384"), SL_E_ATTEST_FORMAT,
		          "document.digest: not \"SHA384\" (the only digest NSM uses)");
		break;
	case F_TIMESTAMP:
		SL_ENSURE(cbor_isa_uint(v) && cbor_get_int(v) > 0, SL_E_ATTEST_FORMAT,
		          "document.timestamp: not a positive integer (ms since 1970)");
		d->timestamp_ms = cbor_get_int(v);
		break;
	case F_PCRS:
		SL_GUARD(parse_pcrs(v, d));
		break;
	case F_CERTIFICATE:
		SL_GUARD(get_bstr(v, 1, SL_NITRO_CERT_MAX, false, &d->certificate,
		                  "document.certificate"));
		break;
	case F_CABUNDLE:
		SL_GUARD(parse_cabundle(v, d));
		break;
	case F_PUBLIC_KEY:
		SL_GUARD(get_bstr(v, 0, SL_NITRO_FIELD_MAX, true, &d->public_key,
		                  "document.public_key"));
		break;
	case F_USER_DATA:
		SL_GUARD(
		    get_bstr(v, 0, SL_NITRO_FIELD_MAX, true, &d->user_data, "document.user_data"));
		break;
	default:
		SL_GUARD(get_bstr(v, 0, SL_NITRO_FIELD_MAX, true, &d->nonce, "document.nonce"));
		break;
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_payload(const cbor_item_t *m, sl_nitro_doc *d)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	bool seen[F_COUNT] = {false};

	SL_ENSURE(cbor_isa_map(m), SL_E_ATTEST_FORMAT, "document payload: not a map");
	struct cbor_pair *pairs = cbor_map_handle(m);
	for (size_t i = 0; i < cbor_map_size(m); i++) {
		int f = 0;
		while (f < F_COUNT && !str_is(pairs[i].key, field_names[f]))
			f++;
		SL_ENSURE(f < F_COUNT, SL_E_ATTEST_FORMAT,
		          "document payload: entry %zu has an unknown or non-text key", i);
		SL_ENSURE(!seen[f], SL_E_ATTEST_FORMAT, "document.%s: given twice", field_names[f]);
		seen[f] = true;
		SL_GUARD(parse_field(f, pairs[i].value, d));
	}
	for (int f = 0; f < F_REQUIRED; f++)
		SL_ENSURE(seen[f], SL_E_ATTEST_FORMAT, "document.%s: missing", field_names[f]);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_nitro_doc_parse(const uint8_t *p, size_t len, sl_nitro_doc *d)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	cbor_item_t *top = NULL, *arr = NULL, *pl = NULL;
	sl_nitro_bytes sig;
	sl_reader r;
	uint8_t major = 0;
	uint64_t tag = 0;

	memset(d, 0, sizeof(*d));
	SL_ENSURE(len <= SL_NITRO_DOC_MAX, SL_E_ATTEST_FORMAT,
	          "Nitro document: %zu bytes, more than %d", len, SL_NITRO_DOC_MAX);
	/* the tag is read here: libcbor 0.8 does not decode tags 6..20 */
	sl_reader_init(&r, p, len, "Nitro document");
	SL_GUARD(wf_head(&r, &major, &tag, "Nitro document"));
	if (major == 6) {
		SL_ENSURE(tag == COSE_SIGN1_TAG, SL_E_ATTEST_FORMAT,
		          "Nitro document: CBOR tag %llu, want 18 (COSE_Sign1) or none",
		          (unsigned long long)tag);
		p += sl_reader_offset(&r);
		len -= sl_reader_offset(&r);
	}
	SL_GUARD(decode(p, len, &top, "Nitro document"));
	arr = cbor_incref(top);
	SL_ENSURE(cbor_isa_array(arr) && cbor_array_size(arr) == 4, SL_E_ATTEST_FORMAT,
	          "Nitro document: not a COSE_Sign1 (an array of 4)");
	cbor_item_t **it = cbor_array_handle(arr);
	SL_GUARD(get_bstr(it[0], 1, 256, false, &d->protected_hdr, "COSE protected header"));
	SL_GUARD(check_protected(&d->protected_hdr));
	SL_ENSURE(cbor_isa_map(it[1]), SL_E_ATTEST_FORMAT, "COSE unprotected header: not a map");
	SL_GUARD(get_bstr(it[2], 1, SL_NITRO_DOC_MAX, false, &d->payload, "COSE payload"));
	SL_GUARD(get_bstr(it[3], SL_NITRO_SIG_LEN, SL_NITRO_SIG_LEN, false, &sig,
	                  "COSE signature (ES384 r || s)"));
	d->sig = sig.p;
	SL_GUARD(decode(d->payload.p, d->payload.len, &pl, "document payload"));
	SL_GUARD(parse_payload(pl, d));
	d->cose_item = arr;
	d->payload_item = pl;
	arr = pl = NULL;
	rc = SL_OK;
out:
	if (top != NULL)
		cbor_decref(&top);
	if (arr != NULL)
		cbor_decref(&arr);
	if (pl != NULL)
		cbor_decref(&pl);
	if (rc != SL_OK)
		memset(d, 0, sizeof(*d));
	return rc;
}

void sl_nitro_doc_free(sl_nitro_doc *d)
{
	cbor_item_t *a = d->cose_item, *p = d->payload_item;
	if (a != NULL)
		cbor_decref(&a);
	if (p != NULL)
		cbor_decref(&p);
	memset(d, 0, sizeof(*d));
}
