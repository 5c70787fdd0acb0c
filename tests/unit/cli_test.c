/* The option layer: the word lists of the option tables (which the shell
 * completion offers and sl_cli_parse enforces) against each value's own
 * parser, and sl_cli_parse refusing a word not listed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../launcher/cli/cli.h"
#include "../../launcher/outputs/outputs.h"
#include "seclaunch/attest.h"
#include "seclaunch/audit.h"
#include "seclaunch/crypto.h"
#include "seclaunch/stage.h"

/* Calls check(word) for each word of a "a|b|c" list; returns how many. */
static size_t each_word(const char *list, void (*check)(const char *word))
{
	char w[64];
	size_t n = 0;
	for (const char *p = list; *p != '\0';) {
		size_t len = strcspn(p, "|");
		assert_true(len > 0 && len < sizeof(w));
		memcpy(w, p, len);
		w[len] = '\0';
		check(w);
		n++;
		p += len + (p[len] == '|');
	}
	return n;
}

static void stage_ok(const char *w)
{
	sl_stage_where where;
	assert_int_equal(sl_stage_where_parse(w, &where), SL_OK);
}

static void tee_ok(const char *w)
{
	assert_true(strcmp(w, "auto") == 0 || sl_evidence_kind_find(w) != NULL);
}

static void aead_ok(const char *w)
{
	sl_aead_id id;
	assert_int_equal(sl_aead_from_name(w, &id), SL_OK);
}

static void format_ok(const char *w)
{
	sl_audit_format f;
	assert_int_equal(sl_audit_format_parse(w, &f), SL_OK);
}

static void preempt_ok(const char *w)
{
	struct sl_out_cfg c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_WATCH, w), 1);
}

static void test_listed_values_parse(void **state)
{
	(void)state;
	assert_int_equal(each_word(SL_CLI_STAGE_VALUES, stage_ok), 5);
	assert_int_equal(each_word(SL_CLI_TEE_VALUES, tee_ok), 6);
	assert_int_equal(each_word(SL_CLI_AEAD_VALUES, aead_ok), 2);
	assert_int_equal(each_word(SL_CLI_FORMAT_VALUES, format_ok), 4);
	assert_int_equal(each_word(SL_CLI_PREEMPT_VALUES, preempt_ok), 3);
}

enum { K_PICK = 256 };
static const struct sl_cli_opt pick_opts[] = {
    {"pick", required_argument, K_PICK, NULL, "one|two"},
    {NULL, 0, 0, NULL},
};
static int picked;

static void pick_help(FILE *f)
{
	fputs("Usage: t [--pick one|two]\n", f);
}

static int pick_option(void *ctx, int key, char *arg)
{
	(void)ctx;
	(void)arg;
	if (key == K_PICK)
		picked++;
	return 0;
}

static int parse(char *a, char *b)
{
	static const struct sl_cli_spec spec = {
	    .name = "t", .opts = pick_opts, .help = pick_help, .on_option = pick_option};
	struct sl_cli_shared sh;
	char *argv[] = {"t", a, b, NULL};
	return sl_cli_parse(&spec, NULL, &sh, b != NULL ? 3 : 2, argv);
}

static void test_unlisted_value_refused(void **state)
{
	(void)state;
	picked = 0;
	assert_int_equal(parse("--pick", "two"), -1);
	assert_int_equal(parse("--pick=one", NULL), -1);
	assert_int_equal(parse("--pick", "one=x"), -1);
	assert_int_equal(picked, 3);
	assert_int_equal(parse("--pick", "three"), SL_CAT_USAGE);
	assert_int_equal(parse("--pick", "on"), SL_CAT_USAGE);
	assert_int_equal(parse("--pick", ""), SL_CAT_USAGE);
	assert_int_equal(picked, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_listed_values_parse),
	    cmocka_unit_test(test_unlisted_value_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
