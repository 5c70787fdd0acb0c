/* Extending the workload register: a TPM PCR's sha256 bank through ESAPI,
 * or TDX RTMR3 through the kernel's measurement interface
 * (/sys/class/misc/tdx_guest/measurements/rtmr3:sha384: a write of 48
 * bytes extends it, a read returns its value). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "seclaunch/util.h"
#include "seclaunch/workload.h"
#include "tpm2_int.h"

static SL_RESULT read_pcr(sl_tpm2_conn *c, unsigned pcr, uint8_t out[static 32])
{
	sl_err rc = SL_E_TPM;
	TPML_PCR_SELECTION sel = {.count = 1};
	TPML_PCR_SELECTION *got = NULL;
	TPML_DIGEST *vals = NULL;
	UINT32 counter = 0;

	SL_ENSURE(pcr <= 23, SL_E_USAGE, "PCR %u", pcr);
	sel.pcrSelections[0].hash = TPM2_ALG_SHA256;
	sel.pcrSelections[0].sizeofSelect = 3;
	sel.pcrSelections[0].pcrSelect[pcr / 8] = (uint8_t)(1u << (pcr % 8));
	SL_GUARD_TSS(Esys_PCR_Read(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &sel,
	                           &counter, &got, &vals),
	             SL_E_TPM, "reading PCR %u", pcr);
	SL_ENSURE(vals->count == 1 && vals->digests[0].size == 32, SL_E_TPM,
	          "reading PCR %u: the TPM has no sha256 bank value for it", pcr);
	memcpy(out, vals->digests[0].buffer, 32);
	rc = SL_OK;
out:
	Esys_Free(got);
	Esys_Free(vals);
	return rc;
}

sl_err sl_workload_tpm_extend(const char *tcti, unsigned pcr, const uint8_t *expect,
                              const uint8_t *alt, const uint8_t digest[static 32],
                              uint8_t before[static 32])
{
	sl_err rc = SL_E_TPM;
	sl_tpm2_conn c = {0};
	TPML_DIGEST_VALUES v = {.count = 1};

	SL_ENSURE(pcr <= 15, SL_E_USAGE, "workload register: PCR %u (0..15 only)", pcr);
	v.digests[0].hashAlg = TPM2_ALG_SHA256;
	memcpy(v.digests[0].digest.sha256, digest, 32);
	SL_GUARD(sl_tpm2_connect(tcti, &c));
	SL_GUARD(read_pcr(&c, pcr, before));
	SL_ENSURE((expect != NULL && memcmp(before, expect, 32) == 0) ||
	              (alt != NULL && memcmp(before, alt, 32) == 0),
	          SL_E_ATTEST, "PCR %u does not hold the value its workload log replays to", pcr);
	SL_GUARD_TSS(Esys_PCR_Extend(c.esys, ESYS_TR_PCR0 + pcr, ESYS_TR_PASSWORD, ESYS_TR_NONE,
	                             ESYS_TR_NONE, &v),
	             SL_E_TPM, "extending PCR %u (sha256 bank)", pcr);
	rc = SL_OK;
out:
	sl_tpm2_disconnect(&c);
	return rc;
}

static void rtmr_path(const char *root, char *p, size_t n)
{
	snprintf(p, n, "%s/rtmr3:sha384", root != NULL ? root : SL_WORKLOAD_TDX_MEASUREMENTS);
}

bool sl_workload_rtmr_available(const char *root)
{
	char p[512];
	rtmr_path(root, p, sizeof(p));
	return access(p, W_OK) == 0;
}

sl_err sl_workload_rtmr_extend(const char *root, const uint8_t digest[static 48])
{
	sl_err rc = SL_E_SYSTEM;
	char p[512];
	int fd = -1;
	ssize_t n;

	rtmr_path(root, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_SYSTEM, "%s: %s (no TDX measurement interface)", p,
	          strerror(errno));
	/* one write of exactly the digest: the kernel extends with it */
	do
		n = write(fd, digest, 48);
	while (n < 0 && errno == EINTR);
	SL_ENSURE(n == 48, SL_E_SYSTEM, "extending %s: %s", p,
	          n < 0 ? strerror(errno) : "short write");
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}
