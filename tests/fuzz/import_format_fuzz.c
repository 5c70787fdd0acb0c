/* Fuzz target: the binary / hex / base64 detection and decoding of
 * `evidence import` (attest/import_format.c). Beyond "no crash", each input
 * checks what the decoder promises: a known format name, nothing over max,
 * binary handed back byte for byte, hex and base64 decoded to what their
 * text says; and the input taken as bytes, written as hex and as
 * line-wrapped base64, must come back as those bytes, named by its form. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/import_format.h"
#include "seclaunch/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX 16384

static bool named(const char *f)
{
	return strcmp(f, "binary") == 0 || strcmp(f, "hex") == 0 || strcmp(f, "base64") == 0 ||
	       strcmp(f, "base64url") == 0;
}

static bool all_text(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!(p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r') ||
		      (p[i] > 0x20 && p[i] < 0x7f)))
			return false;
	}
	return n > 0;
}

static bool hex_only(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)s[i]))
			return false;
	}
	return n % 2 == 0;
}

/* what the decoder said of p (max bytes at most) holds */
static void decode_checked(const uint8_t *p, size_t n, size_t max)
{
	uint8_t *out = NULL;
	size_t olen = 0;
	const char *fmt = NULL;
	if (sl_import_decode(p, n, max, &out, &olen, &fmt, "fuzz") != SL_OK) {
		free(out);
		return;
	}
	if (out == NULL || fmt == NULL || !named(fmt) || olen > max)
		abort();
	if (strcmp(fmt, "binary") == 0 && (olen != n || (n > 0 && memcmp(out, p, n) != 0)))
		abort();
	if (strcmp(fmt, "hex") == 0) {
		/* the non-space characters, lower-cased, are the output in hex */
		char *h = malloc(2 * olen + 1);
		size_t k = 0;
		if (h == NULL)
			abort();
		sl_hex_encode(out, olen, h);
		for (size_t i = 0; i < n; i++) {
			if (isspace(p[i]))
				continue;
			if (k >= 2 * olen || tolower(p[i]) != h[k++])
				abort();
		}
		if (k != 2 * olen)
			abort();
		free(h);
	}
	free(out);
}

/* the bytes b written as text of one form must decode back to b */
static void round_trip(const uint8_t *b, size_t n)
{
	uint8_t *out = NULL;
	size_t olen = 0;
	const char *fmt = NULL;
	char *h = malloc(2 * n + 2), *b64 = NULL;
	if (h == NULL || n == 0 || n > MAX / 2)
		goto done;
	sl_hex_encode(b, n, h);
	h[2 * n] = '\n';
	if (sl_import_decode((const uint8_t *)h, 2 * n + 1, MAX, &out, &olen, &fmt, "hex") !=
	        SL_OK ||
	    strcmp(fmt, "hex") != 0 || olen != n || memcmp(out, b, n) != 0)
		abort();
	free(out);
	out = NULL;
	if (sl_b64_encode(b, n, &b64) != SL_OK)
		goto done;
	size_t bl = strlen(b64);
	/* base64 whose text is only hex digits of even length reads as hex: by design */
	if (!hex_only(b64, bl)) {
		/* wrapped at 76 columns, as base64(1) writes it */
		char *w = malloc(bl + bl / 76 + 2);
		size_t k = 0;
		if (w == NULL)
			abort();
		for (size_t i = 0; i < bl; i++) {
			if (i > 0 && i % 76 == 0)
				w[k++] = '\n';
			w[k++] = b64[i];
		}
		if (sl_import_decode((const uint8_t *)w, k, MAX, &out, &olen, &fmt, "b64") !=
		        SL_OK ||
		    strcmp(fmt, "base64") != 0 || olen != n || memcmp(out, b, n) != 0)
			abort();
		free(w);
	}
	/* bytes that are not all text are taken as they are */
	if (!all_text(b, n)) {
		free(out);
		out = NULL;
		if (sl_import_decode(b, n, MAX, &out, &olen, &fmt, "bin") != SL_OK ||
		    strcmp(fmt, "binary") != 0 || olen != n || memcmp(out, b, n) != 0)
			abort();
	}
done:
	free(out);
	free(b64);
	free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_checked(data, size, MAX);
	/* a small bound: the size checks of each form */
	if (size > 0)
		decode_checked(data + 1, size - 1, data[0]);
	round_trip(data, size);
	return 0;
}
