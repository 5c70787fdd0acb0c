/* cloud_identity: pinning what the cloud provider signed in the identity
 * document (GCP project / instance, AWS account / instance), and tying that
 * instance to the TEE evidence where the evidence names one. Without a pin a
 * region claim says only "some VM in this region": any VM there can mint a
 * token bound to another machine's request (docs/policy.md). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy_int.h"

/* One pin: policy field, provider, claim, and the shape its values must have. */
struct pin {
	const char *field, *provider, *claim, *shape;
	bool (*valid)(const char *s);
};

static bool digits(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	return n >= min && n <= max && strspn(s, "0123456789") == n;
}

/* 6..30 of [a-z0-9-], a letter first, no trailing '-' (Google's rule). */
static bool gcp_project_id(const char *s)
{
	size_t n = strlen(s);
	return n >= 6 && n <= 30 && s[0] >= 'a' && s[0] <= 'z' && s[n - 1] != '-' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}
static bool gcp_number(const char *s)
{
	return digits(s, 1, 20) && s[0] != '0';
}
static bool aws_account(const char *s)
{
	return digits(s, 12, 12);
}
/* i- and 8 or 17 lower-case hex digits */
static bool aws_instance(const char *s)
{
	size_t n = strlen(s);
	return strncmp(s, "i-", 2) == 0 && (n == 10 || n == 19) &&
	       strspn(s + 2, "0123456789abcdef") == n - 2;
}

static const struct pin PINS[] = {
    {"gcp_project_ids", "gcp", "cloud.project_id", "a GCP project id (6..30 of a-z 0-9 -)",
     gcp_project_id},
    {"gcp_project_numbers", "gcp", "cloud.project_number", "a GCP project number (digits)",
     gcp_number},
    {"gcp_instance_ids", "gcp", "cloud.instance_id", "a GCE instance id (digits)", gcp_number},
    {"aws_account_ids", "aws", "cloud.account_id", "an AWS account id (12 digits)", aws_account},
    {"aws_instance_ids", "aws", "cloud.instance_id",
     "an AWS instance id (i- and 8 or 17 hex digits)", aws_instance},
};
#define NPINS (sizeof(PINS) / sizeof(PINS[0]))

/* Where the verified TEE evidence names the machine's instance, per provider.
 * Only Azure's vTPM evidence does (the HCL report's vmUniqueId, signed with
 * the SEV-SNP report); GCP vTPM quotes, SEV-SNP and TDX reports carry no
 * instance id, and AWS is not a TEE kind here. */
static const char *tee_instance_claim(const char *provider)
{
	if (provider != NULL && strcmp(provider, "azure") == 0)
		return "azure.vm.unique_id";
	return NULL;
}

static SL_RESULT check_values(const struct pin *pn, const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *e;
	SL_GUARD(sl_policy_want_list(v, path, "an array of strings"));
	json_array_foreach (v, i, e) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		SL_GUARD(sl_policy_want_type(e, JSON_STRING, p, pn->shape));
		SL_ENSURE(pn->valid(json_string_value(e)), SL_E_INPUT, "%s: '%.64s' is not %s", p,
		          json_string_value(e), pn->shape);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_policy_check_identity(struct vctx *c, const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	const char *fields[NPINS + 2];
	json_t *e;

	for (size_t i = 0; i < NPINS; i++)
		fields[i] = PINS[i].field;
	fields[NPINS] = "same_instance";
	fields[NPINS + 1] = NULL;
	SL_GUARD(sl_policy_want_type(v, JSON_OBJECT, path, "an object of identity pins"));
	NOTE(sl_policy_only_fields(v, path, fields));
	SL_ENSURE(json_object_size(v) > 0, SL_E_INPUT,
	          "%s: pins nothing (give gcp_project_ids, aws_account_ids, ...)", path);
	for (size_t i = 0; i < NPINS; i++) {
		if ((e = json_object_get(v, PINS[i].field)) == NULL)
			continue;
		snprintf(p, sizeof(p), "%s.%s", path, PINS[i].field);
		NOTE(check_values(&PINS[i], e, p));
	}
	if ((e = json_object_get(v, "same_instance")) != NULL && !json_is_boolean(e)) {
		snprintf(p, sizeof(p), "%s.same_instance", path);
		NOTE(sl_policy_verr(p, "must be true or false, not %s", sl_policy_type_name(e)));
	}
	rc = SL_OK;
out:
	return rc;
}

static void join(const json_t *arr, char *buf, size_t n)
{
	size_t i, off = 0;
	json_t *e;
	buf[0] = '\0';
	json_array_foreach ((json_t *)arr, i, e) {
		int w = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", json_string_value(e));
		if (w < 0 || (size_t)w >= n - off)
			break;
		off += (size_t)w;
	}
}

void sl_policy_eval_identity(const sl_claims *c, const json_t *rule, const char *rpath,
                             sl_policy_note_fn fn, void *d)
{
	char path[PATH_MAX_LEN], list[512];
	const json_t *ci = json_object_get(rule, "cloud_identity");
	const char *prov = sl_claims_get(c, "cloud.provider");
	const char *verified = sl_claims_get(c, "cloud.region_verified");
	bool pinned = false, any_pin = false;

	if (ci == NULL)
		return;
	snprintf(path, sizeof(path), "%s.cloud_identity", rpath);
	if (prov == NULL || verified == NULL || strcmp(verified, "true") != 0) {
		sl_policy_notef(
		    fn, d, false, path,
		    "the rule pins the cloud identity, and there is no provider-signed identity "
		    "document (cloud.provider=%s, cloud.region_verified=%s)",
		    prov ? prov : "missing", verified ? verified : "missing");
		return;
	}
	for (size_t i = 0; i < NPINS; i++) {
		const json_t *want = json_object_get(ci, PINS[i].field);
		any_pin = any_pin || want != NULL;
		if (want == NULL || strcmp(PINS[i].provider, prov) != 0)
			continue;
		pinned = true;
		snprintf(path, sizeof(path), "%s.cloud_identity.%s", rpath, PINS[i].field);
		const char *have = sl_claims_get(c, PINS[i].claim);
		bool ok = false;
		size_t k;
		json_t *e;
		json_array_foreach ((json_t *)want, k, e) {
			ok = ok || (have != NULL && strcmp(have, json_string_value(e)) == 0);
		}
		join(want, list, sizeof(list));
		if (ok)
			sl_policy_notef(fn, d, true, path,
			                "the %s identity's %s is %s (provider-signed)", prov,
			                PINS[i].claim, have);
		else
			sl_policy_notef(
			    fn, d, false, path,
			    "the %s identity's %s is %s, want one of [%s]: an identity from "
			    "another %s",
			    prov, PINS[i].claim, have ? have : "missing", list,
			    strstr(PINS[i].field, "instance")  ? "instance"
			    : strstr(PINS[i].field, "account") ? "account"
			                                       : "project");
	}
	/* pins for some providers only: an identity from another provider is
	 * exactly the relay they are meant to stop */
	if (any_pin && !pinned) {
		snprintf(path, sizeof(path), "%s.cloud_identity", rpath);
		sl_policy_notef(
		    fn, d, false, path,
		    "the rule pins the cloud identity but nothing for provider '%s': a %s "
		    "identity is refused",
		    prov, prov);
	}
	if (!json_is_true(json_object_get(ci, "same_instance")))
		return;
	snprintf(path, sizeof(path), "%s.cloud_identity.same_instance", rpath);
	const char *ck = tee_instance_claim(prov);
	const char *tee = ck != NULL ? sl_claims_get(c, ck) : NULL;
	const char *inst = sl_claims_get(c, "cloud.instance_id");
	if (ck == NULL)
		sl_policy_notef(
		    fn, d, false, path,
		    "no TEE evidence seclaunch verifies names a %s instance (vTPM quotes, "
		    "SEV-SNP and TDX reports carry no instance id), so the identity cannot be "
		    "tied to the attested machine",
		    prov);
	else if (tee == NULL || inst == NULL)
		sl_policy_notef(
		    fn, d, false, path,
		    "the identity and the TEE evidence must name the same instance, and %s is "
		    "missing",
		    tee == NULL ? ck : "cloud.instance_id");
	else if (strcasecmp(tee, inst) != 0)
		sl_policy_notef(
		    fn, d, false, path,
		    "the identity names instance %s, the TEE evidence %s (%s): a relayed "
		    "identity",
		    inst, tee, ck);
	else
		sl_policy_notef(fn, d, true, path,
		                "the identity and the TEE evidence name instance %s", inst);
}
