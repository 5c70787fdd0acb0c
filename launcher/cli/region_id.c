/* Region identity for a key release: shared by `run` and `decrypt --kms`. */
#include <string.h>

#include "region_id.h"
#include "seclaunch/identity.h"

int sl_region_id_option(struct sl_region_id *r, int key, char *arg)
{
	switch (key) {
	case SL_REGION_O_CLOUD_ID:
		r->cloud_identity = arg;
		return 1;
	case SL_REGION_O_GCP_JWKS:
		r->gcp_jwks = arg;
		return 1;
	case SL_REGION_O_AWS_TRUST:
		r->aws_trust = arg;
		return 1;
	case SL_REGION_O_REGION:
		r->region = arg;
		return 1;
	default:
		return 0;
	}
}

int sl_region_id_check(const struct sl_region_id *r, const char *cmd)
{
	if (r->cloud_identity != NULL && r->region != NULL)
		return sl_cli_usage(cmd, "--cloud-identity and --region exclude each other");
	return 0;
}

sl_err sl_region_id_collect(const struct sl_region_id *r,
                            const uint8_t binding[static SL_BINDING_LEN], sl_claims *c,
                            json_t **doc)
{
	sl_err rc = SL_E_INTERNAL;
	json_t *d = NULL;

	*doc = NULL;
	if (r->cloud_identity != NULL) {
		sl_identity_opts io = {.gcp_jwks = r->gcp_jwks,
		                       .aws_trust_dir = r->aws_trust,
		                       .binding = binding,
		                       .binding_len = SL_BINDING_LEN};
		const char *ci = r->cloud_identity;
		if (strcmp(ci, "metadata") == 0 || strncmp(ci, "metadata:", 9) == 0)
			SL_GUARD(sl_identity_collect(ci[8] == ':' ? ci + 9 : "auto", binding,
			                             SL_BINDING_LEN, &d));
		else
			SL_GUARD(sl_identity_load_file(ci, &d));
		rc = sl_identity_verify(d, &io, c);
		if (rc != SL_OK)
			SL_GUARD(sl_err_wrap(rc, "%s", ci));
	} else if (r->region != NULL) {
		SL_GUARD(sl_identity_unsigned_region(r->region, c));
		SL_GUARD(sl_identity_unsigned_doc(r->region, &d));
	}
	*doc = d;
	d = NULL;
	rc = SL_OK;
out:
	json_decref(d);
	return rc;
}
