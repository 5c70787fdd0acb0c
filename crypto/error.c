/* The error table and the thread-local detail message. */
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>

#include "seclaunch/error.h"

#define SL_DETAIL_MAX 1024

static _Thread_local char detail[SL_DETAIL_MAX];

#define SL_ERR_MSG_(name, cat, msg) [name] = msg,
static const char *const messages[SL_E__COUNT] = {SL_ERROR_TABLE(SL_ERR_MSG_)};
#undef SL_ERR_MSG_
#define SL_ERR_NAME_(name, cat, msg) [name] = #name,
static const char *const names[SL_E__COUNT] = {SL_ERROR_TABLE(SL_ERR_NAME_)};
#undef SL_ERR_NAME_
#define SL_ERR_CAT_(name, cat, msg) [name] = cat,
static const int categories[SL_E__COUNT] = {SL_ERROR_TABLE(SL_ERR_CAT_)};
#undef SL_ERR_CAT_

static int valid(sl_err code)
{
	return (int)code >= 0 && code < SL_E__COUNT;
}

static void set_detail(const char *fmt, va_list ap) SL_PRINTF(1, 0);
static void set_detail(const char *fmt, va_list ap)
{
	vsnprintf(detail, sizeof(detail), fmt, ap);
}

sl_err sl_err_set(sl_err code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_detail(fmt, ap);
	va_end(ap);
	return code;
}

sl_err sl_err_wrap(sl_err code, const char *fmt, ...)
{
	char prefix[SL_DETAIL_MAX];
	char old[SL_DETAIL_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, detail, sizeof(old));
	if (old[0] != '\0')
		snprintf(detail, sizeof(detail), "%s: %s", prefix, old);
	else
		snprintf(detail, sizeof(detail), "%s", prefix);
	return code;
}

const char *sl_err_detail(void)
{
	return detail;
}

void sl_err_clear(void)
{
	detail[0] = '\0';
}

const char *sl_err_message(sl_err code)
{
	return valid(code) ? messages[code] : "unknown error";
}

const char *sl_err_name(sl_err code)
{
	return valid(code) ? names[code] : "SL_E_UNKNOWN";
}

int sl_err_exit_code(sl_err code)
{
	return valid(code) ? categories[code] : SL_CAT_SYSTEM;
}

sl_err sl_err_ossl(sl_err code, const char *fmt, ...)
{
	char reason[256] = "";
	unsigned long e, last = 0;
	va_list ap;

	/* The queue holds the whole stack; the last entry is the most specific. */
	while ((e = ERR_get_error()) != 0)
		last = e;
	if (last != 0)
		ERR_error_string_n(last, reason, sizeof(reason));
	va_start(ap, fmt);
	set_detail(fmt, ap);
	va_end(ap);
	if (reason[0] != '\0') {
		size_t n = strlen(detail);
		snprintf(detail + n, sizeof(detail) - n, " (OpenSSL: %s)", reason);
	}
	return code;
}
