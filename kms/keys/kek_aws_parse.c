/* AWS KMS JSON answers (kmsd.h, kmsd_aws_parse): every byte is untrusted
 * (a compromised or impersonated endpoint, an emulator): sizes are bounded,
 * base64 is decoded with a cap, strings are copied only when they fit and
 * hold nothing but what AWS sends there. Pure: no I/O (fuzzed by
 * tests/fuzz/aws_kms_fuzz.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "seclaunch/json.h"

/* AWS's largest CiphertextBlob; a Plaintext is at most 4096. */
#define AWS_BLOB_MAX 6144

void kmsd_aws_answer_free(kmsd_aws_answer *a)
{
	if (a->blob != NULL)
		sl_wipe(a->blob, a->blob_len);
	free(a->blob);
	memset(a, 0, sizeof(*a));
}

/* Copies s into out when it fits and every byte is in allowed. */
static bool copy_token(const char *s, const char *allowed, char *out, size_t cap)
{
	size_t n = strlen(s);
	if (n == 0 || n >= cap || strspn(s, allowed) != n)
		return false;
	memcpy(out, s, n + 1);
	return true;
}

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

static void error_fields(const json_t *root, kmsd_aws_answer *out)
{
	const char *t = sl_json_getstr(root, "__type");
	const char *m = sl_json_getstr(root, "message");
	if (m == NULL)
		m = sl_json_getstr(root, "Message");
	if (t != NULL) {
		const char *h = strrchr(t, '#');
		(void)copy_token(h != NULL ? h + 1 : t, ALNUM "_.", out->error, sizeof(out->error));
	}
	if (m != NULL) {
		size_t o = 0;
		for (size_t i = 0; m[i] != '\0' && o + 1 < sizeof(out->message); i++)
			if ((unsigned char)m[i] >= 0x20 && m[i] != 0x7f)
				out->message[o++] = m[i];
		out->message[o] = '\0';
	}
}

sl_err kmsd_aws_parse(const uint8_t *body, size_t len, long status, const char *want,
                      kmsd_aws_answer *out)
{
	sl_err rc = SL_E_SYSTEM;
	json_error_t je;
	json_t *root = NULL;
	const json_t *md;
	const char *s;
	memset(out, 0, sizeof(*out));
	if (len > 0)
		root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	if (status < 200 || status >= 300) {
		if (json_is_object(root))
			error_fields(root, out);
		rc = SL_OK; /* the caller reads error/message */
		goto out;
	}
	if (want == NULL) {
		rc = SL_OK;
		goto out;
	}
	SL_ENSURE(json_is_object(root), SL_E_SYSTEM, "AWS KMS answer: not a JSON object");
	s = sl_json_getstr(root, "KeyId");
	if (s != NULL && !copy_token(s, ALNUM ":/_.-", out->key_arn, sizeof(out->key_arn)))
		SL_FAIL(SL_E_SYSTEM, "AWS KMS answer: KeyId is not a key ARN");
	if (strcmp(want, "KeyMetadata") == 0) {
		md = json_object_get(root, "KeyMetadata");
		SL_ENSURE(json_is_object(md), SL_E_SYSTEM, "AWS KMS answer: no KeyMetadata object");
		s = sl_json_getstr(md, "Arn");
		SL_ENSURE(s != NULL &&
		              copy_token(s, ALNUM ":/_.-", out->key_arn, sizeof(out->key_arn)),
		          SL_E_SYSTEM, "AWS KMS answer: KeyMetadata.Arn missing or not an ARN");
		s = sl_json_getstr(md, "KeyState");
		if (s != NULL)
			(void)copy_token(s, ALNUM "_", out->key_state, sizeof(out->key_state));
		s = sl_json_getstr(md, "KeySpec");
		if (s == NULL)
			s = sl_json_getstr(md, "CustomerMasterKeySpec");
		if (s != NULL)
			(void)copy_token(s, ALNUM "_", out->key_spec, sizeof(out->key_spec));
		s = sl_json_getstr(md, "KeyUsage");
		if (s != NULL)
			(void)copy_token(s, ALNUM "_", out->key_usage, sizeof(out->key_usage));
		rc = SL_OK;
		goto out;
	}
	s = sl_json_getstr(root, want);
	SL_ENSURE(s != NULL, SL_E_SYSTEM, "AWS KMS answer: no \"%s\" string", want);
	rc = sl_b64_decode(s, AWS_BLOB_MAX, &out->blob, &out->blob_len, want);
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_SYSTEM, "AWS KMS answer");
		goto out;
	}
	SL_ENSURE(out->blob_len > 0, SL_E_SYSTEM, "AWS KMS answer: \"%s\" is empty", want);
	rc = SL_OK;
out:
	if (root != NULL && want != NULL && strcmp(want, "Plaintext") == 0) {
		/* the DEK's base64 inside the parsed tree */
		const char *p = sl_json_getstr(root, "Plaintext");
		if (p != NULL)
			sl_wipe((char *)p, strlen(p));
	}
	if (rc != SL_OK)
		kmsd_aws_answer_free(out);
	json_decref(root);
	return rc;
}
