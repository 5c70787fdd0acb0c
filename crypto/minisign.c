/* minisign key and signature files (see include/seclaunch/minisign.h). */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seclaunch/buf.h"
#include "seclaunch/minisign.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define SIGALG "Ed"
#define SIGALG_HASHED "ED"
#define KDFALG "Sc"
#define CHKALG "B2"
#define UNTRUSTED_PREFIX "untrusted comment: "
#define TRUSTED_PREFIX "trusted comment: "
#define SALT_LEN 32
#define CHK_LEN 32
#define SK_LEN 64
/* key_id || sk || checksum: the part scrypt's stream encrypts */
#define KEYNUM_SK_LEN (SL_MINISIGN_KEYID_LEN + SK_LEN + CHK_LEN)
#define SECKEY_LEN (2 + 2 + 2 + SALT_LEN + 8 + 8 + KEYNUM_SK_LEN)
#define PUBKEY_LEN (2 + SL_MINISIGN_KEYID_LEN + SL_MINISIGN_PK_LEN)
#define SIGBLOB_LEN (2 + SL_MINISIGN_KEYID_LEN + SL_MINISIGN_SIG_LEN)
#define SECKEY_FILE_MAX 4096

struct sl_minisign_seckey {
	sl_secret *sk; /* 64 bytes: Ed25519 seed || public key */
	uint8_t key_id[SL_MINISIGN_KEYID_LEN];
};

struct sl_minisign_sig {
	bool prehashed;
	uint8_t key_id[SL_MINISIGN_KEYID_LEN];
	uint8_t sig[SL_MINISIGN_SIG_LEN];
	uint8_t global_sig[SL_MINISIGN_SIG_LEN];
	char *trusted_comment;
};

/* Reads one line (without its "\n" and an optional "\r"); an absent final
 * newline is fine. Fails when no bytes are left. */
static SL_RESULT read_line(sl_reader *r, const char **line, size_t *len, const char *field)
{
	sl_err rc = SL_E_FORMAT;
	size_t left = sl_reader_left(r);
	const uint8_t *p = NULL;
	sl_reader ln;
	SL_ENSURE(left > 0, SL_E_FORMAT, "%s: %s: missing line", r->what, field);
	SL_GUARD(sl_read_token(r, '\n', &ln, field));
	size_t n = sl_reader_left(&ln);
	SL_GUARD(sl_read_view(&ln, n, &p, field));
	if (n > 0 && p[n - 1] == '\r')
		n--;
	SL_ENSURE(memchr(p, '\0', n) == NULL, SL_E_FORMAT, "%s: %s: contains a NUL byte", r->what,
	          field);
	*line = (const char *)p;
	*len = n;
	rc = SL_OK;
out:
	return rc;
}

/* Only blank lines may follow the last field. */
static SL_RESULT expect_blank_rest(sl_reader *r)
{
	sl_err rc = SL_E_FORMAT;
	while (sl_reader_left(r) > 0) {
		const char *l = NULL;
		size_t n = 0;
		SL_GUARD(read_line(r, &l, &n, "trailing line"));
		for (size_t i = 0; i < n; i++)
			SL_ENSURE(l[i] == ' ' || l[i] == '\t', SL_E_FORMAT,
			          "%s: unexpected text after the last field", r->what);
	}
	rc = SL_OK;
out:
	return rc;
}

static bool has_prefix(const char *l, size_t n, const char *prefix)
{
	size_t pn = strlen(prefix);
	return n >= pn && memcmp(l, prefix, pn) == 0;
}

/* Decodes exactly want bytes of standard base64 from a line into out. */
static SL_RESULT b64_exact(const char *l, size_t n, uint8_t *out, size_t want, const char *what,
                           const char *field)
{
	size_t got = 0;
	const char *end = NULL;
	while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\t'))
		n--;
	if (sodium_base642bin(out, want, l, n, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) !=
	        0 ||
	    end != l + n || got != want)
		return sl_err_set(SL_E_FORMAT, "%s: %s: want %zu bytes of base64", what, field,
		                  want);
	return SL_OK;
}

void sl_minisign_key_id_hex(const uint8_t key_id[static SL_MINISIGN_KEYID_LEN], char *buf)
{
	uint64_t v = 0;
	for (int i = SL_MINISIGN_KEYID_LEN - 1; i >= 0; i--)
		v = (v << 8) | key_id[i];
	snprintf(buf, 17, "%016" PRIX64, v);
}

sl_err sl_minisign_pubkey_parse(const uint8_t *data, size_t len, sl_minisign_pubkey *out)
{
	sl_err rc = SL_E_FORMAT;
	sl_reader r;
	const char *l = NULL;
	size_t n = 0;
	uint8_t blob[PUBKEY_LEN];

	sl_reader_init(&r, data, len, "minisign public key");
	SL_GUARD(read_line(&r, &l, &n, "first line"));
	if (has_prefix(l, n, UNTRUSTED_PREFIX))
		SL_GUARD(read_line(&r, &l, &n, "key line"));
	SL_GUARD(b64_exact(l, n, blob, sizeof(blob), r.what, "key"));
	SL_GUARD(expect_blank_rest(&r));
	SL_ENSURE(memcmp(blob, SIGALG, 2) == 0, SL_E_FORMAT,
	          "minisign public key: algorithm '%c%c' is not Ed25519 ('Ed')", blob[0], blob[1]);
	memcpy(out->key_id, blob + 2, SL_MINISIGN_KEYID_LEN);
	memcpy(out->pk, blob + 2 + SL_MINISIGN_KEYID_LEN, SL_MINISIGN_PK_LEN);
	rc = SL_OK;
out:
	return rc;
}

/* The key's file text ("untrusted comment: minisign public key <ID>\n<b64>\n"), malloc'd. */
static SL_RESULT sl_minisign_pubkey_format(const sl_minisign_pubkey *pk, char **out)
{
	sl_err rc = SL_E_NOMEM;
	uint8_t blob[PUBKEY_LEN];
	char b64[sodium_base64_ENCODED_LEN(PUBKEY_LEN, sodium_base64_VARIANT_ORIGINAL)];
	char id[17];

	memcpy(blob, SIGALG, 2);
	memcpy(blob + 2, pk->key_id, SL_MINISIGN_KEYID_LEN);
	memcpy(blob + 2 + SL_MINISIGN_KEYID_LEN, pk->pk, SL_MINISIGN_PK_LEN);
	sodium_bin2base64(b64, sizeof(b64), blob, sizeof(blob), sodium_base64_VARIANT_ORIGINAL);
	sl_minisign_key_id_hex(pk->key_id, id);
	SL_ENSURE(asprintf(out, UNTRUSTED_PREFIX "minisign public key %s\n%s\n", id, b64) >= 0,
	          SL_E_NOMEM, "formatting a public key");
	rc = SL_OK;
out:
	return rc;
}

/* BLAKE2b-256(sig_alg || key_id || sk): minisign's secret key checksum. */
static void seckey_checksum(const uint8_t *key_id, const uint8_t *sk, uint8_t out[CHK_LEN])
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, CHK_LEN);
	crypto_generichash_update(&st, (const uint8_t *)SIGALG, 2);
	crypto_generichash_update(&st, key_id, SL_MINISIGN_KEYID_LEN);
	crypto_generichash_update(&st, sk, SK_LEN);
	crypto_generichash_final(&st, out, CHK_LEN);
	sl_wipe(&st, sizeof(st));
}

/* The decoded secret key blob, in secret memory. */
static SL_RESULT seckey_decode(const uint8_t *data, size_t len, sl_secret **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_reader r;
	const char *l = NULL;
	size_t n = 0;
	sl_secret *blob = NULL;

	sl_reader_init(&r, data, len, "minisign secret key");
	SL_GUARD(read_line(&r, &l, &n, "first line"));
	if (has_prefix(l, n, UNTRUSTED_PREFIX))
		SL_GUARD(read_line(&r, &l, &n, "key line"));
	SL_GUARD(sl_secret_new(SECKEY_LEN, &blob));
	SL_GUARD(b64_exact(l, n, sl_secret_data(blob), SECKEY_LEN, r.what, "key"));
	SL_GUARD(expect_blank_rest(&r));
	*out = blob;
	blob = NULL;
	rc = SL_OK;
out:
	sl_secret_free(blob);
	return rc;
}

bool sl_minisign_seckey_is_encrypted(const uint8_t *data, size_t len)
{
	sl_secret *blob = NULL;
	if (seckey_decode(data, len, &blob) != SL_OK) {
		sl_err_clear();
		return false;
	}
	bool enc = memcmp(sl_secret_data(blob) + 2, KDFALG, 2) == 0;
	sl_secret_free(blob);
	return enc;
}

/* XORs the key_id||sk||checksum part with scrypt(password, salt). */
static SL_RESULT seckey_crypt(uint8_t *blob, const char *password)
{
	sl_err rc = SL_E_CRYPTO;
	sl_secret *stream = NULL;
	const uint8_t *salt = NULL;
	uint64_t ops = 0, mem = 0;
	sl_reader r;
	sl_reader_init(&r, blob, SECKEY_LEN, "minisign secret key");
	SL_GUARD(sl_read_skip(&r, 6, "algorithms"));
	SL_GUARD(sl_read_view(&r, SALT_LEN, &salt, "scrypt salt"));
	SL_GUARD(sl_read_u64le(&r, &ops, "scrypt opslimit"));
	SL_GUARD(sl_read_u64le(&r, &mem, "scrypt memlimit"));
	/* Bounds keep a hostile key file from asking for unbounded work. */
	SL_ENSURE(ops > 0 && ops <= 4ULL * crypto_pwhash_scryptsalsa208sha256_OPSLIMIT_SENSITIVE &&
	              mem > 0 &&
	              mem <= 2ULL * crypto_pwhash_scryptsalsa208sha256_MEMLIMIT_SENSITIVE,
	          SL_E_FORMAT, "minisign secret key: scrypt limits out of range");
	SL_GUARD(sl_secret_new(KEYNUM_SK_LEN, &stream));
	SL_GUARD_SODIUM(crypto_pwhash_scryptsalsa208sha256(sl_secret_data(stream), KEYNUM_SK_LEN,
	                                                   password, strlen(password), salt,
	                                                   (unsigned long long)ops, (size_t)mem),
	                SL_E_NOMEM, "minisign secret key: scrypt failed (out of memory?)");
	uint8_t *k = blob + sl_reader_offset(&r); /* key id || sk || checksum, in place */
	for (size_t i = 0; i < KEYNUM_SK_LEN; i++)
		k[i] ^= sl_secret_data(stream)[i];
	rc = SL_OK;
out:
	sl_secret_free(stream);
	return rc;
}

sl_err sl_minisign_seckey_parse(const uint8_t *data, size_t len, const char *password,
                                sl_minisign_seckey **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_secret *blobs = NULL;
	sl_minisign_seckey *sk = NULL;
	uint8_t chk[CHK_LEN];
	uint8_t pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t seed_sk[crypto_sign_SECRETKEYBYTES];

	SL_GUARD(seckey_decode(data, len, &blobs));
	uint8_t *blob = sl_secret_data(blobs);
	sl_reader r;
	const uint8_t *sigalg, *kdfalg, *chkalg, *kid, *skb, *stored;
	sl_reader_init(&r, blob, SECKEY_LEN, "minisign secret key");
	SL_GUARD(sl_read_view(&r, 2, &sigalg, "signature algorithm"));
	SL_GUARD(sl_read_view(&r, 2, &kdfalg, "key derivation"));
	SL_GUARD(sl_read_view(&r, 2, &chkalg, "checksum algorithm"));
	SL_GUARD(sl_read_skip(&r, SALT_LEN + 16, "scrypt salt and limits"));
	/* views: after seckey_crypt they show the decrypted bytes */
	SL_GUARD(sl_read_view(&r, SL_MINISIGN_KEYID_LEN, &kid, "key id"));
	SL_GUARD(sl_read_view(&r, SK_LEN, &skb, "secret key"));
	SL_GUARD(sl_read_view(&r, CHK_LEN, &stored, "checksum"));
	SL_GUARD(sl_reader_expect_end(&r));
	SL_ENSURE(memcmp(sigalg, SIGALG, 2) == 0, SL_E_FORMAT,
	          "minisign secret key: signature algorithm is not 'Ed'");
	SL_ENSURE(memcmp(chkalg, CHKALG, 2) == 0, SL_E_FORMAT,
	          "minisign secret key: checksum algorithm is not 'B2'");
	bool encrypted = memcmp(kdfalg, KDFALG, 2) == 0;
	SL_ENSURE(encrypted || (kdfalg[0] == 0 && kdfalg[1] == 0), SL_E_FORMAT,
	          "minisign secret key: unknown key derivation '%c%c'", kdfalg[0], kdfalg[1]);
	if (encrypted) {
		SL_ENSURE(password != NULL, SL_E_USAGE,
		          "minisign secret key: encrypted, and no password was given");
		SL_GUARD(seckey_crypt(blob, password));
	}
	seckey_checksum(kid, skb, chk);
	/* minisign -W leaves the checksum of an unencrypted key zero. */
	bool zero = sodium_is_zero(stored, CHK_LEN);
	SL_ENSURE(sl_ct_eq(chk, stored, CHK_LEN) || (!encrypted && zero), SL_E_WRONG_KEY,
	          encrypted ? "minisign secret key: wrong password (checksum mismatch)"
	                    : "minisign secret key: checksum mismatch (corrupt key)");
	/* The key's public half must be the one its seed derives. */
	SL_GUARD_SODIUM(crypto_sign_seed_keypair(pk, seed_sk, skb), SL_E_CRYPTO,
	                "minisign secret key: deriving the key pair");
	SL_ENSURE(sl_ct_eq(seed_sk, skb, SK_LEN), SL_E_FORMAT,
	          "minisign secret key: public half does not match the seed (corrupt key)");

	sk = calloc(1, sizeof(*sk));
	SL_ENSURE(sk != NULL, SL_E_NOMEM, "allocating a secret key");
	SL_GUARD(sl_secret_from(skb, SK_LEN, &sk->sk));
	memcpy(sk->key_id, kid, SL_MINISIGN_KEYID_LEN);
	*out = sk;
	sk = NULL;
	rc = SL_OK;
out:
	sl_wipe(seed_sk, sizeof(seed_sk));
	sl_minisign_seckey_free(sk);
	sl_secret_free(blobs);
	return rc;
}

void sl_minisign_seckey_free(sl_minisign_seckey *sk)
{
	if (sk == NULL)
		return;
	sl_secret_free(sk->sk);
	free(sk);
}

void sl_minisign_seckey_pubkey(const sl_minisign_seckey *sk, sl_minisign_pubkey *out)
{
	memcpy(out->key_id, sk->key_id, SL_MINISIGN_KEYID_LEN);
	memcpy(out->pk, sl_secret_data(sk->sk) + 32, SL_MINISIGN_PK_LEN);
}

static void put_u64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

sl_err sl_minisign_keygen(const char *password, uint64_t opslimit, uint64_t memlimit,
                          char **seckey_text, char **pubkey_text, sl_minisign_pubkey *pk)
{
	sl_err rc = SL_E_CRYPTO;
	sl_secret *blobs = NULL;
	sl_secret *b64 = NULL;
	char *sec = NULL;
	size_t b64len = sodium_base64_ENCODED_LEN(SECKEY_LEN, sodium_base64_VARIANT_ORIGINAL);

	SL_GUARD(sl_secret_new(SECKEY_LEN, &blobs));
	uint8_t *blob = sl_secret_data(blobs);
	memset(blob, 0, SECKEY_LEN);
	uint8_t *kid = blob + 6 + SALT_LEN + 16;
	uint8_t *skb = kid + SL_MINISIGN_KEYID_LEN;
	memcpy(blob, SIGALG, 2);
	memcpy(blob + 4, CHKALG, 2);
	sl_random(kid, SL_MINISIGN_KEYID_LEN);
	SL_GUARD_SODIUM(crypto_sign_keypair(pk->pk, skb), SL_E_CRYPTO, "generating an Ed25519 key");
	memcpy(pk->key_id, kid, SL_MINISIGN_KEYID_LEN);
	seckey_checksum(kid, skb, skb + SK_LEN);
	if (password != NULL) {
		memcpy(blob + 2, KDFALG, 2);
		sl_random(blob + 6, SALT_LEN);
		put_u64le(blob + 6 + SALT_LEN,
		          opslimit ? opslimit
		                   : crypto_pwhash_scryptsalsa208sha256_OPSLIMIT_SENSITIVE);
		put_u64le(blob + 6 + SALT_LEN + 8,
		          memlimit ? memlimit
		                   : crypto_pwhash_scryptsalsa208sha256_MEMLIMIT_SENSITIVE);
		SL_GUARD(seckey_crypt(blob, password));
	}
	SL_GUARD(sl_secret_new(b64len, &b64));
	sodium_bin2base64((char *)sl_secret_data(b64), b64len, blob, SECKEY_LEN,
	                  sodium_base64_VARIANT_ORIGINAL);
	{
		/* asprintf grows its buffer by realloc, leaving copies of an
		 * unencrypted key behind: size it, then format it once */
		const char *kind = password != NULL ? "encrypted" : "unencrypted";
		static const char fmt[] = UNTRUSTED_PREFIX "minisign %s secret key\n%s\n";
		int n = snprintf(NULL, 0, fmt, kind, (char *)sl_secret_data(b64));
		SL_ENSURE(n > 0 && (sec = malloc((size_t)n + 1)) != NULL, SL_E_NOMEM,
		          "formatting a secret key");
		snprintf(sec, (size_t)n + 1, fmt, kind, (char *)sl_secret_data(b64));
	}
	SL_GUARD(sl_minisign_pubkey_format(pk, pubkey_text));
	*seckey_text = sec;
	sec = NULL;
	rc = SL_OK;
out:
	if (sec != NULL) {
		sl_wipe(sec, strlen(sec));
		free(sec);
	}
	sl_secret_free(b64);
	sl_secret_free(blobs);
	return rc;
}

sl_err sl_minisign_sign(const sl_minisign_seckey *sk, const uint8_t *msg, size_t len,
                        const char *trusted_comment, bool legacy, char **sig_text)
{
	sl_err rc = SL_E_CRYPTO;
	uint8_t blob[SIGBLOB_LEN];
	uint8_t hash[crypto_generichash_BYTES_MAX];
	uint8_t global[SL_MINISIGN_SIG_LEN];
	char b64a[sodium_base64_ENCODED_LEN(SIGBLOB_LEN, sodium_base64_VARIANT_ORIGINAL)];
	char b64b[sodium_base64_ENCODED_LEN(SL_MINISIGN_SIG_LEN, sodium_base64_VARIANT_ORIGINAL)];
	char deftc[64];
	uint8_t *gmsg = NULL;
	const uint8_t *key = sl_secret_data(sk->sk);

	if (trusted_comment == NULL) {
		snprintf(deftc, sizeof(deftc), "timestamp:%lld", (long long)time(NULL));
		trusted_comment = deftc;
	}
	size_t tclen = strlen(trusted_comment);
	SL_ENSURE(tclen <= SL_MINISIGN_COMMENT_MAX && strpbrk(trusted_comment, "\r\n") == NULL,
	          SL_E_USAGE, "trusted comment: one line of at most %d bytes",
	          SL_MINISIGN_COMMENT_MAX);
	memcpy(blob, legacy ? SIGALG : SIGALG_HASHED, 2);
	memcpy(blob + 2, sk->key_id, SL_MINISIGN_KEYID_LEN);
	if (legacy) {
		crypto_sign_detached(blob + 2 + SL_MINISIGN_KEYID_LEN, NULL, msg, len, key);
	} else {
		crypto_generichash(hash, sizeof(hash), msg, len, NULL, 0);
		crypto_sign_detached(blob + 2 + SL_MINISIGN_KEYID_LEN, NULL, hash, sizeof(hash),
		                     key);
	}
	gmsg = malloc(SL_MINISIGN_SIG_LEN + tclen);
	SL_ENSURE(gmsg != NULL, SL_E_NOMEM, "signing");
	memcpy(gmsg, blob + 2 + SL_MINISIGN_KEYID_LEN, SL_MINISIGN_SIG_LEN);
	memcpy(gmsg + SL_MINISIGN_SIG_LEN, trusted_comment, tclen);
	crypto_sign_detached(global, NULL, gmsg, SL_MINISIGN_SIG_LEN + tclen, key);
	sodium_bin2base64(b64a, sizeof(b64a), blob, sizeof(blob), sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(b64b, sizeof(b64b), global, sizeof(global),
	                  sodium_base64_VARIANT_ORIGINAL);
	SL_ENSURE(asprintf(sig_text,
	                   UNTRUSTED_PREFIX
	                   "signature from minisign secret key\n%s\n" TRUSTED_PREFIX "%s\n%s\n",
	                   b64a, trusted_comment, b64b) >= 0,
	          SL_E_NOMEM, "formatting a signature");
	rc = SL_OK;
out:
	free(gmsg);
	return rc;
}

sl_err sl_minisign_sig_parse(const uint8_t *data, size_t len, sl_minisign_sig **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_reader r;
	const char *l = NULL;
	size_t n = 0;
	uint8_t blob[SIGBLOB_LEN];
	sl_minisign_sig *s = calloc(1, sizeof(*s));

	SL_ENSURE(s != NULL, SL_E_NOMEM, "allocating a signature");
	sl_reader_init(&r, data, len, "minisign signature");
	SL_GUARD(read_line(&r, &l, &n, "untrusted comment line"));
	SL_ENSURE(has_prefix(l, n, UNTRUSTED_PREFIX), SL_E_FORMAT,
	          "minisign signature: line 1 must start with '" UNTRUSTED_PREFIX "'");
	SL_GUARD(read_line(&r, &l, &n, "signature line"));
	SL_GUARD(b64_exact(l, n, blob, sizeof(blob), r.what, "line 2 (signature)"));
	if (memcmp(blob, SIGALG_HASHED, 2) == 0)
		s->prehashed = true;
	else
		SL_ENSURE(memcmp(blob, SIGALG, 2) == 0, SL_E_FORMAT,
		          "minisign signature: algorithm '%c%c' is neither 'ED' nor 'Ed'", blob[0],
		          blob[1]);
	memcpy(s->key_id, blob + 2, SL_MINISIGN_KEYID_LEN);
	memcpy(s->sig, blob + 2 + SL_MINISIGN_KEYID_LEN, SL_MINISIGN_SIG_LEN);
	SL_GUARD(read_line(&r, &l, &n, "trusted comment line"));
	SL_ENSURE(has_prefix(l, n, TRUSTED_PREFIX), SL_E_FORMAT,
	          "minisign signature: line 3 must start with '" TRUSTED_PREFIX "'");
	size_t pn = strlen(TRUSTED_PREFIX);
	SL_ENSURE(n - pn <= SL_MINISIGN_COMMENT_MAX, SL_E_FORMAT,
	          "minisign signature: trusted comment longer than %d bytes",
	          SL_MINISIGN_COMMENT_MAX);
	s->trusted_comment = strndup(l + pn, n - pn);
	SL_ENSURE(s->trusted_comment != NULL, SL_E_NOMEM, "allocating a comment");
	SL_GUARD(read_line(&r, &l, &n, "global signature line"));
	SL_GUARD(b64_exact(l, n, s->global_sig, sizeof(s->global_sig), r.what,
	                   "line 4 (trusted comment signature)"));
	SL_GUARD(expect_blank_rest(&r));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_minisign_sig_free(s);
	return rc;
}

void sl_minisign_sig_free(sl_minisign_sig *s)
{
	if (s == NULL)
		return;
	free(s->trusted_comment);
	free(s);
}

bool sl_minisign_sig_prehashed(const sl_minisign_sig *s)
{
	return s->prehashed;
}

const char *sl_minisign_sig_trusted_comment(const sl_minisign_sig *s)
{
	return s->trusted_comment;
}

void sl_minisign_sig_key_id(const sl_minisign_sig *s, uint8_t out[static SL_MINISIGN_KEYID_LEN])
{
	memcpy(out, s->key_id, SL_MINISIGN_KEYID_LEN);
}

sl_err sl_minisign_verify(const sl_minisign_pubkey *pk, const sl_minisign_sig *sig,
                          const uint8_t *msg, size_t len)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t hash[crypto_generichash_BYTES_MAX];
	uint8_t *gmsg = NULL;
	char want[17], got[17];
	size_t tclen = strlen(sig->trusted_comment);

	if (memcmp(pk->key_id, sig->key_id, SL_MINISIGN_KEYID_LEN) != 0) {
		sl_minisign_key_id_hex(sig->key_id, got);
		sl_minisign_key_id_hex(pk->key_id, want);
		SL_FAIL(SL_E_INTEGRITY,
		        "signature was made by key %s, not by the public key %s (wrong public key)",
		        got, want);
	}
	int bad;
	if (sig->prehashed) {
		crypto_generichash(hash, sizeof(hash), msg, len, NULL, 0);
		bad = crypto_sign_verify_detached(sig->sig, hash, sizeof(hash), pk->pk);
	} else {
		bad = crypto_sign_verify_detached(sig->sig, msg, len, pk->pk);
	}
	SL_ENSURE(bad == 0, SL_E_INTEGRITY, "%s signature does not verify (content changed?)",
	          sig->prehashed ? "prehashed (ED)" : "legacy (Ed)");
	gmsg = malloc(SL_MINISIGN_SIG_LEN + tclen + 1);
	SL_ENSURE(gmsg != NULL, SL_E_NOMEM, "verifying");
	memcpy(gmsg, sig->sig, SL_MINISIGN_SIG_LEN);
	memcpy(gmsg + SL_MINISIGN_SIG_LEN, sig->trusted_comment, tclen);
	SL_ENSURE(crypto_sign_verify_detached(sig->global_sig, gmsg, SL_MINISIGN_SIG_LEN + tclen,
	                                      pk->pk) == 0,
	          SL_E_INTEGRITY, "trusted comment signature does not verify (comment changed?)");
	rc = SL_OK;
out:
	free(gmsg);
	return rc;
}
