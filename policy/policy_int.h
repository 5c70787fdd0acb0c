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

/* The shared helpers (policy_util.c): every other file of policy/ calls
 * them, and they call none of those files, so the arrows between the files
 * go one way. */

/* '*' matches any run of characters (also none); everything else is literal. */
bool sl_policy_glob(const char *pat, const char *s);
bool sl_policy_in_list(const char *const *list, const char *s);

/* The built-in tables from regions.json: known "cloud:region" names (array
 * of strings) and groups (object). New references. */
SL_MUST_USE sl_err sl_policy_builtin_regions(json_t **known, json_t **groups);

/* Whether region ("cloud:region") matches an allowed/denied_regions entry
 * (a group name or a pattern); policy_eval.c. */
bool sl_policy_region_entry_matches(const sl_policy *p, const char *entry, const char *region);

/* The candidate nearest to s by edit distance when it is close enough to be
 * a typo (at most a third of its length, and at least one), else NULL. */
const char *sl_policy_nearest(const char *s, const char *const *cands, size_t n);
/* The same over an array of strings / an object's keys. */
const char *sl_policy_nearest_json(const char *s, const json_t *arr_or_obj);

/* Validation errors are SL_E_INPUT with "PATH: message". */
#define PATH_MAX_LEN 256

/* Validation context: the built-in tables, the policy's merged groups, and
 * every error and warning found so far. Checks go on after an error so
 * `policy check` can list them all. */
struct vctx {
	json_t *known;    /* array of "cloud:region" */
	json_t *groups;   /* merged */
	json_t *errors;   /* [{"path", "message"}] */
	json_t *warnings; /* [{"path", "message"}] */
	sl_err first;     /* the first error's code; SL_OK while none */
};
/* Appends {"path", "message"} to a list of findings. */
SL_MUST_USE sl_err sl_policy_finding(json_t *list, const char *path, const char *msg);
/* Records e (an input error: its detail "PATH: message") and returns SL_OK;
 * any other failure (memory) is returned, and validation stops. */
SL_MUST_USE sl_err sl_policy_note(struct vctx *c, sl_err e);

/* Runs a check; an input error is noted and validation goes on. Needs
 * `sl_err rc`, `struct vctx *c` and an out: label. */
#define NOTE(expr)                                                                                 \
	do {                                                                                       \
		sl_err note_rc_ = sl_policy_note(c, (expr));                                       \
		if (note_rc_ != SL_OK) {                                                           \
			rc = note_rc_;                                                             \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

SL_MUST_USE sl_err sl_policy_verr(const char *path, const char *fmt, ...) SL_PRINTF(2, 3);
const char *sl_policy_type_name(const json_t *v);
/* "unknown field 'k'", with the nearest of allowed when it looks like a typo. */
SL_MUST_USE sl_err sl_policy_unknown_field(const char *path, const char *k,
                                           const char *const *allowed);
/* Rejects members of obj not in allowed (NULL-terminated). */
SL_MUST_USE sl_err sl_policy_only_fields(const json_t *obj, const char *path,
                                         const char *const *allowed);
SL_MUST_USE sl_err sl_policy_want_type(const json_t *v, json_type t, const char *path,
                                       const char *what);
/* A non-empty array (an allow-list); what names the array's kind. */
SL_MUST_USE sl_err sl_policy_want_list(const json_t *v, const char *path, const char *what);

/* Evaluation of a rule's parts against the claims appends to the decision
 * through a note function; sl_policy_notef formats the text first. */
typedef void (*sl_policy_note_fn)(void *d, bool pass, const char *path, const char *text);
void sl_policy_notef(sl_policy_note_fn fn, void *d, bool pass, const char *path, const char *fmt,
                     ...) SL_PRINTF(5, 6);

/* The validation of the whole document (policy_parse.c), into c. */
SL_MUST_USE sl_err sl_policy_validate(json_t *root, struct vctx *c);
/* $.datasets[i].cloud_identity (policy_identity.c). */
SL_MUST_USE sl_err sl_policy_check_identity(struct vctx *c, const json_t *v, const char *path);
/* Evaluation of a rule's cloud_identity pins against the claims. */
void sl_policy_eval_identity(const sl_claims *c, const json_t *rule, const char *rpath,
                             sl_policy_note_fn note, void *d);
/* $.datasets[i].workloads (policy_workload.c): validation, and evaluation
 * against the workload.* claims. */
SL_MUST_USE sl_err sl_policy_check_workloads(struct vctx *c, const json_t *v, const char *path);
void sl_policy_eval_workloads(const sl_claims *c, const json_t *rule, const char *rpath,
                              sl_policy_note_fn note, void *d);
/* $.datasets[i].gpu (policy_gpu.c): validation, and evaluation against the
 * GPU set's claims (gpu.count, gpu.cc, gpu.mode, gpu.devtools, gpu.binding). */
SL_MUST_USE sl_err sl_policy_check_gpu(const json_t *v, const char *path);
void sl_policy_eval_gpu(const sl_claims *c, const json_t *rule, const char *rpath,
                        sl_policy_note_fn note, void *d);
/* $.datasets[i].measurements / .min_tcb (policy_tee.c) */
SL_MUST_USE sl_err sl_policy_check_measurements(json_t *m, const char *path);
SL_MUST_USE sl_err sl_policy_check_min_tcb(json_t *m, const char *path);

#endif
