/* seclaunch policy identity-verify | identity-collect, and the --identity
 * option of explain: cloud identity documents as region evidence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "policy_cli.h"
#include "seclaunch/identity.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define CMD "policy"

void sl_policy_cli_print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (s != NULL)
		puts(s);
	free(s);
}

sl_err sl_policy_cli_add_identity(const struct opts *o, sl_claims *c)
{
	sl_err rc = SL_E_IO;
	json_t *doc = NULL;
	SL_GUARD(sl_identity_load_file(o->identity, &doc));
	rc = sl_identity_verify(doc, &o->id, c);
	if (rc != SL_OK)
		rc = sl_err_wrap(rc, "%s", o->identity);
out:
	json_decref(doc);
	return rc;
}

int sl_policy_cli_identity_verify(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_claims *c = NULL;
	json_t *j = NULL;
	if (o->identity == NULL)
		return sl_cli_usage(CMD, "identity-verify needs --identity");
	SL_GUARD(sl_claims_new(&c));
	SL_GUARD(sl_policy_cli_add_identity(o, c));
	SL_GUARD(sl_claims_to_json(c, &j));
	if (sl_cli_json)
		sl_policy_cli_print_json(j);
	else if (!sl_cli_quiet)
		for (size_t i = 0; i < sl_claims_count(c); i++)
			printf("%s=%s\n", sl_claims_key(c, i), sl_claims_value(c, i));
	rc = SL_OK;
out:
	json_decref(j);
	sl_claims_free(c);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " identity-verify", rc);
}

int sl_policy_cli_identity_collect(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	json_t *doc = NULL;
	char *text = NULL;
	if (o->out == NULL)
		return sl_cli_usage(CMD " identity-collect", "needs -o DOC");
	SL_GUARD(sl_cli_check_new(o->out, o->force));
	SL_GUARD(sl_identity_collect(o->cloud ? o->cloud : "auto", o->id.binding, o->id.binding_len,
	                             &doc));
	text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	SL_ENSURE(text != NULL, SL_E_NOMEM, "formatting the document");
	SL_GUARD(sl_file_write_atomic(o->out, text, strlen(text), 0600, o->force));
	if (sl_cli_json)
		sl_cli_print_json(
		    json_pack("{s:s, s:s}", "kind", sl_json_getstr(doc, "kind"), "output", o->out));
	else if (!sl_cli_quiet)
		printf("%s identity document -> %s\n", sl_json_getstr(doc, "kind"), o->out);
	rc = SL_OK;
out:
	free(text);
	json_decref(doc);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " identity-collect", rc);
}
