/* TSS2 response codes turned into seclaunch errors. */
#include <stdio.h>
#include <string.h>
#include <tss2/tss2_rc.h>

#include "seclaunch/error.h"

sl_err sl_err_tss(sl_err code, uint32_t tss_rc, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sl_err_set(code, "%s (TPM: 0x%x %s)", msg, tss_rc, Tss2_RC_Decode(tss_rc));
}
