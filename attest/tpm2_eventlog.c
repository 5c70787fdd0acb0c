/* The TCG PC Client crypto-agile event log (TCG PC Client Platform Firmware
 * Profile, section 10): a TCG_PCClientPCREvent header carrying the "Spec ID
 * Event03" description of the digest algorithms, then TCG_PCR_EVENT2
 * records. All integers little-endian. Replaying the log must reproduce the
 * quoted PCRs; the SecureBoot variable measured into PCR 7 becomes a claim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "tpm2_int.h"

#define EV_NO_ACTION 0x00000003u
#define EV_EFI_VARIABLE_DRIVER_CONFIG 0x80000001u
#define MAX_ALGS 8
#define MAX_EVENTS 100000
#define MAX_EVENT_DATA (1u << 20)

typedef struct spec {
	size_t nalgs;
	TPM2_ALG_ID alg[MAX_ALGS];
	uint16_t size[MAX_ALGS];
} spec;

typedef struct replay {
	const sl_tpm2_pcrs *pcrs;
	uint8_t value[TPM2_NUM_PCR_BANKS][24][64];
	uint32_t touched[TPM2_NUM_PCR_BANKS];
	int bank_of[MAX_ALGS]; /* log algorithm -> pcrs bank, -1 when not quoted */
	int secure_boot;       /* -1 unknown, 0 off, 1 on */
} replay;

static SL_RESULT read_spec(sl_reader *r, spec *s)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader ev;
	uint32_t pcr, type, size, nalgs;
	uint8_t sig[16], vlen;
	static const uint8_t want[16] = "Spec ID Event03";

	SL_GUARD(sl_read_u32le(r, &pcr, "header.pcrIndex"));
	SL_GUARD(sl_read_u32le(r, &type, "header.eventType"));
	SL_ENSURE(pcr == 0 && type == EV_NO_ACTION, SL_E_ATTEST_FORMAT,
	          "event log: the first event is not the EV_NO_ACTION Spec ID event");
	SL_GUARD(sl_read_skip(r, 20, "header.digest"));
	SL_GUARD(sl_read_u32le(r, &size, "header.eventSize"));
	SL_GUARD(sl_read_sub(r, size, &ev, "header.event"));
	SL_GUARD(sl_read_bytes(&ev, sig, sizeof(sig), "specId.signature"));
	SL_ENSURE(memcmp(sig, want, sizeof(want)) == 0, SL_E_ATTEST_FORMAT,
	          "event log: not a crypto-agile log (no \"Spec ID Event03\")");
	SL_GUARD(sl_read_skip(&ev, 4 + 4, "specId.platformClass/version/uintnSize"));
	SL_GUARD(sl_read_u32le(&ev, &nalgs, "specId.numberOfAlgorithms"));
	SL_ENSURE(nalgs >= 1 && nalgs <= MAX_ALGS, SL_E_ATTEST_FORMAT,
	          "event log: %u digest algorithms", nalgs);
	s->nalgs = nalgs;
	for (uint32_t i = 0; i < nalgs; i++) {
		SL_GUARD(sl_read_u16le(&ev, &s->alg[i], "specId.digestSizes.algorithmId"));
		SL_GUARD(sl_read_u16le(&ev, &s->size[i], "specId.digestSizes.digestSize"));
		SL_ENSURE(s->size[i] >= 1 && s->size[i] <= 64, SL_E_ATTEST_FORMAT,
		          "event log: digest size %u", s->size[i]);
		const EVP_MD *md = sl_tpm2_md(s->alg[i]);
		SL_ENSURE(md == NULL || (size_t)EVP_MD_get_size(md) == s->size[i],
		          SL_E_ATTEST_FORMAT, "event log: algorithm 0x%04x with digest size %u",
		          s->alg[i], s->size[i]);
	}
	SL_GUARD(sl_read_u8(&ev, &vlen, "specId.vendorInfoSize"));
	SL_GUARD(sl_read_skip(&ev, vlen, "specId.vendorInfo"));
	SL_GUARD(sl_reader_expect_end(&ev));
	rc = SL_OK;
out:
	return rc;
}

/* UEFI_VARIABLE_DATA named "SecureBoot": its first data byte is the state. */
static SL_RESULT secure_boot_var(const uint8_t *data, size_t len, int *state)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	uint64_t nlen, dlen;
	const uint8_t *name;
	uint8_t v;
	static const char sb[] = "SecureBoot";

	*state = -1;
	sl_reader_init(&r, data, len, "event log: UEFI_VARIABLE_DATA");
	SL_GUARD(sl_read_skip(&r, 16, "VariableName"));
	SL_GUARD(sl_read_u64le(&r, &nlen, "UnicodeNameLength"));
	SL_GUARD(sl_read_u64le(&r, &dlen, "VariableDataLength"));
	SL_ENSURE(nlen <= 1024 && dlen <= MAX_EVENT_DATA, SL_E_ATTEST_FORMAT,
	          "event log: UEFI variable lengths %llu/%llu", (unsigned long long)nlen,
	          (unsigned long long)dlen);
	SL_GUARD(sl_read_view(&r, (size_t)nlen * 2, &name, "UnicodeName"));
	if (nlen == sizeof(sb) - 1) {
		bool match = true;
		for (size_t i = 0; i < nlen; i++)
			match = match && name[2 * i] == (uint8_t)sb[i] && name[2 * i + 1] == 0;
		if (match && dlen >= 1) {
			SL_GUARD(sl_read_u8(&r, &v, "VariableData"));
			*state = v != 0;
		}
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT one_event(sl_reader *r, const spec *s, replay *rp, size_t idx)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint32_t pcr, type, count, size;
	const uint8_t *digest[MAX_ALGS], *data;
	char field[64];

	snprintf(field, sizeof(field), "event[%zu]", idx);
	SL_GUARD(sl_read_u32le(r, &pcr, "event.pcrIndex"));
	SL_GUARD(sl_read_u32le(r, &type, "event.eventType"));
	SL_GUARD(sl_read_u32le(r, &count, "event.digests.count"));
	SL_ENSURE(count == s->nalgs, SL_E_ATTEST_FORMAT,
	          "event log: %s has %u digests, the header names %zu algorithms", field, count,
	          s->nalgs);
	for (uint32_t i = 0; i < count; i++) {
		uint16_t alg;
		SL_GUARD(sl_read_u16le(r, &alg, "event.digests.hashAlg"));
		SL_ENSURE(alg == s->alg[i], SL_E_ATTEST_FORMAT,
		          "event log: %s digest %u is algorithm 0x%04x, expected 0x%04x", field, i,
		          alg, s->alg[i]);
		SL_GUARD(sl_read_view(r, s->size[i], &digest[i], "event.digests.digest"));
	}
	SL_GUARD(sl_read_u32le(r, &size, "event.eventSize"));
	SL_ENSURE(size <= MAX_EVENT_DATA, SL_E_ATTEST_FORMAT, "event log: %s of %u bytes", field,
	          size);
	SL_GUARD(sl_read_view(r, size, &data, "event.event"));
	if (rp == NULL || type == EV_NO_ACTION)
		goto done;
	SL_ENSURE(pcr < 24, SL_E_ATTEST_FORMAT, "event log: %s extends PCR %u", field, pcr);
	if (pcr == 7 && type == EV_EFI_VARIABLE_DRIVER_CONFIG) {
		int state;
		SL_GUARD(secure_boot_var(data, size, &state));
		if (state >= 0) {
			/* The claim comes from the event data, so the data must be what
			 * the digests (and thereby the quoted PCR) measured. */
			for (size_t i = 0; i < s->nalgs; i++) {
				uint8_t h[64];
				size_t hl;
				if (sl_tpm2_md(s->alg[i]) == NULL)
					continue;
				SL_GUARD(sl_tpm2_digest(s->alg[i], data, size, h, &hl));
				SL_ENSURE(
				    hl == s->size[i] && sl_ct_eq(h, digest[i], hl), SL_E_ATTEST,
				    "event log: %s (SecureBoot variable) data does not match its "
				    "%s digest",
				    field, sl_tpm2_hash_name(s->alg[i]));
			}
			rp->secure_boot = state;
		}
	}
	for (size_t i = 0; i < s->nalgs; i++) {
		int b = rp->bank_of[i];
		uint8_t buf[128];
		size_t hl;
		if (b < 0)
			continue;
		memcpy(buf, rp->value[b][pcr], s->size[i]);
		memcpy(buf + s->size[i], digest[i], s->size[i]);
		SL_GUARD(sl_tpm2_digest(s->alg[i], buf, 2 * s->size[i], rp->value[b][pcr], &hl));
		rp->touched[b] |= 1u << pcr;
	}
done:
	rc = SL_OK;
out:
	return rc;
}

/* A StartupLocality EV_NO_ACTION event sets PCR 0's initial value. */
static void startup_locality(const uint8_t *p, size_t len, spec *s, replay *rp)
{
	sl_reader r;
	uint32_t pcr, type, count, size;
	const uint8_t *data;
	static const uint8_t sig[16] = "StartupLocality";

	sl_reader_init(&r, p, len, "event log");
	if (sl_read_u32le(&r, &pcr, "") != SL_OK || sl_read_u32le(&r, &type, "") != SL_OK ||
	    sl_read_u32le(&r, &count, "") != SL_OK || count != s->nalgs) {
		sl_err_clear();
		return;
	}
	for (size_t i = 0; i < s->nalgs; i++) {
		if (sl_read_skip(&r, 2 + (size_t)s->size[i], "") != SL_OK) {
			sl_err_clear();
			return;
		}
	}
	if (sl_read_u32le(&r, &size, "") != SL_OK || sl_read_view(&r, size, &data, "") != SL_OK) {
		sl_err_clear();
		return;
	}
	if (pcr == 0 && type == EV_NO_ACTION && size >= 17 && memcmp(data, sig, 16) == 0) {
		for (size_t i = 0; i < s->nalgs; i++) {
			if (rp->bank_of[i] >= 0)
				rp->value[rp->bank_of[i]][0][s->size[i] - 1] = data[16];
		}
	}
}

static SL_RESULT walk(const uint8_t *log, size_t len, replay *rp, spec *s)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	size_t n = 0;

	sl_reader_init(&r, log, len, "event log");
	SL_GUARD(read_spec(&r, s));
	if (rp != NULL) {
		for (size_t i = 0; i < s->nalgs; i++) {
			rp->bank_of[i] = -1;
			for (size_t b = 0; b < rp->pcrs->nbanks; b++) {
				if (rp->pcrs->alg[b] == s->alg[i])
					rp->bank_of[i] = (int)b;
			}
		}
		startup_locality(log + sl_reader_offset(&r), sl_reader_left(&r), s, rp);
	}
	while (sl_reader_left(&r) > 0) {
		SL_ENSURE(n < MAX_EVENTS, SL_E_ATTEST_FORMAT, "event log: more than %d events",
		          MAX_EVENTS);
		SL_GUARD(one_event(&r, s, rp, n));
		n++;
	}
	rc = SL_OK;
out:
	/* a malformed log is malformed evidence: an attestation failure */
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

sl_err sl_tpm2_eventlog_parse(const uint8_t *log, size_t len)
{
	spec s;
	return walk(log, len, NULL, &s);
}

sl_err sl_tpm2_eventlog_check(const uint8_t *log, size_t len, const sl_tpm2_pcrs *pcrs,
                              sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	static replay rp_zero;
	replay *rp = NULL;
	spec s;
	char list[128] = "", hex[129], want[129];
	size_t ll = 0;
	bool pcr7 = false;

	rp = malloc(sizeof(*rp));
	SL_ENSURE(rp != NULL, SL_E_NOMEM, "event log replay");
	*rp = rp_zero;
	rp->pcrs = pcrs;
	rp->secure_boot = -1;
	SL_GUARD(walk(log, len, rp, &s));
	for (size_t b = 0; b < pcrs->nbanks; b++) {
		const EVP_MD *md = sl_tpm2_md(pcrs->alg[b]);
		size_t dl = md != NULL ? (size_t)EVP_MD_get_size(md) : 0;
		for (unsigned i = 0; i < 24; i++) {
			if (!(rp->touched[b] & pcrs->set[b] & (1u << i)))
				continue;
			if (memcmp(rp->value[b][i], pcrs->value[b][i], dl) != 0) {
				sl_hex_encode(rp->value[b][i], dl, hex);
				sl_hex_encode(pcrs->value[b][i], dl, want);
				SL_FAIL(SL_E_ATTEST,
				        "event log: replay of PCR %s.%u gives %s, the quote has %s",
				        sl_tpm2_hash_name(pcrs->alg[b]), i, hex, want);
			}
			if (i == 7)
				pcr7 = true;
		}
	}
	/* the PCRs the log reproduced (any bank) */
	for (unsigned i = 0; i < 24; i++) {
		bool any = false;
		for (size_t b = 0; b < pcrs->nbanks; b++)
			any = any || (rp->touched[b] & pcrs->set[b] & (1u << i));
		if (any)
			ll += (size_t)snprintf(list + ll, sizeof(list) - ll, "%s%u", ll ? "," : "",
			                       i);
	}
	SL_GUARD(sl_claims_set(claims, "tpm.eventlog", ll > 0 ? "replayed" : "no-quoted-pcrs"));
	SL_GUARD(sl_claims_set(claims, "tpm.eventlog.pcrs", list));
	SL_GUARD(sl_claims_set(claims, "tpm.secure_boot",
	                       !pcr7 || rp->secure_boot < 0 ? "unknown"
	                       : rp->secure_boot            ? "enabled"
	                                                    : "disabled"));
	rc = SL_OK;
out:
	free(rp);
	return rc;
}
