/* Hex and base64 through libsodium's constant-time codecs. */
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
