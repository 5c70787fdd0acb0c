/* kms/http/: the network process (docs/architecture.md): the HTTPS server,
 * routing, request parsers, handlers, refusal limits, metrics, and the
 * client half of the key process (kek_client.c). It never holds a KEK: no
 * object here references a symbol defined in kms/keys/ (scripts/check-layers). */
#ifndef SECLAUNCH_KMS_HTTP_H
#define SECLAUNCH_KMS_HTTP_H

#include "../kmsd.h"
#include "../state/state.h"

/* ---- KEKs, as the network process sees them (kek_client.c) -------------
 * Every KEK operation is a request to the key process (the client half of
 * ../keyproc_table.h); what only reads the state store (a key's row, whether
 * it is usable, the count) is answered here. There is no unwrap: a DEK
 * reaches this process only sealed to a client's ephemeral key. */

typedef struct kmsd_kek kmsd_kek;
typedef struct kmsd_keyproc kmsd_keyproc;
struct kmsd_store;
struct kmsd_key_row;

SL_MUST_USE sl_err kmsd_kek_open_remote(kmsd_keyproc *kp, struct kmsd_store *st, kmsd_kek **out);
void kmsd_kek_close(kmsd_kek *k);
/* SL_E_EXISTS when the id is taken. */
SL_MUST_USE sl_err kmsd_kek_create(kmsd_kek *k, const char *id);
/* As create; aws_key_id (kek_backend "aws-kms" only; NULL: a new AWS key)
 * adopts an existing AWS KMS key as version 1. */
SL_MUST_USE sl_err kmsd_kek_adopt(kmsd_kek *k, const char *id, const char *aws_key_id);
/* Disable or enable (the store's state and the backend's). *found false
 * for an unknown key. */
SL_MUST_USE sl_err kmsd_kek_set_state(kmsd_kek *k, const char *id, bool enable, bool *found);
/* The store's delete, what the key process holds of it, and for AWS keys
 * ScheduleKeyDeletion of every version. */
SL_MUST_USE sl_err kmsd_kek_delete(kmsd_kek *k, const char *id, bool force, size_t *refs,
                                   bool *deleted);
/* Whether key id may be used for a decision now: the denial it earns
 * (KMSD_D_KEY_UNKNOWN, KMSD_D_KEY_DISABLED) with *why, KMSD_KEY_USABLE, or
 * KMSD_KEY_STORE_DOWN when the state store could not answer. rd: the key
 * rows read with the request's challenge (NULL or without this id: the
 * store is asked). The key process checks the key again at the unwrap. */
#define KMSD_KEY_USABLE (-1)
#define KMSD_KEY_STORE_DOWN (-2)
int kmsd_kek_usable(kmsd_kek *k, const kmsd_release_read *rd, const char *id, char *why,
                    size_t why_n);
/* The key's row in the store (state, current version). */
SL_MUST_USE sl_err kmsd_kek_state(kmsd_kek *k, const char *id, struct kmsd_key_row *row,
                                  bool *found);
/* A new KEK version for new wraps. *version: the new one. */
SL_MUST_USE sl_err kmsd_kek_rotate(kmsd_kek *k, const char *id, unsigned *version);
/* A wrapped DEK wrapped again under the key's current version (in the key
 * process). */
SL_MUST_USE sl_err kmsd_kek_rewrap(kmsd_kek *k, const char *id, const char *dataset_id,
                                   const uint8_t *in, size_t len,
                                   uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
size_t kmsd_kek_count(kmsd_kek *k);
/* SL_E_INPUT unknown key; SL_E_KMS_REFUSED disabled key or retired version;
 * SL_E_SYSTEM the state store or the key process failed. */
SL_MUST_USE sl_err kmsd_kek_wrap(kmsd_kek *k, const char *id, const char *dataset_id,
                                 const uint8_t dek[static SL_KMS_DEK_LEN],
                                 uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
/* The DEK unwrapped and sealed to eph_pub, in the key process: what the
 * release hands out. */
SL_MUST_USE sl_err kmsd_kek_unwrap_seal(kmsd_kek *k, const char *id, const char *dataset_id,
                                        const uint8_t *wrapped, size_t len,
                                        const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                        uint8_t sealed[static KMSD_SEALED_LEN]);
/* A fresh random DEK made in the key process, returned only wrapped (for
 * the output's manifest) and sealed to eph_pub (for the job): no DEK is
 * ever in the network process. */
SL_MUST_USE sl_err kmsd_kek_new_sealed(kmsd_kek *k, const char *id, const char *dataset_id,
                                       const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                       uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                       size_t *wrapped_len, uint8_t sealed[static KMSD_SEALED_LEN]);

/* The key process's client half (kek_client.c). attach takes the ends that
 * kmsd_keyproc_spawn (kms/keys/) made and reads the first answer (whether
 * the key process could open its keys); on failure it closes them and
 * waits for the monitor. */
SL_MUST_USE sl_err kmsd_keyproc_attach(int *near, unsigned channels, int status_fd, pid_t pid,
                                       kmsd_keyproc **out);
void kmsd_keyproc_stop(kmsd_keyproc *kp);
pid_t kmsd_keyproc_pid(const kmsd_keyproc *kp);
/* Whether a key process serves now (false while it is restarted). */
bool kmsd_keyproc_up(const kmsd_keyproc *kp);
/* Calls fn from a thread of its own: state 0 the key process pid died
 * (status: its wait status) and is restarted, 1 it was restarted as pid,
 * -1 it ended and is not restarted (status 0: the service stops). */
SL_MUST_USE sl_err kmsd_keyproc_watch(kmsd_keyproc *kp,
                                      void (*fn)(void *arg, int state, int pid, int status),
                                      void *arg);

/* ---- request parsers (parse.c): pure functions over untrusted bytes ---- */

#define KMSD_MAX_KEYS 64
#define KMSD_MAX_EVIDENCE 8
#define KMSD_MAX_JOB 16384 /* bytes of compact JSON in a release's "job" */

typedef struct kmsd_key_entry {
	char key_id[SL_KMS_ID_MAX + 1];
	char dataset_id[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
	size_t wrapped_len;
} kmsd_key_entry;

/* An output key asked for: in a release (the launch's one request), a
 * renewal, or the compatibility path POST /v1/output. */
#define KMSD_MAX_OUTPUTS 16
#define KMSD_DEST_MAX 2048
typedef struct kmsd_output_entry {
	char output_id[SL_KMS_DATASET_ID_MAX + 1];
	char destination[KMSD_DEST_MAX + 1];
	char key_id[SL_KMS_ID_MAX + 1]; /* "" when the client names none */
} kmsd_output_entry;

typedef struct kmsd_release_req {
	json_t *root; /* owns evidence/identity/job */
	uint8_t nonce[SL_NONCE_LEN];
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	uint8_t policy_digest[SL_SHA256_LEN];
	json_t *evidence; /* borrowed from root: array of objects */
	json_t *identity; /* array (maybe empty) */
	json_t *job;      /* object (maybe empty) */
	size_t nkeys;
	kmsd_key_entry keys[KMSD_MAX_KEYS];
	size_t noutputs; /* "outputs": fresh output keys (0: none) */
	kmsd_output_entry outputs[KMSD_MAX_OUTPUTS];
} kmsd_release_req;

/* Each fails with SL_E_INPUT naming the field. */
SL_MUST_USE sl_err kmsd_parse_challenge(const uint8_t *body, size_t len);
SL_MUST_USE sl_err kmsd_parse_release(const uint8_t *body, size_t len, kmsd_release_req **out);
void kmsd_release_req_free(kmsd_release_req *r);
/* POST /v1/output (handlers_output.c): the attested part of a release (nkeys
 * 0, noutputs 0), the job's input dataset ids, and each output asked for. */
typedef struct kmsd_output_req {
	kmsd_release_req *att;
	size_t ninputs;
	char inputs[KMSD_MAX_KEYS][SL_KMS_DATASET_ID_MAX + 1];
	size_t noutputs;
	kmsd_output_entry outputs[KMSD_MAX_OUTPUTS];
} kmsd_output_req;
SL_MUST_USE sl_err kmsd_parse_output(const uint8_t *body, size_t len, kmsd_output_req **out);
void kmsd_output_req_free(kmsd_output_req *r);
SL_MUST_USE sl_err kmsd_parse_key_create(const uint8_t *body, size_t len,
                                         char id[static SL_KMS_ID_MAX + 1]);
SL_MUST_USE sl_err kmsd_parse_wrap(const uint8_t *body, size_t len,
                                   char dataset_id[static SL_KMS_DATASET_ID_MAX + 1],
                                   sl_secret **dek);

typedef struct kmsd_enroll_req {
	uint8_t *ek_pub; /* TPM2B_PUBLIC bytes */
	size_t ek_pub_len;
	uint8_t *ek_cert; /* DER, NULL when absent */
	size_t ek_cert_len;
	uint8_t *ak_pub; /* TPM2B_PUBLIC bytes */
	size_t ak_pub_len;
	bool has_token; /* an admin-issued enrollment token came with it */
	char enroll_token[129];
} kmsd_enroll_req;
SL_MUST_USE sl_err kmsd_parse_enroll(const uint8_t *body, size_t len, kmsd_enroll_req *out);
void kmsd_enroll_req_clear(kmsd_enroll_req *r);

typedef struct kmsd_activate_req {
	uint8_t session[16];
	sl_secret *secret; /* the activated credential */
} kmsd_activate_req;
SL_MUST_USE sl_err kmsd_parse_activate(const uint8_t *body, size_t len, kmsd_activate_req *out);

/* parse_admin.c: {} or {"force": bool}; {"dataset_id", "wrapped_dek"}. */
SL_MUST_USE sl_err kmsd_parse_key_action(const uint8_t *body, size_t len, bool *force);
/* POST /v1/aks/revoke {"name": HEX}: the AK's TPM name (1..KMSD_AK_NAME_MAX
 * bytes) and its hex; SL_E_INPUT otherwise. */
SL_MUST_USE sl_err kmsd_parse_ak_revoke(const uint8_t *body, size_t len,
                                        uint8_t name[static KMSD_AK_NAME_MAX], size_t *nlen,
                                        char hex[static 2 * KMSD_AK_NAME_MAX + 1]);
/* POST /v1/eks/readmit {"ek_sha256": HEX}: the EK's digest (as enroll list
 * shows it) and its canonical lower-case hex. */
SL_MUST_USE sl_err kmsd_parse_ek_readmit(const uint8_t *body, size_t len, uint8_t ek[static 32],
                                         char hex[static 65]);
/* POST /v1/enroll/tokens {} or {"ttl_s": N}: the token's lifetime in
 * seconds (default one hour, at most a week); SL_E_INPUT naming the field. */
#define KMSD_ETOKEN_TTL_DEFAULT 3600
#define KMSD_ETOKEN_TTL_MAX 604800
SL_MUST_USE sl_err kmsd_parse_enroll_token(const uint8_t *body, size_t len, int64_t *ttl_s);
SL_MUST_USE sl_err kmsd_parse_rewrap(const uint8_t *body, size_t len,
                                     char dataset_id[static SL_KMS_DATASET_ID_MAX + 1],
                                     uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                     size_t *wrapped_len);
/* POST /v1/keys {"id", "aws_key_id"?}: aws_key_id "" when absent. */
#define KMSD_AWS_KEY_ID_MAX KMSD_KEK_WRAPPED_MAX
SL_MUST_USE sl_err kmsd_parse_key_create_aws(const uint8_t *body, size_t len,
                                             char id[static SL_KMS_ID_MAX + 1],
                                             char aws_key_id[static KMSD_AWS_KEY_ID_MAX + 1]);

/* ---- metrics (metrics.c) ---------------------------------------------- */

enum kmsd_route {
	KMSD_R_CHALLENGE,
	KMSD_R_RELEASE,
	KMSD_R_OUTPUT,
	KMSD_R_ENROLL,
	KMSD_R_ACTIVATE,
	KMSD_R_KEYS,
	KMSD_R_WRAP,
	KMSD_R_HEALTH,
	KMSD_R_METRICS,
	KMSD_R_RENEW,
	KMSD_R_AKS,
	KMSD_R_OTHER,
	KMSD_R__COUNT
};

/* Denial reason codes: the "code" of each reason in a 403 and a metrics label. */
#define KMSD_DENIALS(X)                                                                            \
	X(NONCE_UNKNOWN, "nonce_unknown")                                                          \
	X(NONCE_USED, "nonce_reused")                                                              \
	X(NONCE_EXPIRED, "nonce_expired")                                                          \
	X(POLICY_DIGEST, "policy_digest_mismatch")                                                 \
	X(EVIDENCE, "evidence_invalid")                                                            \
	X(IDENTITY, "identity_invalid")                                                            \
	X(BINDING, "binding_mismatch")                                                             \
	X(AK_UNKNOWN, "ak_not_enrolled")                                                           \
	X(AK_REVOKED, "ak_revoked")                                                                \
	X(POLICY, "policy_denied")                                                                 \
	X(KEY_UNKNOWN, "key_unknown")                                                              \
	X(KEY_DISABLED, "key_disabled")                                                            \
	X(UNWRAP, "unwrap_failed")                                                                 \
	X(RATE_LIMITED, "rate_limited")                                                            \
	X(OUTPUT_RUN, "output_run_mismatch")

#define KMSD_DENIAL_ENUM_(n, s) KMSD_D_##n,
enum kmsd_denial { KMSD_DENIALS(KMSD_DENIAL_ENUM_) KMSD_D__COUNT };
#undef KMSD_DENIAL_ENUM_
const char *kmsd_denial_code(enum kmsd_denial d);

typedef struct kmsd_metrics kmsd_metrics;
SL_MUST_USE sl_err kmsd_metrics_new(kmsd_metrics **out);
void kmsd_metrics_free(kmsd_metrics *m);
void kmsd_metrics_request(kmsd_metrics *m, enum kmsd_route r, unsigned status, uint64_t ns);
void kmsd_metrics_release(kmsd_metrics *m, size_t nkeys);
void kmsd_metrics_denial(kmsd_metrics *m, enum kmsd_denial d);
/* Counters of work done and not done (docs/seclaunchd.md, Metrics). */
enum kmsd_counter {
	KMSD_C_EVIDENCE_VERIFIED, /* evidence items handed to a verifier */
	KMSD_C_AUDIT_AGGREGATED,  /* refusals counted into a summary record */
	KMSD_C_AUDIT_UNRECORDED,  /* decisions answered 503: no record could be written */
	KMSD_C__COUNT
};
void kmsd_metrics_count(kmsd_metrics *m, enum kmsd_counter c);
/* Prometheus text exposition (malloc'd). */
SL_MUST_USE sl_err kmsd_metrics_render(kmsd_metrics *m, size_t challenges, size_t aks, size_t keys,
                                       char **out);

/* ---- the service (server.c, handlers_*.c) ----------------------------- */

struct sl_audit;
struct sl_policy;

/* ---- refusals per source (refusals.c) ----------------------------------
 * A token bucket per client address, charged by refused releases
 * (rate_per_min tokens, refilled evenly), and the audit aggregation of cheap
 * refusals: per source and reason, the first in each window is written in
 * full, later ones are counted and written as one summary record when the
 * window closes (docs/audit.md, Aggregated refusals). Memory is bounded. */
typedef struct kmsd_refusals kmsd_refusals;
SL_MUST_USE sl_err kmsd_refusals_new(unsigned rate_per_min, unsigned window_s, kmsd_refusals **out);
void kmsd_refusals_free(kmsd_refusals *t);
/* false when the source has no token left; *retry_after_s: when one is back. */
bool kmsd_refusals_admit(kmsd_refusals *t, const char *source, unsigned *retry_after_s);
/* Takes one token from the source. */
void kmsd_refusals_charge(kmsd_refusals *t, const char *source);
/* true: write this refusal in full now; false: it was counted (a summary
 * follows). reason is a denial code (kmsd_denial_code). */
bool kmsd_refusals_note(kmsd_refusals *t, const char *source, const char *reason);
/* The same for a refused lease renewal or output-key request (event
 * SL_AUDIT_EV_RENEW / SL_AUDIT_EV_OUTPUT: a window of its own, and the
 * summary is a record of that event); kmsd_refusals_note is for releases. */
bool kmsd_refusals_note_event(kmsd_refusals *t, const char *source, const char *event,
                              const char *reason);
/* Summaries whose window closed (all pending ones when force), as a JSON
 * array of {"source","reason","count","first","last","window_s"}; NULL when
 * none. The caller writes them, or hands them back with _putback. */
json_t *kmsd_refusals_take(kmsd_refusals *t, bool force);
void kmsd_refusals_putback(kmsd_refusals *t, json_t *summaries);
/* Whether the last audit write succeeded (a counted refusal is only answered
 * 403 while the log is writable). */
void kmsd_refusals_audit_state(kmsd_refusals *t, bool ok);
bool kmsd_refusals_audit_ok(kmsd_refusals *t);

/* Bearer-token scopes (routes.c): each a token file of its own; admin holds
 * every scope. */
enum kmsd_scope {
	KMSD_SCOPE_METRICS, /* GET /metrics */
	KMSD_SCOPE_WRAP,    /* data owners: wrap and rewrap DEKs, read keys */
	KMSD_SCOPE_OPERATE, /* enrollment tokens, AK list and revoke */
	KMSD_SCOPE_ADMIN,   /* the key lifecycle, and everything above */
	KMSD_SCOPE__COUNT
};
const char *kmsd_scope_name(enum kmsd_scope s);

/* What the server asks of the daemon's live configuration (kms/daemon/
 * reload.c), handed down in the context so that kms/http/ calls nothing
 * above it: enter fills req with base and the generation of config and
 * policy in force, held until leave; reload is SIGHUP's. */
typedef struct kmsd_gen kmsd_gen;
struct kmsd_ctx;
typedef struct kmsd_live_ops {
	kmsd_gen *(*enter)(const struct kmsd_ctx *base, struct kmsd_ctx *req);
	void (*leave)(kmsd_gen *g);
	void (*reload)(struct kmsd_ctx *ctx);
} kmsd_live_ops;

typedef struct kmsd_ctx {
	const kmsd_config *cfg;
	kmsd_kek *kek;
	kmsd_nonces *nonces;
	kmsd_registry *registry;
	kmsd_metrics *metrics;
	struct sl_audit *audit;
	struct sl_policy *policy;
	struct kmsd_store *store;
	kmsd_keyproc *keyproc;       /* the KEK process (NULL in unit tests: in-process KEKs) */
	const kmsd_live_ops *live;   /* NULL: cfg and policy here are the ones in force */
	kmsd_refusals *refusals;     /* NULL: no rate limit, every refusal in full */
	kmsd_refusals *enroll_limit; /* /v1/enroll requests per source; NULL: none */
	/* the SHA-256 of each scope's token (the tokens themselves are not
	 * kept); token_set: that scope has a token of its own */
	uint8_t token_sha256[KMSD_SCOPE__COUNT][32];
	bool token_set[KMSD_SCOPE__COUNT];
} kmsd_ctx;

/* The output keys asked for (handlers_output.c), for a release, a renewal
 * and POST /v1/output alike: each output id is NAME:RUN with RUN job.id;
 * the policy names its KEK, which is usable; the output id's rules and
 * every input's (inputs: the dataset ids read) allow this machine and the
 * destination; the run is bound to this attested subject (output_runs).
 * keys[i] is the KEK of outputs[i]; *ttl lowered to the smallest key_ttl
 * (0: none yet); *store_failed when the store could not answer. */
typedef struct kmsd_outputs_ask {
	const json_t *job;
	const char *const *inputs;
	size_t ninputs;
	const kmsd_output_entry *outputs;
	size_t noutputs;
} kmsd_outputs_ask;
void kmsd_outputs_judge(kmsd_ctx *ctx, const kmsd_outputs_ask *a, json_t *reasons,
                        const sl_claims *claims, const char *keys[], uint64_t *ttl,
                        bool *store_failed);
/* A fresh DEK per output, made, wrapped and sealed to eph_pub in the key
 * process, appended to out as {"output_id", "key_id", "wrapped_dek",
 * "sealed"}; false (reasons appended) when one fails. */
bool kmsd_outputs_issue(kmsd_ctx *ctx, const kmsd_outputs_ask *a, const char *const keys[],
                        const uint8_t eph_pub[static SL_EPH_PUB_LEN], json_t *reasons, json_t *out);
/* The outputs of a request as audit records list them. */
json_t *kmsd_outputs_json(const kmsd_outputs_ask *a, const char *const keys[]);

typedef struct kmsd_request {
	const char *method;
	const char *path;
	const uint8_t *body;
	size_t len;
	const char *authorization; /* NULL when absent */
	const char *source;        /* client address ("127.0.0.1"), NULL when unknown */
} kmsd_request;

typedef struct kmsd_response {
	unsigned status;
	json_t *json;         /* body (owned); problem JSON for errors */
	char *text;           /* or a text body (owned, metrics) */
	bool problem;         /* content type application/problem+json */
	unsigned retry_after; /* seconds for Retry-After on 429/503 (0: 1) */
} kmsd_response;

/* Sets an RFC 7807 problem body: type "urn:seclaunch:kms:<slug>". reasons
 * (stolen, may be NULL) becomes "reasons". */
void kmsd_problem(kmsd_response *res, unsigned status, const char *slug, const char *title,
                  const char *detail, json_t *reasons);
/* 400 from a parser error (the detail names the field). */
void kmsd_bad_request(kmsd_response *res);
/* Reads every configured token file (sl_secret_read_token) into ctx; two
 * scopes holding the same token is a configuration error naming both. */
struct kmsd_config;
SL_MUST_USE sl_err kmsd_tokens_load(kmsd_ctx *ctx, const kmsd_config *c);
/* Whether the request's bearer token has scope need (the admin token has
 * every scope), compared in constant time against every configured token.
 * false: 401 (no token, or not one of seclaunchd's) or 403 naming the
 * token's scope and what `what` ("POST /v1/keys/{id}/delete") needs; the
 * refusal is recorded as event (key_id: NULL or a valid key id), and the
 * answer is 503 when that record cannot be written. */
bool kmsd_authorize(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                    enum kmsd_scope need, const char *what, const char *event, const char *key_id);
/* Appends an audit record; false (and the failure on stderr) when it could not
 * be written. An answer that grants something (keys released, a DEK wrapped, a
 * key created, an AK enrolled) is sent only when its record was written:
 * callers answer kmsd_audit_failed() otherwise. reasons is borrowed; details
 * is stolen. Without an audit log (unit tests) it records nothing, true. */
bool kmsd_audit(kmsd_ctx *ctx, const char *event, const char *key_id, const char *dataset_id,
                const char *decision, json_t *reasons, const char *claims_digest, json_t *details);
/* kmsd_audit with the record's top-level job_id (the release's job.id). */
bool kmsd_audit_job(kmsd_ctx *ctx, const char *event, const char *job_id, const char *key_id,
                    const char *dataset_id, const char *decision, json_t *reasons,
                    const char *claims_digest, json_t *details);
/* 503: the decision (grant or refusal) was not recorded, so it is not
 * given; the client may retry. */
void kmsd_audit_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what);
/* 429 before the body is read when req's source has no refusal token left
 * (kmsd_refusals_admit), the refusal recorded as `event` (in full, or
 * counted); what names the request ("lease renewal"). true: answered. */
bool kmsd_refusal_limited(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                          const char *event, const char *what);
/* A refused attested request: takes a token from the source and records it
 * with write(arg), or counts it when it is cheap (decided before evidence
 * was verified) and one like it (event, code) was written in full in this
 * window. false: it could not be recorded (the caller answers 503). */
bool kmsd_refusal_record(kmsd_ctx *ctx, const char *source, const char *event, const char *code,
                         bool cheap, bool (*write)(void *), void *arg);
/* Writes the refusal summaries that are due (all when force: at stop);
 * false when one could not be written (they are kept for the next try). */
bool kmsd_flush_refusals(kmsd_ctx *ctx, bool force);

void kmsd_handle_challenge(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_release(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_output(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
typedef struct kmsd_attest_opts {
	bool check_digest;  /* refuse a policy_digest other than the one in force
	                     * (a release: version skew); false for a renewal,
	                     * judged by the policy in force now */
	bool *verified;     /* out: the evidence was looked at */
	bool *store_failed; /* out: the state store could not answer (503) */
} kmsd_attest_opts;
/* The attestation checks of a release, for the other attested operations
 * (handlers_output.c): nonce (consumed), policy digest, then (only when both
 * pass) every evidence item and identity document against the binding.
 * Reasons are appended to reasons as a release words them; claims are
 * filled; *verified says whether evidence was looked at. */
void kmsd_release_attest(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                         sl_claims *claims, const kmsd_attest_opts *o);
/* Each key of req as a release judges it: usable (not unknown, not
 * disabled) and allowed by the policy in force for these claims; reasons
 * appended, *ttl the smallest key_ttl (0: none), *store_failed when the state
 * store could not answer. */
void kmsd_release_judge(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                        sl_claims *claims, uint64_t *ttl, bool *store_failed);
void kmsd_handle_enroll(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_activate(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* POST /v1/enroll/tokens {"ttl_s"?} (admin): a single-use enrollment token. */
void kmsd_handle_enroll_token(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_key_create(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_wrap(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                      kmsd_response *res);
/* handlers_keys.c: GET /v1/keys, GET /v1/keys/{id}, POST
 * /v1/keys/{id}/{rotate|disable|enable|retire|delete|rewrap} (admin).
 * action: NULL for the key itself. */
void kmsd_handle_key_admin(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                           const char *action, kmsd_response *res);
/* handlers_renew.c: POST /v1/renew (a lease renewal: docs/protocol.md). */
void kmsd_handle_renew(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* handlers_aks.c: GET /v1/aks, POST /v1/aks/revoke (admin). */
void kmsd_handle_aks_list(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_aks_revoke(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_eks_readmit(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* The lease of an allowed release or renewal: {"ttl", "expires"} for the
 * smallest key_ttl of the decisions (ttl_s), NULL when there is none. */
json_t *kmsd_lease_json(uint64_t ttl_s);
void kmsd_handle_health(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_metrics(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);

/* 503 for a failure of the state store (the decision cannot be made or
 * kept: nothing is granted, nothing is recorded as refused). */
void kmsd_store_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what);

/* Routes one request (pure dispatch: used by the server and the fuzz target). */
enum kmsd_route kmsd_dispatch(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);

/* Runs the HTTPS server until SIGTERM/SIGINT; SIGHUP calls ctx->live->reload. */
SL_MUST_USE sl_err kmsd_serve(kmsd_ctx *ctx);
/* The limits a reload may change (max_body). */
void kmsd_server_set_limits(const kmsd_config *c);

#endif
