/* KEK backend dispatch and the wrapped-DEK format shared by both backends:
 *   wrapped = 0x01 | iv[12] | AES-256-GCM(KEK, iv, AAD, DEK)[32] | tag[16]
 *   AAD     = u16be(len(key_id)) | key_id | u16be(len(dataset_id)) | dataset_id
 * The length prefixes make the AAD unambiguous ("ab"+"c" != "a"+"bc"), so a
 * wrapped DEK opens only under the key id and dataset id it was made for. */
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"
#include "seclaunch/buf.h"

#define WRAP_VERSION 1

struct kmsd_kek {
	enum kmsd_backend backend;
	kmsd_keystore *ks;
	kmsd_p11 *p11;
};

size_t kmsd_wrap_aad(const char *id, const char *dataset_id, uint8_t *aad)
{
	size_t a = strlen(id), b = strlen(dataset_id), o = 0;
	aad[o++] = (uint8_t)(a >> 8);
	aad[o++] = (uint8_t)a;
	memcpy(aad + o, id, a);
	o += a;
	aad[o++] = (uint8_t)(b >> 8);
	aad[o++] = (uint8_t)b;
	memcpy(aad + o, dataset_id, b);
	return o + b;
}

sl_err kmsd_kek_open(const kmsd_config *c, kmsd_kek **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_kek *k = calloc(1, sizeof(*k));
	SL_ENSURE(k != NULL, SL_E_NOMEM, "kek backend");
	k->backend = c->backend;
	if (c->backend == KMSD_KEK_LOCAL)
		SL_GUARD(kmsd_keystore_open(c->keystore_file, c->master_key_file, &k->ks));
	else
		SL_GUARD(
		    kmsd_p11_open(c->p11_module, c->p11_token_label, c->p11_pin_file, &k->p11));
	*out = k;
	k = NULL;
	rc = SL_OK;
out:
	kmsd_kek_close(k);
	return rc;
}

void kmsd_kek_close(kmsd_kek *k)
{
	if (k == NULL)
		return;
	kmsd_keystore_close(k->ks);
	kmsd_p11_close(k->p11);
	free(k);
}

sl_err kmsd_kek_create(kmsd_kek *k, const char *id)
{
	if (k->backend == KMSD_KEK_LOCAL)
		return kmsd_keystore_create(k->ks, id);
	return kmsd_p11_create(k->p11, id);
}

static SL_RESULT exists_fn(const uint8_t kek[static 32], void *ctx)
{
	(void)kek;
	(void)ctx;
	return SL_OK;
}

bool kmsd_kek_exists(kmsd_kek *k, const char *id)
{
	if (k->backend == KMSD_KEK_LOCAL)
		return kmsd_keystore_with(k->ks, id, exists_fn, NULL) == SL_OK;
	return kmsd_p11_exists(k->p11, id);
}

size_t kmsd_kek_count(kmsd_kek *k)
{
	if (k->backend == KMSD_KEK_LOCAL)
		return kmsd_keystore_count(k->ks);
	return kmsd_p11_count(k->p11);
}

struct gcm_job {
	const uint8_t *iv, *aad, *in, *tag;
	size_t aad_len;
	uint8_t *out, *tag_out;
};

static SL_RESULT seal_fn(const uint8_t kek[static 32], void *ctx)
{
	struct gcm_job *j = ctx;
	return kmsd_gcm_seal(kek, j->iv, j->aad, j->aad_len, j->in, SL_KMS_DEK_LEN, j->out,
	                     j->tag_out);
}

static SL_RESULT open_fn(const uint8_t kek[static 32], void *ctx)
{
	struct gcm_job *j = ctx;
	return kmsd_gcm_open(kek, j->iv, j->aad, j->aad_len, j->in, SL_KMS_DEK_LEN, j->tag, j->out);
}

sl_err kmsd_kek_wrap(kmsd_kek *k, const char *id, const char *dataset_id,
                     const uint8_t dek[static SL_KMS_DEK_LEN],
                     uint8_t out[static SL_KMS_WRAPPED_DEK_LEN])
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t aad[KMSD_AAD_MAX];
	size_t aad_len = kmsd_wrap_aad(id, dataset_id, aad);
	out[0] = WRAP_VERSION;
	sl_random(out + 1, KMSD_GCM_IV);
	if (k->backend == KMSD_KEK_LOCAL) {
		struct gcm_job j = {.iv = out + 1,
		                    .aad = aad,
		                    .aad_len = aad_len,
		                    .in = dek,
		                    .out = out + 1 + KMSD_GCM_IV,
		                    .tag_out = out + 1 + KMSD_GCM_IV + SL_KMS_DEK_LEN};
		SL_GUARD(kmsd_keystore_with(k->ks, id, seal_fn, &j));
	} else {
		SL_GUARD(kmsd_p11_encrypt(k->p11, id, out + 1, aad, aad_len, dek,
		                          out + 1 + KMSD_GCM_IV));
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_kek_unwrap(kmsd_kek *k, const char *id, const char *dataset_id, const uint8_t *wrapped,
                       size_t len, uint8_t dek[static SL_KMS_DEK_LEN])
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t aad[KMSD_AAD_MAX];
	size_t aad_len = kmsd_wrap_aad(id, dataset_id, aad);
	/* version u8, IV, ciphertext, tag (docs/protocol.md, "Wrapping") */
	sl_reader r, ctr, all;
	uint8_t version = 0;
	const uint8_t *iv = NULL, *ct_tag = NULL, *ct = NULL, *tag = NULL;
	SL_ENSURE(len == SL_KMS_WRAPPED_DEK_LEN, SL_E_INTEGRITY,
	          "wrapped DEK for key '%s': %zu bytes, want %d", id, len, SL_KMS_WRAPPED_DEK_LEN);
	sl_reader_init(&r, wrapped, len, "wrapped DEK");
	SL_GUARD(sl_read_u8(&r, &version, "version"));
	SL_GUARD(sl_read_view(&r, KMSD_GCM_IV, &iv, "IV"));
	SL_GUARD(sl_read_sub(&r, sl_reader_left(&r), &ctr, "ciphertext and tag"));
	all = ctr;
	SL_GUARD(sl_read_view(&all, sl_reader_left(&all), &ct_tag, "ciphertext and tag"));
	SL_GUARD(sl_read_view(&ctr, SL_KMS_DEK_LEN, &ct, "ciphertext"));
	SL_GUARD(sl_read_view(&ctr, sl_reader_left(&ctr), &tag, "tag"));
	SL_ENSURE(version == WRAP_VERSION, SL_E_INTEGRITY,
	          "wrapped DEK for key '%s': unknown version %u", id, version);
	if (k->backend == KMSD_KEK_LOCAL) {
		struct gcm_job j = {
		    .iv = iv, .aad = aad, .aad_len = aad_len, .in = ct, .tag = tag, .out = dek};
		rc = kmsd_keystore_with(k->ks, id, open_fn, &j);
	} else {
		/* the PKCS#11 mechanism takes ciphertext || tag as one buffer */
		rc = kmsd_p11_decrypt(k->p11, id, iv, aad, aad_len, ct_tag, dek);
	}
	if (rc == SL_E_INTEGRITY)
		rc = sl_err_set(
		    SL_E_INTEGRITY,
		    "wrapped DEK does not open under key '%s' for dataset '%s' (tampered, "
		    "or made for another key or dataset)",
		    id, dataset_id);
	if (rc != SL_OK)
		goto out;
	rc = SL_OK;
out:
	if (rc != SL_OK)
		sl_wipe(dek, SL_KMS_DEK_LEN);
	return rc;
}
