/* Error and usage reporting shared by every subcommand. */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

bool sl_cli_quiet;
bool sl_cli_json;

int sl_cli_fail(const char *cmd, sl_err rc)
{
	const char *detail = sl_err_detail();
	fprintf(stderr, "seclaunch %s: error: %s\n", cmd,
	        detail[0] != '\0' ? detail : sl_err_message(rc));
	return sl_err_exit_code(rc);
}

int sl_cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "seclaunch %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'seclaunch %s --help'.\n", cmd);
	return SL_CAT_USAGE;
}
