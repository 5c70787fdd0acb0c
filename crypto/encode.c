/* Hex and base64 through libsodium's constant-time codecs; public bytes
 * (evidence, certificates) through a table decoder that accepts exactly
 * what sl_b64_decode accepts. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"

void sl_hex_encode(const uint8_t *in, size_t len, char *out)
{
	sodium_bin2hex(out, len * 2 + 1, in, len);
}

bool sl_hex_is_lower(const char *s, size_t n)
{
	return s != NULL && strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

sl_err sl_hex_decode(const char *hex, uint8_t *out, size_t want, const char *field)
{
	size_t got = 0;
	const char *end = NULL;
	size_t hlen = strlen(hex);

	if (hlen != want * 2 || sodium_hex2bin(out, want, hex, hlen, NULL, &got, &end) != 0 ||
	    got != want || end != hex + hlen)
		return sl_err_set(SL_E_INPUT, "%s: want %zu bytes as %zu hex digits", field, want,
		                  want * 2);
	return SL_OK;
}

sl_err sl_hex_decode_alloc(const char *hex, size_t max, uint8_t **out, size_t *len,
                           const char *field)
{
	size_t hlen = strlen(hex);
	if (hlen % 2 != 0 || hlen / 2 > max)
		return sl_err_set(SL_E_INPUT,
		                  "%s: want an even number of hex digits, at most %zu bytes", field,
		                  max);
	uint8_t *b = malloc(hlen / 2 + 1);
	if (b == NULL)
		return sl_err_set(SL_E_NOMEM, "%s: allocating", field);
	sl_err rc = sl_hex_decode(hex, b, hlen / 2, field);
	if (rc != SL_OK) {
		sl_wipe(b, hlen / 2 + 1); /* may hold decoded secret bytes */
		free(b);
		return rc;
	}
	*out = b;
	*len = hlen / 2;
	return SL_OK;
}

sl_err sl_b64_encode(const uint8_t *in, size_t len, char **out)
{
	size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(n);
	if (s == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating %zu bytes for base64", n);
	sodium_bin2base64(s, n, in, len, sodium_base64_VARIANT_ORIGINAL);
	*out = s;
	return SL_OK;
}

static SL_RESULT b64_decode(const char *in, size_t inlen, int variant, size_t max, uint8_t **out,
                            size_t *len, const char *field)
{
	size_t cap = inlen / 4 * 3 + 3;
	size_t got = 0;
	const char *end = NULL;

	if (inlen / 4 * 3 > max + 3)
		return sl_err_set(SL_E_TOO_LARGE, "%s: base64 longer than %zu bytes", field, max);
	uint8_t *b = malloc(cap + 1);
	if (b == NULL)
		return sl_err_set(SL_E_NOMEM, "%s: allocating", field);
	if (sodium_base642bin(b, cap, in, inlen, NULL, &got, &end, variant) != 0 ||
	    end != in + inlen) {
		/* a prefix may have decoded: callers decode DEKs and tokens */
		sl_wipe(b, cap + 1);
		free(b);
		return sl_err_set(SL_E_FORMAT, "%s: not valid base64", field);
	}
	if (got > max) {
		sl_wipe(b, cap + 1);
		free(b);
		return sl_err_set(SL_E_TOO_LARGE, "%s: %zu bytes, at most %zu allowed", field, got,
		                  max);
	}
	*out = b;
	*len = got;
	return SL_OK;
}

sl_err sl_b64_decode(const char *in, size_t max, uint8_t **out, size_t *len, const char *field)
{
	return b64_decode(in, strlen(in), sodium_base64_VARIANT_ORIGINAL, max, out, len, field);
}

sl_err sl_b64url_decode(const char *in, size_t inlen, size_t max, uint8_t **out, size_t *len,
                        const char *field)
{
	return b64_decode(in, inlen, sodium_base64_VARIANT_URLSAFE_NO_PADDING, max, out, len,
	                  field);
}

/* 0..63 for the standard alphabet, 0xff for anything else. */
static const uint8_t b64_val[256] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3e, 0xff, 0xff, 0xff, 0x3f,
    0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
    0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/* Strict standard base64: n alphabet characters, then exactly the padding
 * they call for (none, "==" or "="), unused bits zero, nothing after. */
static bool b64_public(const char *in, size_t inlen, uint8_t *out, size_t *got)
{
	const uint8_t *p = (const uint8_t *)in;
	size_t n = 0, o = 0;
	while (n < inlen && b64_val[p[n]] != 0xff)
		n++;
	size_t pad = inlen - n, rem = n % 4;
	if (rem == 1 || pad != (rem == 0 ? 0 : 4 - rem))
		return false;
	for (size_t i = n; i < inlen; i++)
		if (p[i] != '=')
			return false;
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		uint32_t v = (uint32_t)b64_val[p[i]] << 18 | (uint32_t)b64_val[p[i + 1]] << 12 |
		             (uint32_t)b64_val[p[i + 2]] << 6 | b64_val[p[i + 3]];
		out[o++] = (uint8_t)(v >> 16);
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)v;
	}
	if (rem == 2) {
		uint32_t v = (uint32_t)b64_val[p[i]] << 6 | b64_val[p[i + 1]];
		if ((v & 0x0f) != 0)
			return false;
		out[o++] = (uint8_t)(v >> 4);
	} else if (rem == 3) {
		uint32_t v = (uint32_t)b64_val[p[i]] << 12 | (uint32_t)b64_val[p[i + 1]] << 6 |
		             b64_val[p[i + 2]];
		if ((v & 0x03) != 0)
			return false;
		out[o++] = (uint8_t)(v >> 10);
		out[o++] = (uint8_t)(v >> 2);
	}
	*got = o;
	return true;
}

sl_err sl_b64_decode_public(const char *in, size_t max, uint8_t **out, size_t *len,
                            const char *field)
{
	size_t inlen = strlen(in), cap = inlen / 4 * 3 + 3, got = 0;

	if (inlen / 4 * 3 > max + 3)
		return sl_err_set(SL_E_TOO_LARGE, "%s: base64 longer than %zu bytes", field, max);
	uint8_t *b = malloc(cap + 1);
	if (b == NULL)
		return sl_err_set(SL_E_NOMEM, "%s: allocating", field);
	if (!b64_public(in, inlen, b, &got)) {
		free(b);
		return sl_err_set(SL_E_FORMAT, "%s: not valid base64", field);
	}
	if (got > max) {
		free(b);
		return sl_err_set(SL_E_TOO_LARGE, "%s: %zu bytes, at most %zu allowed", field, got,
		                  max);
	}
	*out = b;
	*len = got;
	return SL_OK;
}
