/* The Intel SGX extension of a PCK certificate (OID 1.2.840.113741.1.13.1):
 * a SEQUENCE of {OID, value} pairs, the TCB pair holding another such
 * SEQUENCE. Decoded with OpenSSL's generic ASN.1 (d2i_ASN1_SEQUENCE_ANY). */
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <stdlib.h>
#include <string.h>

#include "tdx_quote.h"
#include "x509_util.h"

#define SGX_EXT "1.2.840.113741.1.13.1"

static STACK_OF(ASN1_TYPE) * seq_parse(const unsigned char *p, long len)
{
	const unsigned char *q = p;
	STACK_OF(ASN1_TYPE) *s = d2i_ASN1_SEQUENCE_ANY(NULL, &q, len);
	if (s != NULL && q - p != len) {
		sk_ASN1_TYPE_pop_free(s, ASN1_TYPE_free);
		s = NULL;
	}
	ERR_clear_error();
	return s;
}

/* Element i of s as an {OID, value} pair: the OID's dotted text and the value. */
static bool pair(STACK_OF(ASN1_TYPE) * s, int i, char *oid, size_t n, STACK_OF(ASN1_TYPE) * *holder,
                 const ASN1_TYPE **val)
{
	*holder = NULL;
	const ASN1_TYPE *t = sk_ASN1_TYPE_value(s, i);
	if (t == NULL || t->type != V_ASN1_SEQUENCE)
		return false;
	STACK_OF(ASN1_TYPE) *p = seq_parse(ASN1_STRING_get0_data(t->value.sequence),
	                                   ASN1_STRING_length(t->value.sequence));
	if (p == NULL || sk_ASN1_TYPE_num(p) != 2 ||
	    sk_ASN1_TYPE_value(p, 0)->type != V_ASN1_OBJECT ||
	    OBJ_obj2txt(oid, (int)n, sk_ASN1_TYPE_value(p, 0)->value.object, 1) <= 0) {
		sk_ASN1_TYPE_pop_free(p, ASN1_TYPE_free);
		return false;
	}
	*holder = p;
	*val = sk_ASN1_TYPE_value(p, 1);
	return true;
}

static bool octets(const ASN1_TYPE *v, uint8_t *out, int n)
{
	if (v->type != V_ASN1_OCTET_STRING || ASN1_STRING_length(v->value.octet_string) != n)
		return false;
	memcpy(out, ASN1_STRING_get0_data(v->value.octet_string), (size_t)n);
	return true;
}

static bool small_int(const ASN1_TYPE *v, uint32_t max, uint32_t *out)
{
	uint64_t u = 0;
	if (v->type != V_ASN1_INTEGER || ASN1_INTEGER_get_uint64(&u, v->value.integer) != 1 ||
	    u > max) {
		ERR_clear_error();
		return false;
	}
	*out = (uint32_t)u;
	return true;
}

static SL_RESULT parse_tcb(const ASN1_TYPE *v, sl_pck_ext *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	STACK_OF(ASN1_TYPE) *s = NULL, *h = NULL;
	uint32_t seen = 0;
	char oid[80];

	SL_ENSURE(v->type == V_ASN1_SEQUENCE, SL_E_ATTEST_FORMAT,
	          "PCK SGX extension: TCB not a SEQUENCE");
	s = seq_parse(ASN1_STRING_get0_data(v->value.sequence),
	              ASN1_STRING_length(v->value.sequence));
	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "PCK SGX extension: TCB malformed");
	for (int i = 0; i < sk_ASN1_TYPE_num(s); i++) {
		const ASN1_TYPE *val = NULL;
		SL_ENSURE(pair(s, i, oid, sizeof(oid), &h, &val), SL_E_ATTEST_FORMAT,
		          "PCK SGX extension: TCB entry %d malformed", i);
		size_t pl = strlen(SGX_EXT ".2.");
		if (strncmp(oid, SGX_EXT ".2.", pl) == 0) {
			char *end = NULL;
			unsigned long k = strtoul(oid + pl, &end, 10);
			if (end == oid + pl || *end != '\0')
				k = 0; /* not a direct child arc: ignored */
			uint32_t x = 0;
			if (k >= 1 && k <= 16) {
				SL_ENSURE(small_int(val, 255, &x), SL_E_ATTEST_FORMAT,
				          "PCK SGX extension: TCB component %lu malformed", k);
				o->comp_svn[k - 1] = (uint8_t)x;
				seen |= 1u << (k - 1);
			} else if (k == 17) {
				SL_ENSURE(small_int(val, 65535, &o->pcesvn), SL_E_ATTEST_FORMAT,
				          "PCK SGX extension: PCESVN malformed");
				seen |= 1u << 16;
			} else if (k == 18) {
				SL_ENSURE(octets(val, o->cpusvn, 16), SL_E_ATTEST_FORMAT,
				          "PCK SGX extension: CPUSVN malformed");
				seen |= 1u << 17;
			}
		}
		sk_ASN1_TYPE_pop_free(h, ASN1_TYPE_free);
		h = NULL;
	}
	SL_ENSURE(seen == 0x3ffff, SL_E_ATTEST_FORMAT,
	          "PCK SGX extension: TCB lacks components (seen mask 0x%x)", seen);
	rc = SL_OK;
out:
	sk_ASN1_TYPE_pop_free(h, ASN1_TYPE_free);
	sk_ASN1_TYPE_pop_free(s, ASN1_TYPE_free);
	return rc;
}

sl_err sl_pck_ext_parse_der(const uint8_t *der, size_t len, sl_pck_ext *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	STACK_OF(ASN1_TYPE) *s = NULL, *h = NULL;
	bool fmspc = false, pceid = false, tcb = false;
	char oid[80];

	memset(o, 0, sizeof(*o));
	SL_ENSURE(len <= 65536, SL_E_ATTEST_FORMAT, "PCK SGX extension: too large");
	s = seq_parse(der, (long)len);
	SL_ENSURE(s != NULL, SL_E_ATTEST_FORMAT, "PCK SGX extension: not a DER SEQUENCE");
	for (int i = 0; i < sk_ASN1_TYPE_num(s); i++) {
		const ASN1_TYPE *val = NULL;
		SL_ENSURE(pair(s, i, oid, sizeof(oid), &h, &val), SL_E_ATTEST_FORMAT,
		          "PCK SGX extension: entry %d is not an {OID, value} pair", i);
		if (strcmp(oid, SGX_EXT ".4") == 0) {
			SL_ENSURE(!fmspc && octets(val, o->fmspc, 6), SL_E_ATTEST_FORMAT,
			          "PCK SGX extension: FMSPC malformed or repeated");
			fmspc = true;
		} else if (strcmp(oid, SGX_EXT ".3") == 0) {
			SL_ENSURE(!pceid && octets(val, o->pceid, 2), SL_E_ATTEST_FORMAT,
			          "PCK SGX extension: PCE-ID malformed or repeated");
			pceid = true;
		} else if (strcmp(oid, SGX_EXT ".2") == 0) {
			SL_ENSURE(!tcb, SL_E_ATTEST_FORMAT, "PCK SGX extension: TCB repeated");
			SL_GUARD(parse_tcb(val, o));
			tcb = true;
		}
		sk_ASN1_TYPE_pop_free(h, ASN1_TYPE_free);
		h = NULL;
	}
	SL_ENSURE(fmspc && pceid && tcb, SL_E_ATTEST_FORMAT,
	          "PCK SGX extension: missing FMSPC, PCE-ID or TCB");
	rc = SL_OK;
out:
	sk_ASN1_TYPE_pop_free(h, ASN1_TYPE_free);
	sk_ASN1_TYPE_pop_free(s, ASN1_TYPE_free);
	return rc;
}

sl_err sl_pck_ext_from_cert(const X509 *x, sl_pck_ext *out)
{
	const ASN1_OCTET_STRING *os = sl_x509_ext(x, SGX_EXT);
	if (os == NULL)
		return sl_err_set(SL_E_ATTEST_CHAIN, "PCK certificate: no SGX extension (%s)",
		                  SGX_EXT);
	return sl_pck_ext_parse_der(ASN1_STRING_get0_data(os), (size_t)ASN1_STRING_length(os), out);
}
