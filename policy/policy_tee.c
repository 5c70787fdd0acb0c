/* Policy v1 validation of the TEE rules: measurements per kind and minimum
 * TCB. Hex values are normalised to lower case in place. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

static const char *const TDX_TCB_STATUS[] = {"UpToDate",
                                             "SWHardeningNeeded",
                                             "ConfigurationNeeded",
                                             "ConfigurationAndSWHardeningNeeded",
                                             "OutOfDate",
                                             "OutOfDateConfigurationNeeded",
                                             NULL};

static SL_RESULT check_hexlist(json_t *parent, const char *name, size_t want_bytes,
                               const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	json_t *v = json_object_get(parent, name);
	json_t *arr = NULL;
	size_t i;
	json_t *e;

	if (json_is_string(v)) {
		arr = json_array();
		SL_ENSURE(arr != NULL && json_array_append(arr, v) == 0, SL_E_NOMEM, "policy");
	} else {
		SL_GUARD(
		    sl_policy_want_type(v, JSON_ARRAY, path, "a hex string or an array of them"));
		SL_ENSURE(json_array_size(v) > 0, SL_E_INPUT,
		          "%s: an empty list of accepted values accepts nothing", path);
		arr = json_incref(v);
	}
	json_array_foreach (arr, i, e) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		SL_GUARD(sl_policy_want_type(e, JSON_STRING, p, "a hex string"));
		char buf[2 * 64 + 1];
		const char *s = json_string_value(e);
		size_t n = strlen(s);
		SL_ENSURE(n == 2 * want_bytes, SL_E_INPUT,
		          "%s: want %zu hex digits (%zu bytes), got %zu", p, 2 * want_bytes,
		          want_bytes, n);
		for (size_t j = 0; j < n; j++) {
			SL_ENSURE(isxdigit((unsigned char)s[j]), SL_E_INPUT,
			          "%s: '%c' is not a hex digit", p, s[j]);
			buf[j] = (char)tolower((unsigned char)s[j]);
		}
		buf[n] = '\0';
		SL_ENSURE(json_array_set_new(arr, i, json_string(buf)) == 0, SL_E_NOMEM, "policy");
	}
	SL_ENSURE(json_object_set(parent, name, arr) == 0, SL_E_NOMEM, "policy");
	rc = SL_OK;
out:
	json_decref(arr);
	return rc;
}

static size_t bank_bytes(const char *bank)
{
	if (strcmp(bank, "sha1") == 0)
		return 20;
	if (strcmp(bank, "sha256") == 0)
		return 32;
	if (strcmp(bank, "sha384") == 0)
		return 48;
	if (strcmp(bank, "sha512") == 0)
		return 64;
	return 0;
}

/* "pcr0".."pcr31", no leading zeros. */
static bool nitro_pcr_name(const char *f)
{
	if (strncmp(f, "pcr", 3) != 0 || !isdigit((unsigned char)f[3]))
		return false;
	char *end = NULL;
	long n = strtol(f + 3, &end, 10);
	return *end == '\0' && n <= 31 && (f[3] != '0' || f[4] == '\0') && strlen(f) <= 5;
}

sl_err sl_policy_check_measurements(json_t *m, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	static const char *const kinds[] = {"tpm2", "sev-snp", "tdx", "aws-nitro", NULL};
	static const char *const snp_f[] = {"measurement", NULL};
	static const char *const tdx_f[] = {"mrtd", "rtmr0", "rtmr1", "rtmr2", "rtmr3", NULL};
	const char *k;
	json_t *v;

	SL_GUARD(sl_policy_want_type(m, JSON_OBJECT, path, "an object of TEE kinds"));
	SL_GUARD(sl_policy_only_fields(m, path, kinds));
	json_object_foreach (m, k, v) {
		snprintf(p, sizeof(p), "%s.%s", path, k);
		SL_GUARD(sl_policy_want_type(v, JSON_OBJECT, p, "an object"));
		SL_ENSURE(json_object_size(v) > 0, SL_E_INPUT, "%s: lists no measurement", p);
		const char *f;
		json_t *fv;
		if (strcmp(k, "tpm2") == 0) {
			json_object_foreach (v, f, fv) {
				snprintf(q, sizeof(q), "%s.%s", p, f);
				size_t nb = bank_bytes(f);
				SL_ENSURE(nb > 0, SL_E_INPUT,
				          "%s: unknown PCR bank (sha1, sha256, sha384, sha512)", q);
				SL_GUARD(sl_policy_want_type(fv, JSON_OBJECT, q,
				                             "an object of PCR index -> values"));
				SL_ENSURE(json_object_size(fv) > 0, SL_E_INPUT, "%s: lists no PCR",
				          q);
				const char *idx;
				json_t *iv;
				json_object_foreach (fv, idx, iv) {
					char r[PATH_MAX_LEN];
					snprintf(r, sizeof(r), "%s.%s", q, idx);
					char *end = NULL;
					long n = strtol(idx, &end, 10);
					SL_ENSURE(idx[0] >= '0' && idx[0] <= '9' && *end == '\0' &&
					              n <= 23 && (idx[0] != '0' || idx[1] == '\0'),
					          SL_E_INPUT, "%s: PCR index must be 0..23", r);
					SL_GUARD(check_hexlist(fv, idx, nb, r));
				}
			}
		} else if (strcmp(k, "aws-nitro") == 0) {
			json_object_foreach (v, f, fv) {
				snprintf(q, sizeof(q), "%s.%s", p, f);
				SL_ENSURE(nitro_pcr_name(f), SL_E_INPUT,
				          "%s: want a Nitro PCR pcr0..pcr31 (SHA-384)", q);
				SL_GUARD(check_hexlist(v, f, 48, q));
			}
		} else {
			const char *const *fields = strcmp(k, "tdx") == 0 ? tdx_f : snp_f;
			SL_GUARD(sl_policy_only_fields(v, p, fields));
			json_object_foreach (v, f, fv) {
				snprintf(q, sizeof(q), "%s.%s", p, f);
				SL_GUARD(check_hexlist(v, f, 48, q));
			}
		}
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_policy_check_min_tcb(json_t *m, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	static const char *const kinds[] = {"sev-snp", "tdx", NULL};
	static const char *const snp_parts[] = {"bootloader", "tee", "snp",
	                                        "microcode",  "fmc", NULL};
	static const char *const tdx_f[] = {"tcb_status", NULL};
	const char *k, *f;
	json_t *v, *fv;

	SL_GUARD(sl_policy_want_type(m, JSON_OBJECT, path, "an object of TEE kinds"));
	SL_GUARD(sl_policy_only_fields(m, path, kinds));
	json_object_foreach (m, k, v) {
		snprintf(p, sizeof(p), "%s.%s", path, k);
		SL_GUARD(sl_policy_want_type(v, JSON_OBJECT, p, "an object"));
		SL_ENSURE(json_object_size(v) > 0, SL_E_INPUT, "%s: sets no minimum", p);
		bool snp = strcmp(k, "sev-snp") == 0;
		SL_GUARD(sl_policy_only_fields(v, p, snp ? snp_parts : tdx_f));
		json_object_foreach (v, f, fv) {
			snprintf(q, sizeof(q), "%s.%s", p, f);
			if (snp) {
				SL_ENSURE(json_is_integer(fv) && json_integer_value(fv) >= 0 &&
				              json_integer_value(fv) <= 255,
				          SL_E_INPUT, "%s: must be an integer 0..255", q);
				continue;
			}
			SL_GUARD(sl_policy_want_list(fv, q, "an array of acceptable TCB statuses"));
			size_t i;
			json_t *e;
			json_array_foreach (fv, i, e) {
				char r[PATH_MAX_LEN];
				snprintf(r, sizeof(r), "%s[%zu]", q, i);
				SL_ENSURE(
				    json_is_string(e) &&
				        sl_policy_in_list(TDX_TCB_STATUS, json_string_value(e)),
				    SL_E_INPUT,
				    "%s: not a TDX TCB status (UpToDate, SWHardeningNeeded, "
				    "ConfigurationNeeded, ConfigurationAndSWHardeningNeeded, "
				    "OutOfDate, "
				    "OutOfDateConfigurationNeeded)",
				    r);
			}
		}
	}
	rc = SL_OK;
out:
	return rc;
}
