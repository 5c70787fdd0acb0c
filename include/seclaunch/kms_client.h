/* The KMS client: talks to seclaunchd (docs/protocol.md) over HTTPS.
 *
 * Transport: libcurl, TLS verified against a CA bundle (--kms-ca), optional
 * public-key pinning, connect and total timeouts, a response size cap, and
 * retries with exponential backoff and jitter for connection failures, 429
 * and 5xx only (a 4xx answer is final). Errors:
 *   SL_E_KMS_UNREACHABLE  no TLS connection could be made (after retries)
 *   SL_E_KMS_REFUSED      the server answered with an error status
 *   SL_E_KMS_PROTOCOL     the answer was not what the protocol says
 *   SL_E_POLICY_DENIED    a release was denied (403); the detail lists every
 *                         reason and sl_kms_last_problem() holds the problem JSON
 *   SL_E_ATTEST           the same, when a reason says the KMS did not accept the
 *                         evidence (sl_kms_refusal_code)
 * Every secret that comes back (DEKs) is opened straight into sl_secret.
 */
#ifndef SECLAUNCH_KMS_CLIENT_H
#define SECLAUNCH_KMS_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/error.h"
#include "seclaunch/kms.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

typedef struct sl_kms sl_kms;

typedef struct sl_kms_opts {
	const char *url;     /* "https://host:port" (no trailing path) */
	const char *ca_file; /* CA bundle for the server's certificate; NULL: system store */
	const char
	    *pinned_pubkey; /* curl pin: "sha256//BASE64[;...]" or a PEM/DER file; NULL: none */
	const char *admin_token_file;  /* admin calls only; read into secret memory (mode 0600) */
	const char *enroll_token_file; /* sl_kms_enroll: an admin-issued enrollment token (0600) */
	long connect_timeout_ms;       /* 0: 5000 */
	long total_timeout_ms;         /* per attempt; 0: 30000 */
	unsigned max_attempts;         /* 0: 4 (1 = no retry) */
	size_t max_response;           /* 0: 1 MiB */
} sl_kms_opts;

SL_MUST_USE sl_err sl_kms_new(const sl_kms_opts *o, sl_kms **out);
void sl_kms_free(sl_kms *k);

/* The problem JSON (RFC 7807) of the last error answer, or NULL. Borrowed;
 * valid until the next call on k. */
const json_t *sl_kms_last_problem(const sl_kms *k);

/* ---- key release ------------------------------------------------------ */

typedef struct sl_kms_challenge {
	uint8_t nonce[SL_NONCE_LEN];
	time_t expires;
	uint8_t policy_digest[SL_SHA256_LEN]; /* the policy seclaunchd enforces */
} sl_kms_challenge;

/* POST /v1/challenge. */
SL_MUST_USE sl_err sl_kms_challenge_get(sl_kms *k, sl_kms_challenge *out);

/* A fresh X25519 key pair for one release: pub is sent (and bound into the
 * evidence), *sk (SL_KMS_EPH_SK_LEN bytes) opens the sealed DEKs. */
SL_MUST_USE sl_err sl_kms_eph_keypair(uint8_t pub[static SL_EPH_PUB_LEN], sl_secret **sk);

typedef struct sl_kms_key_req {
	const char *key_id;
	const char *dataset_id;
	const uint8_t *wrapped_dek;
	size_t wrapped_dek_len;
} sl_kms_key_req;

typedef struct sl_kms_output_want {
	const char *output_id;   /* the output's dataset id */
	const char *destination; /* where it is written (the URL the policy matches) */
	const char *key_id;      /* NULL: the KEK the policy names for output_id */
} sl_kms_output_want;

typedef struct sl_kms_output_key {
	char key_id[SL_KMS_ID_MAX + 1];
	uint8_t wrapped_dek[SL_KMS_WRAPPED_DEK_MAX]; /* goes into the output's manifest */
	size_t wrapped_dek_len;
	sl_secret *dek; /* SL_KMS_DEK_LEN bytes; the caller frees */
} sl_kms_output_key;

typedef struct sl_kms_release_req {
	const uint8_t *nonce;         /* SL_NONCE_LEN, from the challenge */
	const uint8_t *eph_pub;       /* SL_EPH_PUB_LEN */
	const uint8_t *policy_digest; /* SL_SHA256_LEN, the one in the binding */
	const json_t *evidence;       /* array of evidence objects (as `seclaunch attest` writes) */
	const json_t *identity;       /* array of cloud identity documents; NULL: [] */
	const json_t *job;            /* object describing the job; NULL: {} */
	const sl_kms_key_req *keys;
	size_t nkeys; /* 0..64 (0 only with outputs) */
	/* output keys asked for in the same request (docs/protocol.md): a
	 * fresh DEK each, under the lease of the keys */
	const sl_kms_output_want *outputs;
	size_t noutputs;             /* 0..16 */
	sl_kms_output_key *out_keys; /* release: filled on success (noutputs entries) */
} sl_kms_release_req;

/* POST /v1/release. On success deks[i] (SL_KMS_DEK_LEN bytes, secret memory)
 * is the DEK of req->keys[i], opened with eph_sk, and req->out_keys[i] the
 * output key of req->outputs[i]; the caller frees each. All or nothing: on
 * error no deks[i] nor out_keys[i].dek is set. */
SL_MUST_USE sl_err sl_kms_release(sl_kms *k, const sl_kms_release_req *req, sl_secret *eph_sk,
                                  sl_secret *deks[]);

/* The lease of the last successful release ({"ttl", "expires_unix",
 * "expires"}), NULL when the answer carried none (no key_ttl). Borrowed. */
const json_t *sl_kms_last_lease(const sl_kms *k);

/* POST /v1/renew (docs/protocol.md, Leases): req as for a release (fresh
 * nonce, an eph_pub that opens nothing, fresh evidence); no key comes back.
 * *lease: the new lease (new reference), or NULL when the policy in force
 * sets no key_ttl any more. A refusal is SL_E_POLICY_DENIED / SL_E_ATTEST as
 * for a release (the problem in sl_kms_last_problem). */
SL_MUST_USE sl_err sl_kms_renew(sl_kms *k, const sl_kms_release_req *req, json_t **lease);

/* ---- admin: enrolled AKs (GET /v1/aks, POST /v1/aks/revoke) ------------ */
/* *aks: the answer, {"aks": [...], "revoked_eks": [...]} ("aks" checked to
 * be an array; "revoked_eks" absent from servers before it). */
SL_MUST_USE sl_err sl_kms_aks_list(sl_kms *k, json_t **aks);
SL_MUST_USE sl_err sl_kms_ak_revoke(sl_kms *k, const char *name_hex, bool *already);
/* POST /v1/eks/readmit: a revoked machine (its EK's SHA-256, hex) may
 * enroll and release again. */
SL_MUST_USE sl_err sl_kms_ek_readmit(sl_kms *k, const char *ek_hex);

/* ---- output keys ------------------------------------------------------- */

typedef struct sl_kms_output_req {
	const uint8_t *nonce, *eph_pub, *policy_digest; /* as a release */
	const json_t *evidence, *identity, *job;
	const char *const *inputs; /* the job's input dataset ids */
	size_t ninputs;
	const sl_kms_output_want *outputs;
	size_t noutputs; /* 1..16 */
} sl_kms_output_req;

/* POST /v1/output (the compatibility path; a run asks for its output keys
 * in its release): a fresh DEK for each output, wrapped under the KEK the
 * policy names (keys[i].wrapped_dek) and opened with eph_sk (keys[i].dek).
 * Errors as a release (a 403 is SL_E_POLICY_DENIED or SL_E_ATTEST). All or
 * nothing. */
SL_MUST_USE sl_err sl_kms_output(sl_kms *k, const sl_kms_output_req *req, sl_secret *eph_sk,
                                 sl_kms_output_key keys[]);

/* ---- enrollment (TPM credential activation) ---------------------------- */

/* POST /v1/enroll + /v1/enroll/activate with the TPM at tcti (NULL: default):
 * sends EK public (+ EK certificate when the TPM has one) and AK public,
 * answers the MakeCredential challenge with ActivateCredential. On success
 * *ak_name_hex (malloc'd) is the enrolled AK's TPM name. */
SL_MUST_USE sl_err sl_kms_enroll(sl_kms *k, const char *tcti, char **ak_name_hex);

/* ---- admin (Bearer admin token) --------------------------------------- */

/* POST /v1/keys {"id"}: creates a KEK. An existing id fails (SL_E_KMS_REFUSED, 409).
 * aws_key_id (an AWS KMS key id, ARN or alias; NULL: none) adopts that AWS
 * key (seclaunchd's kek_backend "aws-kms"). */
SL_MUST_USE sl_err sl_kms_key_create_aws(sl_kms *k, const char *key_id, const char *aws_key_id);

/* POST /v1/keys/{id}/wrap: wraps dek (SL_KMS_DEK_LEN) for dataset_id; *wrapped
 * (malloc'd, *wrapped_len bytes) goes into the SLD header. */
SL_MUST_USE sl_err sl_kms_wrap(sl_kms *k, const char *key_id, const char *dataset_id,
                               sl_secret *dek, uint8_t **wrapped, size_t *wrapped_len);

/* The one mapping from a KMS refusal (403 with reasons) to an error code,
 * so every command exits alike: a reason about the machine's evidence
 * (evidence_invalid, binding_mismatch, ak_not_enrolled, identity_invalid) is
 * an attestation failure, SL_E_ATTEST (exit 3); any other reason is a policy
 * denial, SL_E_POLICY_DENIED (exit 4). docs/exit-codes.md lists them. */
sl_err sl_kms_refusal_code(const json_t *reasons);

#endif
