/* Every seclaunchd request body parser (kms/http/parse*.c). The first byte picks
 * the parser, the rest is the body: challenge, release, key create, wrap,
 * enroll, key actions, AK revocation and EK re-admission, rewrap and enrollment tokens,
 * activate. Each must return cleanly (accept or SL_E_INPUT) on any
 * bytes, and what it accepts must satisfy the checked invariants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../kms/http/http.h"
#include "../../kms/keys/keys.h" /* kmsd_wrap_aad: the AAD of the ids parsed */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	if (!init) {
		if (sl_crypto_init() != SL_OK)
			abort();
		init = 1;
	}
	if (size < 1)
		return 0;
	const uint8_t *body = data + 1;
	size_t len = size - 1;
	switch (data[0] % 8) {
	case 0:
		(void)kmsd_parse_challenge(body, len);
		break;
	case 1: {
		kmsd_release_req *r = NULL;
		if (kmsd_parse_release(body, len, &r) == SL_OK) {
			/* no key only with outputs; no output id twice */
			if ((r->nkeys < 1 && r->noutputs < 1) || r->nkeys > KMSD_MAX_KEYS ||
			    r->noutputs > KMSD_MAX_OUTPUTS || !json_is_array(r->evidence) ||
			    !json_is_array(r->identity) || !json_is_object(r->job))
				abort();
			for (size_t i = 0; i < r->noutputs; i++)
				for (size_t j = 0; j < i; j++)
					if (strcmp(r->outputs[i].output_id,
					           r->outputs[j].output_id) == 0)
						abort();
			for (size_t i = 0; i < r->nkeys; i++) {
				if (!kmsd_valid_key_id(r->keys[i].key_id) ||
				    !kmsd_valid_dataset_id(r->keys[i].dataset_id) ||
				    (r->keys[i].wrapped_len != SL_KMS_WRAPPED_DEK_LEN &&
				     (r->keys[i].wrapped_len < 3 ||
				      r->keys[i].wrapped_len > SL_KMS_WRAPPED_DEK_MAX ||
				      r->keys[i].wrapped[1] != KMSD_AWS_MARKER)))
					abort();
				uint8_t aad[KMSD_AAD_MAX];
				if (kmsd_wrap_aad(r->keys[i].key_id, r->keys[i].dataset_id, aad) >
				    KMSD_AAD_MAX)
					abort();
				/* no key twice in an accepted request */
				for (size_t j = 0; j < i; j++)
					if (strcmp(r->keys[i].key_id, r->keys[j].key_id) == 0 &&
					    strcmp(r->keys[i].dataset_id, r->keys[j].dataset_id) ==
					        0)
						abort();
			}
			for (size_t i = 1; i < json_array_size(r->evidence); i++)
				for (size_t j = 0; j < i; j++)
					if (json_equal(json_array_get(r->evidence, i),
					               json_array_get(r->evidence, j)))
						abort();
		}
		kmsd_release_req_free(r);
		break;
	}
	case 2: {
		char id[SL_KMS_ID_MAX + 1];
		if (kmsd_parse_key_create(body, len, id) == SL_OK && !kmsd_valid_key_id(id))
			abort();
		break;
	}
	case 3: {
		char ds[SL_KMS_DATASET_ID_MAX + 1];
		sl_secret *dek = NULL;
		if (kmsd_parse_wrap(body, len, ds, &dek) == SL_OK &&
		    (sl_secret_len(dek) != SL_KMS_DEK_LEN || !kmsd_valid_dataset_id(ds)))
			abort();
		sl_secret_free(dek);
		break;
	}
	case 4: {
		kmsd_enroll_req e;
		if (kmsd_parse_enroll(body, len, &e) == SL_OK) {
			if (e.ek_pub_len == 0 || e.ak_pub_len == 0)
				abort();
			kmsd_enroll_req_clear(&e);
		}
		break;
	}
	case 6: {
		bool force = true;
		uint8_t name[KMSD_AK_NAME_MAX];
		char hex[2 * KMSD_AK_NAME_MAX + 1];
		size_t n = 0;
		if (kmsd_parse_key_action(body, len, &force) != SL_OK && force)
			abort();
		/* the same bytes as an AK revocation */
		if (kmsd_parse_ak_revoke(body, len, name, &n, hex) == SL_OK &&
		    (n == 0 || n > KMSD_AK_NAME_MAX || strlen(hex) != 2 * n))
			abort();
		/* and as an EK re-admission: 32 bytes, their canonical hex */
		{
			uint8_t ek[32];
			char ekhex[65], back[65];
			if (kmsd_parse_ek_readmit(body, len, ek, ekhex) == SL_OK) {
				sl_hex_encode(ek, 32, back);
				if (strlen(ekhex) != 64 || strcmp(ekhex, back) != 0)
					abort();
			}
		}
		break;
	}
	case 7: {
		char ds[SL_KMS_DATASET_ID_MAX + 1];
		int64_t ttl = 0;
		uint8_t w[SL_KMS_WRAPPED_DEK_MAX];
		size_t wl = 0;
		char id[SL_KMS_ID_MAX + 1], aws[KMSD_AWS_KEY_ID_MAX + 1];
		if (kmsd_parse_rewrap(body, len, ds, w, &wl) == SL_OK &&
		    (!kmsd_valid_dataset_id(ds) || wl > SL_KMS_WRAPPED_DEK_MAX))
			abort();
		if (kmsd_parse_key_create_aws(body, len, id, aws) == SL_OK &&
		    (!kmsd_valid_key_id(id) || strlen(aws) > KMSD_AWS_KEY_ID_MAX))
			abort();
		/* the same bytes as an enrollment token request */
		if (kmsd_parse_enroll_token(body, len, &ttl) == SL_OK &&
		    (ttl < 1 || ttl > KMSD_ETOKEN_TTL_MAX))
			abort();
		break;
	}
	default: {
		kmsd_activate_req a;
		if (kmsd_parse_activate(body, len, &a) == SL_OK)
			sl_secret_free(a.secret);
		break;
	}
	}
	return 0;
}
