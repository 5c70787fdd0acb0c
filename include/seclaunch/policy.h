/* Policy v1: the compliance team's signed rules (docs/policy.md).
 *
 * A policy is a JSON document signed with minisign. It is loaded either from
 * bytes (parse + validate only: `policy check`) or from files with its
 * signature verified first: a policy whose signature fails is never parsed
 * into rules, let alone evaluated. Its digest is the SHA-256 of the exact
 * signed bytes and goes into the binding and every audit record.
 *
 * Evaluation is a pure function of (policy, claims, request): deterministic,
 * no side effects, default deny, deny wins. The launcher's pre-flight,
 * `seclaunch policy explain` and seclaunchd all call sl_policy_evaluate.
 */
#ifndef SECLAUNCH_POLICY_H
#define SECLAUNCH_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/claims.h"
#include "seclaunch/error.h"

typedef struct sl_policy sl_policy;
typedef struct sl_decision sl_decision;

/* Largest policy document accepted. */
#define SL_POLICY_MAX_BYTES (1024 * 1024)

/* Parses and validates a policy document (NOT signature-checked: for `policy
 * check` and tests; seclaunchd and `run` use sl_policy_load_signed). Errors:
 * SL_E_FORMAT (not JSON) / SL_E_INPUT (invalid) / SL_E_VERSION (version other
 * than 1) / SL_E_TOO_LARGE (over SL_POLICY_MAX_BYTES), all exit 2; the detail naming the JSON
 * path: "$.datasets[1].allowed_regions[0]: pattern 'aws:eu-*x' matches no
 * known region". The digest is SHA-256 of data. */
SL_MUST_USE sl_err sl_policy_load(const uint8_t *data, size_t len, sl_policy **out);

/* `policy check`: validates as sl_policy_load does but goes on after an
 * error, and adds warnings for dangerous gaps in a valid policy (an SNP/TDX
 * rule without measurements or min_tcb, no keys map, restricted data without
 * key_ttl, ...). *report (new reference, set unless memory runs out) is
 * {"ok": bool, "errors": [{"path", "message"}], "warnings": [{"path",
 * "message"}]}; a message may end "(did you mean 'x'?)". strict: warnings
 * become errors. Returns SL_OK when ok, else the first error's code (exit 2)
 * with its "PATH: message" as the detail. */
SL_MUST_USE sl_err sl_policy_check(const uint8_t *data, size_t len, bool strict, json_t **report);

/* Verifies the minisign signature of the policy bytes under the public key
 * text, then parses. Signature failures (bad signature, wrong key, tampered
 * trusted comment) are SL_E_POLICY_SIG (exit 4) naming why; a malformed
 * signature or key file is SL_E_FORMAT (exit 2). */
SL_MUST_USE sl_err sl_policy_load_signed_mem(const uint8_t *data, size_t len, const uint8_t *sig,
                                             size_t sig_len, const uint8_t *pubkey,
                                             size_t pubkey_len, sl_policy **out);
/* The same from files. sig_path NULL: "<policy_path>.minisig". */
SL_MUST_USE sl_err sl_policy_load_signed(const char *policy_path, const char *sig_path,
                                         const char *pubkey_path, sl_policy **out);

/* The built-in development policy: releases any key for any dataset to any
 * verified evidence (seclaunchd --dev without --policy). It allows an
 * unverified region and says so in every decision. Its digest is SHA-256 of
 * its fixed text (sl_policy_dev_text). */
SL_MUST_USE sl_err sl_policy_dev(sl_policy **out);
const char *sl_policy_dev_text(void);
/* The key the development policy names for every output (to any destination);
 * seclaunchd --dev creates it at start. */
#define SL_POLICY_DEV_OUTPUT_KEY "dev-outputs"
bool sl_policy_is_dev(const sl_policy *p);

void sl_policy_free(sl_policy *p);

#define SL_POLICY_DIGEST_LEN 32
const uint8_t *sl_policy_digest(const sl_policy *p); /* SL_POLICY_DIGEST_LEN bytes */
const char *sl_policy_digest_hex(const sl_policy *p);
/* The verified trusted comment; NULL when loaded unsigned. */
const char *sl_policy_trusted_comment(const sl_policy *p);
bool sl_policy_signed(const sl_policy *p);
bool sl_policy_allow_unverified_region(const sl_policy *p);

/* What is asked for. */
typedef struct sl_policy_request {
	const char *dataset_id;     /* required */
	const char *key_id;         /* NULL: no key asked (e.g. pre-flight of a region) */
	const char *const *outputs; /* output destinations (URLs) the job will write to */
	size_t n_outputs;
	bool gpu_decrypt; /* the data is to be decrypted on the GPU (run --gpu-decrypt) */
} sl_policy_request;

/* Evaluates the policy. A deny is a decision, not an error: the return is
 * SL_OK with *out filled unless memory runs out or req is malformed
 * (SL_E_USAGE). */
SL_MUST_USE sl_err sl_policy_evaluate(const sl_policy *p, const sl_claims *claims,
                                      const sl_policy_request *req, sl_decision **out);

/* The $.keys rule alone, for a wrap (which has no claims): SL_OK when the
 * policy lets key_id serve dataset_id (the development policy lets every key
 * serve every dataset), else SL_E_POLICY_DENIED with the reason in the
 * detail, worded as sl_policy_evaluate words it. */
SL_MUST_USE sl_err sl_policy_key_check(const sl_policy *p, const char *key_id,
                                       const char *dataset_id);

/* The KEK that serves an output: the one key of $.keys whose patterns match
 * output_id. SL_OK and *key_id (borrowed from the policy); SL_E_POLICY_DENIED
 * naming the rule when no key matches or more than one does (which one would
 * be a guess). The development policy names no key: SL_E_POLICY_DENIED. */
SL_MUST_USE sl_err sl_policy_output_key(const sl_policy *p, const char *output_id,
                                        const char **key_id);

void sl_decision_free(sl_decision *d);
bool sl_decision_allowed(const sl_decision *d);
/* Rules that matched and passed, each "PATH: text"
 * ("$.datasets[0].allowed_regions: region gcp:europe-west4 is in group eu"). */
size_t sl_decision_matched_count(const sl_decision *d);
const char *sl_decision_matched(const sl_decision *d, size_t i);
/* Why it was denied, each "PATH: text"
 * ("$.datasets[0].measurements.tpm.sha256.7: claim tpm.pcr.sha256.7 is 00..,
 * want one of [ab..]"). Empty when allowed. */
size_t sl_decision_reason_count(const sl_decision *d);
const char *sl_decision_reason(const sl_decision *d, size_t i);
/* JSON array of the reason strings (new reference): the KMS's 403 "reasons". */
SL_MUST_USE sl_err sl_decision_reasons_json(const sl_decision *d, json_t **out);
/* The whole decision (new reference), as `policy explain --json` prints it:
 * {"decision": "allow"|"deny", "dataset", "key", "dataset_rules",
 *  "policy_digest", "development_policy", "key_ttl", "matched": [...],
 *  "reasons": [...]} */
SL_MUST_USE sl_err sl_decision_to_json(const sl_decision *d, json_t **out);
/* The matched dataset rule's key_ttl in seconds (0: none given). */
uint64_t sl_decision_key_ttl(const sl_decision *d);
/* SL_OK when allowed; otherwise sets SL_E_POLICY_DENIED with every reason
 * joined by "; " as the detail and returns it. */
SL_MUST_USE sl_err sl_decision_err(const sl_decision *d);

#endif
