/* Verifies a "tpm2" evidence object (docs/evidence.md) without a TPM.
 *
 * Order: structure (strict unmarshalling, magic, type), AK public area
 * (restricted-signing attributes, name), binding (extraData), PCR values
 * (recomputed pcrDigest), signature, trust in the AK, event log. Every
 * failure names the field or check at fault. */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"
#include "tpm2_int.h"

typedef struct blobs {
	uint8_t *attest, *sig, *akpub, *akspki, *akcert, *ekcert, *log;
	size_t attest_len, sig_len, akpub_len, akspki_len, akcert_len, ekcert_len, log_len;
} blobs;

static void blobs_free(blobs *b)
{
	free(b->attest);
	free(b->sig);
	free(b->akpub);
	free(b->akspki);
	free(b->akcert);
	free(b->ekcert);
	free(b->log);
}

/* A base64 field: required, or optional (absent -> NULL). */
static SL_RESULT b64_field(const json_t *ev, const char *name, bool required, size_t max,
                           uint8_t **out, size_t *len)
{
	const json_t *v = json_object_get(ev, name);
	char field[64];

	*out = NULL;
	*len = 0;
	if (v == NULL && !required)
		return SL_OK;
	if (!json_is_string(v))
		return sl_err_set(SL_E_ATTEST_FORMAT, "evidence.%s: missing or not a string", name);
	snprintf(field, sizeof(field), "evidence.%s", name);
	sl_err rc = sl_b64_decode(json_string_value(v), max, out, len, field);
	if (rc != SL_OK)
		return sl_err_wrap(SL_E_ATTEST_FORMAT, "evidence");
	return SL_OK;
}

static SL_RESULT read_blobs(const json_t *ev, blobs *b)
{
	sl_err rc = SL_E_ATTEST_FORMAT;

	SL_GUARD(b64_field(ev, "tpms_attest", true, SL_TPM2_BLOB_MAX, &b->attest, &b->attest_len));
	SL_GUARD(b64_field(ev, "signature", true, SL_TPM2_BLOB_MAX, &b->sig, &b->sig_len));
	/* ak_spki: an AK known only as a public key (tpm2_readpublic -f pem) */
	SL_GUARD(b64_field(ev, "ak_spki", false, SL_TPM2_BLOB_MAX, &b->akspki, &b->akspki_len));
	SL_GUARD(b64_field(ev, "ak_public", b->akspki == NULL, SL_TPM2_BLOB_MAX, &b->akpub,
	                   &b->akpub_len));
	SL_ENSURE(b->akpub == NULL || b->akspki == NULL, SL_E_ATTEST_FORMAT,
	          "evidence: both ak_public and ak_spki given (one AK)");
	SL_GUARD(b64_field(ev, "ak_cert", false, SL_TPM2_CERT_MAX, &b->akcert, &b->akcert_len));
	SL_GUARD(b64_field(ev, "ek_cert", false, SL_TPM2_CERT_MAX, &b->ekcert, &b->ekcert_len));
	SL_GUARD(b64_field(ev, "event_log", false, SL_TPM2_EVENTLOG_MAX, &b->log, &b->log_len));
	rc = SL_OK;
out:
	return rc;
}

/* evidence.pcrs {"sha256": {"0": "hex", ...}, ...} must hold exactly the
 * quote's selection; the values, concatenated in selection order and hashed
 * with the signature's hash, must give pcrDigest. */
static SL_RESULT check_pcrs(const json_t *ev, const TPMS_QUOTE_INFO *q, TPM2_ALG_ID hash,
                            sl_tpm2_pcrs *pcrs, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const json_t *all = json_object_get(ev, "pcrs"), *bank, *v;
	const char *bname, *key;
	EVP_MD_CTX *mctx = EVP_MD_CTX_new();
	uint8_t d[64];
	unsigned int dl = 0;
	char ck[64], hex[129];

	memset(pcrs, 0, sizeof(*pcrs));
	SL_ENSURE(mctx != NULL, SL_E_NOMEM, "pcrs");
	SL_ENSURE(json_is_object(all), SL_E_ATTEST_FORMAT,
	          "evidence.pcrs: missing or not an object");
	SL_ENSURE(q->pcrSelect.count >= 1 && q->pcrSelect.count <= TPM2_NUM_PCR_BANKS,
	          SL_E_ATTEST_FORMAT, "TPMS_ATTEST.pcrSelect: %u banks", q->pcrSelect.count);
	SL_ENSURE(json_object_size(all) == q->pcrSelect.count, SL_E_ATTEST_FORMAT,
	          "evidence.pcrs: %zu banks, the quote selects %u", json_object_size(all),
	          q->pcrSelect.count);
	SL_GUARD_OSSL(EVP_DigestInit_ex(mctx, sl_tpm2_md(hash), NULL) == 1, SL_E_CRYPTO,
	              "pcrDigest");
	for (uint32_t i = 0; i < q->pcrSelect.count; i++) {
		const TPMS_PCR_SELECTION *s = &q->pcrSelect.pcrSelections[i];
		const EVP_MD *md = sl_tpm2_md(s->hash);
		size_t vlen = md != NULL ? (size_t)EVP_MD_get_size(md) : 0, nsel = 0;
		bname = sl_tpm2_hash_name(s->hash);
		SL_ENSURE(bname != NULL, SL_E_ATTEST_FORMAT,
		          "TPMS_ATTEST.pcrSelect: bank 0x%04x not supported", s->hash);
		for (uint32_t j = 0; j < i; j++)
			SL_ENSURE(q->pcrSelect.pcrSelections[j].hash != s->hash, SL_E_ATTEST_FORMAT,
			          "TPMS_ATTEST.pcrSelect: bank %s selected twice", bname);
		bank = json_object_get(all, bname);
		SL_ENSURE(json_is_object(bank), SL_E_ATTEST_FORMAT,
		          "evidence.pcrs.%s: missing (the quote selects this bank)", bname);
		pcrs->alg[i] = s->hash;
		pcrs->nbanks = i + 1;
		for (unsigned p = 0; p < (unsigned)s->sizeofSelect * 8; p++) {
			if (!(s->pcrSelect[p / 8] & (1u << (p % 8))))
				continue;
			SL_ENSURE(p < 24, SL_E_ATTEST_FORMAT, "TPMS_ATTEST.pcrSelect: PCR %u", p);
			snprintf(ck, sizeof(ck), "%u", p);
			v = json_object_get(bank, ck);
			SL_ENSURE(json_is_string(v), SL_E_ATTEST_FORMAT,
			          "evidence.pcrs.%s.%u: missing (the quote selects it)", bname, p);
			rc = sl_hex_decode(json_string_value(v), pcrs->value[i][p], vlen, "pcr");
			if (rc != SL_OK)
				SL_FAIL(SL_E_ATTEST_FORMAT,
				        "evidence.pcrs.%s.%u: not %zu bytes of hex", bname, p,
				        vlen);
			pcrs->set[i] |= 1u << p;
			nsel++;
			SL_GUARD_OSSL(EVP_DigestUpdate(mctx, pcrs->value[i][p], vlen) == 1,
			              SL_E_CRYPTO, "pcrDigest");
			snprintf(ck, sizeof(ck), "tpm.pcr.%s.%u", bname, p);
			SL_GUARD(sl_claims_set_hex(claims, ck, pcrs->value[i][p], vlen));
		}
		SL_ENSURE(json_object_size(bank) == nsel, SL_E_ATTEST_FORMAT,
		          "evidence.pcrs.%s: %zu values, the quote selects %zu", bname,
		          json_object_size(bank), nsel);
	}
	json_object_foreach ((json_t *)all, key, v) {
		TPM2_ALG_ID a = sl_tpm2_hash_from_name(key);
		bool found = false;
		for (size_t b = 0; b < pcrs->nbanks; b++)
			found = found || pcrs->alg[b] == a;
		SL_ENSURE(found, SL_E_ATTEST_FORMAT,
		          "evidence.pcrs.%.16s: not in the quote's selection", key);
	}
	SL_GUARD_OSSL(EVP_DigestFinal_ex(mctx, d, &dl) == 1, SL_E_CRYPTO, "pcrDigest");
	if (dl != q->pcrDigest.size || !sl_ct_eq(d, q->pcrDigest.buffer, dl)) {
		sl_hex_encode(q->pcrDigest.buffer, q->pcrDigest.size < 64 ? q->pcrDigest.size : 64,
		              hex);
		SL_FAIL(SL_E_ATTEST,
		        "pcrDigest: the quote's %s does not match the supplied PCR values", hex);
	}
	rc = SL_OK;
out:
	EVP_MD_CTX_free(mctx);
	return rc;
}

/* magic and type come first, and the type selects how the rest parses:
 * check them before unmarshalling the whole structure. */
static SL_RESULT check_header(const uint8_t *p, size_t len)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	uint32_t magic;
	uint16_t type;

	sl_reader_init(&r, p, len, "TPMS_ATTEST");
	SL_GUARD(sl_read_u32be(&r, &magic, "magic"));
	SL_GUARD(sl_read_u16be(&r, &type, "type"));
	SL_ENSURE(magic == TPM2_GENERATED_VALUE, SL_E_ATTEST,
	          "TPMS_ATTEST.magic: 0x%08x is not TPM_GENERATED_VALUE (not made by a TPM)",
	          magic);
	SL_ENSURE(type == TPM2_ST_ATTEST_QUOTE, SL_E_ATTEST,
	          "TPMS_ATTEST.type: 0x%04x is not TPM_ST_ATTEST_QUOTE", type);
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

static SL_RESULT pin_ok(const char *path, EVP_PKEY *ak)
{
	sl_err rc = SL_E_IO;
	uint8_t *pem = NULL;
	size_t len = 0;
	BIO *bio = NULL;
	EVP_PKEY *pin = NULL;

	SL_GUARD(sl_file_read(path, 65536, &pem, &len));
	bio = BIO_new_mem_buf(pem, (int)len);
	pin = bio != NULL ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
	ERR_clear_error();
	SL_ENSURE(pin != NULL, SL_E_INPUT, "--ak-pin %s: not a PEM public key", path);
	SL_ENSURE(EVP_PKEY_eq(pin, ak) == 1, SL_E_ATTEST_UNTRUSTED,
	          "AK not trusted: the AK is not the pinned key (--ak-pin %s)", path);
	rc = SL_OK;
out:
	ERR_clear_error();
	EVP_PKEY_free(pin);
	BIO_free(bio);
	free(pem);
	return rc;
}

static SL_RESULT cert_ok(const sl_verify_opts *o, const blobs *b, EVP_PKEY *ak)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;
	X509 *cert = NULL;

	SL_ENSURE(b->akcert != NULL, SL_E_ATTEST_UNTRUSTED,
	          "AK not trusted: the evidence carries no AK certificate (--trust %s)",
	          o->trust_dir);
	SL_GUARD(sl_tpm2_x509_parse(b->akcert, b->akcert_len, &cert, "evidence.ak_cert"));
	SL_GUARD(sl_tpm2_cert_verify(cert, o->trust_dir, o->at, ak, "AK certificate"));
	rc = SL_OK;
out:
	X509_free(cert);
	return rc;
}

/* A pin, when given, alone decides (the caller named exactly one key).
 * Otherwise an AK certificate chaining to trust_dir or an enrolled AK name
 * suffices; when both are configured and both refuse, the certificate's
 * reason is reported. Without any: the AK is not trusted. */
static SL_RESULT check_trust(const sl_verify_opts *o, const blobs *b, EVP_PKEY *ak,
                             const uint8_t *name, size_t name_len, const char **how)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;

	if (o->ak_pin_pem != NULL) {
		SL_GUARD(pin_ok(o->ak_pin_pem, ak));
		*how = "pin";
		goto done;
	}
	if (o->trust_dir != NULL) {
		rc = cert_ok(o, b, ak);
		if (rc == SL_OK) {
			*how = "certificate";
			goto done;
		}
		if (name_len == 0 || o->ak_enrolled == NULL ||
		    !o->ak_enrolled(name, name_len, o->ak_enrolled_ctx))
			goto out;
		sl_err_clear();
		*how = "enrolled";
		goto done;
	}
	SL_ENSURE(name_len > 0, SL_E_ATTEST_UNTRUSTED,
	          "AK not trusted: an AK given only as a public key (ak_spki) has no TPM name "
	          "to enroll; give --ak-pin PEM or --trust DIR with an AK certificate");
	SL_ENSURE(o->ak_enrolled != NULL, SL_E_ATTEST_UNTRUSTED,
	          "AK not trusted: give --ak-pin PEM or --trust DIR (or enroll the AK)");
	SL_ENSURE(o->ak_enrolled(name, name_len, o->ak_enrolled_ctx), SL_E_ATTEST_UNTRUSTED,
	          "AK not trusted: this AK is not enrolled");
	*how = "enrolled";
done:
	rc = SL_OK;
out:
	return rc;
}

/* The EK certificate (from NV) says which TPM this is; without credential
 * activation nothing ties it to the AK, so it yields a claim, not a verdict. */
static SL_RESULT ek_cert_claim(const sl_verify_opts *o, const blobs *b, sl_claims *claims)
{
	const char *v = "absent";

	if (b->ekcert != NULL && o->trust_dir == NULL) {
		v = "present";
	} else if (b->ekcert != NULL) {
		v = sl_tpm2_ek_cert_verify(b->ekcert, b->ekcert_len, o->trust_dir, o->at, NULL,
		                           0) == SL_OK
		        ? "verified"
		        : "unverified";
		sl_err_clear();
	}
	return sl_claims_set(claims, "tpm.ek.cert", v);
}

static SL_RESULT attest_claims(const TPMS_ATTEST *a, sl_claims *c)
{
	sl_err rc = SL_E_NOMEM;

	SL_GUARD(sl_claims_setf(c, "tpm.clock", "%llu", (unsigned long long)a->clockInfo.clock));
	SL_GUARD(sl_claims_setf(c, "tpm.reset_count", "%u", a->clockInfo.resetCount));
	SL_GUARD(sl_claims_setf(c, "tpm.restart_count", "%u", a->clockInfo.restartCount));
	SL_GUARD(sl_claims_set(c, "tpm.safe", a->clockInfo.safe ? "true" : "false"));
	SL_GUARD(sl_claims_setf(c, "tpm.firmware_version", "%016llx",
	                        (unsigned long long)a->firmwareVersion));
	rc = SL_OK;
out:
	return rc;
}

static TPM2_ALG_ID sig_hash(const TPMT_SIGNATURE *s)
{
	switch (s->sigAlg) {
	case TPM2_ALG_RSASSA:
	case TPM2_ALG_RSAPSS:
		return s->signature.rsassa.hash;
	case TPM2_ALG_ECDSA:
		return s->signature.ecdsa.hash;
	default:
		return TPM2_ALG_NULL;
	}
}

/* A restricted key signs only with its own scheme. */
static SL_RESULT scheme_matches(const TPMT_PUBLIC *p, const TPMT_SIGNATURE *s)
{
	const TPMT_ASYM_SCHEME *sch = (const TPMT_ASYM_SCHEME *)&p->parameters.asymDetail.scheme;
	if (sch->scheme == TPM2_ALG_NULL)
		return SL_OK;
	if (sch->scheme != s->sigAlg || sch->details.anySig.hashAlg != sig_hash(s))
		return sl_err_set(SL_E_ATTEST_SIG,
		                  "signature: scheme 0x%04x/0x%04x is not the AK's 0x%04x/0x%04x",
		                  s->sigAlg, sig_hash(s), sch->scheme, sch->details.anySig.hashAlg);
	return SL_OK;
}

/* An AK given as a SubjectPublicKeyInfo: the key alone, sized as an AK must
 * be. Its TPM attributes (restricted signing) cannot be seen. */
static SL_RESULT spki_key(const blobs *b, EVP_PKEY **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const unsigned char *q = b->akspki;
	char curve[32] = "";
	size_t n = 0;

	*out = d2i_PUBKEY(NULL, &q, (long)b->akspki_len);
	ERR_clear_error();
	SL_ENSURE(*out != NULL && (size_t)(q - b->akspki) == b->akspki_len, SL_E_ATTEST_FORMAT,
	          "evidence.ak_spki: not a DER SubjectPublicKeyInfo");
	if (EVP_PKEY_is_a(*out, "RSA")) {
		SL_ENSURE(EVP_PKEY_get_bits(*out) >= 2048, SL_E_ATTEST_UNTRUSTED,
		          "AK: RSA key of %d bits", EVP_PKEY_get_bits(*out));
	} else {
		SL_ENSURE(EVP_PKEY_is_a(*out, "EC") &&
		              EVP_PKEY_get_utf8_string_param(*out, "group", curve, sizeof(curve),
		                                             &n) == 1 &&
		              (strcmp(curve, "prime256v1") == 0 ||
		               strcmp(curve, "secp384r1") == 0 || strcmp(curve, "secp521r1") == 0),
		          SL_E_ATTEST_UNTRUSTED, "AK: not an RSA or NIST P-256/384/521 key");
	}
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		EVP_PKEY_free(*out);
		*out = NULL;
	}
	return rc;
}

sl_err sl_tpm2_verify_evidence(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	blobs b = {0};
	TPMS_ATTEST a;
	TPMT_SIGNATURE sig;
	TPM2B_PUBLIC ak;
	EVP_PKEY *key = NULL;
	sl_tpm2_pcrs *pcrs = NULL;
	uint8_t name[SL_TPM2_NAME_MAX], want[SL_TPM2_NAME_MAX];
	size_t name_len = 0;
	const char *how = NULL, *s;
	char hex[2 * SL_TPM2_NAME_MAX + 1];
	const json_t *v;

	SL_ENSURE(json_is_object(ev), SL_E_ATTEST_FORMAT, "evidence: not an object");
	v = json_object_get(ev, "version");
	SL_ENSURE(v == NULL || (json_is_integer(v) && json_integer_value(v) == 1), SL_E_VERSION,
	          "evidence.version: only version 1 is known");
	SL_GUARD(read_blobs(ev, &b));
	SL_GUARD(check_header(b.attest, b.attest_len));
	SL_GUARD(sl_tpm2_mu_attest(b.attest, b.attest_len, &a));
	SL_GUARD(sl_tpm2_mu_signature(b.sig, b.sig_len, &sig));
	SL_ENSURE(sig_hash(&sig) != TPM2_ALG_SHA1, SL_E_ATTEST_SIG,
	          "SHA-1 quotes are refused: the quote is signed with SHA-1 (collisions are "
	          "practical; SHA-256/384/512 only); quote with an AK whose scheme uses "
	          "SHA-256, e.g. tpm2_createak -g sha256, tpm2_quote -g sha256");
	if (b.akspki != NULL) {
		SL_GUARD(spki_key(&b, &key));
	} else {
		SL_GUARD(sl_tpm2_mu_public(b.akpub, b.akpub_len, &ak, "evidence.ak_public"));
		SL_GUARD(sl_tpm2_tpmt_name(&ak.publicArea, name, &name_len));
	}
	if (b.akspki == NULL && (s = sl_json_getstr(ev, "ak_name")) != NULL) {
		SL_ENSURE(strlen(s) == 2 * name_len &&
		              sl_hex_decode(s, want, name_len, "evidence.ak_name") == SL_OK &&
		              memcmp(want, name, name_len) == 0,
		          SL_E_ATTEST,
		          "evidence.ak_name: does not match the AK name recomputed from "
		          "ak_public");
	}
	if (b.akspki == NULL)
		SL_GUARD(sl_tpm2_ak_check_tpmt(&ak.publicArea));

	if (o->no_binding) {
		SL_GUARD(sl_claims_set(claims, "binding", "unchecked"));
	} else {
		SL_ENSURE(o->expect != NULL, SL_E_USAGE, "no expected nonce/binding given");
		SL_ENSURE(
		    a.extraData.size == o->expect_len &&
		        sl_ct_eq(a.extraData.buffer, o->expect, o->expect_len),
		    SL_E_ATTEST_BINDING,
		    "TPMS_ATTEST.extraData: the quote is not bound to the expected nonce/binding "
		    "(%u bytes in the quote, %zu expected)",
		    a.extraData.size, o->expect_len);
		SL_GUARD(
		    sl_claims_set_hex(claims, "binding", a.extraData.buffer, a.extraData.size));
	}

	SL_ENSURE(sl_tpm2_md(sig_hash(&sig)) != NULL, SL_E_ATTEST_SIG,
	          "signature: scheme 0x%04x / hash 0x%04x not supported", sig.sigAlg,
	          sig_hash(&sig));
	pcrs = malloc(sizeof(*pcrs));
	SL_ENSURE(pcrs != NULL, SL_E_NOMEM, "pcrs");
	SL_GUARD(check_pcrs(ev, &a.attested.quote, sig_hash(&sig), pcrs, claims));

	if (b.akspki == NULL) {
		SL_GUARD(sl_tpm2_public_pkey(&ak.publicArea, &key));
		SL_GUARD(scheme_matches(&ak.publicArea, &sig));
	}
	SL_GUARD(sl_tpm2_sig_verify(key, &sig, b.attest, b.attest_len));
	SL_GUARD(check_trust(o, &b, key, name, name_len, &how));

	if (b.log != NULL) {
		SL_GUARD(sl_tpm2_eventlog_check(b.log, b.log_len, pcrs, claims));
	} else {
		SL_GUARD(sl_claims_set(claims, "tpm.eventlog", "absent"));
		SL_GUARD(sl_claims_set(claims, "tpm.secure_boot", "unknown"));
	}
	SL_GUARD(sl_claims_set(claims, "tee.kind", "tpm2"));
	if (b.akspki == NULL) {
		sl_hex_encode(name, name_len, hex);
		SL_GUARD(sl_claims_set(claims, "tpm.ak.name", hex));
	} else {
		/* no TPM public area: restricted signing is the trust anchor's word */
		SL_GUARD(sl_claims_set(claims, "tpm.ak.attributes", "unverified"));
	}
	SL_GUARD(sl_claims_set(claims, "tpm.ak.trust", how));
	SL_GUARD(sl_claims_setf(
	    claims, "tpm.ak.alg", "%s",
	    (b.akspki != NULL ? EVP_PKEY_is_a(key, "RSA") : ak.publicArea.type == TPM2_ALG_RSA)
	        ? "rsa"
	        : "ecc"));
	SL_GUARD(sl_claims_set(claims, "tpm.quote.hash", sl_tpm2_hash_name(sig_hash(&sig))));
	SL_GUARD(ek_cert_claim(o, &b, claims));
	SL_GUARD(attest_claims(&a, claims));
	rc = SL_OK;
out:
	free(pcrs);
	EVP_PKEY_free(key);
	blobs_free(&b);
	return rc;
}
