/* libcurl failures turned into seclaunch errors. */
#include <curl/curl.h>
#include <stdio.h>

#include "seclaunch/error.h"

sl_err sl_err_curl(sl_err code, int curl_code, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sl_err_set(code, "%s (%s)", msg, curl_easy_strerror((CURLcode)curl_code));
}
