/* Internals shared by the policy module's files. */
#ifndef SECLAUNCH_POLICY_INT_H
#define SECLAUNCH_POLICY_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "seclaunch/policy.h"

/* policy/regions.json, embedded (policy/regions_data.c, scripts/gen-regions). */
extern const char sl_policy_regions_json[];
extern const unsigned long sl_policy_regions_json_len;

struct sl_policy {
	json_t *doc;    /* the validated document (NULL for the development policy) */
	json_t *groups; /* group name -> array of patterns: built-ins, then the policy's */
	bool dev;
	bool allow_unverified;
	uint8_t digest[SL_POLICY_DIGEST_LEN];
	char digest_hex[2 * SL_POLICY_DIGEST_LEN + 1];
	char *trusted_comment;
};

/* '*' matches any run of characters (also none); everything else is literal. */
bool sl_policy_glob(const char *pat, const char *s);

/* The built-in tables from regions.json: known "cloud:region" names (array
 * of strings) and groups (object). New references. */
SL_MUST_USE sl_err sl_policy_builtin_regions(json_t **known, json_t **groups);

/* Whether region ("cloud:region") matches an allowed/denied_regions entry
 * (a group name or a pattern). */
bool sl_policy_region_entry_matches(const sl_policy *p, const char *entry, const char *region);

/* Validation helpers shared by policy_parse.c and policy_tee.c. Errors are
 * SL_E_INPUT with "PATH: message". */
#define PATH_MAX_LEN 256
SL_MUST_USE sl_err sl_policy_verr(const char *path, const char *fmt, ...) SL_PRINTF(2, 3);
const char *sl_policy_type_name(const json_t *v);
bool sl_policy_in_list(const char *const *list, const char *s);
/* Rejects members of obj not in allowed (NULL-terminated). */
SL_MUST_USE sl_err sl_policy_only_fields(const json_t *obj, const char *path,
                                         const char *const *allowed);
SL_MUST_USE sl_err sl_policy_want_type(const json_t *v, json_type t, const char *path,
                                       const char *what);
/* $.datasets[i].measurements / .min_tcb */
SL_MUST_USE sl_err sl_policy_check_measurements(json_t *m, const char *path);
SL_MUST_USE sl_err sl_policy_check_min_tcb(json_t *m, const char *path);

#endif
