/* Binary, hex or base64 reports and quotes (import_format.h). */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "import_format.h"
#include "seclaunch/util.h"

static bool is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_b64(uint8_t c, bool *url)
{
	if (isalnum(c) || c == '+' || c == '/' || c == '=')
		return true;
	if (c == '-' || c == '_') {
		*url = true;
		return true;
	}
	return false;
}

sl_err sl_import_decode(const uint8_t *p, size_t len, size_t max, uint8_t **out, size_t *outlen,
                        const char **format, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	char *s = NULL;
	size_t n = 0;
	bool text = len > 0, hex = true, b64 = true, url = false;

	*out = NULL;
	*outlen = 0;
	*format = "binary";
	for (size_t i = 0; i < len && text; i++)
		text = is_space(p[i]) || (p[i] > 0x20 && p[i] < 0x7f);
	if (!text) {
		SL_ENSURE(len <= max, SL_E_ATTEST_FORMAT, "%s: %zu bytes, more than %zu", what, len,
		          max);
		*out = malloc(len > 0 ? len : 1);
		SL_ENSURE(*out != NULL, SL_E_NOMEM, "%s", what);
		if (len > 0)
			memcpy(*out, p, len);
		*outlen = len;
		rc = SL_OK;
		goto out;
	}
	/* text: whitespace anywhere (line-wrapped xxd -p or base64) is dropped */
	s = malloc(len + 4); /* room for base64 padding */
	SL_ENSURE(s != NULL, SL_E_NOMEM, "%s", what);
	for (size_t i = 0; i < len; i++) {
		if (is_space(p[i]))
			continue;
		hex = hex && isxdigit(p[i]);
		b64 = b64 && is_b64(p[i], &url);
		s[n++] = (char)p[i];
	}
	s[n] = '\0';
	SL_ENSURE(n > 0, SL_E_ATTEST_FORMAT, "%s: only whitespace", what);
	if (hex && n % 2 == 0) {
		*format = "hex";
		for (size_t i = 0; i < n; i++)
			s[i] = (char)tolower((unsigned char)s[i]);
		rc = sl_hex_decode_alloc(s, max, out, outlen, what);
	} else if (b64) {
		*format = url ? "base64url" : "base64";
		if (url) {
			while (n > 0 && s[n - 1] == '=')
				s[--n] = '\0';
			rc = sl_b64url_decode(s, n, max, out, outlen, what);
		} else {
			while (n % 4 != 0) /* unpadded */
				s[n++] = '=';
			s[n] = '\0';
			rc = sl_b64_decode(s, max, out, outlen, what);
		}
	} else {
		SL_FAIL(SL_E_ATTEST_FORMAT,
		        "%s: text that is neither hex nor base64 (the forms accepted: binary, hex, "
		        "base64, each with surrounding whitespace)",
		        what);
	}
	if (rc != SL_OK)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "%s read as %s", what, *format);
out:
	free(s);
	return rc;
}
