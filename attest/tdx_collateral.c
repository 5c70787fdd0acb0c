/* Intel PCS collateral for TDX: TCB info (tcbInfo v3, id "TDX") and the
 * TD_QE enclave identity, each signed (ECDSA P-256, hex r||s) over the exact
 * bytes of its JSON member by the Intel SGX TCB Signing certificate, which
 * must chain to the pinned root at the collateral's issueDate. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tdx_quote.h"
#include "x509_util.h"
#include "seclaunch/buf.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define MAX_JSON_FILES 64
#define MAX_JSON_BYTES (1024 * 1024)

/* Status ranks, best first; overall status = the worst of its parts. */
static const char *const ranks[] = {
    "UpToDate",
    "SWHardeningNeeded",
    "ConfigurationNeeded",
    "ConfigurationAndSWHardeningNeeded",
    "OutOfDate",
    "OutOfDateConfigurationNeeded",
    "Revoked",
    "NotSupported",
};

static int rank(const char *s)
{
	for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
		if (strcmp(s, ranks[i]) == 0)
			return (int)i;
	}
	return (int)(sizeof(ranks) / sizeof(ranks[0])); /* unknown: worst */
}

bool sl_tdx_status_worse(const char *a, const char *b)
{
	return a[0] != '\0' && rank(a) > rank(b);
}

static void worst(char dst[static 40], const char *other)
{
	if (sl_tdx_status_worse(other, dst))
		snprintf(dst, 40, "%s", other);
}

static SL_RESULT hex_field(const json_t *o, const char *key, uint8_t *out, size_t n,
                           const char *what)
{
	const char *s = sl_json_getstr(o, key);
	if (s == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s.%s: missing", what, key);
	char low[260];
	size_t l = strlen(s);
	if (l >= sizeof(low))
		return sl_err_set(SL_E_ATTEST_FORMAT, "%s.%s: too long", what, key);
	for (size_t i = 0; i <= l; i++)
		low[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] + 32 : s[i]);
	sl_err rc = sl_hex_decode(low, out, n, key);
	return rc == SL_OK ? SL_OK : sl_err_wrap(SL_E_ATTEST_FORMAT, "%s", what);
}

static int svn_at(const json_t *arr, size_t i)
{
	return (int)json_integer_value(json_object_get(json_array_get(arr, i), "svn"));
}

static SL_RESULT module_status(const json_t *ti, const sl_tdx_body *b, char out[static 40])
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	char id[16];
	uint8_t mrsigner[48], attr[8], mask[8];
	size_t i;
	json_t *m = NULL;

	snprintf(id, sizeof(id), "TDX_%02X", b->tee_tcb_svn[1]);
	json_array_foreach (json_object_get(ti, "tdxModuleIdentities"), i, m) {
		const char *mid = sl_json_getstr(m, "id");
		if (mid == NULL || strcasecmp(mid, id) != 0)
			continue;
		SL_GUARD(hex_field(m, "mrsigner", mrsigner, 48, id));
		SL_GUARD(hex_field(m, "attributes", attr, 8, id));
		SL_GUARD(hex_field(m, "attributesMask", mask, 8, id));
		SL_ENSURE(memcmp(mrsigner, b->mrsignerseam, 48) == 0, SL_E_ATTEST_UNTRUSTED,
		          "TDX module identity %s: mrsigner differs from MRSIGNERSEAM", id);
		for (int k = 0; k < 8; k++)
			SL_ENSURE((b->seam_attributes[k] & mask[k]) == attr[k],
			          SL_E_ATTEST_UNTRUSTED,
			          "TDX module identity %s: SEAM attributes differ", id);
		size_t j;
		json_t *lvl = NULL;
		json_array_foreach (json_object_get(m, "tcbLevels"), j, lvl) {
			json_int_t isv = json_integer_value(
			    json_object_get(json_object_get(lvl, "tcb"), "isvsvn"));
			if (b->tee_tcb_svn[0] >= isv) {
				const char *st = sl_json_getstr(lvl, "tcbStatus");
				snprintf(out, 40, "%s", st != NULL ? st : "NotSupported");
				rc = SL_OK;
				goto out;
			}
		}
		snprintf(out, 40, "NotSupported");
		rc = SL_OK;
		goto out;
	}
	snprintf(out, 40, "NotSupported");
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tdx_tcb_eval(const json_t *ti, const sl_pck_ext *pck, const sl_tdx_body *b,
                       sl_tdx_tcb *out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t fmspc[6], pceid[2];
	size_t i;
	json_t *lvl = NULL;

	memset(out, 0, sizeof(*out));
	SL_GUARD(hex_field(ti, "fmspc", fmspc, 6, "tcbInfo"));
	SL_GUARD(hex_field(ti, "pceId", pceid, 2, "tcbInfo"));
	SL_ENSURE(memcmp(fmspc, pck->fmspc, 6) == 0 && memcmp(pceid, pck->pceid, 2) == 0,
	          SL_E_ATTEST_FORMAT, "tcbInfo: FMSPC / PCE-ID differ from the PCK certificate's");
	const char *id = sl_json_getstr(ti, "id");
	SL_ENSURE(id != NULL && strcmp(id, "TDX") == 0, SL_E_ATTEST_FORMAT,
	          "tcbInfo: id is not TDX");
	json_t *mod = json_object_get(ti, "tdxModule");
	if (mod != NULL) {
		uint8_t mrsigner[48], attr[8], mask[8];
		SL_GUARD(hex_field(mod, "mrsigner", mrsigner, 48, "tdxModule"));
		SL_GUARD(hex_field(mod, "attributes", attr, 8, "tdxModule"));
		SL_GUARD(hex_field(mod, "attributesMask", mask, 8, "tdxModule"));
		SL_ENSURE(memcmp(mrsigner, b->mrsignerseam, 48) == 0, SL_E_ATTEST_UNTRUSTED,
		          "tcbInfo.tdxModule: mrsigner differs from MRSIGNERSEAM");
		for (int k = 0; k < 8; k++)
			SL_ENSURE((b->seam_attributes[k] & mask[k]) == attr[k],
			          SL_E_ATTEST_UNTRUSTED,
			          "tcbInfo.tdxModule: SEAM attributes differ");
	}
	/* With TDX module identities (tcbInfo v3) and a module major version
	 * > 0, TEE_TCB_SVN bytes 0 and 1 are judged by the module identity. */
	bool by_module =
	    json_object_get(ti, "tdxModuleIdentities") != NULL && b->tee_tcb_svn[1] > 0;
	snprintf(out->status, sizeof(out->status), "NotSupported");
	json_array_foreach (json_object_get(ti, "tcbLevels"), i, lvl) {
		json_t *tcb = json_object_get(lvl, "tcb");
		json_t *sgx = json_object_get(tcb, "sgxtcbcomponents");
		json_t *tdx = json_object_get(tcb, "tdxtcbcomponents");
		SL_ENSURE(json_array_size(sgx) == 16 && json_array_size(tdx) == 16,
		          SL_E_ATTEST_FORMAT,
		          "tcbInfo.tcbLevels[%zu]: want 16 SGX and 16 TDX components", i);
		bool ok = pck->pcesvn >= json_integer_value(json_object_get(tcb, "pcesvn"));
		for (size_t k = 0; ok && k < 16; k++)
			ok = pck->comp_svn[k] >= svn_at(sgx, k);
		for (size_t k = by_module ? 2 : 0; ok && k < 16; k++)
			ok = b->tee_tcb_svn[k] >= svn_at(tdx, k);
		if (!ok)
			continue;
		const char *st = sl_json_getstr(lvl, "tcbStatus");
		const char *date = sl_json_getstr(lvl, "tcbDate");
		snprintf(out->status, sizeof(out->status), "%s", st != NULL ? st : "NotSupported");
		snprintf(out->tcb_date, sizeof(out->tcb_date), "%s", date != NULL ? date : "");
		break;
	}
	if (by_module) {
		SL_GUARD(module_status(ti, b, out->module_status));
		worst(out->status, out->module_status);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tdx_qe_eval(const json_t *qi, const sl_tdx_qe_report *qe, char status[static 40])
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t mrsigner[32], attr[16], amask[16], misc[4], mmask[4];
	size_t i;
	json_t *lvl = NULL;

	const char *id = sl_json_getstr(qi, "id");
	SL_ENSURE(id != NULL && strcmp(id, "TD_QE") == 0, SL_E_ATTEST_FORMAT,
	          "enclaveIdentity: id is not TD_QE");
	SL_GUARD(hex_field(qi, "mrsigner", mrsigner, 32, "enclaveIdentity"));
	SL_GUARD(hex_field(qi, "attributes", attr, 16, "enclaveIdentity"));
	SL_GUARD(hex_field(qi, "attributesMask", amask, 16, "enclaveIdentity"));
	SL_GUARD(hex_field(qi, "miscselect", misc, 4, "enclaveIdentity"));
	SL_GUARD(hex_field(qi, "miscselectMask", mmask, 4, "enclaveIdentity"));
	SL_ENSURE(memcmp(mrsigner, qe->mrsigner, 32) == 0, SL_E_ATTEST_UNTRUSTED,
	          "TDX QE identity: QE report MRSIGNER is not the TD_QE signer");
	SL_ENSURE(json_integer_value(json_object_get(qi, "isvprodid")) == qe->isvprodid,
	          SL_E_ATTEST_UNTRUSTED, "TDX QE identity: ISVPRODID differs");
	uint32_t m =
	    (uint32_t)misc[0] << 24 | (uint32_t)misc[1] << 16 | (uint32_t)misc[2] << 8 | misc[3];
	uint32_t mm = (uint32_t)mmask[0] << 24 | (uint32_t)mmask[1] << 16 |
	              (uint32_t)mmask[2] << 8 | mmask[3];
	SL_ENSURE((qe->miscselect & mm) == m, SL_E_ATTEST_UNTRUSTED,
	          "TDX QE identity: MISCSELECT differs");
	for (int k = 0; k < 16; k++)
		SL_ENSURE((qe->attributes[k] & amask[k]) == attr[k], SL_E_ATTEST_UNTRUSTED,
		          "TDX QE identity: ATTRIBUTES differ");
	snprintf(status, 40, "OutOfDate");
	json_array_foreach (json_object_get(qi, "tcbLevels"), i, lvl) {
		json_int_t isv =
		    json_integer_value(json_object_get(json_object_get(lvl, "tcb"), "isvsvn"));
		if (qe->isvsvn >= isv) {
			const char *st = sl_json_getstr(lvl, "tcbStatus");
			snprintf(status, 40, "%s", st != NULL ? st : "OutOfDate");
			break;
		}
	}
	rc = SL_OK;
out:
	return rc;
}
