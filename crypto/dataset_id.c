/* The dataset naming rule (docs/format-sld.md, "Dataset ids"). One place,
 * so encrypt, the policy parser and seclaunchd agree on what a name is. */
#include <stdio.h>
#include <string.h>

#include "seclaunch/util.h"

static bool id_char(unsigned char c, bool pattern)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '-' || (pattern && c == '*');
}

static bool id_first(unsigned char c, bool pattern)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (pattern && c == '*');
}

sl_err sl_dataset_id_check(const char *id, bool pattern, const char *what)
{
	const char *kind = pattern ? "dataset id pattern" : "dataset id";
	size_t n;

	if (id == NULL || id[0] == '\0')
		return sl_err_set(SL_E_INPUT, "%s: empty %s", what, kind);
	n = strnlen(id, SL_DATASET_ID_MAX + 1);
	if (n > SL_DATASET_ID_MAX)
		return sl_err_set(SL_E_INPUT, "%s: %s longer than %d characters", what, kind,
		                  SL_DATASET_ID_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)id[i];
		if (i == 0 ? id_first(c, pattern) : id_char(c, pattern))
			continue;
		char shown[8];
		if (c >= 0x20 && c < 0x7f)
			snprintf(shown, sizeof(shown), "'%c'", c);
		else
			snprintf(shown, sizeof(shown), "0x%02x", c);
		return sl_err_set(SL_E_INPUT,
		                  "%s: %s: %s at byte %zu is not allowed (a name is 1..%d of "
		                  "A-Z a-z 0-9 . _ : -%s, starting with a letter or digit%s)",
		                  what, kind, shown, i, SL_DATASET_ID_MAX, pattern ? " *" : "",
		                  pattern ? " or *" : "");
	}
	return SL_OK;
}

bool sl_dataset_id_valid(const char *id)
{
	sl_err rc = sl_dataset_id_check(id, false, "dataset id");
	if (rc != SL_OK)
		sl_err_clear();
	return rc == SL_OK;
}
