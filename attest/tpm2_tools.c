/* tpm2-tools file formats (tpm2_quote -m/-s/-o, tpm2_checkquote -m/-s/-f).
 *
 * The PCR file ("serialized", tpm2-tools' default) is a memory image of
 * tpm2-tools' own structures, integers little-endian:
 *   TPML_PCR_SELECTION  u32 count, 16 x {u16 hash, u8 sizeofSelect,
 *                       u8 pcrSelect[4], u8 pad}            (132 bytes)
 *   u32 n               number of TPML_DIGEST that follow
 *   n x TPML_DIGEST     u32 count, 8 x {u16 size, u8 buffer[64]} (532 bytes)
 * The digests list the selected PCRs bank by bank, index ascending. */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/util.h"
#include "seclaunch/json.h"
#include "tpm2_int.h"

#define SEL_ENTRY 8
#define SEL_SIZE (4 + TPM2_NUM_PCR_BANKS * SEL_ENTRY)
#define DIG_ENTRY 66
#define DIG_PER_LIST 8
#define LIST_SIZE (4 + DIG_PER_LIST * DIG_ENTRY)
#define MAX_LISTS 64

static size_t dsize(TPM2_ALG_ID alg)
{
	const EVP_MD *md = sl_tpm2_md(alg);
	return md != NULL ? (size_t)EVP_MD_get_size(md) : 0;
}

static SL_RESULT write_file(const char *prefix, const char *ext, const void *p, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s", prefix, ext);
	return sl_file_write_atomic(path, p, len, 0644, true);
}

static SL_RESULT b64(const json_t *ev, const char *key, uint8_t **out, size_t *len)
{
	const char *s = sl_json_getstr(ev, key);
	if (s == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "evidence.%s: missing", key);
	return sl_b64_decode(s, SL_TPM2_BLOB_MAX, out, len, key);
}

sl_err sl_tpm2_tools_export(const json_t *ev, const char *prefix)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *msg = NULL, *sig = NULL, *pub = NULL, buf[SEL_SIZE + 4 + MAX_LISTS * LIST_SIZE];
	size_t msg_len = 0, sig_len = 0, pub_len = 0, n = 0, lists = 0, in_list = 0, list_off = 0;
	char *pem = NULL, key[8];
	TPMS_ATTEST a;
	const TPML_PCR_SELECTION *sel;
	const json_t *pcrs = json_object_get(ev, "pcrs");

	SL_GUARD(b64(ev, "tpms_attest", &msg, &msg_len));
	SL_GUARD(b64(ev, "signature", &sig, &sig_len));
	SL_GUARD(b64(ev, "ak_public", &pub, &pub_len));
	SL_GUARD(sl_tpm2_mu_attest(msg, msg_len, &a));
	SL_ENSURE(a.type == TPM2_ST_ATTEST_QUOTE, SL_E_ATTEST_FORMAT, "TPMS_ATTEST: not a quote");
	sel = &a.attested.quote.pcrSelect;
	SL_ENSURE(sel->count <= TPM2_NUM_PCR_BANKS, SL_E_ATTEST_FORMAT,
	          "pcrSelect: too many banks");
	memset(buf, 0, sizeof(buf));
	buf[0] = (uint8_t)sel->count;
	for (uint32_t i = 0; i < sel->count; i++) {
		const TPMS_PCR_SELECTION *s = &sel->pcrSelections[i];
		uint8_t *e = buf + 4 + i * SEL_ENTRY;
		e[0] = (uint8_t)s->hash;
		e[1] = (uint8_t)(s->hash >> 8);
		e[2] = s->sizeofSelect;
		memcpy(e + 3, s->pcrSelect, s->sizeofSelect <= 4 ? s->sizeofSelect : 4);
	}
	n = SEL_SIZE + 4;
	for (uint32_t i = 0; i < sel->count; i++) {
		const TPMS_PCR_SELECTION *s = &sel->pcrSelections[i];
		const json_t *bank = json_object_get(pcrs, sl_tpm2_hash_name(s->hash));
		size_t dl = dsize(s->hash);
		for (unsigned p = 0; p < 24u && p / 8 < s->sizeofSelect; p++) {
			if (!(s->pcrSelect[p / 8] & (1u << (p % 8))))
				continue;
			if (in_list == 0) {
				SL_ENSURE(lists < MAX_LISTS, SL_E_ATTEST_FORMAT, "too many PCRs");
				list_off = n;
				n += LIST_SIZE;
				lists++;
			}
			snprintf(key, sizeof(key), "%u", p);
			uint8_t *d = buf + list_off + 4 + in_list * DIG_ENTRY;
			d[0] = (uint8_t)dl;
			SL_GUARD(sl_hex_decode(
			    sl_json_getstr(bank, key) != NULL ? sl_json_getstr(bank, key) : "",
			    d + 2, dl, "evidence.pcrs"));
			buf[list_off] = (uint8_t)++in_list;
			if (in_list == DIG_PER_LIST)
				in_list = 0;
		}
	}
	buf[SEL_SIZE] = (uint8_t)lists;
	SL_GUARD(sl_tpm2_public_to_pem(pub, pub_len, &pem));
	SL_GUARD(write_file(prefix, ".msg", msg, msg_len));
	SL_GUARD(write_file(prefix, ".sig", sig, sig_len));
	SL_GUARD(write_file(prefix, ".pcrs", buf, n));
	SL_GUARD(write_file(prefix, ".ak.pem", pem, strlen(pem)));
	SL_GUARD(write_file(prefix, ".ak.pub", pub, pub_len));
	rc = SL_OK;
out:
	free(msg);
	free(sig);
	free(pub);
	free(pem);
	return rc;
}

/* Parses the serialized PCR file into sel and pcrs. */
static SL_RESULT parse_pcr_file(const uint8_t *p, size_t len, sl_tpm2_pcrs *pcrs)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, sr;
	uint32_t count, nlists, di = 0, in_list = 0;
	TPMS_PCR_SELECTION sel[TPM2_NUM_PCR_BANKS];
	uint8_t lists[MAX_LISTS][LIST_SIZE];

	memset(pcrs, 0, sizeof(*pcrs));
	sl_reader_init(&r, p, len, "tpm2-tools PCR file");
	SL_GUARD(sl_read_sub(&r, SEL_SIZE, &sr, "TPML_PCR_SELECTION"));
	SL_GUARD(sl_read_u32le(&sr, &count, "count"));
	SL_ENSURE(count >= 1 && count <= TPM2_NUM_PCR_BANKS, SL_E_ATTEST_FORMAT,
	          "tpm2-tools PCR file: %u banks", count);
	for (uint32_t i = 0; i < TPM2_NUM_PCR_BANKS; i++) {
		SL_GUARD(sl_read_u16le(&sr, &sel[i].hash, "hash"));
		SL_GUARD(sl_read_u8(&sr, &sel[i].sizeofSelect, "sizeofSelect"));
		SL_GUARD(sl_read_bytes(&sr, sel[i].pcrSelect, 4, "pcrSelect"));
		SL_GUARD(sl_read_skip(&sr, 1, "padding"));
		if (i < count)
			SL_ENSURE(dsize(sel[i].hash) > 0 && sel[i].sizeofSelect <= 3,
			          SL_E_ATTEST_FORMAT, "tpm2-tools PCR file: bank %u (0x%04x)", i,
			          sel[i].hash);
	}
	SL_GUARD(sl_read_u32le(&r, &nlists, "digest list count"));
	SL_ENSURE(nlists <= MAX_LISTS && sl_reader_left(&r) == (size_t)nlists * LIST_SIZE,
	          SL_E_ATTEST_FORMAT, "tpm2-tools PCR file: %u digest lists in %zu bytes", nlists,
	          sl_reader_left(&r));
	for (uint32_t i = 0; i < nlists; i++)
		SL_GUARD(sl_read_bytes(&r, lists[i], LIST_SIZE, "TPML_DIGEST"));
	pcrs->nbanks = count;
	for (uint32_t b = 0; b < count; b++) {
		size_t dl = dsize(sel[b].hash);
		pcrs->alg[b] = sel[b].hash;
		for (unsigned n = 0; n < 24u && n / 8 < sel[b].sizeofSelect; n++) {
			if (!(sel[b].pcrSelect[n / 8] & (1u << (n % 8))))
				continue;
			SL_ENSURE(di < nlists, SL_E_ATTEST_FORMAT,
			          "tpm2-tools PCR file: too few values");
			/* TPML_DIGEST: count u32le, then TPM2B_DIGEST entries (size u16le, bytes)
			 */
			sl_reader lr;
			uint32_t lc = 0;
			uint16_t sz = 0;
			sl_reader_init(&lr, lists[di], LIST_SIZE, "tpm2-tools PCR file");
			SL_GUARD(sl_read_u32le(&lr, &lc, "TPML_DIGEST count"));
			SL_ENSURE(lc <= DIG_PER_LIST && in_list < lc, SL_E_ATTEST_FORMAT,
			          "tpm2-tools PCR file: value for %s.%u",
			          sl_tpm2_hash_name(sel[b].hash), n);
			SL_GUARD(sl_read_skip(&lr, (size_t)in_list * DIG_ENTRY, "TPM2B_DIGEST"));
			SL_GUARD(sl_read_u16le(&lr, &sz, "TPM2B_DIGEST size"));
			SL_ENSURE((size_t)sz == dl, SL_E_ATTEST_FORMAT,
			          "tpm2-tools PCR file: value for %s.%u",
			          sl_tpm2_hash_name(sel[b].hash), n);
			SL_GUARD(sl_read_bytes(&lr, pcrs->value[b][n], dl, "TPM2B_DIGEST"));
			pcrs->set[b] |= 1u << n;
			if (++in_list >= lc) {
				in_list = 0;
				di++;
			}
		}
	}
	SL_ENSURE(di == nlists && in_list == 0, SL_E_ATTEST_FORMAT,
	          "tpm2-tools PCR file: more values than selected PCRs");
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

static SL_RESULT read_into(json_t *ev, const char *path, const char *key, size_t max, uint8_t **p,
                           size_t *len)
{
	sl_err rc = sl_file_read(path, max, p, len);
	if (rc != SL_OK)
		return rc;
	return sl_tpm2_json_put_b64(ev, key, *p, *len);
}

/* A DER SubjectPublicKeyInfo, the whole buffer. */
static EVP_PKEY *spki_der(const uint8_t *p, size_t len)
{
	const unsigned char *q = p;
	EVP_PKEY *k = len <= INT32_MAX ? d2i_PUBKEY(NULL, &q, (long)len) : NULL;
	if (k != NULL && (size_t)(q - p) != len) {
		EVP_PKEY_free(k);
		k = NULL;
	}
	ERR_clear_error();
	return k;
}

static EVP_PKEY *spki_pem(const uint8_t *p, size_t len)
{
	static const char marker[] = "-----BEGIN PUBLIC KEY-----";
	bool found = false;
	for (size_t i = 0; !found && i + sizeof(marker) - 1 <= len; i++)
		found = memcmp(p + i, marker, sizeof(marker) - 1) == 0;
	if (!found || len > INT32_MAX)
		return NULL;
	BIO *bio = BIO_new_mem_buf(p, (int)len);
	EVP_PKEY *k = bio != NULL ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	ERR_clear_error();
	return k;
}

/* The AK file as tpm2-tools, keylime and the Azure vTPM tools write it: a
 * TPM2B_PUBLIC (tpm2_createak -u, tpm2_readpublic -o), a bare TPMT_PUBLIC,
 * or a PEM / DER SubjectPublicKeyInfo (tpm2_readpublic -f pem|der). The TPM
 * forms go into "ak_public" (a TPMT_PUBLIC gets its size prefix), a key into
 * "ak_spki" (DER). */
static SL_RESULT put_ak(json_t *ev, const char *path, const uint8_t *p, size_t len,
                        const char **format)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	TPM2B_PUBLIC pub;
	uint8_t *buf = NULL, *der = NULL;
	EVP_PKEY *k = NULL;

	if (len >= 2 && (size_t)(p[0] << 8 | p[1]) == len - 2 &&
	    sl_tpm2_mu_public(p, len, &pub, path) == SL_OK) {
		*format = "tpm2b_public";
		SL_GUARD(sl_tpm2_json_put_b64(ev, "ak_public", p, len));
		goto done;
	}
	sl_err_clear();
	if (len > 0 && len <= SL_TPM2_BLOB_MAX - 2) {
		buf = malloc(len + 2);
		SL_ENSURE(buf != NULL, SL_E_NOMEM, "%s", path);
		buf[0] = (uint8_t)(len >> 8);
		buf[1] = (uint8_t)len;
		memcpy(buf + 2, p, len);
		if (sl_tpm2_mu_public(buf, len + 2, &pub, path) == SL_OK) {
			*format = "tpmt_public";
			SL_GUARD(sl_tpm2_json_put_b64(ev, "ak_public", buf, len + 2));
			goto done;
		}
		sl_err_clear();
	}
	if ((k = spki_der(p, len)) != NULL)
		*format = "der";
	else if ((k = spki_pem(p, len)) != NULL)
		*format = "pem";
	SL_ENSURE(k != NULL, SL_E_INPUT,
	          "--ak-public %s: not an AK public key in a form accepted: TPM2B_PUBLIC "
	          "(tpm2_createak -u, tpm2_readpublic -o), TPMT_PUBLIC, or a PEM or DER "
	          "SubjectPublicKeyInfo (tpm2_readpublic -f pem|der, tpm2_checkquote -u)",
	          path);
	int dl = i2d_PUBKEY(k, &der);
	SL_GUARD_OSSL(dl > 0, SL_E_CRYPTO, "%s", path);
	SL_GUARD(sl_tpm2_json_put_b64(ev, "ak_spki", der, (size_t)dl));
done:
	rc = SL_OK;
out:
	free(buf);
	OPENSSL_free(der);
	EVP_PKEY_free(k);
	return rc;
}

sl_err sl_tpm2_tools_import(const char *msg, const char *sig, const char *pcrs,
                            const char *ak_public, json_t **out, const char **ak_format)
{
	sl_err rc = SL_E_NOMEM;
	json_t *ev = json_object(), *pj = NULL;
	uint8_t *m = NULL, *s = NULL, *p = NULL, *a = NULL;
	size_t ml, sl, pl, al;
	sl_tpm2_pcrs *v = malloc(sizeof(*v));

	*out = NULL;
	SL_ENSURE(ev != NULL && v != NULL, SL_E_NOMEM, "evidence");
	SL_ENSURE(json_object_set_new(ev, "kind", json_string("tpm2")) == 0 &&
	              json_object_set_new(ev, "version", json_integer(1)) == 0,
	          SL_E_NOMEM, "evidence");
	SL_GUARD(read_into(ev, msg, "tpms_attest", SL_TPM2_BLOB_MAX, &m, &ml));
	SL_GUARD(read_into(ev, sig, "signature", SL_TPM2_BLOB_MAX, &s, &sl));
	SL_GUARD(sl_file_read(ak_public, 65536, &a, &al));
	SL_GUARD(put_ak(ev, ak_public, a, al, ak_format));
	SL_GUARD(sl_file_read(pcrs, SEL_SIZE + 4 + MAX_LISTS * LIST_SIZE, &p, &pl));
	rc = parse_pcr_file(p, pl, v);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "%s", pcrs);
		goto out;
	}
	SL_GUARD(sl_tpm2_pcrs_json(v, &pj));
	SL_ENSURE(json_object_set_new(ev, "pcrs", pj) == 0, SL_E_NOMEM, "evidence");
	pj = NULL;
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(pj);
	free(v);
	free(m);
	free(s);
	free(p);
	free(a);
	return rc;
}
