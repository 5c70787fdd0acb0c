/* Region identity for a key release (`run` and `decrypt --kms`): one set of
 * options and one collector, so both commands send the same documents. */
#ifndef SECLAUNCH_LAUNCHER_REGION_ID_H
#define SECLAUNCH_LAUNCHER_REGION_ID_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"

struct sl_region_id {
	const char *cloud_identity; /* FILE, or metadata[:gcp|:aws] */
	const char *gcp_jwks;       /* Google's signing keys, for the local check */
	const char *aws_trust;      /* AWS certificates directory, for the local check */
	const char *region;         /* an unsigned CLOUD:REGION */
};

enum {
	SL_REGION_O_CLOUD_ID = 0x2000,
	SL_REGION_O_GCP_JWKS,
	SL_REGION_O_AWS_TRUST,
	SL_REGION_O_REGION
};

/* The option table lines; put them in the command's sl_cli_opt table. */
#define SL_REGION_ID_OPTS                                                                          \
	{"cloud-identity", required_argument, SL_REGION_O_CLOUD_ID, NULL},                         \
	    {"gcp-jwks", required_argument, SL_REGION_O_GCP_JWKS, NULL},                           \
	    {"aws-trust", required_argument, SL_REGION_O_AWS_TRUST, NULL},                         \
	    {"aws-certs", required_argument, SL_REGION_O_AWS_TRUST, "aws-trust"},                  \
	{                                                                                          \
		"region", required_argument, SL_REGION_O_REGION, NULL                              \
	}

/* The --help lines for them. */
#define SL_REGION_ID_HELP                                                                          \
	"  --cloud-identity FILE  a signed cloud identity document (GCP JWT, AWS IID)\n"           \
	"  --cloud-identity metadata[:gcp|:aws]\n"                                                 \
	"                         fetch it from the metadata server now (a GCP token\n"            \
	"                         then names this request's binding as its audience)\n"            \
	"  --gcp-jwks FILE        Google's signing keys, to check a GCP token locally\n"           \
	"  --aws-trust DIR        AWS certificates, to check an AWS document locally\n"            \
	"  --region CLOUD:REGION  an UNSIGNED region; counts only when the policy sets\n"          \
	"                         allow_unverified_region (development)\n"

/* Takes key/arg when it is one of SL_REGION_ID_OPTS: returns 1, else 0. */
int sl_region_id_option(struct sl_region_id *r, int key, char *arg);
/* The checks of the options: a usage error (exit code) or 0. */
int sl_region_id_check(const struct sl_region_id *r, const char *cmd);
/* The document r names, verified here against binding, its claims added to
 * c; *doc is NULL when r names none. A metadata document is fetched now, so
 * a GCP token's audience is this binding. */
SL_MUST_USE sl_err sl_region_id_collect(const struct sl_region_id *r,
                                        const uint8_t binding[static SL_BINDING_LEN], sl_claims *c,
                                        json_t **doc);

#endif
