/* The script an interpreter reads (launcher/run/workload_script.c): the input
 * is a command line and an environment, NUL-separated strings, the two
 * parts split at the first empty string; the first string is the
 * interpreter. Whatever the bytes, the answer is NONE, UNKNOWN with a
 * reason, or FILE naming an argument after argv[0]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../launcher/run/workload_int.h"

#define MAXS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[4096], *argv[MAXS + 1], *envp[MAXS + 1], why[256];
	size_t na = 0, ne = 0, at = 0;
	bool env = false;
	if (size == 0 || size >= sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (char *p = buf; p < buf + size; p += strlen(p) + 1) {
		if (*p == '\0' && !env) {
			env = true;
			continue;
		}
		if (!env && na < MAXS)
			argv[na++] = p;
		else if (env && ne < MAXS)
			envp[ne++] = p;
	}
	argv[na] = NULL;
	envp[ne] = NULL;
	if (na == 0)
		return 0;
	sl_wl_script_kind k = sl_wl_script(argv[0], argv, envp, &at, why, sizeof(why));
	if (k == SL_WL_SCRIPT_FILE && (at == 0 || at >= na))
		abort();
	if (k == SL_WL_SCRIPT_UNKNOWN && why[0] == '\0')
		abort();
	if (sl_wl_script_env(argv[0], envp, why, sizeof(why)) == SL_WL_SCRIPT_UNKNOWN &&
	    why[0] == '\0')
		abort();
	return 0;
}
