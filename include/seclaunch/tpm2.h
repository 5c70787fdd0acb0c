/* TPM 2.0: the attestation key, enrollment material, credential activation.
 *
 * Client side (talks to a TPM through TPM2-TSS ESAPI; TCTI string from the
 * options, else $SECLAUNCH_TCTI, else "device:/dev/tpmrm0"):
 *   - the AK lives at a persistent handle so it is the same key on every
 *     invocation: created once under the EK (restricted signing key; RSA-2048
 *     RSASSA-SHA256 or ECC P-256 ECDSA-SHA256) and made persistent with
 *     TPM2_EvictControl. The EK itself is not persisted: it is recreated from
 *     the TCG EK template (creation is deterministic) and flushed after use.
 *   - enrollment material: EK public, EK certificate (from NV when present),
 *     AK public and AK name;
 *   - TPM2_ActivateCredential: recovers the secret a verifier sealed to this
 *     TPM's EK and this AK's name.
 * Every transient object is flushed on every path (no resource manager is
 * assumed: swtpm has none).
 *
 * Server side (software only, OpenSSL; no TPM needed):
 *   - the TPM name of a public area; the restricted-signing check of an AK;
 *   - TPM2_MakeCredential exactly as TPM 2.0 Part 1 section 24 describes
 *     (seed protected to the EK by RSA-OAEP label "IDENTITY" or ECDH + KDFe,
 *     KDFa-derived AES-128-CFB and HMAC keys, integrity HMAC);
 *   - EK certificate verification against a directory of CA certificates.
 *
 * Byte formats: a "TPM2B_PUBLIC" is the marshalled structure with its 2-byte
 * size prefix (what TPM2_ReadPublic returns and Tss2_MU_TPM2B_PUBLIC_Marshal
 * writes). A name is nameAlg (2 bytes, big-endian) || digest of the
 * marshalled TPMT_PUBLIC (for SHA-256: 34 bytes, starting 00 0b).
 */
#ifndef SECLAUNCH_TPM2_H
#define SECLAUNCH_TPM2_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/error.h"
#include "seclaunch/secret.h"

/* Default persistent handles of the AK (SECLAUNCH_AK_HANDLE overrides, hex). */
#define SL_TPM2_AK_HANDLE_RSA 0x81010002u
#define SL_TPM2_AK_HANDLE_ECC 0x81010003u
/* NV indices read for certificates (TCG EK Credential Profile; GCE vTPM AK). */
#define SL_TPM2_NV_EK_CERT_RSA 0x01c00002u
#define SL_TPM2_NV_EK_CERT_ECC 0x01c0000au
#define SL_TPM2_NV_AK_CERT_RSA 0x01c10000u
#define SL_TPM2_NV_AK_CERT_ECC 0x01c10002u

/* Largest name: 2-byte algorithm + SHA-512 digest. */
#define SL_TPM2_NAME_MAX 66
/* Credential (secret) sizes MakeCredential accepts: 1..32 bytes (the EK's
 * nameAlg is SHA-256, and the TPM refuses a credential longer than that). */
#define SL_TPM2_CREDENTIAL_MAX 32

typedef enum sl_tpm2_alg {
	SL_TPM2_ALG_RSA = 0, /* RSA-2048 */
	SL_TPM2_ALG_ECC = 1, /* NIST P-256 */
} sl_tpm2_alg;

/* "rsa" / "ecc" -> alg (SL_E_USAGE naming the word otherwise). */
SL_MUST_USE sl_err sl_tpm2_alg_parse(const char *s, sl_tpm2_alg *out);

typedef struct sl_tpm2_key_opts {
	const char *tcti;   /* NULL: $SECLAUNCH_TCTI, else device:/dev/tpmrm0 */
	sl_tpm2_alg ek_alg; /* TCG EK template (low range): RSA-2048 (default) or ECC P-256 */
	sl_tpm2_alg ak_alg; /* AK key type when the AK has to be created */
	uint32_t ak_handle; /* 0: $SECLAUNCH_AK_HANDLE, else the default for ak_alg */
} sl_tpm2_key_opts;

/* Everything the KMS needs to enroll this machine. All buffers malloc'd;
 * free with sl_tpm2_material_free. */
typedef struct sl_tpm2_material {
	uint8_t *ek_public; /* TPM2B_PUBLIC of the EK */
	size_t ek_public_len;
	uint8_t *ek_cert; /* DER from NV (SL_TPM2_NV_EK_CERT_*), NULL when absent */
	size_t ek_cert_len;
	uint8_t *ak_public; /* TPM2B_PUBLIC of the AK */
	size_t ak_public_len;
	uint8_t ak_name[SL_TPM2_NAME_MAX];
	size_t ak_name_len;
	uint32_t ak_handle; /* where the AK lives */
} sl_tpm2_material;

void sl_tpm2_material_free(sl_tpm2_material *m); /* frees the members, not m */

/* ---- client side (ESAPI) ---------------------------------------------- */

/* Makes sure the AK exists at its persistent handle (creating it under the EK
 * on first use) and returns the enrollment material. A key at the handle that
 * is not a restricted signing key of the requested type is an error
 * (SL_E_TPM naming the handle), never silently replaced. */
SL_MUST_USE sl_err sl_tpm2_enrollment_material(const sl_tpm2_key_opts *o, sl_tpm2_material *out);

/* TPM2_ActivateCredential with the AK (at its persistent handle, which must
 * exist: activation never creates an AK) and the EK
 * (recreated from o->ek_alg's template). cred_blob is a marshalled
 * TPM2B_ID_OBJECT and enc_secret a marshalled TPM2B_ENCRYPTED_SECRET, both
 * with their size prefix, as sl_tpm2_make_credential writes them. A blob made
 * for another TPM's EK or another AK fails with SL_E_ATTEST. */
SL_MUST_USE sl_err sl_tpm2_activate_credential(const sl_tpm2_key_opts *o, const uint8_t *cred_blob,
                                               size_t cred_blob_len, const uint8_t *enc_secret,
                                               size_t enc_secret_len, sl_secret **out);

/* ---- server side (software) ------------------------------------------- */

/* The name of a public area (TPM2B_PUBLIC bytes; trailing bytes rejected).
 * name must hold SL_TPM2_NAME_MAX bytes. */
SL_MUST_USE sl_err sl_tpm2_public_name(const uint8_t *pub, size_t pub_len,
                                       uint8_t name[static SL_TPM2_NAME_MAX], size_t *name_len);

/* OK when pub (TPM2B_PUBLIC) is a restricted signing key made inside a TPM:
 * fixedTPM, fixedParent, sensitiveDataOrigin, restricted and sign set,
 * decrypt clear; RSA-2048+ or ECC P-256/P-384. SL_E_ATTEST_UNTRUSTED naming
 * the missing attribute otherwise. */
SL_MUST_USE sl_err sl_tpm2_ak_check(const uint8_t *pub, size_t pub_len);

/* The public key of a TPM2B_PUBLIC as a PEM SubjectPublicKeyInfo (malloc'd,
 * NUL-terminated). */
SL_MUST_USE sl_err sl_tpm2_public_to_pem(const uint8_t *pub, size_t pub_len, char **pem);

/* TPM2_MakeCredential in software: protects credential (1..32 bytes) to the
 * EK (TPM2B_PUBLIC of a restricted decryption key: RSA -> OAEP-SHA256 label
 * "IDENTITY"; ECC -> ephemeral ECDH + KDFe) for the object named ak_name.
 * Outputs (malloc'd): a marshalled TPM2B_ID_OBJECT and a marshalled
 * TPM2B_ENCRYPTED_SECRET, the inputs of sl_tpm2_activate_credential (and of
 * TPM2_ActivateCredential). */
SL_MUST_USE sl_err sl_tpm2_make_credential(const uint8_t *ek_pub, size_t ek_pub_len,
                                           const uint8_t *ak_name, size_t ak_name_len,
                                           const uint8_t *credential, size_t credential_len,
                                           uint8_t **cred_blob, size_t *cred_blob_len,
                                           uint8_t **enc_secret, size_t *enc_secret_len);

/* Verifies an EK certificate (DER or PEM) against the CA certificates (PEM or
 * DER files) in ca_dir at time at (0 = now), and, when ek_pub is non-NULL,
 * that the certificate's key is that EK (TPM2B_PUBLIC). SL_OK, or
 * SL_E_ATTEST_CHAIN / SL_E_ATTEST_UNTRUSTED with the reason in the detail. */
SL_MUST_USE sl_err sl_tpm2_ek_cert_verify(const uint8_t *cert, size_t cert_len, const char *ca_dir,
                                          time_t at, const uint8_t *ek_pub, size_t ek_pub_len);

/* ---- tpm2-tools interoperability ------------------------------------ */

/* Writes a "tpm2" evidence object as the files tpm2_quote writes and
 * tpm2_checkquote reads: PREFIX.msg (TPMS_ATTEST), PREFIX.sig (TPMT_SIGNATURE,
 * "tss" format), PREFIX.pcrs (tpm2-tools' serialized PCR format: raw
 * TPML_PCR_SELECTION, a count, raw TPML_DIGESTs, little-endian), PREFIX.ak.pem
 * and PREFIX.ak.pub (TPM2B_PUBLIC). */
SL_MUST_USE sl_err sl_tpm2_tools_export(const json_t *ev, const char *prefix);
/* Builds a "tpm2" evidence object from tpm2_quote's -m/-s/-o files (-o in
 * the default serialized format) and the AK's public key: a TPM2B_PUBLIC
 * (tpm2_createak -u, tpm2_readpublic -o), a TPMT_PUBLIC, or a PEM or DER
 * SubjectPublicKeyInfo (tpm2_readpublic -f pem|der). *ak_format names the
 * form read: "tpm2b_public", "tpmt_public", "pem" or "der". */
SL_MUST_USE sl_err sl_tpm2_tools_import(const char *msg, const char *sig, const char *pcrs,
                                        const char *ak_public, json_t **ev, const char **ak_format);

#endif
