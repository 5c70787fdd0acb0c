/* The "sev-snp" evidence kind: {"kind":"sev-snp","report":b64,
 * "certs":{"vcek"|"vlek":b64 DER,"ask"|"asvk":b64,"ark":b64}} (certs optional). */
#include <fcntl.h>
#include <linux/sev-guest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kinds.h"
#include "snp_report.h"
#include "snp_tsm.h"
#include "x509_util.h"
#include "seclaunch/buf.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

#define SEV_GUEST_DEV "/dev/sev-guest"
#define MAX_REPORT_B64 4096
#define MAX_CERT 16384

static bool snp_available(const sl_collect_opts *o)
{
	(void)o;
	return access(SEV_GUEST_DEV, F_OK) == 0;
}

/* Fallback without configfs-tsm: SNP_GET_EXT_REPORT on /dev/sev-guest. */
static SL_RESULT collect_ioctl(const uint8_t rd[64], uint8_t **report, size_t *rlen, uint8_t **aux,
                               size_t *auxlen)
{
	sl_err rc = SL_E_ATTEST;
	struct snp_ext_report_req req;
	struct snp_report_resp resp;
	struct snp_guest_request_ioctl g;
	const size_t certs_cap = 4 * 4096;
	uint8_t *certs = calloc(1, certs_cap);
	int fd = -1;

	*report = *aux = NULL;
	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	memset(&g, 0, sizeof(g));
	SL_ENSURE(certs != NULL, SL_E_NOMEM, "SNP certificates");
	fd = open(SEV_GUEST_DEV, O_RDWR | O_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_ATTEST, "%s: cannot open", SEV_GUEST_DEV);
	memcpy(req.data.user_data, rd, 64);
	req.certs_address = (uint64_t)(uintptr_t)certs;
	req.certs_len = (uint32_t)certs_cap;
	g.msg_version = 1;
	g.req_data = (uint64_t)(uintptr_t)&req;
	g.resp_data = (uint64_t)(uintptr_t)&resp;
	SL_ENSURE(ioctl(fd, SNP_GET_EXT_REPORT, &g) == 0, SL_E_ATTEST,
	          "%s: SNP_GET_EXT_REPORT failed (fw error 0x%llx)", SEV_GUEST_DEV,
	          (unsigned long long)g.exitinfo2);
	/* MSG_REPORT_RSP: status u32, report_size u32, reserved[24], report */
	uint32_t status = 0, size = 0;
	sl_reader rr;
	sl_reader_init(&rr, resp.data, sizeof(resp.data), "MSG_REPORT_RSP");
	SL_GUARD(sl_read_u32le(&rr, &status, "status"));
	SL_GUARD(sl_read_u32le(&rr, &size, "report_size"));
	SL_GUARD(sl_read_skip(&rr, 24, "reserved"));
	SL_ENSURE(status == 0 && size == SL_SNP_REPORT_LEN && size <= sl_reader_left(&rr),
	          SL_E_ATTEST, "%s: report status %u size %u", SEV_GUEST_DEV, status, size);
	const uint8_t *rp = NULL;
	SL_GUARD(sl_read_view(&rr, size, &rp, "report"));
	*report = malloc(size);
	SL_ENSURE(*report != NULL, SL_E_NOMEM, "SNP report");
	memcpy(*report, rp, size);
	*rlen = size;
	*aux = certs;
	*auxlen = certs_cap;
	certs = NULL;
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	free(certs);
	return rc;
}

static SL_RESULT snp_collect(const sl_collect_opts *o, json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	uint8_t rd[64] = {0};
	uint8_t *report = NULL, *aux = NULL;
	size_t rlen = 0, auxlen = 0;
	char *b64 = NULL;
	json_t *ev = NULL, *certs = NULL;
	const char *root = o->tsm_root != NULL ? o->tsm_root : SL_TSM_DEFAULT_ROOT;

	*out = NULL;
	SL_ENSURE(o->nonce != NULL && o->nonce_len >= 1 && o->nonce_len <= 64, SL_E_USAGE,
	          "sev-snp: the binding must be 1..64 bytes");
	memcpy(rd, o->nonce, o->nonce_len);
	if (access(root, F_OK) == 0)
		SL_GUARD(sl_tsm_report(root, "sev_guest", rd, &report, &rlen, &aux, &auxlen));
	else
		SL_GUARD(collect_ioctl(rd, &report, &rlen, &aux, &auxlen));
	SL_ENSURE(rlen == SL_SNP_REPORT_LEN, SL_E_ATTEST, "sev-snp: got a %zu-byte report", rlen);
	ev = json_object();
	certs = json_object();
	SL_ENSURE(ev != NULL && certs != NULL, SL_E_NOMEM, "sev-snp evidence");
	SL_GUARD(sl_b64_encode(report, rlen, &b64));
	SL_ENSURE(json_object_set_new(ev, "kind", json_string("sev-snp")) == 0 &&
	              json_object_set_new(ev, "report", json_string(b64)) == 0,
	          SL_E_NOMEM, "sev-snp evidence");
	if (aux != NULL && auxlen > 0)
		SL_GUARD(sl_snp_cert_table_to_json(aux, auxlen, certs));
	if (json_object_size(certs) > 0) {
		SL_ENSURE(json_object_set(ev, "certs", certs) == 0, SL_E_NOMEM, "sev-snp evidence");
	}
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	json_decref(ev);
	json_decref(certs);
	free(report);
	free(aux);
	free(b64);
	return rc;
}

static SL_RESULT b64_field(const json_t *obj, const char *key, size_t max, bool required,
                           uint8_t **out, size_t *len, const char *what)
{
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	*len = 0;
	if (v == NULL && !required)
		return SL_OK;
	if (!json_is_string(v))
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s.%s: missing or not a string", what, key);
	sl_err rc = sl_b64_decode_public(json_string_value(v), max, out, len, key);
	if (rc != SL_OK)
		return sl_err_wrap(SL_E_ATTEST_FORMAT, "%s", what);
	return SL_OK;
}

/* The evidence's certificates (each b64 DER) into a stack. */
sl_err sl_snp_ev_certs(const json_t *ev, STACK_OF(X509) * st)
{
	static const char *const names[] = {"vcek", "vlek", "ask", "asvk", "ark", NULL};
	sl_err rc = SL_E_ATTEST_FORMAT;
	json_t *certs = json_object_get(ev, "certs");
	uint8_t *der = NULL;
	size_t len = 0;
	X509 *x = NULL;
	const char *key = NULL;
	json_t *val = NULL;

	if (certs == NULL)
		return SL_OK;
	SL_ENSURE(json_is_object(certs), SL_E_ATTEST_FORMAT, "evidence.certs: not an object");
	key = sl_json_unknown(certs, names);
	SL_ENSURE(key == NULL, SL_E_ATTEST_FORMAT, "evidence.certs.%.16s: unknown certificate",
	          key);
	json_object_foreach (certs, key, val) {
		SL_GUARD(b64_field(certs, key, MAX_CERT, true, &der, &len, "evidence.certs"));
		SL_GUARD(sl_x509_from_der_cached(der, len, &x, key));
		SL_ENSURE(sk_X509_push(st, x) > 0, SL_E_NOMEM, "evidence.certs");
		x = NULL;
		free(der);
		der = NULL;
	}
	rc = SL_OK;
out:
	X509_free(x);
	free(der);
	return rc;
}

static SL_RESULT snp_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *report = NULL;
	size_t rlen = 0;
	STACK_OF(X509) *certs = sk_X509_new_null();

	SL_ENSURE(certs != NULL, SL_E_NOMEM, "sev-snp evidence");
	SL_GUARD(b64_field(ev, "report", MAX_REPORT_B64, true, &report, &rlen, "evidence"));
	SL_GUARD(sl_snp_ev_certs(ev, certs));
	SL_GUARD(sl_snp_verify_report(report, rlen, certs, o, true, claims));
	rc = SL_OK;
out:
	free(report);
	sk_X509_pop_free(certs, X509_free);
	return rc;
}

const sl_evidence_kind sl_kind_snp = {
    .name = "sev-snp",
    .available = snp_available,
    .collect = snp_collect,
    .verify = snp_verify,
};
