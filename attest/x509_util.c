/* Certificate helpers for the TEE verifiers (see x509_util.h). */
#include <dirent.h>
#include <pthread.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_dir.h"
#include "vcache.h"
#include "x509_util.h"
#include "seclaunch/util.h"

static void fp_keep(X509 *x);

#define MAX_DIR_FILES 256
#define MAX_FILE_BYTES (1024 * 1024)

static bool looks_pem(const uint8_t *p, size_t len)
{
	static const char marker[] = "-----BEGIN";
	for (size_t i = 0; i + sizeof(marker) - 1 <= len; i++) {
		if (memcmp(p + i, marker, sizeof(marker) - 1) == 0)
			return true;
	}
	return false;
}

static SL_RESULT parse_pem(const uint8_t *p, size_t len, STACK_OF(X509) * certs,
                           STACK_OF(X509_CRL) * crls, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	STACK_OF(X509_INFO) *infos = NULL;
	BIO *bio = NULL;
	int n = 0;

	SL_ENSURE(len <= INT32_MAX, SL_E_ATTEST_FORMAT, "%s: too large", what);
	bio = BIO_new_mem_buf(p, (int)len);
	SL_GUARD_OSSL(bio != NULL, SL_E_NOMEM, "%s: BIO", what);
	infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL);
	SL_GUARD_OSSL(infos != NULL, SL_E_ATTEST_FORMAT, "%s: not a valid PEM bundle", what);
	for (int i = 0; i < sk_X509_INFO_num(infos); i++) {
		X509_INFO *info = sk_X509_INFO_value(infos, i);
		if (info->x509 != NULL && certs != NULL) {
			SL_GUARD_OSSL(sk_X509_push(certs, info->x509) > 0, SL_E_NOMEM, "%s", what);
			info->x509 = NULL;
			n++;
		}
		if (info->crl != NULL && crls != NULL) {
			SL_GUARD_OSSL(sk_X509_CRL_push(crls, info->crl) > 0, SL_E_NOMEM, "%s",
			              what);
			info->crl = NULL;
			n++;
		}
	}
	SL_ENSURE(n > 0, SL_E_ATTEST_FORMAT, "%s: PEM holds no certificate or CRL", what);
	rc = SL_OK;
out:
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(bio);
	return rc;
}

sl_err sl_x509_from_der(const uint8_t *p, size_t len, X509 **out, const char *what)
{
	const unsigned char *q = p;
	X509 *x = NULL;

	*out = NULL;
	if (len > INT32_MAX)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: too large", what);
	x = d2i_X509(NULL, &q, (long)len);
	if (x == NULL)
		return sl_err_ossl(SL_E_ATTEST_FORMAT, "%s: not a DER certificate", what);
	if ((size_t)(q - p) != len) {
		X509_free(x);
		return sl_err_set(SL_E_ATTEST_FORMAT,
		                  "%s: %zu trailing bytes after the certificate", what,
		                  len - (size_t)(q - p));
	}
	*out = x;
	return SL_OK;
}

static SL_RESULT parse_uncached(const uint8_t *p, size_t len, STACK_OF(X509) * certs,
                                STACK_OF(X509_CRL) * crls, const char *what)
{
	if (looks_pem(p, len))
		return parse_pem(p, len, certs, crls, what);
	X509 *x = NULL;
	sl_err rc = sl_x509_from_der(p, len, &x, what);
	if (rc == SL_OK) {
		if (certs == NULL || sk_X509_push(certs, x) <= 0) {
			X509_free(x);
			return certs == NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "%s", what);
		}
		return SL_OK;
	}
	ERR_clear_error();
	const unsigned char *q = p;
	X509_CRL *crl = len <= INT32_MAX ? d2i_X509_CRL(NULL, &q, (long)len) : NULL;
	if (crl == NULL || (size_t)(q - p) != len) {
		X509_CRL_free(crl);
		ERR_clear_error();
		return sl_err_set(SL_E_ATTEST_FORMAT,
		                  "%s: neither PEM nor a DER certificate or CRL", what);
	}
	if (crls == NULL || sk_X509_CRL_push(crls, crl) <= 0) {
		X509_CRL_free(crl);
		return crls == NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "%s", what);
	}
	return SL_OK;
}

/* OpenSSL 3's decoders make parsing a certificate cost more than verifying
 * its signature, and a verifier sees the same chains and collateral files
 * again and again: parsed blobs are kept, keyed by the SHA-256 of their
 * bytes (so a hit is the same input), in a small fixed table. Only the
 * parse is cached; every verification still checks every signature. */
#define CACHE_SLOTS 64
#define CACHE_MAX_BLOB (64 * 1024)

static struct cache_slot {
	bool used;
	uint8_t key[32];
	STACK_OF(X509) * certs;
	STACK_OF(X509_CRL) * crls;
} cache[CACHE_SLOTS];
static unsigned cache_next;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* Appends new references to the slot's objects; false when out of memory. */
static bool cache_copy(const struct cache_slot *c, STACK_OF(X509) * certs,
                       STACK_OF(X509_CRL) * crls)
{
	for (int i = 0; certs != NULL && i < sk_X509_num(c->certs); i++) {
		X509 *x = sk_X509_value(c->certs, i);
		if (X509_up_ref(x) != 1)
			return false;
		if (sk_X509_push(certs, x) <= 0) {
			X509_free(x);
			return false;
		}
	}
	for (int i = 0; crls != NULL && i < sk_X509_CRL_num(c->crls); i++) {
		X509_CRL *x = sk_X509_CRL_value(c->crls, i);
		if (X509_CRL_up_ref(x) != 1)
			return false;
		if (sk_X509_CRL_push(crls, x) <= 0) {
			X509_CRL_free(x);
			return false;
		}
	}
	return true;
}

sl_err sl_x509_parse_blob(const uint8_t *p, size_t len, STACK_OF(X509) * certs,
                          STACK_OF(X509_CRL) * crls, const char *what)
{
	struct cache_slot fresh = {.used = true};
	bool hit = false, ok = true;

	if (len > CACHE_MAX_BLOB)
		return parse_uncached(p, len, certs, crls, what);
	sl_sha256(p, len, fresh.key);
	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < CACHE_SLOTS && !hit; i++) {
		if (cache[i].used && memcmp(cache[i].key, fresh.key, 32) == 0) {
			hit = true;
			ok = cache_copy(&cache[i], certs, crls);
		}
	}
	pthread_mutex_unlock(&cache_mu);
	if (hit)
		return ok ? SL_OK : sl_err_set(SL_E_NOMEM, "%s", what);

	fresh.certs = sk_X509_new_null();
	fresh.crls = sk_X509_CRL_new_null();
	if (fresh.certs == NULL || fresh.crls == NULL) {
		sk_X509_free(fresh.certs);
		sk_X509_CRL_free(fresh.crls);
		return sl_err_set(SL_E_NOMEM, "%s", what);
	}
	sl_err rc = parse_uncached(p, len, fresh.certs, fresh.crls, what);
	if (rc == SL_OK) {
		/* fill OpenSSL's per-certificate extension cache now, so shared
		 * objects are only read from here on */
		for (int i = 0; i < sk_X509_num(fresh.certs); i++) {
			(void)X509_check_purpose(sk_X509_value(fresh.certs, i), -1, 0);
			fp_keep(sk_X509_value(fresh.certs, i));
		}
		ok = cache_copy(&fresh, certs, crls);
		pthread_mutex_lock(&cache_mu);
		struct cache_slot *slot = &cache[cache_next++ % CACHE_SLOTS];
		struct cache_slot old = *slot;
		*slot = fresh;
		pthread_mutex_unlock(&cache_mu);
		fresh = old;
		if (!ok)
			rc = sl_err_set(SL_E_NOMEM, "%s", what);
	}
	sk_X509_pop_free(fresh.certs, X509_free);
	sk_X509_CRL_pop_free(fresh.crls, X509_CRL_free);
	return rc;
}

sl_err sl_x509_from_der_cached(const uint8_t *p, size_t len, X509 **out, const char *what)
{
	struct cache_slot fresh = {.used = true};
	X509 *x = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int n = 0;
	bool keyed = false;

	*out = NULL;
	/* its own key space: the same bytes as a blob may parse otherwise (PEM) */
	keyed = md != NULL && len <= CACHE_MAX_BLOB &&
	        EVP_DigestInit_ex(md, sl_vcache_md(), NULL) == 1 &&
	        EVP_DigestUpdate(md, "one DER certificate", 19) == 1 &&
	        EVP_DigestUpdate(md, p, len) == 1 && EVP_DigestFinal_ex(md, fresh.key, &n) == 1 &&
	        n == 32;
	EVP_MD_CTX_free(md);
	if (keyed) {
		pthread_mutex_lock(&cache_mu);
		for (int i = 0; i < CACHE_SLOTS && x == NULL; i++)
			if (cache[i].used && memcmp(cache[i].key, fresh.key, 32) == 0 &&
			    sk_X509_num(cache[i].certs) == 1 &&
			    X509_up_ref(sk_X509_value(cache[i].certs, 0)) == 1)
				x = sk_X509_value(cache[i].certs, 0);
		pthread_mutex_unlock(&cache_mu);
		if (x != NULL) {
			*out = x;
			return SL_OK;
		}
	}
	sl_err rc = sl_x509_from_der(p, len, &x, what);
	if (rc != SL_OK || !keyed) {
		*out = x;
		return rc;
	}
	(void)X509_check_purpose(x, -1, 0); /* shared from here on: read only */
	fp_keep(x);
	fresh.certs = sk_X509_new_null();
	fresh.crls = sk_X509_CRL_new_null();
	if (fresh.certs != NULL && fresh.crls != NULL && X509_up_ref(x) == 1) {
		if (sk_X509_push(fresh.certs, x) > 0) {
			pthread_mutex_lock(&cache_mu);
			struct cache_slot *slot = &cache[cache_next++ % CACHE_SLOTS];
			struct cache_slot old = *slot;
			*slot = fresh;
			pthread_mutex_unlock(&cache_mu);
			fresh = old;
		} else {
			X509_free(x);
		}
	}
	sk_X509_pop_free(fresh.certs, X509_free);
	sk_X509_CRL_pop_free(fresh.crls, X509_CRL_free);
	*out = x;
	return SL_OK;
}

static bool cert_file_name(const char *n)
{
	const char *dot = strrchr(n, '.');
	return dot != NULL && (strcmp(dot, ".pem") == 0 || strcmp(dot, ".crt") == 0 ||
	                       strcmp(dot, ".cer") == 0 || strcmp(dot, ".der") == 0);
}

/* sl_x509_load_dir from a snapshot of the directory (coll_dir.h): the
 * same files in the same order, their bytes read once for every
 * verification while they are unchanged. */
static SL_RESULT load_snapshot(const char *dir, const sl_coll_dir *snap, STACK_OF(X509) * certs,
                               STACK_OF(X509_CRL) * crls)
{
	sl_err rc = SL_E_IO;
	int files = 0;
	char path[4096];

	for (size_t i = 0; i < sl_coll_dir_count(snap); i++) {
		const sl_coll_file *f = sl_coll_dir_file(snap, i);
		if (!cert_file_name(f->name))
			continue;
		SL_ENSURE(++files <= MAX_DIR_FILES, SL_E_TOO_LARGE,
		          "collateral %s: more than %d certificate files", dir, MAX_DIR_FILES);
		int n = snprintf(path, sizeof(path), "%s/%s", dir, f->name);
		SL_ENSURE(n > 0 && (size_t)n < sizeof(path), SL_E_IO,
		          "collateral %s: path too long", dir);
		SL_GUARD(sl_x509_parse_blob(f->data, f->len, certs, crls, path));
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_x509_load_dir(const char *dir, STACK_OF(X509) * certs, STACK_OF(X509_CRL) * crls)
{
	sl_err rc = SL_E_IO;
	DIR *d = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int files = 0;
	char path[4096];
	sl_coll_dir *snap = sl_coll_dir_get(dir);

	if (snap != NULL) {
		rc = load_snapshot(dir, snap, certs, crls);
		sl_coll_dir_release(snap);
		return rc;
	}
	d = opendir(dir);
	SL_ENSURE(d != NULL, SL_E_IO, "collateral %s: cannot open directory", dir);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (e->d_name[0] == '.' || !cert_file_name(e->d_name))
			continue;
		SL_ENSURE(++files <= MAX_DIR_FILES, SL_E_TOO_LARGE,
		          "collateral %s: more than %d certificate files", dir, MAX_DIR_FILES);
		int n = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		SL_ENSURE(n > 0 && (size_t)n < sizeof(path), SL_E_IO,
		          "collateral %s: path too long", dir);
		SL_GUARD(sl_file_read(path, MAX_FILE_BYTES, &buf, &len));
		SL_GUARD(sl_x509_parse_blob(buf, len, certs, crls, path));
		free(buf);
		buf = NULL;
	}
	rc = SL_OK;
out:
	free(buf);
	if (d != NULL)
		closedir(d);
	return rc;
}

/* The SHA-256 fingerprint of a cached (shared, read-only) certificate is
 * computed once, before it is shared, and kept with it in its ex_data:
 * X509_digest encodes the whole certificate again each time. */
static int fp_index = -1;
static pthread_once_t fp_once = PTHREAD_ONCE_INIT;

static void fp_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	free(ptr);
}

static void fp_init(void)
{
	fp_index = X509_get_ex_new_index(0, NULL, NULL, NULL, fp_free);
}

static void digest(X509 *x, uint8_t out[static 32])
{
	unsigned int n = 32;
	if (X509_digest(x, EVP_sha256(), out, &n) != 1 || n != 32)
		memset(out, 0, 32);
}

/* Before x is shared: its fingerprint into its ex_data. */
static void fp_keep(X509 *x)
{
	uint8_t *fp;
	pthread_once(&fp_once, fp_init);
	if (fp_index < 0 || X509_get_ex_data(x, fp_index) != NULL || (fp = malloc(32)) == NULL)
		return;
	digest(x, fp);
	if (X509_set_ex_data(x, fp_index, fp) != 1)
		free(fp);
}

void sl_x509_fingerprint(X509 *x, uint8_t out[static 32])
{
	const uint8_t *fp = NULL;
	pthread_once(&fp_once, fp_init);
	if (fp_index >= 0)
		fp = X509_get_ex_data(x, fp_index);
	if (fp != NULL)
		memcpy(out, fp, 32);
	else
		digest(x, out);
}

void sl_x509_subject_cn(const X509 *x, char *buf, size_t n)
{
	buf[0] = '\0';
	X509_NAME *name = X509_get_subject_name(x);
	int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
	if (i < 0)
		return;
	const ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
	size_t len = (size_t)ASN1_STRING_length(s);
	if (len >= n)
		len = n - 1;
	memcpy(buf, ASN1_STRING_get0_data(s), len);
	buf[len] = '\0';
	/* a CN with an embedded NUL must not compare equal to its prefix */
	if (strlen(buf) != len)
		buf[0] = '\0';
}

const ASN1_OCTET_STRING *sl_x509_ext(const X509 *x, const char *oid)
{
	ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
	if (obj == NULL)
		return NULL;
	int i = X509_get_ext_by_OBJ(x, obj, -1);
	ASN1_OBJECT_free(obj);
	if (i < 0)
		return NULL;
	return X509_EXTENSION_get_data(X509_get_ext(x, i));
}

sl_err sl_x509_ext_uint(const X509 *x, const char *oid, bool *present, uint32_t *v,
                        const char *what)
{
	const ASN1_OCTET_STRING *os = sl_x509_ext(x, oid);
	*present = false;
	*v = 0;
	if (os == NULL)
		return SL_OK;
	const unsigned char *p = ASN1_STRING_get0_data(os);
	long len = ASN1_STRING_length(os);
	const unsigned char *q = p;
	ASN1_INTEGER *ai = d2i_ASN1_INTEGER(NULL, &q, len);
	uint64_t u = 0;
	bool ok =
	    ai != NULL && q - p == len && ASN1_INTEGER_get_uint64(&u, ai) == 1 && u <= UINT32_MAX;
	ASN1_INTEGER_free(ai);
	ERR_clear_error();
	if (!ok)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s: extension %s is not a small DER INTEGER",
		                  what, oid);
	*present = true;
	*v = (uint32_t)u;
	return SL_OK;
}

static SL_RESULT verify_chain(X509 *leaf, STACK_OF(X509) * untrusted, STACK_OF(X509) * roots,
                              time_t at, STACK_OF(X509) * *chain_out, const char *what)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();

	if (chain_out != NULL)
		*chain_out = NULL;
	SL_GUARD_OSSL(store != NULL && ctx != NULL, SL_E_NOMEM, "%s: X509 store", what);
	for (int i = 0; i < sk_X509_num(roots); i++)
		SL_GUARD_OSSL(X509_STORE_add_cert(store, sk_X509_value(roots, i)) == 1, SL_E_CRYPTO,
		              "%s: adding a root", what);
	SL_GUARD_OSSL(X509_STORE_CTX_init(ctx, store, leaf, untrusted) == 1, SL_E_CRYPTO,
	              "%s: X509_STORE_CTX_init", what);
	if (at != 0)
		X509_STORE_CTX_set_time(ctx, 0, at);
	if (X509_verify_cert(ctx) != 1) {
		int err = X509_STORE_CTX_get_error(ctx);
		int depth = X509_STORE_CTX_get_error_depth(ctx);
		X509 *bad = X509_STORE_CTX_get_current_cert(ctx);
		char cn[128] = "?";
		if (bad != NULL)
			sl_x509_subject_cn(bad, cn, sizeof(cn));
		char when[32] = "now";
		if (at != 0)
			sl_time_rfc3339(at, when, sizeof(when));
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_CHAIN,
		        "%s: certificate chain invalid at %s: %s (depth %d, '%s')", what, when,
		        X509_verify_cert_error_string(err), depth, cn);
	}
	if (chain_out != NULL)
		*chain_out = X509_STORE_CTX_get1_chain(ctx);
	rc = SL_OK;
out:
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return rc;
}

/* The chain cache's key: the fingerprints of every certificate given, in
 * order (leaf, untrusted, roots: the chain that OpenSSL builds depends on
 * them all). */
static bool chain_key(X509 *leaf, STACK_OF(X509) * untrusted, STACK_OF(X509) * roots,
                      sl_vcache_key *k)
{
	uint8_t fp[32];
	sl_vcache_hasher *h = sl_vcache_begin("x509 chain");
	STACK_OF(X509) * parts[] = {untrusted, roots};
	sl_x509_fingerprint(leaf, fp);
	sl_vcache_add(h, fp, 32);
	for (int p = 0; p < 2; p++) {
		uint8_t n[4] = {0, 0, (uint8_t)(sk_X509_num(parts[p]) >> 8),
		                (uint8_t)sk_X509_num(parts[p])};
		sl_vcache_add(h, n, 4);
		for (int i = 0; i < sk_X509_num(parts[p]); i++) {
			sl_x509_fingerprint(sk_X509_value(parts[p], i), fp);
			sl_vcache_add(h, fp, 32);
		}
	}
	return sl_vcache_end(h, k);
}

/* given[i]: leaf, then untrusted, then roots (the indices a cached chain names) */
static X509 *given(X509 *leaf, STACK_OF(X509) * untrusted, STACK_OF(X509) * roots, int i)
{
	if (i == 0)
		return leaf;
	if (i - 1 < sk_X509_num(untrusted))
		return sk_X509_value(untrusted, i - 1);
	return sk_X509_value(roots, i - 1 - sk_X509_num(untrusted));
}

static bool asn1_time_t(const ASN1_TIME *a, time_t *t)
{
	struct tm tm;
	if (a == NULL || ASN1_TIME_to_tm(a, &tm) != 1)
		return false;
	*t = timegm(&tm);
	return true;
}

/* Remembers a chain that verified: its certificates as indices into what
 * was given, and the times at which every one of them is valid. */
static void chain_put(const sl_vcache_key *k, X509 *leaf, STACK_OF(X509) * untrusted,
                      STACK_OF(X509) * roots, STACK_OF(X509) * chain)
{
	uint8_t idx[SL_VCACHE_VAL_MAX];
	int n = sk_X509_num(chain), all = 1 + sk_X509_num(untrusted) + sk_X509_num(roots);
	time_t from = 0, until = 0;
	if (n < 1 || n > SL_VCACHE_VAL_MAX || all > 255)
		return;
	for (int c = 0; c < n; c++) {
		X509 *x = sk_X509_value(chain, c);
		time_t nb, na;
		int i = 0;
		while (i < all && given(leaf, untrusted, roots, i) != x)
			i++;
		if (i == all || !asn1_time_t(X509_get0_notBefore(x), &nb) ||
		    !asn1_time_t(X509_get0_notAfter(x), &na))
			return;
		idx[c] = (uint8_t)i;
		if (c == 0 || nb > from)
			from = nb;
		if (c == 0 || na < until)
			until = na;
	}
	sl_vcache_put(k, from, until, idx, (size_t)n);
}

sl_err sl_x509_verify_chain(X509 *leaf, STACK_OF(X509) * untrusted, STACK_OF(X509) * roots,
                            time_t at, STACK_OF(X509) * *chain_out, const char *what)
{
	uint8_t idx[SL_VCACHE_VAL_MAX];
	size_t n = 0;
	sl_vcache_key k;
	STACK_OF(X509) *chain = NULL;
	bool keyed = chain_key(leaf, untrusted, roots, &k);
	int all = 1 + sk_X509_num(untrusted) + sk_X509_num(roots);
	if (chain_out != NULL)
		*chain_out = NULL;
	if (keyed && sl_vcache_get(&k, at, idx, &n)) {
		chain = sk_X509_new_null();
		for (size_t c = 0; chain != NULL && c < n; c++) {
			X509 *x = idx[c] < all ? given(leaf, untrusted, roots, idx[c]) : NULL;
			bool held = x != NULL && X509_up_ref(x) == 1;
			if (!held || sk_X509_push(chain, x) <= 0) {
				if (held)
					X509_free(x);
				sk_X509_pop_free(chain, X509_free);
				chain = NULL;
			}
		}
		if (chain != NULL) {
			if (chain_out != NULL)
				*chain_out = chain;
			else
				sk_X509_pop_free(chain, X509_free);
			return SL_OK;
		}
	}
	sl_err rc = verify_chain(leaf, untrusted, roots, at, &chain, what);
	if (rc == SL_OK && keyed)
		chain_put(&k, leaf, untrusted, roots, chain);
	if (rc == SL_OK && chain_out != NULL)
		*chain_out = chain;
	else
		sk_X509_pop_free(chain, X509_free);
	return rc;
}

/* A CRL's signature by issuer, remembered by the CRL's and the issuer's
 * exact bytes (a verdict on bytes alone: no time changes it). */
static bool crl_sig_ok(X509_CRL *crl, X509 *issuer)
{
	uint8_t d[32];
	unsigned int n = 0;
	sl_vcache_key k;
	bool keyed = false;
	if (X509_CRL_digest(crl, sl_vcache_md(), d, &n) == 1 && n == 32) {
		sl_vcache_hasher *h = sl_vcache_begin("x509 crl signature");
		sl_vcache_add(h, d, 32);
		sl_x509_fingerprint(issuer, d);
		sl_vcache_add(h, d, 32);
		keyed = sl_vcache_end(h, &k);
	}
	if (keyed && sl_vcache_get(&k, 1, NULL, NULL))
		return true;
	if (X509_CRL_verify(crl, X509_get0_pubkey(issuer)) != 1)
		return false;
	if (keyed)
		sl_vcache_put(&k, 0, INT64_MAX, NULL, 0);
	return true;
}

sl_err sl_x509_check_crls(X509 *cert, X509 *issuer, STACK_OF(X509_CRL) * crls, bool *found,
                          const char *what)
{
	*found = false;
	for (int i = 0; i < sk_X509_CRL_num(crls); i++) {
		X509_CRL *crl = sk_X509_CRL_value(crls, i);
		if (X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_subject_name(issuer)) != 0)
			continue;
		if (!crl_sig_ok(crl, issuer)) {
			ERR_clear_error();
			return sl_err_set(SL_E_ATTEST_CHAIN, "%s: CRL signature invalid", what);
		}
		*found = true;
		X509_REVOKED *rev = NULL;
		if (X509_CRL_get0_by_serial(crl, &rev, X509_get0_serialNumber(cert)) == 1) {
			char cn[128];
			sl_x509_subject_cn(cert, cn, sizeof(cn));
			return sl_err_set(SL_E_ATTEST_CHAIN, "%s: certificate '%s' is revoked",
			                  what, cn);
		}
	}
	return SL_OK;
}
