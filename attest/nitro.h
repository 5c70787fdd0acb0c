/* AWS Nitro Enclaves attestation documents (private to attest/).
 *
 * A document is a COSE_Sign1 (RFC 9052; untagged or with tag 18) over a CBOR
 * payload map, signed ES384 by the enclave's leaf certificate, which chains
 * through the payload's cabundle to the AWS Nitro Enclaves root G1
 * (docs/evidence-aws-nitro.md). The parser only checks the form: every size,
 * type and bound, nothing cryptographic. */
#ifndef SECLAUNCH_ATTEST_NITRO_H
#define SECLAUNCH_ATTEST_NITRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/attest.h"
#include "seclaunch/error.h"

#define SL_NITRO_DOC_MAX (32 * 1024) /* a real document is 4-6 KiB */
#define SL_NITRO_PCRS 32             /* PCR indexes 0..31 */
#define SL_NITRO_PCR_LEN 48          /* SHA-384 */
#define SL_NITRO_SIG_LEN 96          /* ECDSA P-384 r || s */
#define SL_NITRO_CABUNDLE_MAX 8
#define SL_NITRO_CERT_MAX 4096
#define SL_NITRO_FIELD_MAX 1024 /* nonce, user_data, public_key (NSM: <= 1024) */
#define SL_NITRO_MODULE_ID_MAX 256

/* Views into the decoded document (valid until sl_nitro_doc_free). */
typedef struct sl_nitro_bytes {
	const uint8_t *p;
	size_t len;
	bool present; /* false: absent or CBOR null */
} sl_nitro_bytes;

typedef struct sl_nitro_doc {
	sl_nitro_bytes protected_hdr; /* the serialized protected header (signed) */
	sl_nitro_bytes payload;       /* the serialized payload (signed) */
	const uint8_t *sig;           /* SL_NITRO_SIG_LEN bytes */
	char module_id[SL_NITRO_MODULE_ID_MAX + 1];
	uint64_t timestamp_ms;
	bool pcr_present[SL_NITRO_PCRS];
	const uint8_t *pcr[SL_NITRO_PCRS];
	sl_nitro_bytes certificate;
	sl_nitro_bytes cabundle[SL_NITRO_CABUNDLE_MAX];
	size_t ncabundle;
	sl_nitro_bytes public_key, user_data, nonce;
	void *cose_item, *payload_item; /* the decoded CBOR the views point into */
} sl_nitro_doc;

/* Parses a document (the whole buffer, nothing after it). On failure
 * nothing is left to free; on success free with sl_nitro_doc_free. */
SL_MUST_USE sl_err sl_nitro_doc_parse(const uint8_t *p, size_t len, sl_nitro_doc *d);
void sl_nitro_doc_free(sl_nitro_doc *d);

/* Verifies a document: form, certificate chain to the root whose DER SHA-256
 * is root_fp (the kind passes the pinned AWS root; tests pass others) at
 * o->at, the ES384 COSE signature, and the binding (the nonce field equals
 * o->expect exactly). Adds the claims. */
SL_MUST_USE sl_err sl_nitro_verify_doc(const uint8_t *p, size_t len,
                                       const uint8_t root_fp[static 32], const sl_verify_opts *o,
                                       sl_claims *claims);

/* The SHA-256 of the AWS Nitro Enclaves root G1 certificate (DER). */
extern const uint8_t sl_nitro_root_sha256[32];

#endif
