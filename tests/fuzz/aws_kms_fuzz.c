/* AWS KMS answers (kms/keys/kek_aws_parse.c): the first byte picks the status
 * class and what the call wanted, the rest is the answer body. Every byte
 * is untrusted; what the parser accepts satisfies the checked invariants:
 * blobs within AWS's bound, strings NUL-terminated, within their fields
 * and free of control characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../kms/keys/keys.h"

static void check_str(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const wants[] = {"CiphertextBlob", "Plaintext", "KeyMetadata", NULL};
	static const long statuses[] = {200, 400, 500, 302};
	kmsd_aws_answer a;
	if (size < 1)
		return 0;
	const char *want = wants[data[0] & 3];
	long status = statuses[(data[0] >> 2) & 3];
	if (kmsd_aws_parse(data + 1, size - 1, status, want, &a) == SL_OK) {
		check_str(a.error, sizeof(a.error));
		check_str(a.message, sizeof(a.message));
		check_str(a.key_arn, sizeof(a.key_arn));
		check_str(a.key_state, sizeof(a.key_state));
		check_str(a.key_spec, sizeof(a.key_spec));
		check_str(a.key_usage, sizeof(a.key_usage));
		if (a.blob_len > 6144 || (a.blob == NULL) != (a.blob_len == 0))
			abort();
		if (status == 200 && want != NULL && strcmp(want, "KeyMetadata") != 0 &&
		    a.blob_len == 0)
			abort();
		if (status == 200 && want != NULL && strcmp(want, "KeyMetadata") == 0 &&
		    a.key_arn[0] == '\0')
			abort();
		kmsd_aws_answer_free(&a);
	}
	return 0;
}
