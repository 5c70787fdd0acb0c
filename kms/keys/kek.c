/* The in-process KEK operations (the key process runs them: keyproc.c) over
 * the configured backend, and the wrapped-DEK format shared by both backends:
 *   wrapped = 0x01 | iv[12] | AES-256-GCM(KEK, iv, AAD, DEK)[32] | tag[16]
 *   AAD     = u16be(len(key_id)) | key_id | u16be(len(dataset_id)) | dataset_id
 * The length prefixes make the AAD unambiguous ("ab"+"c" != "a"+"bc"), so a
 * wrapped DEK opens only under the key id and dataset id it was made for.
 * The first byte names the KEK version that wrapped it (1..255; every
 * wrapped DEK made before versions existed says 1, which is the version a
 * migrated key gets). Whether a key may be used — it exists, it is enabled,
 * the version is not retired — is asked of the state store on every wrap
 * and unwrap, so a disable on one replica stops releases on all. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "keys.h"
#include "seclaunch/buf.h"
#include "seclaunch/sealbox.h"

_Static_assert(KMSD_SEALED_LEN == SL_KMS_DEK_LEN + SL_SEALBOX_OVERHEAD, "sealed DEK size");

struct kmsd_keys {
	enum kmsd_backend backend;
	kmsd_store *st;
	kmsd_keystore *ks;
	kmsd_p11 *p11;
	kmsd_aws *aws;
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

sl_err kmsd_keys_open(const kmsd_config *c, kmsd_store *st, kmsd_keys **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_keys *k = calloc(1, sizeof(*k));
	SL_ENSURE(k != NULL, SL_E_NOMEM, "kek backend");
	k->backend = c->backend;
	k->st = st;
	if (c->backend == KMSD_KEK_LOCAL)
		SL_GUARD(kmsd_keystore_open(st, c->master_key_file, &k->ks));
	else if (c->backend == KMSD_KEK_AWS)
		SL_GUARD(kmsd_aws_open(c, &k->aws));
	else
		SL_GUARD(
		    kmsd_p11_open(c->p11_module, c->p11_token_label, c->p11_pin_file, &k->p11));
	*out = k;
	k = NULL;
	rc = SL_OK;
out:
	kmsd_keys_close(k);
	return rc;
}

void kmsd_keys_close(kmsd_keys *k)
{
	if (k == NULL)
		return;
	kmsd_keystore_close(k->ks);
	kmsd_p11_close(k->p11);
	kmsd_aws_close(k->aws);
	free(k);
}

/* The token object of a version: the id itself for version 1 (the keys
 * made before versions existed), "id#N" after ('#' is not a key id byte). */
static void p11_label(const char *id, unsigned version, char *out, size_t n)
{
	if (version == 1)
		snprintf(out, n, "%s", id);
	else
		snprintf(out, n, "%s#%u", id, version);
}

sl_err kmsd_keys_create(kmsd_keys *k, const char *id)
{
	return kmsd_keys_adopt(k, id, NULL);
}

sl_err kmsd_keys_adopt(kmsd_keys *k, const char *id, const char *aws_key_id)
{
	sl_err rc;
	bool gone;
	size_t refs;
	if (aws_key_id != NULL && k->backend != KMSD_KEK_AWS)
		return sl_err_set(SL_E_INPUT,
		                  "aws_key_id: this seclaunchd's kek_backend is not \"aws-kms\"");
	if (k->backend == KMSD_KEK_AWS)
		return kmsd_aws_create(k->aws, k->st, id, aws_key_id);
	if (k->backend == KMSD_KEK_LOCAL)
		return kmsd_keystore_create(k->ks, id);
	/* the store's unique key claims the id first; the token object follows */
	rc = kmsd_store_key_create(k->st, id, "pkcs11", NULL, 0, (int64_t)time(NULL));
	if (rc != SL_OK)
		return rc;
	rc = kmsd_p11_create(k->p11, id);
	if (rc != SL_OK && kmsd_store_key_delete(k->st, id, true, &refs, &gone) != SL_OK)
		fprintf(stderr, "seclaunchd: key '%s': token failed and the store row stays: %s\n",
		        id, sl_err_detail());
	return rc;
}

sl_err kmsd_keys_rotate(kmsd_keys *k, const char *id, unsigned *version)
{
	kmsd_key_row row = {0};
	bool found = false;
	char label[SL_KMS_ID_MAX + 16];
	sl_err rc = kmsd_store_key_get(k->st, id, &row, &found);
	if (rc != SL_OK)
		return rc;
	if (!found)
		return sl_err_set(SL_E_INPUT, "unknown key id '%s'", id);
	if (row.current >= KMSD_KEK_VERSION_MAX)
		return sl_err_set(SL_E_TOO_LARGE, "key '%s' has reached version %u, the last one",
		                  id, row.current);
	*version = row.current + 1;
	if (k->backend == KMSD_KEK_LOCAL)
		return kmsd_keystore_rotate(k->ks, id, *version);
	if (k->backend == KMSD_KEK_AWS)
		return kmsd_aws_rotate(k->aws, k->st, id, *version);
	p11_label(id, *version, label, sizeof(label));
	rc = kmsd_p11_create(k->p11, label);
	if (rc == SL_OK)
		rc = kmsd_store_kek_add(k->st, id, *version, NULL, 0, (int64_t)time(NULL));
	return rc;
}

/* SL_E_INPUT unknown key or version; SL_E_KMS_REFUSED disabled or retired;
 * SL_E_SYSTEM the store failed. wrapped/wlen: the version's KEK row as read
 * now (the keystore's cache serves only these bytes). */
static SL_RESULT usable(kmsd_keys *k, const char *id, unsigned *version,
                        uint8_t wrapped[static KMSD_KEK_WRAPPED_MAX], size_t *wlen)
{
	kmsd_key_row row = {0};
	bool found = false, version_ok = false;
	sl_err rc =
	    kmsd_store_key_use(k->st, id, *version, &row, &version_ok, wrapped, wlen, &found);
	if (rc != SL_OK)
		return rc;
	if (!found)
		return sl_err_set(SL_E_INPUT, "unknown key id '%s'", id);
	if (row.state != KMSD_KEY_ENABLED)
		return sl_err_set(SL_E_KMS_REFUSED, "key '%s' is disabled", id);
	if (*version == 0) {
		*version = row.current;
		return SL_OK;
	}
	if (!version_ok)
		return sl_err_set(SL_E_KMS_REFUSED,
		                  "key '%s' version %u is retired or does not exist (current %u)",
		                  id, *version, row.current);
	return SL_OK;
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

sl_err kmsd_keys_wrap(kmsd_keys *k, const char *id, const char *dataset_id,
                      const uint8_t dek[static SL_KMS_DEK_LEN],
                      uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t aad[KMSD_AAD_MAX];
	size_t aad_len = kmsd_wrap_aad(id, dataset_id, aad);
	unsigned version = 0;
	char label[SL_KMS_ID_MAX + 16];
	uint8_t row[KMSD_KEK_WRAPPED_MAX];
	size_t rlen = 0;
	*out_len = 0;
	SL_GUARD(usable(k, id, &version, row, &rlen));
	if (k->backend == KMSD_KEK_AWS)
		return kmsd_aws_wrap(k->aws, row, rlen, id, dataset_id, version, dek, out, out_len);
	*out_len = SL_KMS_WRAPPED_DEK_LEN;
	out[0] = (uint8_t)version;
	sl_random(out + 1, KMSD_GCM_IV);
	if (k->backend == KMSD_KEK_LOCAL) {
		struct gcm_job j = {.iv = out + 1,
		                    .aad = aad,
		                    .aad_len = aad_len,
		                    .in = dek,
		                    .out = out + 1 + KMSD_GCM_IV,
		                    .tag_out = out + 1 + KMSD_GCM_IV + SL_KMS_DEK_LEN};
		SL_GUARD(kmsd_keystore_with(k->ks, id, version, row, rlen, seal_fn, &j));
	} else {
		p11_label(id, version, label, sizeof(label));
		SL_GUARD(kmsd_p11_encrypt(k->p11, label, out + 1, aad, aad_len, dek,
		                          out + 1 + KMSD_GCM_IV));
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_keys_unwrap(kmsd_keys *k, const char *id, const char *dataset_id,
                        const uint8_t *wrapped, size_t len, uint8_t dek[static SL_KMS_DEK_LEN])
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t aad[KMSD_AAD_MAX];
	size_t aad_len = kmsd_wrap_aad(id, dataset_id, aad);
	/* KEK version u8, IV, ciphertext, tag (docs/protocol.md, "Wrapping") */
	sl_reader r, ctr, all;
	uint8_t version = 0;
	unsigned v;
	char label[SL_KMS_ID_MAX + 16];
	uint8_t row[KMSD_KEK_WRAPPED_MAX];
	size_t rlen = 0;
	const uint8_t *iv = NULL, *ct_tag = NULL, *ct = NULL, *tag = NULL;
	if (k->backend == KMSD_KEK_AWS) {
		SL_ENSURE(len >= 3 && len <= SL_KMS_WRAPPED_DEK_MAX && wrapped[0] >= 1,
		          SL_E_INTEGRITY, "wrapped DEK for key '%s': %zu bytes, not an AWS KMS one",
		          id, len);
		v = wrapped[0];
		SL_GUARD(usable(k, id, &v, row, &rlen));
		rc = kmsd_aws_unwrap(k->aws, row, rlen, id, dataset_id, wrapped, len, dek);
		goto opened;
	}
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
	SL_ENSURE(version >= 1, SL_E_INTEGRITY, "wrapped DEK for key '%s': KEK version 0", id);
	v = version;
	SL_GUARD(usable(k, id, &v, row, &rlen));
	if (k->backend == KMSD_KEK_LOCAL) {
		struct gcm_job j = {
		    .iv = iv, .aad = aad, .aad_len = aad_len, .in = ct, .tag = tag, .out = dek};
		rc = kmsd_keystore_with(k->ks, id, v, row, rlen, open_fn, &j);
	} else {
		/* the PKCS#11 mechanism takes ciphertext || tag as one buffer */
		p11_label(id, v, label, sizeof(label));
		rc = kmsd_p11_decrypt(k->p11, label, iv, aad, aad_len, ct_tag, dek);
	}
opened:
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

sl_err kmsd_keys_rewrap(kmsd_keys *k, const char *id, const char *dataset_id, const uint8_t *in,
                        size_t len, uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *dek = NULL;
	SL_GUARD(sl_secret_new(SL_KMS_DEK_LEN, &dek));
	SL_GUARD(kmsd_keys_unwrap(k, id, dataset_id, in, len, sl_secret_data(dek)));
	SL_GUARD(kmsd_keys_wrap(k, id, dataset_id, sl_secret_data(dek), out, out_len));
	rc = SL_OK;
out:
	sl_secret_free(dek); /* wipes */
	return rc;
}

sl_err kmsd_keys_unwrap_seal(kmsd_keys *k, const char *id, const char *dataset_id,
                             const uint8_t *wrapped, size_t len,
                             const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                             uint8_t sealed[static KMSD_SEALED_LEN])
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *dek = NULL;
	SL_GUARD(sl_secret_new(SL_KMS_DEK_LEN, &dek));
	SL_GUARD(kmsd_keys_unwrap(k, id, dataset_id, wrapped, len, sl_secret_data(dek)));
	SL_GUARD(sl_sealbox_seal(sl_secret_data(dek), SL_KMS_DEK_LEN, eph_pub, sealed));
	rc = SL_OK;
out:
	sl_secret_free(dek); /* wipes */
	return rc;
}

sl_err kmsd_keys_new_sealed(kmsd_keys *k, const char *id, const char *dataset_id,
                            const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                            uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX], size_t *wrapped_len,
                            uint8_t sealed[static KMSD_SEALED_LEN])
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *dek = NULL;
	SL_GUARD(sl_secret_random(SL_KMS_DEK_LEN, &dek));
	SL_GUARD(kmsd_keys_wrap(k, id, dataset_id, sl_secret_data(dek), wrapped, wrapped_len));
	SL_GUARD(sl_sealbox_seal(sl_secret_data(dek), SL_KMS_DEK_LEN, eph_pub, sealed));
	rc = SL_OK;
out:
	sl_secret_free(dek); /* wipes */
	return rc;
}

/* The ARN of every version of key id (retired ones too), for the AWS calls
 * that act on the whole key. */
static SL_RESULT aws_each(kmsd_keys *k, const char *id, unsigned current, bool enable)
{
	uint8_t arn[KMSD_KEK_WRAPPED_MAX];
	size_t alen = 0;
	bool retired = false, found = false;
	for (unsigned v = 1; v <= current; v++) {
		sl_err rc = kmsd_store_kek_get(k->st, id, v, arn, &alen, &retired, &found);
		if (rc != SL_OK)
			return rc;
		if (!found)
			continue;
		rc = kmsd_aws_key_state(k->aws, arn, alen, enable);
		if (rc != SL_OK)
			return rc;
	}
	return SL_OK;
}

sl_err kmsd_keys_set_state(kmsd_keys *k, const char *id, bool enable, bool *found)
{
	kmsd_key_row row = {0};
	sl_err rc;
	*found = false;
	if (k->backend != KMSD_KEK_AWS)
		return kmsd_store_key_set_state(
		    k->st, id, enable ? KMSD_KEY_ENABLED : KMSD_KEY_DISABLED, found);
	rc = kmsd_store_key_get(k->st, id, &row, found);
	if (rc != SL_OK || !*found)
		return rc;
	/* disabled here first, so every replica stops at once, then in AWS;
	 * enabled in AWS first, so the store never says usable before AWS does */
	if (!enable)
		SL_GUARD(kmsd_store_key_set_state(k->st, id, KMSD_KEY_DISABLED, found));
	SL_GUARD(aws_each(k, id, row.current, enable));
	if (enable)
		SL_GUARD(kmsd_store_key_set_state(k->st, id, KMSD_KEY_ENABLED, found));
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_keys_delete(kmsd_keys *k, const char *id, bool force, size_t *refs, bool *deleted)
{
	enum { MAXV = KMSD_KEK_VERSION_MAX };
	kmsd_key_row row = {0};
	bool found = false, retired = false, f = false;
	uint8_t(*arns)[KMSD_KEK_WRAPPED_MAX] = NULL;
	size_t *alen = NULL;
	unsigned n = 0;
	sl_err rc = SL_OK;
	*refs = 0;
	*deleted = false;
	if (k->backend == KMSD_KEK_AWS) {
		rc = kmsd_store_key_get(k->st, id, &row, &found);
		if (rc != SL_OK || !found)
			return rc;
		arns = calloc(MAXV, sizeof(*arns));
		alen = calloc(MAXV, sizeof(*alen));
		if (arns == NULL || alen == NULL) {
			rc = sl_err_set(SL_E_NOMEM, "key delete");
			goto out;
		}
		for (unsigned v = 1; v <= row.current && v <= MAXV; v++) {
			rc = kmsd_store_kek_get(k->st, id, v, arns[n], &alen[n], &retired, &f);
			if (rc != SL_OK)
				goto out;
			if (f)
				n++;
		}
	}
	rc = kmsd_store_key_delete(k->st, id, force, refs, deleted);
	if (rc != SL_OK || !*deleted)
		goto out;
	if (k->ks != NULL)
		kmsd_keystore_forget(k->ks, id);
	/* the store's rows are gone: the AWS keys follow, after AWS's own
	 * waiting period (docs/seclaunchd.md, "AWS KMS") */
	for (unsigned i = 0; i < n; i++) {
		if (kmsd_aws_schedule_delete(k->aws, arns[i], alen[i]) != SL_OK)
			fprintf(stderr,
			        "seclaunchd-kek: key '%s' deleted, but its AWS KMS key %.*s was "
			        "not scheduled for deletion (schedule it in AWS): %s\n",
			        id, (int)alen[i], (const char *)arns[i], sl_err_detail());
	}
	rc = SL_OK;
out:
	free(arns);
	free(alen);
	return rc;
}
