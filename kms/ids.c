/* The id rules every folder of kms/ applies: the request parsers
 * (kms/http/), the key process's check of each request (kms/keys/) and
 * migrate (kms/daemon/). */
#include <string.h>

#include "kmsd.h"

bool kmsd_valid_key_id(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SL_KMS_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok)
			return false;
	}
	return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

bool kmsd_valid_dataset_id(const char *s)
{
	/* UTF-8 validity is jansson's (it rejects invalid UTF-8 strings) */
	size_t n = strlen(s);
	if (n == 0 || n > SL_KMS_DATASET_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
			return false;
	}
	return true;
}
