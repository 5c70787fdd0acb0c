/* Parsers of what remote sources send (remote.h): the Content-Range of a
 * range answer, the AWS shared credentials file, the AWS and GCP metadata
 * services' credentials. Pure functions over bytes: no I/O. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "seclaunch/buf.h"
#include "seclaunch/json.h"
#include "seclaunch/secret.h"

/* Decimal digits at *p into *out (no sign, no overflow, at least one). */
static bool digits(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return true;
}

bool sl_remote_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total)
{
	const char *p = v;
	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, "bytes ", 6) != 0)
		return false;
	p += 6;
	while (*p == ' ')
		p++;
	if (!digits(&p, a) || *p++ != '-' || !digits(&p, b) || *p++ != '/' || !digits(&p, total))
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '\0' && *a <= *b && *b < *total;
}

void sl_remote_creds_wipe(sl_remote_creds *c)
{
	sl_aws_creds_wipe(c);
}

sl_err sl_remote_parse_aws_file(const char *text, size_t len, const char *profile,
                                sl_remote_creds *c)
{
	return sl_aws_parse_creds_file(text, len, profile, c);
}

sl_err sl_remote_parse_imds(const uint8_t *json, size_t len, sl_remote_creds *c)
{
	return sl_aws_parse_imds(json, len, c);
}

sl_err sl_remote_parse_gcp_token(const uint8_t *json, size_t len, char **token)
{
	sl_err rc = SL_E_REMOTE_REFUSED;
	json_error_t e;
	json_t *j = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, &e);
	const char *t = NULL;

	*token = NULL;
	SL_ENSURE(j != NULL && json_is_object(j) &&
	              sl_json_str(j, "access_token", 8192, SL_E_REMOTE_REFUSED,
	                          "GCP metadata token", &t) == SL_OK,
	          SL_E_REMOTE_REFUSED, "GCP metadata token: no access_token");
	SL_ENSURE(t[0] != '\0' && strpbrk(t, "\r\n") == NULL, SL_E_REMOTE_REFUSED,
	          "GCP metadata token: an empty access_token, or one with a line break");
	*token = strdup(t);
	SL_ENSURE(*token != NULL, SL_E_NOMEM, "GCP metadata token");
	rc = SL_OK;
out:
	json_decref(j);
	return rc;
}

/* Bytes an S3 answer's token may hold and still go into a query or an XML
 * body unescaped by us (the query is escaped by curl; the XML gets none). */
static bool token_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '<' && c != '>' && c != '&' && c != '"';
}

bool sl_remote_xml_text(const uint8_t *doc, size_t len, const char *elem, char *out, size_t cap)
{
	sl_reader r, before, name, text;
	const uint8_t *p;
	size_t tl = strlen(elem);

	if (cap == 0 || tl == 0)
		return false;
	sl_reader_init(&r, doc, len, "S3 answer");
	/* each element in turn: '<', its name up to '>' */
	while (sl_read_until(&r, '<', &before, "element") == SL_OK) {
		if (sl_read_until(&r, '>', &name, "element") != SL_OK)
			return false;
		if (sl_reader_left(&name) != tl ||
		    sl_read_view(&name, tl, &p, "element") != SL_OK || memcmp(p, elem, tl) != 0)
			continue;
		/* the text, then exactly "</NAME>" */
		if (sl_read_until(&r, '<', &text, "text") != SL_OK ||
		    sl_read_view(&r, tl + 2, &p, "end element") != SL_OK || p[0] != '/' ||
		    memcmp(p + 1, elem, tl) != 0 || p[tl + 1] != '>')
			return false;
		size_t n = sl_reader_left(&text);
		if (n == 0 || n >= cap || sl_read_view(&text, n, &p, "text") != SL_OK)
			return false;
		for (size_t k = 0; k < n; k++)
			if (!token_byte(p[k]))
				return false;
		memcpy(out, p, n);
		out[n] = '\0';
		return true;
	}
	return false;
}

bool sl_remote_etag_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > 130)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if (!(token_byte(c) || (c == '"' && (i == 0 || i == n - 1))))
			return false;
	}
	return !(v[0] == '"') || (n >= 3 && v[n - 1] == '"');
}
