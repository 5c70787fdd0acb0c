/* The "nvidia-gpu" evidence kind, collection through NVML, loaded at run
 * time with dlopen("libnvidia-ml.so.1") so nothing NVIDIA is needed to build.
 * The binding (<= 32 bytes, zero-padded) is the SPDM request nonce; every
 * GPU NVML counts answers that same nonce. One GPU gives the single-GPU
 * form {"report","certs"}; several give {"gpus":[{"report","certs"},...]},
 * the set attest/nvgpu_set.c verifies (docs/evidence-nvidia-gpu.md).
 * NVSwitch reports come from NSCQ, not NVML: they are not collected. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "nvgpu_int.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define NVML_LIB "libnvidia-ml.so.1"
#define MAX_GPUS 64 /* as many as a set holds (nvgpu_set.c) */

/* NVML's structures as its public header defines them. */
typedef void *nvml_device;
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
typedef struct {
	unsigned int version, environment, cc_feature, devtools_mode, multi_gpu_mode;
} nvml_cc_settings;
#define NVML_CC_SETTINGS_V1 ((unsigned int)(sizeof(nvml_cc_settings) | (1u << 24)))

struct nvml {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned int *);
	int (*handle)(unsigned int, nvml_device *);
	int (*report)(nvml_device, nvml_cc_report *);
	int (*cert)(nvml_device, nvml_cc_cert *);
	int (*settings)(nvml_cc_settings *);
	const char *(*error_string)(int);
};

static const char *nvml_err(const struct nvml *n, int code)
{
	const char *s = n->error_string != NULL ? n->error_string(code) : NULL;
	return s != NULL ? s : "unknown NVML error";
}

static SL_RESULT nvml_open(struct nvml *n)
{
	sl_err rc = SL_E_GPU;
	memset(n, 0, sizeof(*n));
	n->lib = dlopen(NVML_LIB, RTLD_NOW | RTLD_LOCAL);
	SL_ENSURE(n->lib != NULL, SL_E_GPU, "nvidia-gpu: no NVIDIA driver (%s not found)",
	          NVML_LIB);
	*(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
	*(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
	*(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&n->report = dlsym(n->lib, "nvmlDeviceGetConfComputeGpuAttestationReport");
	*(void **)&n->cert = dlsym(n->lib, "nvmlDeviceGetConfComputeGpuCertificate");
	*(void **)&n->settings = dlsym(n->lib, "nvmlSystemGetConfComputeSettings");
	*(void **)&n->error_string = dlsym(n->lib, "nvmlErrorString");
	SL_ENSURE(n->init != NULL && n->shutdown != NULL && n->count != NULL && n->handle != NULL &&
	              n->report != NULL && n->cert != NULL,
	          SL_E_GPU,
	          "nvidia-gpu: %s lacks the confidential-computing attestation calls (driver too "
	          "old)",
	          NVML_LIB);
	int e = n->init();
	SL_ENSURE(e == 0, SL_E_GPU, "nvidia-gpu: nvmlInit_v2: %s", nvml_err(n, e));
	rc = SL_OK;
out:
	if (rc != SL_OK && n->lib != NULL) {
		dlclose(n->lib);
		n->lib = NULL;
	}
	return rc;
}

static void nvml_close(struct nvml *n)
{
	if (n->lib == NULL)
		return;
	n->shutdown();
	dlclose(n->lib);
	n->lib = NULL;
}

bool sl_nvgpu_available(const sl_collect_opts *o)
{
	/* GPU evidence accompanies CPU evidence; --tee auto never picks it */
	(void)o;
	return false;
}

static SL_RESULT driver_settings(const struct nvml *n, json_t *ev)
{
	sl_err rc = SL_E_GPU;
	nvml_cc_settings s = {.version = NVML_CC_SETTINGS_V1};
	if (n->settings == NULL || n->settings(&s) != 0)
		return SL_OK; /* unsigned and optional: absent says nothing */
	json_t *d = json_pack("{s:s, s:b, s:s}", "cc", s.cc_feature ? "on" : "off", "devtools",
	                      s.devtools_mode != 0, "multi_gpu_mode",
	                      s.multi_gpu_mode == 0   ? "none"
	                      : s.multi_gpu_mode == 1 ? "protected-pcie"
	                      : s.multi_gpu_mode == 2 ? "nvle"
	                                              : "other");
	SL_ENSURE(d != NULL && json_object_set_new(ev, "driver", d) == 0, SL_E_NOMEM,
	          "GPU evidence");
	rc = SL_OK;
out:
	return rc;
}

/* GPU i's report (asked with the nonce) and certificate chain, checked as
 * far as collection can check them, as {"report", "certs"}. */
static SL_RESULT collect_one(const struct nvml *n, unsigned int i, const sl_collect_opts *o,
                             json_t **out)
{
	sl_err rc = SL_E_GPU;
	nvml_cc_report *rep = calloc(1, sizeof(*rep));
	nvml_cc_cert *cert = calloc(1, sizeof(*cert));
	sl_nvgpu_report *parsed = calloc(1, sizeof(*parsed));
	nvml_device dev = NULL;
	char *rb64 = NULL, *cb64 = NULL;

	*out = NULL;
	SL_ENSURE(rep != NULL && cert != NULL && parsed != NULL, SL_E_NOMEM, "GPU evidence");
	int e = n->handle(i, &dev);
	SL_ENSURE(e == 0, SL_E_GPU, "nvidia-gpu: GPU %u: %s", i, nvml_err(n, e));
	memcpy(rep->nonce, o->nonce, o->nonce_len);
	e = n->report(dev, rep);
	SL_ENSURE(e == 0, SL_E_GPU,
	          "nvidia-gpu: GPU %u: attestation report: %s (is the GPU in "
	          "confidential-computing mode?)",
	          i, nvml_err(n, e));
	e = n->cert(dev, cert);
	SL_ENSURE(e == 0, SL_E_GPU, "nvidia-gpu: GPU %u: certificate chain: %s", i, nvml_err(n, e));
	SL_ENSURE(rep->report_size > 0 && rep->report_size <= sizeof(rep->report), SL_E_GPU,
	          "nvidia-gpu: GPU %u: report size %u out of range", i, rep->report_size);
	SL_ENSURE(cert->attestation_cert_chain_size > 0 &&
	              cert->attestation_cert_chain_size <= sizeof(cert->attestation_cert_chain),
	          SL_E_GPU, "nvidia-gpu: GPU %u: certificate chain size %u out of range", i,
	          cert->attestation_cert_chain_size);
	/* a report the verifier would refuse is refused here, with its reason */
	rc = sl_nvgpu_report_parse(rep->report, rep->report_size, parsed);
	if (rc != SL_OK)
		SL_GUARD(sl_err_wrap(rc, "nvidia-gpu: GPU %u", i));
	SL_ENSURE(sl_ct_eq(parsed->req_nonce, rep->nonce, SL_NVGPU_NONCE_LEN), SL_E_GPU,
	          "nvidia-gpu: GPU %u: the driver's report carries another nonce than the one "
	          "asked for",
	          i);
	SL_GUARD(sl_b64_encode(rep->report, rep->report_size, &rb64));
	SL_GUARD(
	    sl_b64_encode(cert->attestation_cert_chain, cert->attestation_cert_chain_size, &cb64));
	*out = json_pack("{s:s, s:s}", "report", rb64, "certs", cb64);
	SL_ENSURE(*out != NULL, SL_E_NOMEM, "GPU evidence");
	rc = SL_OK;
out:
	free(rb64);
	free(cb64);
	free(rep);
	free(cert);
	free(parsed);
	return rc;
}

sl_err sl_nvgpu_collect(const sl_collect_opts *o, json_t **out)
{
	sl_err rc = SL_E_GPU;
	struct nvml n = {0};
	json_t *ev = NULL, *gpus = json_array(), *one = NULL;
	unsigned int count = 0;

	*out = NULL;
	SL_ENSURE(gpus != NULL, SL_E_NOMEM, "GPU evidence");
	SL_ENSURE(o->nonce != NULL && o->nonce_len > 0 && o->nonce_len <= 32, SL_E_USAGE,
	          "nvidia-gpu: the nonce must be 1..32 bytes (the SPDM nonce is 32), not %zu",
	          o->nonce_len);
	SL_GUARD(nvml_open(&n));
	int e = n.count(&count);
	SL_ENSURE(e == 0, SL_E_GPU, "nvidia-gpu: nvmlDeviceGetCount_v2: %s", nvml_err(&n, e));
	SL_ENSURE(count > 0, SL_E_GPU, "nvidia-gpu: the driver reports no GPU");
	SL_ENSURE(count <= MAX_GPUS, SL_E_GPU,
	          "nvidia-gpu: the driver reports %u GPUs, more than a set holds (%d)", count,
	          MAX_GPUS);
	for (unsigned int i = 0; i < count; i++) {
		SL_GUARD(collect_one(&n, i, o, &one));
		SL_ENSURE(json_array_append_new(gpus, one) == 0, SL_E_NOMEM, "GPU evidence");
		one = NULL;
	}
	if (count == 1) {
		/* the single-GPU form, as before sets existed */
		const json_t *g = json_array_get(gpus, 0);
		ev = json_pack("{s:s, s:O, s:O}", "kind", "nvidia-gpu", "report",
		               json_object_get(g, "report"), "certs", json_object_get(g, "certs"));
		SL_ENSURE(ev != NULL, SL_E_NOMEM, "GPU evidence");
	} else {
		ev = json_pack("{s:s, s:O}", "kind", "nvidia-gpu", "gpus", gpus);
		SL_ENSURE(ev != NULL, SL_E_NOMEM, "GPU evidence");
	}
	SL_GUARD(driver_settings(&n, ev));
	*out = ev;
	ev = NULL;
	rc = SL_OK;
out:
	nvml_close(&n);
	json_decref(one);
	json_decref(gpus);
	json_decref(ev);
	return rc;
}
