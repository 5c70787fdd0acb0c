/* A stand-in for libnvidia-ml.so.1, for tests only (built as
 * build/tests/fakecuda/libnvidia-ml.so.1, never installed, found through
 * LD_LIBRARY_PATH).
 *
 * CC settings: from the file $FAKENVML_CC, read again at every call, so a
 * test can change the GPU's mode while a job runs: "off" (or no file), "on",
 * "devtools" (on, in dev-tools mode). The GPUs are never "ready" when asked;
 * setting them ready succeeds only where they can attest ($FAKENVML_DIR).
 *
 * Attestation: $FAKENVML_DIR holds what tests/fakecuda/mkgpus.sh made: per
 * GPU i a folder gpu<i>/ with key.pem (its P-384 attestation key), chain.pem
 * (its certificate chain, leaf first, up to a test root) and fwid.hex. The
 * fake presents $FAKENVML_GPUS GPUs (default 1) and builds each GPU's SPDM
 * 1.1 GET_MEASUREMENTS request and MEASUREMENTS response (the layout of
 * docs/evidence-nvidia-gpu.md) around the caller's nonce, signed with that
 * GPU's key. Faults, each naming one GPU index:
 *   FAKENVML_REPEAT=i:j  GPU i presents GPU j's key and chain (one GPU twice)
 *   FAKENVML_NONCE=i     GPU i answers another nonce than the one asked
 *   FAKENVML_CC_OFF=i    GPU i's signed feature flag says protected PCIe
 *                        (2), the only signed value that says "not CC"
 *   FAKENVML_FLIP=i      one bit of GPU i's first measurement flipped after
 *                        signing
 * Without $FAKENVML_DIR the attestation calls answer "not supported". */
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_UNKNOWN = 999
};

typedef struct {
	unsigned version, environment, ccFeature, devToolsMode, multiGpuMode;
} nvml_cc_settings;

typedef struct {
	unsigned int is_cec_report_present;
	unsigned int report_size;
	unsigned int cec_report_size;
	unsigned char nonce[32];
	unsigned char report[0x2000];
	unsigned char cec_report[0x1000];
} nvml_cc_report;

typedef struct {
	unsigned int cert_chain_size;
	unsigned int attestation_cert_chain_size;
	unsigned char cert_chain[0x1000];
	unsigned char attestation_cert_chain[0x1400];
} nvml_cc_cert;

/* a device handle is its index + 1 */
typedef void *nvml_device;

EXPORT int nvmlInit_v2(void)
{
	return 0;
}

EXPORT int nvmlShutdown(void)
{
	return 0;
}

EXPORT const char *nvmlErrorString(int e)
{
	return e == NVML_ERROR_NOT_SUPPORTED      ? "Not Supported"
	       : e == NVML_ERROR_INVALID_ARGUMENT ? "Invalid Argument"
	                                          : "Unknown Error";
}

EXPORT int nvmlSystemGetConfComputeSettings(nvml_cc_settings *s)
{
	char mode[32] = "off";
	const char *path = getenv("FAKENVML_CC");
	FILE *f = path != NULL ? fopen(path, "re") : NULL;
	if (f != NULL) {
		if (fgets(mode, sizeof(mode), f) == NULL)
			mode[0] = '\0';
		fclose(f);
		mode[strcspn(mode, "\n")] = '\0';
	}
	s->environment = 0;
	s->multiGpuMode = 0;
	s->ccFeature = strcmp(mode, "on") == 0 || strcmp(mode, "devtools") == 0;
	s->devToolsMode = strcmp(mode, "devtools") == 0;
	return 0;
}

EXPORT int nvmlSystemGetConfComputeGpusReadyState(unsigned *accepting)
{
	*accepting = 0;
	return 0;
}

EXPORT int nvmlSystemSetConfComputeGpusReadyState(unsigned accepting)
{
	(void)accepting;
	return getenv("FAKENVML_DIR") != NULL ? 0 : NVML_ERROR_NOT_SUPPORTED;
}

static unsigned gpus(void)
{
	const char *v = getenv("FAKENVML_GPUS");
	unsigned long n = v != NULL ? strtoul(v, NULL, 10) : 1;
	return n > 0 && n <= 64 ? (unsigned)n : 1;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *count)
{
	*count = gpus();
	return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device *dev)
{
	if (i >= gpus())
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = (nvml_device)(uintptr_t)(i + 1);
	return 0;
}

/* FAKENVML_<name>=i names GPU i */
static int fault_is(const char *name, unsigned i)
{
	const char *v = getenv(name);
	return v != NULL && *v != '\0' && strtoul(v, NULL, 10) == i;
}

/* the GPU whose identity (key, chain) GPU i presents */
static unsigned identity_of(unsigned i)
{
	const char *v = getenv("FAKENVML_REPEAT");
	char *end = NULL;
	if (v != NULL && strtoul(v, &end, 10) == i && end != NULL && *end == ':')
		return (unsigned)strtoul(end + 1, NULL, 10);
	return i;
}

static int read_file(unsigned gpu, const char *name, unsigned char *buf, size_t cap, size_t *len)
{
	const char *dir = getenv("FAKENVML_DIR");
	char path[4096];
	if (dir == NULL)
		return NVML_ERROR_NOT_SUPPORTED;
	snprintf(path, sizeof(path), "%s/gpu%u/%s", dir, gpu, name);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return NVML_ERROR_UNKNOWN;
	*len = fread(buf, 1, cap, f);
	int more = fgetc(f) != EOF;
	fclose(f);
	return more ? NVML_ERROR_UNKNOWN : 0;
}

static size_t put(unsigned char *p, size_t o, const void *v, size_t n)
{
	memcpy(p + o, v, n);
	return o + n;
}

static size_t put_u16(unsigned char *p, size_t o, unsigned v)
{
	p[o] = (unsigned char)(v & 0xff);
	p[o + 1] = (unsigned char)(v >> 8);
	return o + 2;
}

static size_t put_tlv(unsigned char *p, size_t o, unsigned type, const void *v, size_t n)
{
	o = put_u16(p, o, type);
	o = put_u16(p, o, (unsigned)n);
	return put(p, o, v, n);
}

/* ECDSA P-384 over SHA-384 of p[0..n), as r || s (48 bytes each) at sig */
static int sign(unsigned gpu, const unsigned char *p, size_t n, unsigned char sig[96])
{
	unsigned char pem[4096], der[160];
	size_t plen = 0, dlen = sizeof(der);
	int rc = NVML_ERROR_UNKNOWN;
	if (read_file(gpu, "key.pem", pem, sizeof(pem), &plen) != 0)
		return NVML_ERROR_UNKNOWN;
	BIO *b = BIO_new_mem_buf(pem, (int)plen);
	EVP_PKEY *key = b != NULL ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	ECDSA_SIG *es = NULL;
	if (key != NULL && md != NULL &&
	    EVP_DigestSignInit(md, NULL, EVP_sha384(), NULL, key) == 1 &&
	    EVP_DigestSign(md, der, &dlen, p, n) == 1) {
		const unsigned char *q = der;
		es = d2i_ECDSA_SIG(NULL, &q, (long)dlen);
		if (es != NULL && BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 48) == 48 &&
		    BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 48, 48) == 48)
			rc = 0;
	}
	ECDSA_SIG_free(es);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	BIO_free(b);
	return rc;
}

static int fwid_of(unsigned gpu, unsigned char fwid[48])
{
	unsigned char hex[200];
	size_t n = 0;
	if (read_file(gpu, "fwid.hex", hex, sizeof(hex) - 1, &n) != 0 || n < 96)
		return NVML_ERROR_UNKNOWN;
	for (size_t i = 0; i < 48; i++) {
		unsigned v = 0;
		if (sscanf((const char *)hex + 2 * i, "%2x", &v) != 1)
			return NVML_ERROR_UNKNOWN;
		fwid[i] = (unsigned char)v;
	}
	return 0;
}

EXPORT int nvmlDeviceGetConfComputeGpuAttestationReport(nvml_device dev, nvml_cc_report *r)
{
	unsigned i = (unsigned)(uintptr_t)dev - 1, id = identity_of(i);
	unsigned char *p = r->report, fwid[48], meas[2][48], rsp_nonce[32];
	size_t o = 0;
	if (getenv("FAKENVML_DIR") == NULL)
		return NVML_ERROR_NOT_SUPPORTED;
	if (i >= gpus() || fwid_of(id, fwid) != 0)
		return NVML_ERROR_UNKNOWN;
	/* request: SPDM 1.1 GET_MEASUREMENTS, signature asked, all blocks */
	const unsigned char req[4] = {0x11, 0xE0, 0x01, 0xFF};
	o = put(p, o, req, 4);
	o = put(p, o, r->nonce, 32);
	if (fault_is("FAKENVML_NONCE", i))
		p[o - 1] ^= 0x01;
	p[o++] = 0; /* slot 0 */
	/* response: MEASUREMENTS, two DMTF blocks of the (same) firmware */
	const unsigned char rsp[4] = {0x11, 0x60, 0x00, 0x00};
	o = put(p, o, rsp, 4);
	p[o++] = 2;
	size_t rec = 2 * (4 + 3 + 48);
	p[o++] = (unsigned char)rec;
	p[o++] = 0;
	p[o++] = 0;
	for (unsigned k = 0; k < 2; k++) {
		char what[64];
		unsigned mlen = 48;
		snprintf(what, sizeof(what), "fake GPU firmware measurement %u", k + 1);
		EVP_Digest(what, strlen(what), meas[k], &mlen, EVP_sha384(), NULL);
		p[o++] = (unsigned char)(k + 1); /* index */
		p[o++] = 0x01;                   /* DMTF */
		o = put_u16(p, o, 3 + 48);
		p[o++] = 0x01; /* value type */
		o = put_u16(p, o, 48);
		o = put(p, o, meas[k], 48);
	}
	for (unsigned k = 0; k < 32; k++)
		rsp_nonce[k] = (unsigned char)(0xA0 + k + i);
	o = put(p, o, rsp_nonce, 32);
	unsigned char feature = fault_is("FAKENVML_CC_OFF", i) ? 2 : gpus() > 1 ? 1 : 0;
	static const char driver[16] = "570.124.06";
	size_t olen = (4 + sizeof(driver)) + (4 + 48) + (4 + 1);
	o = put_u16(p, o, (unsigned)olen);
	o = put_tlv(p, o, 3, driver, sizeof(driver)); /* DRIVER_VERSION */
	o = put_tlv(p, o, 20, fwid, 48);              /* FWID */
	o = put_tlv(p, o, 36, &feature, 1);           /* FEATURE_FLAG */
	if (sign(id, p, o, p + o) != 0)
		return NVML_ERROR_UNKNOWN;
	if (fault_is("FAKENVML_FLIP", i))
		p[45 + 7 + 10] ^= 0x04; /* a byte of measurement 1's value */
	r->report_size = (unsigned)(o + 96);
	return 0;
}

EXPORT int nvmlDeviceGetConfComputeGpuCertificate(nvml_device dev, nvml_cc_cert *c)
{
	unsigned i = (unsigned)(uintptr_t)dev - 1;
	size_t n = 0;
	if (getenv("FAKENVML_DIR") == NULL)
		return NVML_ERROR_NOT_SUPPORTED;
	if (i >= gpus())
		return NVML_ERROR_UNKNOWN;
	int e = read_file(identity_of(i), "chain.pem", c->attestation_cert_chain,
	                  sizeof(c->attestation_cert_chain), &n);
	if (e != 0)
		return e;
	c->attestation_cert_chain_size = (unsigned)n;
	c->cert_chain_size = 0;
	return 0;
}
