/* Cloud identity documents: the JSON form, dispatch by kind, unsigned
 * regions, and files collected earlier. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_identity_int.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

static const char *const CLOUDS[] = {"aws", "gcp", "azure", NULL};

/* A member this code does not read is refused, not ignored: a document that
 * says "region_verified": true beside its token must not look as if that had
 * counted. */
static SL_RESULT only_members(const json_t *doc, const char *kind, const char *const *allowed)
{
	const char *k = sl_json_unknown(doc, allowed);
	if (k != NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT,
		                  "identity document (%s): unknown member \"%.64s\"", kind, k);
	return SL_OK;
}

sl_err sl_identity_verify(const json_t *doc, const sl_identity_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_claims *tmp = NULL;
	const char *kind = sl_json_getstr(doc, "kind");

	SL_ENSURE(json_is_object(doc) && kind != NULL, SL_E_ATTEST_FORMAT,
	          "identity document: an object with a \"kind\" is expected");
	SL_GUARD(sl_claims_new(&tmp));
	if (strcmp(kind, "gcp-jwt") == 0) {
		static const char *const m[] = {"kind", "token", NULL};
		SL_GUARD(only_members(doc, kind, m));
		json_t *t = json_object_get(doc, "token");
		SL_ENSURE(json_is_string(t), SL_E_ATTEST_FORMAT,
		          "identity document: token missing");
		SL_GUARD(sl_identity_verify_gcp_jwt(json_string_value(t), json_string_length(t), o,
		                                    tmp));
	} else if (strcmp(kind, "aws-iid") == 0) {
		static const char *const m[] = {"kind", "document", "pkcs7", "signature", NULL};
		SL_GUARD(only_members(doc, kind, m));
		json_t *d = json_object_get(doc, "document"), *p = json_object_get(doc, "pkcs7");
		json_t *s = json_object_get(doc, "signature");
		SL_ENSURE(d == NULL || json_is_string(d), SL_E_ATTEST_FORMAT,
		          "identity document: document must be a string (the exact JSON text)");
		SL_ENSURE(json_is_string(p) != json_is_string(s), SL_E_ATTEST_FORMAT,
		          "identity document: want exactly one of pkcs7 and signature");
		SL_ENSURE(d != NULL || p != NULL, SL_E_ATTEST_FORMAT,
		          "identity document: the signature form needs the document");
		SL_GUARD(sl_identity_verify_aws(d ? (const uint8_t *)json_string_value(d) : NULL,
		                                d ? json_string_length(d) : 0,
		                                json_string_value(p ? p : s), p != NULL, o, tmp));
	} else if (strcmp(kind, "unsigned") == 0) {
		static const char *const m[] = {"kind", "region", NULL};
		SL_GUARD(only_members(doc, kind, m));
		const char *r = sl_json_getstr(doc, "region");
		SL_ENSURE(r != NULL, SL_E_ATTEST_FORMAT, "identity document: region missing");
		SL_GUARD(sl_identity_unsigned_region(r, tmp));
	} else {
		SL_FAIL(SL_E_ATTEST_FORMAT,
		        "identity document: unknown kind '%s' (gcp-jwt, aws-iid, unsigned)", kind);
	}
	/* a second document (seclaunchd accepts several) must name the same
	 * place: otherwise the last one would silently win, keeping the other
	 * document's leftover cloud.* claims beside its own */
	static const char *const same[] = {"cloud.provider", "cloud.region"};
	for (size_t i = 0; i < 2; i++) {
		const char *had = sl_claims_get(claims, same[i]),
		           *now = sl_claims_get(tmp, same[i]);
		SL_ENSURE(had == NULL || now == NULL || strcmp(had, now) == 0, SL_E_ATTEST,
		          "identity document: %s '%s' contradicts '%s' from an earlier document",
		          same[i], now, had);
	}
	SL_GUARD(sl_claims_merge(claims, tmp));
	rc = SL_OK;
out:
	sl_claims_free(tmp);
	return rc;
}

sl_err sl_identity_unsigned_region(const char *cloud_region, sl_claims *claims)
{
	sl_err rc = SL_E_INPUT;
	const char *colon = strchr(cloud_region, ':');
	bool known = false;
	SL_ENSURE(colon != NULL && colon[1] != '\0', SL_E_INPUT,
	          "region '%s': want CLOUD:REGION (e.g. aws:eu-west-1)", cloud_region);
	for (size_t i = 0; CLOUDS[i] != NULL; i++)
		known = known || ((size_t)(colon - cloud_region) == strlen(CLOUDS[i]) &&
		                  strncmp(cloud_region, CLOUDS[i], strlen(CLOUDS[i])) == 0);
	SL_ENSURE(known, SL_E_INPUT, "region '%s': cloud must be aws, gcp or azure", cloud_region);
	for (const char *p = colon + 1; *p != '\0'; p++)
		SL_ENSURE((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-',
		          SL_E_INPUT, "region '%s': only [a-z0-9-] after the cloud", cloud_region);
	SL_GUARD(sl_claims_setf(claims, "cloud.provider", "%.*s", (int)(colon - cloud_region),
	                        cloud_region));
	SL_GUARD(sl_claims_set(claims, "cloud.region", colon + 1));
	SL_GUARD(sl_claims_set(claims, "cloud.region_verified", "false"));
	SL_GUARD(sl_claims_set(claims, "cloud.identity_fresh", "false"));
	SL_GUARD(sl_claims_set(claims, "cloud.identity_kind", "unsigned"));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_identity_unsigned_doc(const char *cloud_region, json_t **out)
{
	sl_err rc = SL_E_INPUT;
	sl_claims *c = NULL;
	SL_GUARD(sl_claims_new(&c));
	SL_GUARD(sl_identity_unsigned_region(cloud_region, c)); /* validates the shape */
	*out = json_pack("{s:s, s:s}", "kind", "unsigned", "region", cloud_region);
	SL_ENSURE(*out != NULL, SL_E_NOMEM, "identity document");
	rc = SL_OK;
out:
	sl_claims_free(c);
	return rc;
}

sl_err sl_identity_load_file(const char *path, json_t **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *data = NULL;
	size_t len = 0;
	json_error_t je;
	SL_GUARD(sl_file_read(path, SL_IDENTITY_MAX_BYTES, &data, &len));
	size_t i = 0;
	while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
		i++;
	if (i < len && data[i] == '{') {
		*out = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
		SL_ENSURE(json_is_object(*out), SL_E_FORMAT, "%s: not valid JSON at line %d: %s",
		          path, je.line, je.text);
	} else {
		/* a bare JWT, as the GCP metadata server returns it */
		while (len > i &&
		       (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
			len--;
		*out = json_pack("{s:s, s:s%}", "kind", "gcp-jwt", "token", (const char *)data + i,
		                 len - i);
		SL_ENSURE(*out != NULL, SL_E_FORMAT,
		          "%s: neither a JSON identity document nor a JWT", path);
	}
	rc = SL_OK;
out:
	free(data);
	return rc;
}
