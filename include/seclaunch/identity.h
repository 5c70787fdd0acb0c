/* Cloud identity documents: region evidence that a provider signed.
 *
 * A region counts for policy only when it comes from a verified document:
 *   - GCP Confidential Space attestation token (PKI type: RS256 with an x5c
 *     chain to a pinned root; fresh when eat_nonce holds hex(binding)).
 *   - GCP instance identity token (JWT, RS256) from the metadata server,
 *     requested with audience = hex(binding) and format=full, verified against
 *     Google's signing keys from a local JWKS cache file; iss, aud, exp/iat
 *     checked with bounded skew. Fresh and bound when aud == hex(binding).
 *   - AWS instance identity document with its PKCS7 signature (or the base64
 *     RSA-SHA256 "signature" form), verified against the AWS certificates in
 *     a trust directory. It carries no nonce: cloud.identity_fresh=false.
 *   - An unsigned region (--region CLOUD:REGION): cloud.region_verified=false;
 *     counts only when the policy says allow_unverified_region.
 *
 * Claims added (docs/policy.md):
 *   cloud.provider          "gcp" | "aws"
 *   cloud.region            "europe-west4", "us-east-1" (GCP: zone minus its suffix)
 *   cloud.zone              "europe-west4-a", "us-east-1b" (when signed)
 *   cloud.region_verified   "true" | "false"
 *   cloud.identity_fresh    "true" (GCP, aud == binding) | "false"
 *   cloud.identity_kind     "gcp-jwt" | "aws-iid" | "unsigned"
 *   cloud.identity_iat      unix seconds the provider issued the document
 *                           (GCP iat; AWS pendingTime)
 *   cloud.project_id, cloud.project_number (GCP), cloud.account_id (AWS),
 *   cloud.instance_id
 *   cloud.cs.dbgstat, cloud.cs.image_digest (GCP Confidential Space tokens)
 *
 * The document as it travels (KMS release "identity" array, --cloud-identity
 * files) is a JSON object:
 *   {"kind": "gcp-jwt", "token": "<compact JWS>"}
 *   {"kind": "aws-iid", "document": "<the JSON text, exact bytes>",
 *    "pkcs7": "<base64 DER>"}          or  "signature": "<base64 RSA-SHA256>"
 *   {"kind": "unsigned", "region": "aws:eu-west-1"}
 */
#ifndef SECLAUNCH_IDENTITY_H
#define SECLAUNCH_IDENTITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/attest.h"
#include "seclaunch/error.h"

/* Largest identity document / token accepted. */
#define SL_IDENTITY_MAX_BYTES (64 * 1024)

typedef struct sl_identity_opts {
	/* GCP: JWKS file with Google's signing keys ({"keys":[{kty,n,e,kid,alg}]}). */
	const char *gcp_jwks;
	/* GCP: accepted issuers; NULL = "https://accounts.google.com" and "accounts.google.com". */
	const char *gcp_issuer;
	/* AWS: directory of PEM certificates (any *.pem: the DSA and RSA region certs). */
	const char *aws_trust_dir;
	/* Expected binding: GCP aud must equal its lower-case hex. NULL: aud is
	 * not checked and the claims say cloud.identity_fresh=false. */
	const uint8_t *binding;
	size_t binding_len;
	/* GCP Confidential Space tokens (PKI type, x5c chain in the header): the
	 * pinned root certificate file (PEM), e.g. "Confidential Space Root CA".
	 * NULL: such tokens are refused. */
	const char *gcp_cs_root;
	time_t at;       /* verification time; 0 = now */
	unsigned skew_s; /* allowed clock skew for iat/exp; 0 = 60 s */
} sl_identity_opts;

/* Verifies one identity document (the JSON form above) and adds its claims.
 * Errors: SL_E_ATTEST_FORMAT (malformed, naming the field), SL_E_ATTEST_SIG
 * (signature, wrong signer, kid not in JWKS, alg not RS256),
 * SL_E_ATTEST_BINDING (aud != binding), SL_E_ATTEST (expired, not yet
 * valid, wrong issuer), SL_E_IO (JWKS / trust dir unreadable). */
SL_MUST_USE sl_err sl_identity_verify(const json_t *doc, const sl_identity_opts *o,
                                      sl_claims *claims);
/* The two signed kinds directly. */
SL_MUST_USE sl_err sl_identity_verify_gcp_jwt(const char *token, size_t len,
                                              const sl_identity_opts *o, sl_claims *claims);
/* sig_b64 is either a base64 PKCS7 (pkcs7 true) or a base64 RSA-SHA256 signature. */
SL_MUST_USE sl_err sl_identity_verify_aws(const uint8_t *doc, size_t doc_len, const char *sig_b64,
                                          bool pkcs7, const sl_identity_opts *o, sl_claims *claims);
/* An unsigned "CLOUD:REGION" (e.g. "aws:eu-west-1"): provider, region,
 * region_verified=false, identity_fresh=false, identity_kind=unsigned.
 * SL_E_INPUT when not of that shape. */
SL_MUST_USE sl_err sl_identity_unsigned_region(const char *cloud_region, sl_claims *claims);
/* The JSON form of an unsigned region (new reference). */
SL_MUST_USE sl_err sl_identity_unsigned_doc(const char *cloud_region, json_t **out);

/* Reads a document collected earlier (--cloud-identity FILE): the JSON form
 * above, or a bare GCP JWT text. */
SL_MUST_USE sl_err sl_identity_load_file(const char *path, json_t **out);

/* Collects a document from the metadata server over HTTP (short timeouts,
 * at most one retry). provider: "gcp", "aws" or "auto" (GCP first, then AWS).
 * GCP: GET {base}/computeMetadata/v1/instance/service-accounts/default/identity
 *      ?audience=<hex(binding)>&format=full with "Metadata-Flavor: Google".
 * AWS: PUT {base}/latest/api/token (IMDSv2), then GET
 *      {base}/latest/dynamic/instance-identity/document and .../pkcs7.
 * Base URLs: $SECLAUNCH_GCP_METADATA_URL (default http://metadata.google.internal),
 * $SECLAUNCH_AWS_METADATA_URL (default http://169.254.169.254).
 * SL_E_ATTEST when no metadata server answers. */
SL_MUST_USE sl_err sl_identity_collect(const char *provider, const uint8_t *binding,
                                       size_t binding_len, json_t **out);

#endif
