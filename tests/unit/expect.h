/* A shared assertion of the evidence unit tests (snp, tdx, azure): a call
 * failed with exactly the wanted code, and its detail names the check.
 * Included after cmocka.h and seclaunch/error.h. */
#ifndef SECLAUNCH_TESTS_EXPECT_H
#define SECLAUNCH_TESTS_EXPECT_H

#include <string.h>

static void expect_fail(sl_err got, sl_err want, const char *needle, const char *what)
{
	if (got != want || strstr(sl_err_detail(), needle) == NULL)
		fail_msg("%s: got %s '%s', want %s naming '%s'", what, sl_err_name(got),
		         sl_err_detail(), sl_err_name(want), needle);
}

#endif
