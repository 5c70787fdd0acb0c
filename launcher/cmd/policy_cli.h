/* Internal to `seclaunch policy` (launcher/cmd_policy*.c). */
#ifndef SECLAUNCH_LAUNCHER_POLICY_CLI_H
#define SECLAUNCH_LAUNCHER_POLICY_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "seclaunch/attest.h"
#include "seclaunch/identity.h"

#define MAX_OUTPUTS 64
#define MAX_CLAIMS 8

struct opts {
	const char *seckey, *pubkey_out, *policy, *pubkey, *sig, *comment, *dataset, *key;
	const char *claims[MAX_CLAIMS]; /* --claims, repeatable: one claim set */
	size_t n_claims;
	const char *outputs[MAX_OUTPUTS];
	size_t n_outputs;
	bool no_password, force, legacy, strict;
	const char *identity, *binding_hex, *at, *cloud, *out;
	sl_identity_opts id;
};

/* Pretty-prints j with sorted keys on stdout. */
void sl_policy_cli_print_json(json_t *j);
/* Verifies o->identity with the trust options and adds its claims to c. */
SL_MUST_USE sl_err sl_policy_cli_add_identity(const struct opts *o, sl_claims *c);
int sl_policy_cli_identity_verify(const struct opts *o);
int sl_policy_cli_identity_collect(const struct opts *o);

#endif
