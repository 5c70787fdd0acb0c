/* Client side of enrollment: material for the KMS, TPM2_ActivateCredential. */
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_mu.h>

#include "tpm2_int.h"

sl_err sl_tpm2_alg_parse(const char *s, sl_tpm2_alg *out)
{
	if (s != NULL && strcmp(s, "rsa") == 0)
		*out = SL_TPM2_ALG_RSA;
	else if (s != NULL && strcmp(s, "ecc") == 0)
		*out = SL_TPM2_ALG_ECC;
	else
		return sl_err_set(SL_E_USAGE, "key algorithm '%.16s': want rsa or ecc",
		                  s != NULL ? s : "");
	return SL_OK;
}

void sl_tpm2_material_free(sl_tpm2_material *m)
{
	if (m == NULL)
		return;
	free(m->ek_public);
	free(m->ek_cert);
	free(m->ak_public);
	memset(m, 0, sizeof(*m));
}

sl_err sl_tpm2_enrollment_material(const sl_tpm2_key_opts *o, sl_tpm2_material *out)
{
	sl_err rc = SL_E_TPM;
	sl_tpm2_conn c = {0};
	ESYS_TR ek = ESYS_TR_NONE, ak = ESYS_TR_NONE;
	TPM2B_PUBLIC *ek_pub = NULL, *ak_pub = NULL;
	uint32_t nv =
	    o->ek_alg == SL_TPM2_ALG_ECC ? SL_TPM2_NV_EK_CERT_ECC : SL_TPM2_NV_EK_CERT_RSA;

	memset(out, 0, sizeof(*out));
	SL_GUARD(sl_tpm2_connect(o->tcti, &c));
	SL_GUARD(sl_tpm2_ak_load(&c, o, true, &ak, &ak_pub, &out->ak_handle));
	SL_GUARD(sl_tpm2_ek_create(&c, o->ek_alg, &ek, &ek_pub));
	SL_GUARD(sl_tpm2_marshal_public(ek_pub, &out->ek_public, &out->ek_public_len));
	SL_GUARD(sl_tpm2_marshal_public(ak_pub, &out->ak_public, &out->ak_public_len));
	SL_GUARD(sl_tpm2_tpmt_name(&ak_pub->publicArea, out->ak_name, &out->ak_name_len));
	SL_GUARD(sl_tpm2_nv_read(&c, nv, &out->ek_cert, &out->ek_cert_len));
	rc = SL_OK;
out:
	if (ek != ESYS_TR_NONE)
		(void)Esys_FlushContext(c.esys, ek);
	if (ak != ESYS_TR_NONE)
		(void)Esys_TR_Close(c.esys, &ak);
	Esys_Free(ek_pub);
	Esys_Free(ak_pub);
	sl_tpm2_disconnect(&c);
	if (rc != SL_OK)
		sl_tpm2_material_free(out);
	return rc;
}

sl_err sl_tpm2_activate_credential(const sl_tpm2_key_opts *o, const uint8_t *cred_blob,
                                   size_t cred_blob_len, const uint8_t *enc_secret,
                                   size_t enc_secret_len, sl_secret **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_tpm2_conn c = {0};
	ESYS_TR ek = ESYS_TR_NONE, ak = ESYS_TR_NONE, session = ESYS_TR_NONE, enc = ESYS_TR_NONE;
	TPMT_SYM_DEF sym = {
	    .algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
	TPM2B_PUBLIC *ek_pub = NULL, *ak_pub = NULL;
	TPM2B_ID_OBJECT blob;
	TPM2B_ENCRYPTED_SECRET secret;
	TPM2B_DIGEST *cert = NULL;
	size_t off = 0;
	uint32_t handle;
	uint32_t trc;

	*out = NULL;
	SL_GUARD_TSS(Tss2_MU_TPM2B_ID_OBJECT_Unmarshal(cred_blob, cred_blob_len, &off, &blob),
	             SL_E_ATTEST_FORMAT, "credential blob: malformed TPM2B_ID_OBJECT");
	SL_ENSURE(off == cred_blob_len, SL_E_ATTEST_FORMAT, "credential blob: trailing bytes");
	off = 0;
	SL_GUARD_TSS(
	    Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal(enc_secret, enc_secret_len, &off, &secret),
	    SL_E_ATTEST_FORMAT, "encrypted secret: malformed TPM2B_ENCRYPTED_SECRET");
	SL_ENSURE(off == enc_secret_len, SL_E_ATTEST_FORMAT, "encrypted secret: trailing bytes");

	SL_GUARD(sl_tpm2_connect(o->tcti, &c));
	SL_GUARD(sl_tpm2_ak_load(&c, o, false, &ak, &ak_pub, &handle));
	SL_GUARD(sl_tpm2_ek_create(&c, o->ek_alg, &ek, &ek_pub));
	SL_GUARD(sl_tpm2_ek_session(&c, &session));
	/* The recovered credential is a secret on its way back from the TPM:
	 * an HMAC session salted to the EK encrypts that response parameter,
	 * so the bus (or whoever relays a vTPM's traffic) does not see it. */
	SL_GUARD_TSS(Esys_StartAuthSession(c.esys, ek, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
	                                   ESYS_TR_NONE, NULL, TPM2_SE_HMAC, &sym, TPM2_ALG_SHA256,
	                                   &enc),
	             SL_E_TPM, "starting the EK-salted session that encrypts the credential");
	SL_GUARD_TSS(Esys_TRSess_SetAttributes(
	                 c.esys, enc, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT, 0xff),
	             SL_E_TPM, "session attributes");
	trc = Esys_ActivateCredential(c.esys, ak, ek, ESYS_TR_PASSWORD, session, enc, &blob,
	                              &secret, &cert);
	if (trc != 0) {
		/* Integrity/decryption failures mean the blob was not made for this
		 * TPM's EK and this AK: an attestation failure, not a broken TPM. */
		uint32_t fmt1 = trc & 0xbf;
		/* libtpms answers an RSA seed that does not decrypt (OAEP made for
		 * another EK) with TPM_RC_FAILURE without entering failure mode. */
		bool bad_blob =
		    (trc & 0xffff0000u) == 0 &&
		    (trc == TPM2_RC_FAILURE ||
		     ((trc & TPM2_RC_FMT1) &&
		      (fmt1 == TPM2_RC_INTEGRITY || fmt1 == TPM2_RC_VALUE || fmt1 == TPM2_RC_SIZE ||
		       fmt1 == TPM2_RC_ECC_POINT || fmt1 == TPM2_RC_KEY)));
		rc = sl_err_tss(bad_blob ? SL_E_ATTEST : SL_E_TPM, trc,
		                "ActivateCredential with the AK at 0x%08x: the credential was not "
		                "made for this TPM's EK and AK",
		                handle);
		goto out;
	}
	SL_GUARD(sl_secret_from(cert->buffer, cert->size, out));
	rc = SL_OK;
out:
	if (cert != NULL)
		sl_wipe(cert->buffer, sizeof(cert->buffer));
	Esys_Free(cert);
	if (session != ESYS_TR_NONE)
		(void)Esys_FlushContext(c.esys, session);
	if (enc != ESYS_TR_NONE)
		(void)Esys_FlushContext(c.esys, enc);
	if (ek != ESYS_TR_NONE)
		(void)Esys_FlushContext(c.esys, ek);
	if (ak != ESYS_TR_NONE)
		(void)Esys_TR_Close(c.esys, &ak);
	Esys_Free(ek_pub);
	Esys_Free(ak_pub);
	sl_tpm2_disconnect(&c);
	return rc;
}
