/* ESAPI plumbing: connection, the EK from its TCG template, the AK at its
 * persistent handle, NV reads. Transient objects and sessions are flushed on
 * every path: swtpm (and a bare /dev/tpm0) has no resource manager. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include "tpm2_int.h"

const char *sl_tpm2_tcti_string(const char *tcti)
{
	const char *env = getenv("SECLAUNCH_TCTI");
	if (tcti != NULL && *tcti != '\0')
		return tcti;
	if (env != NULL && *env != '\0')
		return env;
	return "device:/dev/tpmrm0";
}

sl_err sl_tpm2_connect(const char *tcti, sl_tpm2_conn *c)
{
	sl_err rc = SL_E_TPM;
	const char *conf = sl_tpm2_tcti_string(tcti);

	memset(c, 0, sizeof(*c));
	SL_GUARD_TSS(Tss2_TctiLdr_Initialize(conf, &c->tcti), SL_E_TPM, "opening TCTI '%s'", conf);
	SL_GUARD_TSS(Esys_Initialize(&c->esys, c->tcti, NULL), SL_E_TPM, "ESAPI on '%s'", conf);
	rc = SL_OK;
out:
	if (rc != SL_OK)
		sl_tpm2_disconnect(c);
	return rc;
}

void sl_tpm2_disconnect(sl_tpm2_conn *c)
{
	if (c->esys != NULL)
		Esys_Finalize(&c->esys);
	if (c->tcti != NULL)
		Tss2_TctiLdr_Finalize(&c->tcti);
	c->esys = NULL;
	c->tcti = NULL;
}

/* TCG EK Credential Profile 2.x, templates L-1 (RSA 2048) and L-2 (ECC
 * NIST P-256): their authPolicy is PolicySecret(TPM_RH_ENDORSEMENT). */
static const uint8_t ek_policy[32] = {
    0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
    0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
};

static void ek_template(sl_tpm2_alg alg, TPM2B_PUBLIC *t)
{
	TPMT_PUBLIC *p = &t->publicArea;

	memset(t, 0, sizeof(*t));
	p->nameAlg = TPM2_ALG_SHA256;
	p->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
	                      TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_ADMINWITHPOLICY |
	                      TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
	p->authPolicy.size = sizeof(ek_policy);
	memcpy(p->authPolicy.buffer, ek_policy, sizeof(ek_policy));
	if (alg == SL_TPM2_ALG_ECC) {
		p->type = TPM2_ALG_ECC;
		p->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
		p->parameters.eccDetail.symmetric.keyBits.aes = 128;
		p->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
		p->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
		p->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
		p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
		p->unique.ecc.x.size = 32;
		p->unique.ecc.y.size = 32;
	} else {
		p->type = TPM2_ALG_RSA;
		p->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_AES;
		p->parameters.rsaDetail.symmetric.keyBits.aes = 128;
		p->parameters.rsaDetail.symmetric.mode.aes = TPM2_ALG_CFB;
		p->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
		p->parameters.rsaDetail.keyBits = 2048;
		p->parameters.rsaDetail.exponent = 0;
		p->unique.rsa.size = 256;
	}
}

/* The AK: a restricted signing key, userWithAuth with an empty password. */
static void ak_template(sl_tpm2_alg alg, TPM2B_PUBLIC *t)
{
	TPMT_PUBLIC *p = &t->publicArea;

	memset(t, 0, sizeof(*t));
	p->nameAlg = TPM2_ALG_SHA256;
	p->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
	                      TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
	                      TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT;
	if (alg == SL_TPM2_ALG_ECC) {
		p->type = TPM2_ALG_ECC;
		p->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
		p->parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
		p->parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
		p->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
		p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
	} else {
		p->type = TPM2_ALG_RSA;
		p->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
		p->parameters.rsaDetail.scheme.scheme = TPM2_ALG_RSASSA;
		p->parameters.rsaDetail.scheme.details.rsassa.hashAlg = TPM2_ALG_SHA256;
		p->parameters.rsaDetail.keyBits = 2048;
	}
}

static void flush(sl_tpm2_conn *c, ESYS_TR *tr)
{
	if (*tr != ESYS_TR_NONE)
		(void)Esys_FlushContext(c->esys, *tr);
	*tr = ESYS_TR_NONE;
}

sl_err sl_tpm2_ek_create(sl_tpm2_conn *c, sl_tpm2_alg alg, ESYS_TR *ek, TPM2B_PUBLIC **ek_pub)
{
	sl_err rc = SL_E_TPM;
	TPM2B_SENSITIVE_CREATE sens = {0};
	TPM2B_PUBLIC tmpl;
	TPM2B_DATA outside = {0};
	TPML_PCR_SELECTION pcrs = {0};
	TPM2B_CREATION_DATA *cdata = NULL;
	TPM2B_DIGEST *chash = NULL;
	TPMT_TK_CREATION *ticket = NULL;

	*ek = ESYS_TR_NONE;
	ek_template(alg, &tmpl);
	SL_GUARD_TSS(Esys_CreatePrimary(c->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD,
	                                ESYS_TR_NONE, ESYS_TR_NONE, &sens, &tmpl, &outside, &pcrs,
	                                ek, ek_pub, &cdata, &chash, &ticket),
	             SL_E_TPM, "creating the %s EK from the TCG template",
	             alg == SL_TPM2_ALG_ECC ? "ECC" : "RSA");
	rc = SL_OK;
out:
	Esys_Free(cdata);
	Esys_Free(chash);
	Esys_Free(ticket);
	return rc;
}

sl_err sl_tpm2_ek_session(sl_tpm2_conn *c, ESYS_TR *session)
{
	sl_err rc = SL_E_TPM;
	TPMT_SYM_DEF sym = {.algorithm = TPM2_ALG_NULL};
	TPM2B_TIMEOUT *timeout = NULL;
	TPMT_TK_AUTH *ticket = NULL;

	*session = ESYS_TR_NONE;
	SL_GUARD_TSS(Esys_StartAuthSession(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
	                                   ESYS_TR_NONE, ESYS_TR_NONE, NULL, TPM2_SE_POLICY, &sym,
	                                   TPM2_ALG_SHA256, session),
	             SL_E_TPM, "starting a policy session for the EK");
	/* Keep the session after each use so this code, not the TPM, flushes it. */
	SL_GUARD_TSS(
	    Esys_TRSess_SetAttributes(c->esys, *session, TPMA_SESSION_CONTINUESESSION, 0xff),
	    SL_E_TPM, "session attributes");
	SL_GUARD_TSS(Esys_PolicySecret(c->esys, ESYS_TR_RH_ENDORSEMENT, *session, ESYS_TR_PASSWORD,
	                               ESYS_TR_NONE, ESYS_TR_NONE, NULL, NULL, NULL, 0, &timeout,
	                               &ticket),
	             SL_E_TPM, "PolicySecret(endorsement hierarchy)");
	rc = SL_OK;
out:
	if (rc != SL_OK)
		flush(c, session);
	Esys_Free(timeout);
	Esys_Free(ticket);
	return rc;
}

static SL_RESULT handle_exists(sl_tpm2_conn *c, uint32_t h, bool *yes)
{
	sl_err rc = SL_E_TPM;
	TPMI_YES_NO more;
	TPMS_CAPABILITY_DATA *cap = NULL;

	SL_GUARD_TSS(Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
	                                TPM2_CAP_HANDLES, h, 1, &more, &cap),
	             SL_E_TPM, "listing handles at 0x%08x", h);
	*yes = cap->data.handles.count > 0 && cap->data.handles.handle[0] == h;
	rc = SL_OK;
out:
	Esys_Free(cap);
	return rc;
}

static SL_RESULT sl_tpm2_ak_handle(const sl_tpm2_key_opts *o, uint32_t *handle)
{
	const char *env = getenv("SECLAUNCH_AK_HANDLE");
	char *end;
	unsigned long v;

	if (o->ak_handle != 0) {
		v = o->ak_handle;
	} else if (env != NULL && *env != '\0') {
		errno = 0;
		v = strtoul(env, &end, 16);
		if (errno != 0 || *end != '\0')
			return sl_err_set(SL_E_USAGE, "SECLAUNCH_AK_HANDLE: '%.16s' is not hex",
			                  env);
	} else {
		v = o->ak_alg == SL_TPM2_ALG_ECC ? SL_TPM2_AK_HANDLE_ECC : SL_TPM2_AK_HANDLE_RSA;
	}
	if (v < 0x81000000ul || v > 0x81fffffful)
		return sl_err_set(SL_E_USAGE, "AK handle 0x%lx is not a persistent handle", v);
	*handle = (uint32_t)v;
	return SL_OK;
}

/* Creates the AK under the EK and makes it persistent at handle. */
static SL_RESULT ak_create(sl_tpm2_conn *c, const sl_tpm2_key_opts *o, uint32_t handle,
                           ESYS_TR *out)
{
	sl_err rc = SL_E_TPM;
	ESYS_TR ek = ESYS_TR_NONE, session = ESYS_TR_NONE, ak = ESYS_TR_NONE;
	TPM2B_PUBLIC *ek_pub = NULL, *pub = NULL, tmpl;
	TPM2B_PRIVATE *priv = NULL;
	TPM2B_SENSITIVE_CREATE sens = {0};
	TPM2B_DATA outside = {0};
	TPML_PCR_SELECTION pcrs = {0};
	TPM2B_CREATION_DATA *cdata = NULL;
	TPM2B_DIGEST *chash = NULL;
	TPMT_TK_CREATION *ticket = NULL;

	ak_template(o->ak_alg, &tmpl);
	SL_GUARD(sl_tpm2_ek_create(c, o->ek_alg, &ek, &ek_pub));
	SL_GUARD(sl_tpm2_ek_session(c, &session));
	SL_GUARD_TSS(Esys_Create(c->esys, ek, session, ESYS_TR_NONE, ESYS_TR_NONE, &sens, &tmpl,
	                         &outside, &pcrs, &priv, &pub, &cdata, &chash, &ticket),
	             SL_E_TPM, "creating the AK under the EK");
	flush(c, &session); /* a policy session is good for one command */
	SL_GUARD(sl_tpm2_ek_session(c, &session));
	SL_GUARD_TSS(Esys_Load(c->esys, ek, session, ESYS_TR_NONE, ESYS_TR_NONE, priv, pub, &ak),
	             SL_E_TPM, "loading the AK");
	SL_GUARD_TSS(Esys_EvictControl(c->esys, ESYS_TR_RH_OWNER, ak, ESYS_TR_PASSWORD,
	                               ESYS_TR_NONE, ESYS_TR_NONE, handle, out),
	             SL_E_TPM, "making the AK persistent at 0x%08x", handle);
	rc = SL_OK;
out:
	flush(c, &ak);
	flush(c, &session);
	flush(c, &ek);
	Esys_Free(ek_pub);
	Esys_Free(pub);
	Esys_Free(priv);
	Esys_Free(cdata);
	Esys_Free(chash);
	Esys_Free(ticket);
	return rc;
}

sl_err sl_tpm2_ak_load(sl_tpm2_conn *c, const sl_tpm2_key_opts *o, bool create, ESYS_TR *ak,
                       TPM2B_PUBLIC **ak_pub, uint32_t *handle)
{
	sl_err rc = SL_E_TPM;
	bool present = false;
	TPM2B_NAME *name = NULL, *qname = NULL;
	TPM2_ALG_ID want = o->ak_alg == SL_TPM2_ALG_ECC ? TPM2_ALG_ECC : TPM2_ALG_RSA;

	*ak = ESYS_TR_NONE;
	*ak_pub = NULL;
	SL_GUARD(sl_tpm2_ak_handle(o, handle));
	/* the AK is there on every quote but the first: opened straight away
	 * (one TPM command fewer on each launch and renewal), the handle listed
	 * only when that fails */
	TSS2_RC opened =
	    Esys_TR_FromTPMPublic(c->esys, *handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ak);
	if (opened == TSS2_RC_SUCCESS) {
		present = true;
	} else {
		*ak = ESYS_TR_NONE;
		SL_GUARD(handle_exists(c, *handle, &present));
		SL_GUARD_TSS(present ? opened : TSS2_RC_SUCCESS, SL_E_TPM,
		             "opening the AK at 0x%08x", *handle);
	}
	SL_ENSURE(present || create, SL_E_TPM, "no AK at persistent handle 0x%08x (enroll first)",
	          *handle);
	if (!present && (rc = ak_create(c, o, *handle, ak)) != SL_OK) {
		/* Another process may have made it persistent first: use that one. */
		SL_GUARD(handle_exists(c, *handle, &present));
		if (!present)
			goto out;
		sl_err_clear();
		SL_GUARD_TSS(Esys_TR_FromTPMPublic(c->esys, *handle, ESYS_TR_NONE, ESYS_TR_NONE,
		                                   ESYS_TR_NONE, ak),
		             SL_E_TPM, "opening the AK at 0x%08x", *handle);
	}
	SL_GUARD_TSS(Esys_ReadPublic(c->esys, *ak, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ak_pub,
	                             &name, &qname),
	             SL_E_TPM, "reading the AK at 0x%08x", *handle);
	SL_ENSURE((*ak_pub)->publicArea.type == want, SL_E_TPM,
	          "the key at 0x%08x is not an %s AK (set SECLAUNCH_AK_HANDLE or --ak-alg)",
	          *handle, want == TPM2_ALG_ECC ? "ECC" : "RSA");
	rc = sl_tpm2_ak_check_tpmt(&(*ak_pub)->publicArea);
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_TPM, "the key at 0x%08x", *handle);
		goto out;
	}
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		if (*ak != ESYS_TR_NONE)
			(void)Esys_TR_Close(c->esys, ak);
		*ak = ESYS_TR_NONE;
		Esys_Free(*ak_pub);
		*ak_pub = NULL;
	}
	Esys_Free(name);
	Esys_Free(qname);
	return rc;
}

#define NV_CHUNK 512u

sl_err sl_tpm2_nv_present(sl_tpm2_conn *c, const uint32_t *idx, size_t n, bool *present)
{
	sl_err rc = SL_E_TPM;
	TPMI_YES_NO more = TPM2_NO;
	TPMS_CAPABILITY_DATA *cap = NULL;
	uint32_t lo = UINT32_MAX, last = 0;

	for (size_t i = 0; i < n; i++) {
		present[i] = false;
		lo = idx[i] < lo ? idx[i] : lo;
	}
	if (n == 0)
		return SL_OK;
	/* one listing from the lowest index covers them all unless the TPM has
	 * more defined indices in between than one answer holds */
	SL_GUARD_TSS(Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
	                                TPM2_CAP_HANDLES, lo, TPM2_MAX_CAP_HANDLES, &more, &cap),
	             SL_E_TPM, "listing NV indices from 0x%08x", lo);
	for (UINT32 k = 0; k < cap->data.handles.count; k++) {
		last = cap->data.handles.handle[k];
		for (size_t i = 0; i < n; i++)
			present[i] |= last == idx[i];
	}
	for (size_t i = 0; i < n; i++)
		if (more == TPM2_YES && idx[i] > last)
			SL_GUARD(handle_exists(c, idx[i], &present[i]));
	rc = SL_OK;
out:
	Esys_Free(cap);
	return rc;
}

sl_err sl_tpm2_nv_read(sl_tpm2_conn *c, uint32_t index, uint8_t **out, size_t *len)
{
	bool present = false;
	*out = NULL;
	*len = 0;
	sl_err rc = handle_exists(c, index, &present);
	if (rc != SL_OK || !present)
		return rc;
	return sl_tpm2_nv_read_defined(c, index, out, len);
}

sl_err sl_tpm2_nv_read_defined(sl_tpm2_conn *c, uint32_t index, uint8_t **out, size_t *len)
{
	sl_err rc = SL_E_TPM;
	ESYS_TR nv = ESYS_TR_NONE, auth;
	TPM2B_NV_PUBLIC *pub = NULL;
	TPM2B_NAME *name = NULL;
	TPM2B_MAX_NV_BUFFER *chunk = NULL;
	uint8_t *buf = NULL;
	uint16_t size;

	*out = NULL;
	*len = 0;
	SL_GUARD_TSS(
	    Esys_TR_FromTPMPublic(c->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv),
	    SL_E_TPM, "opening NV index 0x%08x", index);
	SL_GUARD_TSS(
	    Esys_NV_ReadPublic(c->esys, nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, &name),
	    SL_E_TPM, "reading NV index 0x%08x's public area", index);
	size = pub->nvPublic.dataSize;
	auth = (pub->nvPublic.attributes & TPMA_NV_AUTHREAD) ? nv : ESYS_TR_RH_OWNER;
	if (size == 0 || !(pub->nvPublic.attributes & TPMA_NV_WRITTEN)) {
		rc = SL_OK;
		goto out;
	}
	buf = malloc(size);
	SL_ENSURE(buf != NULL, SL_E_NOMEM, "NV index 0x%08x", index);
	for (uint16_t off = 0; off < size;) {
		uint16_t left = (uint16_t)(size - off);
		uint16_t n = left > NV_CHUNK ? (uint16_t)NV_CHUNK : left;
		SL_GUARD_TSS(Esys_NV_Read(c->esys, auth, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE,
		                          ESYS_TR_NONE, n, off, &chunk),
		             SL_E_TPM, "reading NV index 0x%08x at %u", index, off);
		SL_ENSURE(chunk->size == n, SL_E_TPM, "NV index 0x%08x: short read", index);
		memcpy(buf + off, chunk->buffer, n);
		off += n;
		Esys_Free(chunk);
		chunk = NULL;
	}
	*out = buf;
	*len = size;
	buf = NULL;
	rc = SL_OK;
out:
	if (nv != ESYS_TR_NONE)
		(void)Esys_TR_Close(c->esys, &nv);
	free(buf);
	Esys_Free(pub);
	Esys_Free(name);
	Esys_Free(chunk);
	return rc;
}
