/* AWS credentials (include/seclaunch/aws.h): the environment, the shared
 * credentials file, IMDSv2. The parsers are pure functions over bytes (the
 * launcher's remote_parse fuzz target drives them). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "seclaunch/aws.h"
#include "seclaunch/http.h"
#include "seclaunch/json.h"
#include "seclaunch/secret.h"

#define CREDS_FILE_MAX (1 << 20)

static void wipe_str(char **s)
{
	if (*s != NULL) {
		sl_wipe(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void sl_aws_creds_wipe(sl_aws_creds *c)
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

sl_err sl_aws_parse_creds_file(const char *text, size_t len, const char *profile, sl_aws_creds *c)
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

sl_err sl_aws_parse_imds(const uint8_t *json, size_t len, sl_aws_creds *c)
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
	sl_aws_creds_wipe(c);
	c->id = strdup(a);
	c->secret = strdup(s);
	c->token = t != NULL ? strdup(t) : NULL;
	SL_ENSURE(c->id != NULL && c->secret != NULL && (t == NULL || c->token != NULL), SL_E_NOMEM,
	          "AWS credentials");
	rc = SL_OK;
out:
	if (rc != SL_OK)
		sl_aws_creds_wipe(c);
	if (j != NULL && s != NULL) /* the secret's copy inside the parsed tree */
		sl_wipe((char *)s, strlen(s));
	json_decref(j);
	return rc;
}

/* It holds a secret key, so it follows the rule of every key file
 * (sl_secret_read_file): a regular file, not a link, owned by this user or
 * root, neither group nor others may read or write it; refused otherwise,
 * never used silently. A file that is not there is no credentials source. */
sl_err sl_aws_creds_file(sl_aws_creds *c)
{
	sl_err rc = SL_E_INPUT;
	const char *path = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
	const char *profile = getenv("AWS_PROFILE");
	char def[1024];
	sl_secret *text = NULL;
	sl_aws_creds got = {0};
	struct stat st;

	if (path == NULL) {
		if (home == NULL)
			return SL_OK;
		snprintf(def, sizeof(def), "%s/.aws/credentials", home);
		path = def;
	}
	if (lstat(path, &st) != 0 && errno == ENOENT)
		return SL_OK;
	rc = sl_secret_read_file(path, CREDS_FILE_MAX, &text);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "AWS shared credentials file");
		goto out;
	}
	rc = sl_aws_parse_creds_file((const char *)sl_secret_data(text), sl_secret_len(text),
	                             profile != NULL ? profile : "default", &got);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "%s", path);
		goto out;
	}
	sl_aws_creds_wipe(c);
	*c = got;
	got = (sl_aws_creds){0};
	rc = SL_OK;
out:
	sl_aws_creds_wipe(&got);
	sl_secret_free(text);
	return rc;
}

static SL_RESULT imds_get(const char *url, const char *method, const char *const *headers,
                          size_t max, sl_http_resp *r)
{
	sl_http_req q = {.what = "AWS instance metadata",
	                 .url = url,
	                 .method = method,
	                 .headers = headers,
	                 .protocols = "http",
	                 .connect_timeout_ms = 1000,
	                 .total_timeout_ms = 3000,
	                 .max_bytes = max,
	                 .no_proxy = true,
	                 .fail = SL_E_REMOTE_UNREACHABLE,
	                 .want_body = true};
	return sl_http_fetch(&q, r);
}

static bool role_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= 128 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+=,.@_-") ==
	           n;
}

/* IMDSv2 at base (NULL: http://169.254.169.254). */
static SL_RESULT sl_aws_creds_imds(const char *imds_base, sl_aws_creds *c)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	const char *base = imds_base != NULL ? imds_base : "http://169.254.169.254";
	char url[1024], hdr[2048], role[129];
	sl_http_resp tok = {0}, rl = {0}, cr = {0};
	const char *ttl[] = {SL_AWS_IMDS_TOKEN_TTL_HEADER, NULL};
	const char *h[] = {hdr, NULL};

	snprintf(url, sizeof(url), "%s%s", base, SL_AWS_IMDS_TOKEN_PATH);
	SL_GUARD(imds_get(url, "PUT", ttl, 4096, &tok));
	SL_ENSURE(strpbrk((char *)tok.body.p, "\r\n") == NULL &&
	              strlen((char *)tok.body.p) == tok.body.len,
	          SL_E_REMOTE_UNREACHABLE, "AWS instance metadata: a malformed token");
	snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", (char *)tok.body.p);
	snprintf(url, sizeof(url), "%s%s", base, SL_AWS_IMDS_ROLE_PATH);
	SL_GUARD(imds_get(url, "GET", h, 4096, &rl));
	snprintf(role, sizeof(role), "%.*s", (int)strcspn((char *)rl.body.p, "\n"),
	         (char *)rl.body.p);
	SL_ENSURE(role_ok(role), SL_E_REMOTE_UNREACHABLE,
	          "AWS instance metadata: no usable role name");
	snprintf(url, sizeof(url), "%s%s%s", base, SL_AWS_IMDS_ROLE_PATH, role);
	SL_GUARD(imds_get(url, "GET", h, 65536, &cr));
	SL_GUARD(sl_aws_parse_imds(cr.body.p, cr.body.len, c));
	rc = SL_OK;
out:
	sl_wipe(hdr, sizeof(hdr));
	sl_http_resp_free(&tok); /* wipes */
	sl_http_resp_free(&rl);
	sl_http_resp_free(&cr);
	return rc;
}

sl_err sl_aws_creds_chain(const char *imds_base, sl_aws_creds *c)
{
	sl_err rc = SL_E_REMOTE_REFUSED;
	const char *e_id = getenv("AWS_ACCESS_KEY_ID"), *e_sec = getenv("AWS_SECRET_ACCESS_KEY");
	const char *e_tok = getenv("AWS_SESSION_TOKEN");
	sl_aws_creds_wipe(c);
	if (e_id != NULL && e_sec != NULL && e_id[0] && e_sec[0]) {
		c->id = strdup(e_id);
		c->secret = strdup(e_sec);
		c->token = e_tok != NULL && e_tok[0] ? strdup(e_tok) : NULL;
		SL_ENSURE(c->id && c->secret && (e_tok == NULL || !e_tok[0] || c->token),
		          SL_E_NOMEM, "AWS credentials");
	} else {
		SL_GUARD(sl_aws_creds_file(c));
		if (c->id == NULL || c->secret == NULL) {
			sl_aws_creds_wipe(c);
			if (sl_aws_creds_imds(imds_base, c) != SL_OK)
				SL_FAIL(
				    SL_E_REMOTE_REFUSED,
				    "no AWS credentials (AWS_ACCESS_KEY_ID / "
				    "AWS_SECRET_ACCESS_KEY, the shared credentials file, or the "
				    "instance metadata service: %s)",
				    sl_err_detail());
		}
	}
	SL_ENSURE(strpbrk(c->id, ":\r\n") == NULL && strpbrk(c->secret, "\r\n") == NULL &&
	              (c->token == NULL || strpbrk(c->token, "\r\n") == NULL),
	          SL_E_INPUT, "AWS credentials: a ':' in the key id or a line break");
	rc = SL_OK;
out:
	if (rc != SL_OK)
		sl_aws_creds_wipe(c);
	return rc;
}
