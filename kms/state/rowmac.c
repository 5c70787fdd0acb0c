/* The one MAC of the state store's rows, and the key-check values of the
 * secret files the store depends on.
 *
 * Every row that grants anything (an enrolled AK, a pending enrollment, an
 * enrollment token) carries
 *   mac = HMAC-SHA256(registry key, "seclaunch-row-v1" | u8 len | table |
 *                     u8 ncols | per column: u8 type | u32be len | bytes)
 * over its primary key and every column that grants (integers as 8 bytes
 * big-endian). The table name and the column count and lengths make the
 * encoding injective, so a MAC made for one table, one row or one purpose
 * never verifies for another. Someone who can write the database but not
 * read the registry key cannot make a row that verifies.
 *
 * A key-check value is the same MAC of the row ("keycheck", name) under the
 * key itself: stored at the store's creation, compared at every start, so
 * another key file than the store was made with stops the service at once
 * (exit 6, naming the file) instead of failing at first use. */
#include <sodium.h>
#include <string.h>

#include "state.h"

static const char ROW_TAG[] = "seclaunch-row-v1";

void kmsd_row_mac(const uint8_t key[static 32], const char *table, const kmsd_sqlv *cols, size_t n,
                  uint8_t mac[static 32])
{
	crypto_auth_hmacsha256_state h;
	uint8_t b[8], tl = (uint8_t)strlen(table), nc = (uint8_t)n;
	crypto_auth_hmacsha256_init(&h, key, 32);
	crypto_auth_hmacsha256_update(&h, (const uint8_t *)ROW_TAG, sizeof(ROW_TAG) - 1);
	crypto_auth_hmacsha256_update(&h, &tl, 1);
	crypto_auth_hmacsha256_update(&h, (const uint8_t *)table, tl);
	crypto_auth_hmacsha256_update(&h, &nc, 1);
	for (size_t i = 0; i < n; i++) {
		const kmsd_sqlv *c = &cols[i];
		uint8_t t = (uint8_t)c->t;
		uint32_t len = c->t == KMSD_SQLV_INT    ? 8
		               : c->t == KMSD_SQLV_NULL ? 0
		                                        : (uint32_t)c->n;
		uint8_t l[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
		                (uint8_t)len};
		crypto_auth_hmacsha256_update(&h, &t, 1);
		crypto_auth_hmacsha256_update(&h, l, 4);
		if (c->t == KMSD_SQLV_INT) {
			for (int k = 0; k < 8; k++)
				b[k] = (uint8_t)((uint64_t)c->i >> (56 - 8 * k));
			crypto_auth_hmacsha256_update(&h, b, 8);
		} else if (c->t != KMSD_SQLV_NULL && len > 0) {
			crypto_auth_hmacsha256_update(&h, c->p, len);
		}
	}
	crypto_auth_hmacsha256_final(&h, mac);
	sodium_memzero(&h, sizeof(h));
}

bool kmsd_row_mac_ok(const uint8_t key[static 32], const char *table, const kmsd_sqlv *cols,
                     size_t n, const uint8_t mac[static 32])
{
	uint8_t want[32];
	kmsd_row_mac(key, table, cols, n, want);
	bool ok = sl_ct_eq(want, mac, 32);
	sodium_memzero(want, sizeof(want));
	return ok;
}

sl_err kmsd_keycheck(kmsd_store *st, const char *name, const char *file,
                     const uint8_t key[static 32])
{
	kmsd_sqlv row[] = {{.t = KMSD_SQLV_TEXT, .p = name, .n = strlen(name)}};
	uint8_t kcv[32], have[32];
	bool written = false;
	kmsd_row_mac(key, "keycheck", row, 1, kcv);
	sl_err rc = kmsd_store_keycheck(st, name, kcv, have, &written);
	if (rc != SL_OK)
		return rc;
	if (!sl_ct_eq(kcv, have, 32))
		return sl_err_set(SL_E_INTEGRITY,
		                  "%s: not the %s this state store was made with (its key-check "
		                  "value differs); not starting: restore that file (or point the "
		                  "configuration at it)",
		                  file, name);
	if (written)
		kmsd_log(
		    KMSD_LOG_NOTICE,
		    "%s: key-check value of the %s recorded in the state store (a new store, "
		    "or its first start with this release); another file is refused from now on",
		    file, name);
	return SL_OK;
}
