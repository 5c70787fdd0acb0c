/* Parsers of what remote sources send (remote.h): the Content-Range of a
 * range answer, the AWS shared credentials file, the AWS and GCP metadata
 * services' credentials. Pure functions over bytes: no I/O. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
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

static void wipe_str(char **s)
{
	if (*s != NULL) {
		sl_wipe(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void sl_remote_creds_wipe(sl_remote_creds *c)
{
	wipe_str(&c->id);
	wipe_str(&c->secret);
	wipe_str(&c->token);
}

/* A copy of n bytes at s as a string; NULL when out of memory. */
static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

sl_err sl_remote_parse_aws_file(const char *text, size_t len, const char *profile,
                                sl_remote_creds *c)
{
	const char *p = text, *end = text + len;
	size_t plen = strlen(profile);
	bool in = false;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *s = p, *e = nl != NULL ? nl : end;
		p = nl != NULL ? nl + 1 : end;
		if (memchr(s, '\0', (size_t)(e - s)) != NULL)
			return sl_err_set(SL_E_INPUT, "AWS credentials file: a NUL byte in a line");
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		while (s < e && isspace((unsigned char)*s))
			s++;
		if (s < e && *s == '[') {
			in = (size_t)(e - s) == plen + 2 && e[-1] == ']' &&
			     memcmp(s + 1, profile, plen) == 0;
			continue;
		}
		const char *eq = memchr(s, '=', (size_t)(e - s));
		if (!in || eq == NULL)
			continue;
		const char *ke = eq, *v = eq + 1;
		while (ke > s && isspace((unsigned char)ke[-1]))
			ke--;
		while (v < e && isspace((unsigned char)*v))
			v++;
		size_t kl = (size_t)(ke - s);
		char **dst = kl == 17 && strncmp(s, "aws_access_key_id", 17) == 0       ? &c->id
		             : kl == 21 && strncmp(s, "aws_secret_access_key", 21) == 0 ? &c->secret
		             : kl == 17 && strncmp(s, "aws_session_token", 17) == 0     ? &c->token
		                                                                        : NULL;
		if (dst == NULL)
			continue;
		wipe_str(dst);
		*dst = dup_n(v, (size_t)(e - v));
		if (*dst == NULL)
			return sl_err_set(SL_E_NOMEM, "AWS credentials file");
	}
	return SL_OK;
}

sl_err sl_remote_parse_imds(const uint8_t *json, size_t len, sl_remote_creds *c)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	json_error_t e;
	json_t *j = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, &e);
	const char *a = NULL, *s = NULL, *t = NULL;

	SL_ENSURE(j != NULL && json_is_object(j), SL_E_REMOTE_UNREACHABLE,
	          "AWS instance metadata: credentials are not a JSON object");
	SL_ENSURE(sl_json_str(j, "AccessKeyId", 1024, SL_E_REMOTE_UNREACHABLE,
	                      "AWS instance metadata", &a) == SL_OK &&
	              sl_json_str(j, "SecretAccessKey", 1024, SL_E_REMOTE_UNREACHABLE,
	                          "AWS instance metadata", &s) == SL_OK &&
	              sl_json_str_opt(j, "Token", 8192, SL_E_REMOTE_UNREACHABLE,
	                              "AWS instance metadata", &t) == SL_OK,
	          SL_E_REMOTE_UNREACHABLE,
	          "AWS instance metadata: credentials without AccessKeyId / SecretAccessKey "
	          "(or too long)");
	sl_remote_creds_wipe(c);
	c->id = strdup(a);
	c->secret = strdup(s);
	c->token = t != NULL ? strdup(t) : NULL;
	SL_ENSURE(c->id != NULL && c->secret != NULL && (t == NULL || c->token != NULL), SL_E_NOMEM,
	          "AWS credentials");
	rc = SL_OK;
out:
	if (rc != SL_OK)
		sl_remote_creds_wipe(c);
	json_decref(j);
	return rc;
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
