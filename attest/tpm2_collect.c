/* Collects a "tpm2" evidence object: a quote by the persistent AK over the
 * selected PCRs, their values, the AK public area, certificates from NV and
 * the measured-boot event log when readable (docs/evidence.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tss2/tss2_mu.h>

#include "kinds.h"
#include "seclaunch/util.h"
#include "tpm2_int.h"

#define DEFAULT_PCRS "sha256:0,1,2,3,4,5,6,7"
#define DEFAULT_EVENTLOG "/sys/kernel/security/tpm0/binary_bios_measurements"

/* "sha256:0,1,2+sha1:0,7" (tpm2-tools' syntax) */
static SL_RESULT parse_pcrs(const char *spec, TPML_PCR_SELECTION *sel)
{
	sl_err rc = SL_E_USAGE;
	char buf[256], *save = NULL, *bank;

	memset(sel, 0, sizeof(*sel));
	SL_ENSURE(strlen(spec) < sizeof(buf), SL_E_USAGE, "--pcrs: too long");
	memcpy(buf, spec, strlen(spec) + 1);
	for (bank = strtok_r(buf, "+", &save); bank != NULL; bank = strtok_r(NULL, "+", &save)) {
		char *colon = strchr(bank, ':'), *list, *s2 = NULL, *num;
		TPMS_PCR_SELECTION *s;
		SL_ENSURE(colon != NULL, SL_E_USAGE, "--pcrs '%s': want BANK:N,N,...", bank);
		*colon = '\0';
		list = colon + 1;
		SL_ENSURE(sel->count < TPM2_NUM_PCR_BANKS, SL_E_USAGE, "--pcrs: too many banks");
		s = &sel->pcrSelections[sel->count];
		s->hash = sl_tpm2_hash_from_name(bank);
		SL_ENSURE(s->hash != TPM2_ALG_ERROR, SL_E_USAGE, "--pcrs: unknown bank '%s'", bank);
		for (uint32_t j = 0; j < sel->count; j++)
			SL_ENSURE(sel->pcrSelections[j].hash != s->hash, SL_E_USAGE,
			          "--pcrs: bank %s given twice", bank);
		s->sizeofSelect = 3;
		for (num = strtok_r(list, ",", &s2); num != NULL; num = strtok_r(NULL, ",", &s2)) {
			char *end;
			long n = strtol(num, &end, 10);
			SL_ENSURE(isdigit((unsigned char)*num) && *end == '\0' && n >= 0 && n < 24,
			          SL_E_USAGE, "--pcrs: '%s' is not a PCR index 0..23", num);
			s->pcrSelect[n / 8] |= (uint8_t)(1u << (n % 8));
		}
		SL_ENSURE(s->pcrSelect[0] | s->pcrSelect[1] | s->pcrSelect[2], SL_E_USAGE,
		          "--pcrs: bank %s selects no PCR", bank);
		sel->count++;
	}
	SL_ENSURE(sel->count > 0, SL_E_USAGE, "--pcrs: empty selection");
	rc = SL_OK;
out:
	return rc;
}

/* Refuses a bank this TPM has not allocated (its PCRs would read empty). */
static SL_RESULT check_banks(sl_tpm2_conn *c, const TPML_PCR_SELECTION *sel)
{
	sl_err rc = SL_E_TPM;
	TPMI_YES_NO more;
	TPMS_CAPABILITY_DATA *cap = NULL;

	SL_GUARD_TSS(Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
	                                TPM2_CAP_PCRS, 0, 1, &more, &cap),
	             SL_E_TPM, "listing PCR banks");
	for (uint32_t i = 0; i < sel->count; i++) {
		const TPMS_PCR_SELECTION *want = &sel->pcrSelections[i];
		bool ok = false;
		for (uint32_t j = 0; j < cap->data.assignedPCR.count; j++) {
			const TPMS_PCR_SELECTION *have = &cap->data.assignedPCR.pcrSelections[j];
			if (have->hash != want->hash)
				continue;
			ok = true;
			for (unsigned k = 0; k < 3; k++)
				ok = ok && (want->pcrSelect[k] & ~have->pcrSelect[k]) == 0;
		}
		SL_ENSURE(ok, SL_E_TPM, "--pcrs: the TPM has not allocated (all of) PCR bank %s",
		          sl_tpm2_hash_name(want->hash));
	}
	rc = SL_OK;
out:
	Esys_Free(cap);
	return rc;
}

/* Reads every selected PCR (PCR_Read returns at most 8 at a time). */
static SL_RESULT read_pcrs(sl_tpm2_conn *c, const TPML_PCR_SELECTION *sel, sl_tpm2_pcrs *p)
{
	sl_err rc = SL_E_TPM;
	TPML_PCR_SELECTION left = *sel, *got = NULL;
	TPML_DIGEST *vals = NULL;
	UINT32 counter;

	memset(p, 0, sizeof(*p));
	p->nbanks = sel->count;
	for (uint32_t i = 0; i < sel->count; i++)
		p->alg[i] = sel->pcrSelections[i].hash;
	for (int round = 0; round < 32; round++) {
		bool any = false;
		size_t vi = 0;
		for (uint32_t i = 0; i < left.count; i++)
			any = any || (left.pcrSelections[i].pcrSelect[0] |
			              left.pcrSelections[i].pcrSelect[1] |
			              left.pcrSelections[i].pcrSelect[2]);
		if (!any)
			break;
		SL_GUARD_TSS(Esys_PCR_Read(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &left,
		                           &counter, &got, &vals),
		             SL_E_TPM, "reading PCRs");
		SL_ENSURE(vals->count > 0, SL_E_TPM, "reading PCRs: the TPM returned none");
		for (uint32_t i = 0; i < got->count; i++) {
			const TPMS_PCR_SELECTION *g = &got->pcrSelections[i];
			uint32_t b = 0;
			while (b < sel->count && sel->pcrSelections[b].hash != g->hash)
				b++;
			SL_ENSURE(b < sel->count, SL_E_TPM, "reading PCRs: unexpected bank");
			for (unsigned n = 0; n < 24; n++) {
				if (n / 8 >= g->sizeofSelect ||
				    !(g->pcrSelect[n / 8] & (1u << (n % 8))))
					continue;
				SL_ENSURE(vi < vals->count && vals->digests[vi].size <= 64,
				          SL_E_TPM, "reading PCRs: short answer");
				memcpy(p->value[b][n], vals->digests[vi].buffer,
				       vals->digests[vi].size);
				p->set[b] |= 1u << n;
				left.pcrSelections[b].pcrSelect[n / 8] &=
				    (uint8_t) ~(1u << (n % 8));
				vi++;
			}
		}
		Esys_Free(got);
		Esys_Free(vals);
		got = NULL;
		vals = NULL;
	}
	rc = SL_OK;
out:
	Esys_Free(got);
	Esys_Free(vals);
	return rc;
}

static SL_RESULT pcr_digest(const TPML_PCR_SELECTION *sel, const sl_tpm2_pcrs *p, TPM2_ALG_ID hash,
                            uint8_t *out, size_t *len)
{
	sl_err rc = SL_E_CRYPTO;
	uint8_t buf[TPM2_NUM_PCR_BANKS * 24 * 64];
	size_t n = 0;

	for (uint32_t b = 0; b < sel->count; b++) {
		size_t dl = (size_t)EVP_MD_get_size(sl_tpm2_md(sel->pcrSelections[b].hash));
		for (unsigned i = 0; i < 24; i++) {
			if (!(p->set[b] & (1u << i)))
				continue;
			memcpy(buf + n, p->value[b][i], dl);
			n += dl;
		}
	}
	SL_GUARD(sl_tpm2_digest(hash, buf, n, out, len));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_json_put_b64(json_t *obj, const char *key, const uint8_t *p, size_t len)
{
	char *s = NULL;
	sl_err rc = sl_b64_encode(p, len, &s);
	if (rc != SL_OK)
		return rc;
	int r = json_object_set_new(obj, key, json_string(s));
	free(s);
	return r == 0 ? SL_OK : sl_err_set(SL_E_NOMEM, "evidence.%s", key);
}

sl_err sl_tpm2_pcrs_json(const sl_tpm2_pcrs *p, json_t **out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *all = json_object(), *bank = NULL;
	char k[8], hex[129];

	SL_ENSURE(all != NULL, SL_E_NOMEM, "evidence.pcrs");
	for (size_t b = 0; b < p->nbanks; b++) {
		size_t dl = (size_t)EVP_MD_get_size(sl_tpm2_md(p->alg[b]));
		bank = json_object();
		SL_ENSURE(bank != NULL, SL_E_NOMEM, "evidence.pcrs");
		for (unsigned i = 0; i < 24; i++) {
			if (!(p->set[b] & (1u << i)))
				continue;
			snprintf(k, sizeof(k), "%u", i);
			sl_hex_encode(p->value[b][i], dl, hex);
			SL_ENSURE(json_object_set_new(bank, k, json_string(hex)) == 0, SL_E_NOMEM,
			          "evidence.pcrs");
		}
		SL_ENSURE(json_object_set_new(all, sl_tpm2_hash_name(p->alg[b]), bank) == 0,
		          SL_E_NOMEM, "evidence.pcrs");
		bank = NULL;
	}
	*out = all;
	all = NULL;
	rc = SL_OK;
out:
	json_decref(bank);
	json_decref(all);
	return rc;
}

/* Adds NV index idx to the evidence as key (and key_nv) when defined. */
static SL_RESULT add_nv(sl_tpm2_conn *c, json_t *ev, uint32_t idx, bool defined, const char *key)
{
	sl_err rc;
	uint8_t *p = NULL;
	size_t len = 0;
	char k[32], v[16];

	if (!defined || json_object_get(ev, key) != NULL)
		return SL_OK;
	rc = sl_tpm2_nv_read_defined(c, idx, &p, &len);
	if (rc == SL_E_TPM) {
		/* A certificate the TPM will not hand out (e.g. an index readable
		 * only with an owner password) is left out, not fatal: the
		 * verifier decides whether it needs one. */
		fprintf(stderr, "seclaunch: warning: %s\n", sl_err_detail());
		sl_err_clear();
		return SL_OK;
	}
	if (rc == SL_OK && p != NULL) {
		rc = sl_tpm2_json_put_b64(ev, key, p, len);
		snprintf(k, sizeof(k), "%s_nv", key);
		snprintf(v, sizeof(v), "0x%08x", idx);
		if (rc == SL_OK && json_object_set_new(ev, k, json_string(v)) != 0)
			rc = sl_err_set(SL_E_NOMEM, "evidence");
	}
	free(p);
	return rc;
}

static SL_RESULT add_eventlog(json_t *ev)
{
	const char *path = getenv("SECLAUNCH_EVENTLOG");
	uint8_t *p = NULL;
	size_t len = 0;
	sl_err rc;

	if (path == NULL || *path == '\0')
		path = DEFAULT_EVENTLOG;
	if (sl_file_read(path, SL_TPM2_EVENTLOG_MAX, &p, &len) != SL_OK) {
		sl_err_clear(); /* not readable here (no firmware log, or not root) */
		return SL_OK;
	}
	rc = len > 0 ? sl_tpm2_json_put_b64(ev, "event_log", p, len) : SL_OK;
	free(p);
	return rc;
}

static SL_RESULT sl_tpm2_collect_evidence(const sl_collect_opts *o, json_t **out)
{
	sl_err rc = SL_E_TPM;
	sl_tpm2_conn c = {0};
	sl_tpm2_key_opts ko = {.tcti = o->tcti};
	ESYS_TR ak = ESYS_TR_NONE;
	TPM2B_PUBLIC *akpub = NULL;
	TPML_PCR_SELECTION sel;
	TPM2B_DATA qual = {0};
	TPMT_SIG_SCHEME in_scheme = {.scheme = TPM2_ALG_NULL};
	TPM2B_ATTEST *quoted = NULL;
	TPMT_SIGNATURE *sig = NULL;
	TPMS_ATTEST a;
	sl_tpm2_pcrs *pcrs = NULL;
	json_t *ev = NULL, *pj = NULL;
	uint8_t sigbuf[sizeof(TPMT_SIGNATURE)], d[64], name[SL_TPM2_NAME_MAX], *akbytes = NULL;
	size_t sigoff = 0, dl = 0, name_len = 0, aklen = 0;
	uint32_t handle = 0;
	const char *alg = getenv("SECLAUNCH_AK_ALG");
	char hex[2 * SL_TPM2_NAME_MAX + 1], hs[16];
	int tries;

	*out = NULL;
	if (alg != NULL && *alg != '\0')
		SL_GUARD(sl_tpm2_alg_parse(alg, &ko.ak_alg));
	SL_GUARD(parse_pcrs(o->pcrs != NULL ? o->pcrs : DEFAULT_PCRS, &sel));
	SL_ENSURE(o->nonce_len <= 64, SL_E_USAGE, "--nonce: at most 64 bytes");
	if (o->nonce != NULL) {
		qual.size = (UINT16)o->nonce_len;
		memcpy(qual.buffer, o->nonce, o->nonce_len);
	}
	pcrs = malloc(sizeof(*pcrs));
	SL_ENSURE(pcrs != NULL, SL_E_NOMEM, "pcrs");
	SL_GUARD(sl_tpm2_connect(o->tcti, &c));
	SL_GUARD(check_banks(&c, &sel));
	SL_GUARD(sl_tpm2_ak_load(&c, &ko, true, &ak, &akpub, &handle));
	/* A PCR may be extended between the quote and the read: retry until the
	 * values read reproduce the quoted digest. */
	for (tries = 0;; tries++) {
		SL_ENSURE(tries < 5, SL_E_TPM, "PCRs keep changing under the quote");
		Esys_Free(quoted);
		Esys_Free(sig);
		quoted = NULL;
		sig = NULL;
		SL_GUARD_TSS(Esys_Quote(c.esys, ak, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
		                        &qual, &in_scheme, &sel, &quoted, &sig),
		             SL_E_TPM, "TPM2_Quote with the AK at 0x%08x", handle);
		SL_GUARD(read_pcrs(&c, &sel, pcrs));
		SL_GUARD(sl_tpm2_mu_attest(quoted->attestationData, quoted->size, &a));
		SL_GUARD(pcr_digest(&sel, pcrs,
		                    sig->sigAlg == TPM2_ALG_ECDSA ? sig->signature.ecdsa.hash
		                                                  : sig->signature.rsassa.hash,
		                    d, &dl));
		if (dl == a.attested.quote.pcrDigest.size &&
		    memcmp(d, a.attested.quote.pcrDigest.buffer, dl) == 0)
			break;
	}
	SL_GUARD_TSS(Tss2_MU_TPMT_SIGNATURE_Marshal(sig, sigbuf, sizeof(sigbuf), &sigoff),
	             SL_E_INTERNAL, "marshalling the signature");
	SL_GUARD(sl_tpm2_marshal_public(akpub, &akbytes, &aklen));
	SL_GUARD(sl_tpm2_tpmt_name(&akpub->publicArea, name, &name_len));

	ev = json_object();
	SL_ENSURE(ev != NULL, SL_E_NOMEM, "evidence");
	SL_ENSURE(json_object_set_new(ev, "kind", json_string("tpm2")) == 0 &&
	              json_object_set_new(ev, "version", json_integer(1)) == 0,
	          SL_E_NOMEM, "evidence");
	SL_GUARD(sl_tpm2_json_put_b64(ev, "tpms_attest", quoted->attestationData, quoted->size));
	SL_GUARD(sl_tpm2_json_put_b64(ev, "signature", sigbuf, sigoff));
	SL_GUARD(sl_tpm2_pcrs_json(pcrs, &pj));
	SL_ENSURE(json_object_set_new(ev, "pcrs", pj) == 0, SL_E_NOMEM, "evidence");
	pj = NULL;
	SL_GUARD(sl_tpm2_json_put_b64(ev, "ak_public", akbytes, aklen));
	sl_hex_encode(name, name_len, hex);
	snprintf(hs, sizeof(hs), "0x%08x", handle);
	SL_ENSURE(json_object_set_new(ev, "ak_name", json_string(hex)) == 0 &&
	              json_object_set_new(ev, "ak_handle", json_string(hs)) == 0,
	          SL_E_NOMEM, "evidence");
	/* which certificates the TPM holds: one listing, not one per index */
	const uint32_t nvs[3] = {akpub->publicArea.type == TPM2_ALG_ECC ? SL_TPM2_NV_AK_CERT_ECC
	                                                                : SL_TPM2_NV_AK_CERT_RSA,
	                         SL_TPM2_NV_EK_CERT_RSA, SL_TPM2_NV_EK_CERT_ECC};
	bool defined[3];
	SL_GUARD(sl_tpm2_nv_present(&c, nvs, 3, defined));
	SL_GUARD(add_nv(&c, ev, nvs[0], defined[0], "ak_cert"));
	SL_GUARD(add_nv(&c, ev, nvs[1], defined[1], "ek_cert"));
	SL_GUARD(add_nv(&c, ev, nvs[2], defined[2], "ek_cert"));
	SL_GUARD(add_eventlog(ev));
	if (o->export_ak_pem != NULL) {
		char *pem = NULL;
		SL_GUARD(sl_tpm2_public_to_pem(akbytes, aklen, &pem));
		rc = sl_file_write_atomic(o->export_ak_pem, pem, strlen(pem), 0644, true);
		free(pem);
		SL_GUARD(rc);
	}
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	if (ak != ESYS_TR_NONE)
		(void)Esys_TR_Close(c.esys, &ak);
	sl_tpm2_disconnect(&c);
	Esys_Free(akpub);
	Esys_Free(quoted);
	Esys_Free(sig);
	free(akbytes);
	free(pcrs);
	json_decref(pj);
	json_decref(ev);
	return rc;
}

static bool tpm2_available(const sl_collect_opts *o)
{
	const char *t = sl_tpm2_tcti_string(o->tcti);
	if (strncmp(t, "device:", 7) == 0)
		return access(t + 7, R_OK | W_OK) == 0;
	return true; /* a simulator or another TCTI was named explicitly */
}

const sl_evidence_kind sl_kind_tpm2 = {
    .name = "tpm2",
    .available = tpm2_available,
    .collect = sl_tpm2_collect_evidence,
    .verify = sl_tpm2_verify_evidence,
};
