/* The PKCS#11 KEK backend: KEKs are AES-256 secret-key objects on a token
 * (CKA_TOKEN, CKA_PRIVATE, CKA_SENSITIVE, not CKA_EXTRACTABLE), labelled with
 * the key id. Wrapping and unwrapping run on the token with CKM_AES_GCM, so
 * a KEK never enters seclaunchd's memory. Sessions come from a small pool:
 * a PKCS#11 session runs one operation at a time. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <p11-kit/pkcs11.h>

#include "keys.h"

#define POOL 8

struct kmsd_p11 {
	void *dl;
	CK_FUNCTION_LIST *f;
	CK_SLOT_ID slot;
	CK_SESSION_HANDLE sess[POOL];
	bool busy[POOL];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_mutex_t create_mu; /* serialises check-then-generate */
};

static SL_RESULT p11_err(CK_RV rv, const char *what, const char *id)
{
	return sl_err_set(rv == CKR_ENCRYPTED_DATA_INVALID || rv == CKR_ENCRYPTED_DATA_LEN_RANGE
	                      ? SL_E_INTEGRITY
	                      : SL_E_SYSTEM,
	                  "PKCS#11 %s%s%s: CKR 0x%lx", what, id ? " for key " : "", id ? id : "",
	                  (unsigned long)rv);
}

static CK_SESSION_HANDLE get_session(kmsd_p11 *p, int *slot)
{
	pthread_mutex_lock(&p->mu);
	for (;;) {
		for (int i = 0; i < POOL; i++) {
			if (!p->busy[i]) {
				p->busy[i] = true;
				pthread_mutex_unlock(&p->mu);
				*slot = i;
				return p->sess[i];
			}
		}
		pthread_cond_wait(&p->cv, &p->mu);
	}
}

static void put_session(kmsd_p11 *p, int slot)
{
	pthread_mutex_lock(&p->mu);
	p->busy[slot] = false;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static SL_RESULT find_slot(kmsd_p11 *p, const char *label)
{
	sl_err rc = SL_E_SYSTEM;
	CK_SLOT_ID slots[64];
	CK_ULONG n = 64;
	CK_RV rv = p->f->C_GetSlotList(CK_TRUE, slots, &n);
	SL_ENSURE(rv == CKR_OK, SL_E_SYSTEM, "PKCS#11 C_GetSlotList: CKR 0x%lx", (unsigned long)rv);
	for (CK_ULONG i = 0; i < n; i++) {
		CK_TOKEN_INFO ti;
		char l[33];
		if (p->f->C_GetTokenInfo(slots[i], &ti) != CKR_OK)
			continue;
		memcpy(l, ti.label, 32);
		l[32] = '\0';
		for (int j = 31; j >= 0 && l[j] == ' '; j--)
			l[j] = '\0';
		if (strcmp(l, label) == 0) {
			p->slot = slots[i];
			return SL_OK;
		}
	}
	SL_FAIL(SL_E_SYSTEM, "PKCS#11: no token labelled '%s'", label);
out:
	return rc;
}

sl_err kmsd_p11_open(const char *module, const char *label, const char *pin_file, kmsd_p11 **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_p11 *p = calloc(1, sizeof(*p));
	sl_secret *pin = NULL;
	CK_C_GetFunctionList gfl;
	CK_C_INITIALIZE_ARGS args = {.flags = CKF_OS_LOCKING_OK};
	CK_RV rv;
	size_t pinlen;
	SL_ENSURE(p != NULL, SL_E_NOMEM, "pkcs11");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_mutex_init(&p->create_mu, NULL);
	p->dl = dlopen(module, RTLD_NOW | RTLD_LOCAL);
	SL_ENSURE(p->dl != NULL, SL_E_SYSTEM, "PKCS#11 module %s: %s", module, dlerror());
	*(void **)&gfl = dlsym(p->dl, "C_GetFunctionList");
	SL_ENSURE(gfl != NULL, SL_E_SYSTEM, "PKCS#11 module %s: no C_GetFunctionList", module);
	SL_ENSURE(gfl(&p->f) == CKR_OK && p->f != NULL, SL_E_SYSTEM,
	          "PKCS#11 module %s: C_GetFunctionList failed", module);
	rv = p->f->C_Initialize(&args);
	SL_ENSURE(rv == CKR_OK, SL_E_SYSTEM, "PKCS#11 C_Initialize: CKR 0x%lx", (unsigned long)rv);
	SL_GUARD(find_slot(p, label));
	SL_GUARD(sl_secret_read_file(pin_file, 256, &pin));
	pinlen = sl_secret_len(pin);
	while (pinlen > 0 &&
	       (sl_secret_data(pin)[pinlen - 1] == '\n' || sl_secret_data(pin)[pinlen - 1] == '\r'))
		pinlen--;
	for (int i = 0; i < POOL; i++) {
		rv = p->f->C_OpenSession(p->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL,
		                         &p->sess[i]);
		SL_ENSURE(rv == CKR_OK, SL_E_SYSTEM, "PKCS#11 C_OpenSession: CKR 0x%lx",
		          (unsigned long)rv);
	}
	/* login state is per application and token: one login covers every session */
	rv = p->f->C_Login(p->sess[0], CKU_USER, sl_secret_data(pin), pinlen);
	SL_ENSURE(rv == CKR_OK || rv == CKR_USER_ALREADY_LOGGED_IN, SL_E_SYSTEM,
	          "PKCS#11 C_Login to token '%s' (PIN from %s): CKR 0x%lx", label, pin_file,
	          (unsigned long)rv);
	*out = p;
	p = NULL;
	rc = SL_OK;
out:
	sl_secret_free(pin);
	kmsd_p11_close(p);
	return rc;
}

void kmsd_p11_close(kmsd_p11 *p)
{
	if (p == NULL)
		return;
	if (p->f != NULL) {
		for (int i = 0; i < POOL; i++) {
			if (p->sess[i] != 0)
				p->f->C_CloseSession(p->sess[i]);
		}
		p->f->C_Finalize(NULL);
	}
	if (p->dl != NULL)
		dlclose(p->dl);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->create_mu);
	free(p);
}

/* Finds the KEK labelled id; *n says how many matched (0 or 1 in a sane token). */
static CK_RV find_key(kmsd_p11 *p, CK_SESSION_HANDLE s, const char *id, CK_OBJECT_HANDLE *h,
                      CK_ULONG *n)
{
	CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
	CK_KEY_TYPE kt = CKK_AES;
	CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof(cls)},
	                    {CKA_KEY_TYPE, &kt, sizeof(kt)},
	                    {CKA_LABEL, (void *)id, strlen(id)}};
	CK_ULONG nt = id != NULL ? 3 : 2;
	CK_OBJECT_HANDLE found[2];
	CK_RV rv = p->f->C_FindObjectsInit(s, t, nt);
	if (rv != CKR_OK)
		return rv;
	*n = 0;
	if (id != NULL) {
		rv = p->f->C_FindObjects(s, found, 2, n);
		if (*n > 0)
			*h = found[0];
	} else {
		CK_ULONG got;
		do {
			got = 0;
			rv = p->f->C_FindObjects(s, found, 2, &got);
			*n += got;
		} while (rv == CKR_OK && got > 0);
	}
	p->f->C_FindObjectsFinal(s);
	return rv;
}

sl_err kmsd_p11_create(kmsd_p11 *p, const char *id)
{
	sl_err rc = SL_E_SYSTEM;
	CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
	CK_KEY_TYPE kt = CKK_AES;
	CK_ULONG len = 32;
	CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
	CK_ATTRIBUTE t[] = {
	    {CKA_CLASS, &cls, sizeof(cls)},      {CKA_KEY_TYPE, &kt, sizeof(kt)},
	    {CKA_VALUE_LEN, &len, sizeof(len)},  {CKA_TOKEN, &yes, sizeof(yes)},
	    {CKA_PRIVATE, &yes, sizeof(yes)},    {CKA_SENSITIVE, &yes, sizeof(yes)},
	    {CKA_EXTRACTABLE, &no, sizeof(no)},  {CKA_ENCRYPT, &yes, sizeof(yes)},
	    {CKA_DECRYPT, &yes, sizeof(yes)},    {CKA_WRAP, &no, sizeof(no)},
	    {CKA_UNWRAP, &no, sizeof(no)},       {CKA_MODIFIABLE, &no, sizeof(no)},
	    {CKA_LABEL, (void *)id, strlen(id)}, {CKA_ID, (void *)id, strlen(id)},
	};
	CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
	CK_OBJECT_HANDLE h;
	CK_ULONG n = 0;
	CK_RV rv;
	int slot;
	CK_SESSION_HANDLE s;
	pthread_mutex_lock(&p->create_mu);
	s = get_session(p, &slot);
	rv = find_key(p, s, id, &h, &n);
	if (rv != CKR_OK) {
		rc = p11_err(rv, "C_FindObjects", id);
	} else if (n > 0) {
		rc = sl_err_set(SL_E_EXISTS, "key '%s' already exists", id);
	} else {
		rv = p->f->C_GenerateKey(s, &m, t, sizeof(t) / sizeof(t[0]), &h);
		rc = rv == CKR_OK ? SL_OK : p11_err(rv, "C_GenerateKey", id);
	}
	put_session(p, slot);
	pthread_mutex_unlock(&p->create_mu);
	return rc;
}

static SL_RESULT crypt(kmsd_p11 *p, bool enc, const char *id, const uint8_t iv[static 12],
                       const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t in_len,
                       uint8_t *out, size_t out_len)
{
	sl_err rc = SL_E_SYSTEM;
	CK_GCM_PARAMS gp = {.pIv = (CK_BYTE_PTR)iv,
	                    .ulIvLen = 12,
	                    .ulIvBits = 96,
	                    .pAAD = (CK_BYTE_PTR)aad,
	                    .ulAADLen = aad_len,
	                    .ulTagBits = 128};
	CK_MECHANISM m = {CKM_AES_GCM, &gp, sizeof(gp)};
	CK_OBJECT_HANDLE h;
	/* room for in_len bytes: some tokens size a GCM decrypt output by its
	 * input, and CKR_BUFFER_TOO_SMALL would leave the operation active */
	uint8_t tmp[64];
	CK_ULONG n = 0, olen = sizeof(tmp);
	int slot;
	CK_SESSION_HANDLE s = get_session(p, &slot);
	CK_RV rv = find_key(p, s, id, &h, &n);
	if (rv != CKR_OK) {
		rc = p11_err(rv, "C_FindObjects", id);
		goto out;
	}
	SL_ENSURE(n > 0, SL_E_INPUT, "unknown key id '%s'", id);
	if (enc) {
		rv = p->f->C_EncryptInit(s, &m, h);
		if (rv == CKR_OK)
			rv = p->f->C_Encrypt(s, (CK_BYTE_PTR)in, in_len, tmp, &olen);
	} else {
		rv = p->f->C_DecryptInit(s, &m, h);
		if (rv == CKR_OK)
			rv = p->f->C_Decrypt(s, (CK_BYTE_PTR)in, in_len, tmp, &olen);
	}
	if (rv != CKR_OK) {
		sl_wipe(out, out_len);
		rc = p11_err(rv, enc ? "C_Encrypt" : "C_Decrypt", id);
		/* any decrypt failure of a well-formed blob is an authentication failure */
		if (!enc)
			rc = SL_E_INTEGRITY;
		goto out;
	}
	SL_ENSURE(olen == out_len, SL_E_SYSTEM, "PKCS#11 AES-GCM: %lu bytes out, want %zu",
	          (unsigned long)olen, out_len);
	memcpy(out, tmp, out_len);
	rc = SL_OK;
out:
	sl_wipe(tmp, sizeof(tmp));
	put_session(p, slot);
	return rc;
}

sl_err kmsd_p11_encrypt(kmsd_p11 *p, const char *id, const uint8_t iv[static 12],
                        const uint8_t *aad, size_t aad_len, const uint8_t pt[static 32],
                        uint8_t ct_tag[static 48])
{
	return crypt(p, true, id, iv, aad, aad_len, pt, 32, ct_tag, 48);
}

sl_err kmsd_p11_decrypt(kmsd_p11 *p, const char *id, const uint8_t iv[static 12],
                        const uint8_t *aad, size_t aad_len, const uint8_t ct_tag[static 48],
                        uint8_t pt[static 32])
{
	return crypt(p, false, id, iv, aad, aad_len, ct_tag, 48, pt, 32);
}
