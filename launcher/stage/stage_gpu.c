/* GPU staging through the CUDA driver API, loaded with dlopen("libcuda.so.1")
 * at run time (seclaunch/cuda_api.h: no build-time CUDA dependency). NVML (libnvidia-ml.so.1) is
 * asked about confidential-computing mode the same way.
 *
 * Pipeline: the decryptor's in-order sink hands over chunk k; it is copied
 * into one of a few pinned host buffers and sent to the device buffer with an
 * asynchronous copy on one of two streams while the decryptor works on chunk
 * k+1. A pinned buffer is reused only after its event says its copy is done,
 * so host memory holds at most NSLOTS chunks of plaintext at any time. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/cuda_api.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "stage_int.h"

/* ---- the CUDA driver API (seclaunch/cuda_api.h) -------------------------- */
static struct sl_cuda_api cu;
static bool cu_loaded;

static bool cuda_load(char *why, size_t whylen)
{
	if (!cu_loaded)
		cu_loaded = sl_cuda_api_load(&cu, why, whylen);
	return cu_loaded;
}

static const char *cu_err(CUresult r)
{
	return sl_cuda_err(&cu, r);
}

#define CU_GUARD(expr, ...)                                                                        \
	do {                                                                                       \
		CUresult cu_rc_ = (expr);                                                          \
		if (cu_rc_ != 0) {                                                                 \
			char msg_[200];                                                            \
			snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                 \
			rc = sl_err_set(SL_E_GPU, "%s: %s", msg_, cu_err(cu_rc_));                 \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* ---- NVML: confidential-computing state -------------------------------- */
typedef struct {
	unsigned environment, ccFeature, devToolsMode;
} nvml_cc_state;
typedef struct {
	unsigned version, environment, ccFeature, devToolsMode, multiGpuMode;
} nvml_cc_settings;
#define NVML_CC_SETTINGS_V1 (sizeof(nvml_cc_settings) | (1u << 24))

static void nvml_probe(sl_gpu_info *info)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void), (*shutdown)(void), (*state)(nvml_cc_state *);
	int (*settings)(nvml_cc_settings *), (*ready)(unsigned *);

	/* without NVML nothing proves CC mode: off is the safe answer */
	snprintf(info->cc, sizeof(info->cc), "off");
	if (lib == NULL) {
		snprintf(info->reason, sizeof(info->reason),
		         "GPU not in confidential-computing mode (NVML unavailable: %s)",
		         dlerror());
		return;
	}
	*(void **)(&init) = sl_cuda_sym_(lib, "nvmlInit_v2", "nvmlInit");
	*(void **)(&shutdown) = dlsym(lib, "nvmlShutdown");
	*(void **)(&state) = dlsym(lib, "nvmlSystemGetConfComputeState");
	*(void **)(&settings) = dlsym(lib, "nvmlSystemGetConfComputeSettings");
	*(void **)(&ready) = dlsym(lib, "nvmlSystemGetConfComputeGpusReadyState");
	if (init == NULL || init() != 0) {
		snprintf(info->reason, sizeof(info->reason),
		         "GPU not in confidential-computing mode (NVML did not initialise)");
		goto out;
	}
	unsigned on = 0, devtools = 0;
	bool known = false;
	nvml_cc_settings cs = {.version = (unsigned)NVML_CC_SETTINGS_V1};
	nvml_cc_state st = {0};
	if (settings != NULL && settings(&cs) == 0) {
		on = cs.ccFeature, devtools = cs.devToolsMode, known = true;
	} else if (state != NULL && state(&st) == 0) {
		on = st.ccFeature, devtools = st.devToolsMode, known = true;
	}
	if (!known || on == 0) {
		snprintf(info->reason, sizeof(info->reason),
		         "GPU not in confidential-computing mode");
	} else {
		unsigned accepting = 0;
		snprintf(info->cc, sizeof(info->cc), "on");
		info->devtools = devtools != 0;
		info->cc_ready = ready != NULL && ready(&accepting) == 0 && accepting != 0;
		snprintf(info->reason, sizeof(info->reason),
		         "GPU in confidential-computing mode%s%s",
		         info->devtools ? ", dev-tools mode (refused)" : "",
		         info->cc_ready ? ", ready" : ", not set ready");
	}
	if (shutdown != NULL)
		shutdown();
out:
	dlclose(lib);
}

/* cuInit and the first device; false with the reason otherwise. */
static bool cuda_device(sl_gpu_info *info)
{
	int n = 0;
	CUdevice dev;
	CUresult r;

	if ((r = cu.Init(0)) != 0) {
		snprintf(info->reason, sizeof(info->reason), "cuInit failed: %s", cu_err(r));
		return false;
	}
	if ((r = cu.DeviceGetCount(&n)) != 0 || n < 1) {
		snprintf(info->reason, sizeof(info->reason), "no CUDA device (%s)",
		         r != 0 ? cu_err(r) : "count 0");
		return false;
	}
	if ((r = cu.DeviceGet(&dev, 0)) != 0) {
		snprintf(info->reason, sizeof(info->reason), "cuDeviceGet(0): %s", cu_err(r));
		return false;
	}
	(void)cu.DeviceGetName(info->name, (int)sizeof(info->name) - 1, dev);
	info->device = 0;
	return true;
}

void sl_gpu_probe(sl_gpu_info *info)
{
	char cc_reason[sizeof(info->reason)];

	memset(info, 0, sizeof(*info));
	snprintf(info->cc, sizeof(info->cc), "absent");
	if (!cuda_load(info->reason, sizeof(info->reason)))
		return;
	nvml_probe(info);
	if (info->devtools)
		return; /* never gets data: not usable, reason says why */
	if (strcmp(info->cc, "on") == 0 && !info->cc_ready) {
		/* the driver refuses work until the GPU is attested and set ready:
		 * usable once its evidence verified (sl_gpu_set_ready) */
		info->needs_ready = true;
		info->usable = true;
		snprintf(info->name, sizeof(info->name), "GPU 0");
		return;
	}
	snprintf(cc_reason, sizeof(cc_reason), "%s", info->reason);
	if (!cuda_device(info)) {
		snprintf(info->cc, sizeof(info->cc), "absent");
		return;
	}
	snprintf(info->reason, sizeof(info->reason), "%s", cc_reason);
	info->usable = true;
}

sl_err sl_gpu_set_ready(sl_gpu_info *info)
{
	sl_err rc = SL_E_GPU;
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void) = NULL, (*shutdown)(void) = NULL, (*set)(unsigned) = NULL;
	bool inited = false;

	SL_ENSURE(lib != NULL, SL_E_GPU, "setting the GPU ready: NVML unavailable: %s", dlerror());
	*(void **)(&init) = sl_cuda_sym_(lib, "nvmlInit_v2", "nvmlInit");
	*(void **)(&shutdown) = dlsym(lib, "nvmlShutdown");
	*(void **)(&set) = dlsym(lib, "nvmlSystemSetConfComputeGpusReadyState");
	SL_ENSURE(init != NULL && set != NULL, SL_E_GPU,
	          "setting the GPU ready: this NVML lacks nvmlSystemSetConfComputeGpusReadyState");
	SL_ENSURE(init() == 0, SL_E_GPU, "setting the GPU ready: NVML did not initialise");
	inited = true;
	SL_ENSURE(set(1) == 0, SL_E_GPU,
	          "setting the GPU ready: nvmlSystemSetConfComputeGpusReadyState refused "
	          "(needs root)");
	info->cc_ready = true;
	info->needs_ready = false;
	SL_ENSURE(cuda_device(info), SL_E_GPU, "GPU set ready but unusable: %s", info->reason);
	snprintf(info->reason, sizeof(info->reason),
	         "GPU in confidential-computing mode, attested and set ready");
	rc = SL_OK;
out:
	if (inited && shutdown != NULL)
		shutdown();
	if (lib != NULL)
		dlclose(lib);
	return rc;
}

/* ---- the staging pipeline --------------------------------------------- */
#define NSLOTS 3
#define NSTREAMS 2

/* A GPU stage's own state (sl_stage.be). */
struct sl_gpu_stage {
	CUdevice dev;
	int ordinal;
	CUcontext ctx;
	CUdeviceptr dptr;
	size_t size;
	size_t chunk;
	void *pinned[NSLOTS];
	CUevent ev[NSLOTS];
	bool busy[NSLOTS];
	CUstream stream[NSTREAMS];
	unsigned next;
	CUipcMemHandle ipc;
	bool have_ipc;
};

/* ---- the backend's table ------------------------------------------------ */

static SL_RESULT gpu_write(sl_stage *s, uint64_t off, const void *pv, size_t len)
{
	sl_err rc = SL_E_GPU;
	struct sl_gpu_stage *g = s->be;
	const uint8_t *p = pv;
	while (len > 0) {
		unsigned slot = g->next;
		size_t n = len < g->chunk ? len : g->chunk;
		if (g->busy[slot]) /* its previous copy must be done before reuse */
			CU_GUARD(cu.EventSynchronize(g->ev[slot]),
			         "waiting for a host-to-device copy");
		memcpy(g->pinned[slot], p, n); /* drain_pinned zeroes every slot at the end */
		CUstream st = g->stream[slot % NSTREAMS];
		CU_GUARD(cu.MemcpyHtoDAsync(g->dptr + off, g->pinned[slot], n, st),
		         "copying %zu bytes to the device at %llu", n, (unsigned long long)off);
		CU_GUARD(cu.EventRecord(g->ev[slot], st), "cuEventRecord");
		g->busy[slot] = true;
		g->next = (slot + 1) % NSLOTS;
		p += n, off += n, len -= n;
	}
	rc = SL_OK;
out:
	return rc;
}

/* Waits for every copy, then zeroes and frees the pinned buffers: after
 * staging no plaintext is left in host memory. */
static SL_RESULT drain_pinned(struct sl_gpu_stage *g)
{
	sl_err rc = SL_OK;
	for (int i = 0; i < NSLOTS; i++) {
		if (g->busy[i] && cu.EventSynchronize(g->ev[i]) != 0)
			rc = sl_err_set(SL_E_GPU, "a host-to-device copy failed");
		g->busy[i] = false;
		if (g->pinned[i] != NULL) {
			sl_wipe(g->pinned[i], g->chunk);
			(void)cu.MemFreeHost(g->pinned[i]);
			g->pinned[i] = NULL;
		}
	}
	return rc;
}

static SL_RESULT gpu_seal(sl_stage *s)
{
	sl_err rc = SL_E_GPU;
	struct sl_gpu_stage *g = s->be;
	SL_GUARD(drain_pinned(g));
	for (int i = 0; i < NSTREAMS; i++)
		CU_GUARD(cu.StreamSynchronize(g->stream[i]), "finishing the copies");
	CU_GUARD(cu.IpcGetMemHandle(&g->ipc, g->dptr), "exporting the device buffer (IPC handle)");
	g->have_ipc = true;
	rc = SL_OK;
out:
	return rc;
}

/* The one place a GPU stage's plaintext is cleared: the pinned buffers
 * (drain_pinned), then the device buffer; the result says whether the
 * device's clearing was confirmed. Everything is released either way. */
static SL_RESULT gpu_wipe(sl_stage *s)
{
	sl_err rc = SL_OK;
	struct sl_gpu_stage *g = s->be;
	if (g == NULL)
		return SL_OK;
	if (g->ctx != NULL)
		(void)cu.CtxSetCurrent(g->ctx);
	if (drain_pinned(g) != SL_OK)
		rc = SL_E_GPU;
	if (g->dptr != 0) {
		CUresult r = cu.MemsetD8(g->dptr, 0, g->size);
		if (r == 0)
			r = cu.CtxSynchronize();
		if (r != 0)
			rc = sl_err_set(SL_E_GPU,
			                "clearing device memory could not be confirmed: %s",
			                cu_err(r));
		(void)cu.MemFree(g->dptr);
		g->dptr = 0;
	}
	for (int i = 0; i < NSLOTS; i++)
		if (g->ev[i] != NULL)
			(void)cu.EventDestroy(g->ev[i]);
	for (int i = 0; i < NSTREAMS; i++)
		if (g->stream[i] != NULL)
			(void)cu.StreamDestroy(g->stream[i]);
	if (g->ctx != NULL)
		(void)cu.PrimaryCtxRelease(g->dev);
	sl_wipe(g, sizeof(*g));
	free(g);
	s->be = NULL;
	return rc;
}

static SL_RESULT gpu_describe(const sl_stage *s, int job_fd, json_t *o)
{
	sl_err rc = SL_E_NOMEM;
	const struct sl_gpu_stage *g = s->be;
	char hex[2 * sizeof(g->ipc.reserved) + 1];

	(void)job_fd; /* the job opens it by its IPC handle */
	SL_ENSURE(g->have_ipc, SL_E_INTERNAL, "GPU staging not finished");
	sl_hex_encode((const uint8_t *)g->ipc.reserved, sizeof(g->ipc.reserved), hex);
	SL_ENSURE(json_object_set_new(o, "kind", json_string("gpu")) == 0 &&
	              json_object_set_new(o, "device", json_integer(g->ordinal)) == 0 &&
	              json_object_set_new(o, "ipc_handle", json_string(hex)) == 0,
	          SL_E_NOMEM, "building SECLAUNCH_DATA");
	rc = SL_OK;
out:
	return rc;
}

/* no descriptor, no host view: the fd and view entries stay NULL */
static const struct sl_stage_ops gpu_ops = {
    .write = gpu_write,
    .seal = gpu_seal,
    .describe = gpu_describe,
    .wipe = gpu_wipe,
};

sl_err sl_stage_gpu_new(const char *dataset_id, uint64_t size, size_t chunk,
                        const sl_gpu_info *info, sl_stage **out)
{
	sl_err rc = SL_E_GPU;
	char why[200] = "";
	sl_stage *s = NULL;
	struct sl_gpu_stage *g = NULL;

	SL_ENSURE(!info->devtools, SL_E_GPU,
	          "dataset %s: the GPU is in confidential-computing dev-tools mode; it gets no "
	          "data",
	          dataset_id);
	SL_ENSURE(info->usable, SL_E_GPU, "dataset %s: no usable GPU: %s", dataset_id,
	          info->reason);
	SL_ENSURE(!info->needs_ready, SL_E_GPU,
	          "dataset %s: the GPU is in CC mode but not attested and set ready", dataset_id);
	SL_ENSURE(cuda_load(why, sizeof(why)), SL_E_GPU, "%s", why);
	SL_ENSURE(size > 0 && size <= SIZE_MAX, SL_E_INPUT,
	          "dataset %s: %llu bytes cannot be staged on a GPU", dataset_id,
	          (unsigned long long)size);
	SL_GUARD(sl_stage_new_(&gpu_ops, dataset_id, size, &s));
	s->method = "gpu-ipc";
	g = calloc(1, sizeof(*g));
	SL_ENSURE(g != NULL, SL_E_NOMEM, "allocating a GPU staging area");
	s->be = g;
	g->size = (size_t)size;
	g->chunk = chunk > 0 ? chunk : (size_t)1 << 20;
	g->ordinal = info->device;
	CU_GUARD(cu.Init(0), "cuInit");
	CU_GUARD(cu.DeviceGet(&g->dev, g->ordinal), "cuDeviceGet(%d)", g->ordinal);
	CU_GUARD(cu.PrimaryCtxRetain(&g->ctx, g->dev), "retaining the primary context");
	CU_GUARD(cu.CtxSetCurrent(g->ctx), "making the primary context current");
	CU_GUARD(cu.MemAlloc(&g->dptr, g->size), "allocating %zu bytes of device memory for %s",
	         g->size, dataset_id);
	for (int i = 0; i < NSTREAMS; i++)
		CU_GUARD(cu.StreamCreate(&g->stream[i], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	for (int i = 0; i < NSLOTS; i++) {
		CU_GUARD(cu.MemHostAlloc(&g->pinned[i], g->chunk, 0), "pinning %zu bytes",
		         g->chunk);
		CU_GUARD(cu.EventCreate(&g->ev[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	}
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s); /* clears and releases g through gpu_wipe */
	return rc;
}

/* ---- --stage gpu-ipc: is CUDA IPC there at all? ------------------------ */
sl_err sl_gpu_ipc_probe(const sl_gpu_info *info)
{
	sl_err rc = SL_E_GPU;
	char why[200] = "";
	CUdevice dev;
	CUcontext ctx = NULL;
	CUdeviceptr p = 0;
	CUipcMemHandle h;
	CUresult r;

	SL_ENSURE(info->usable && !info->needs_ready, SL_E_GPU,
	          "--stage gpu-ipc: no usable GPU: %s", info->reason);
	SL_ENSURE(cuda_load(why, sizeof(why)), SL_E_GPU, "%s", why);
	CU_GUARD(cu.Init(0), "cuInit");
	CU_GUARD(cu.DeviceGet(&dev, info->device), "cuDeviceGet(%d)", info->device);
	CU_GUARD(cu.PrimaryCtxRetain(&ctx, dev), "retaining the primary context");
	CU_GUARD(cu.CtxSetCurrent(ctx), "making the primary context current");
	CU_GUARD(cu.MemAlloc(&p, (size_t)2 << 20), "allocating 2 MiB to probe CUDA IPC");
	r = cu.IpcGetMemHandle(&h, p);
	SL_ENSURE(r == 0, SL_E_GPU,
	          "--stage gpu-ipc: CUDA IPC is not available on this GPU or platform "
	          "(cuIpcGetMemHandle: %s; NVIDIA does not support CUDA IPC in protected-PCIe "
	          "confidential-computing mode); use --stage gpu, which needs no IPC",
	          cu_err(r));
	rc = SL_OK;
out:
	if (p != 0) /* never held data; zeroed anyway, like every buffer freed */
		(void)cu.MemsetD8(p, 0, (size_t)2 << 20), (void)cu.MemFree(p);
	if (ctx != NULL)
		(void)cu.PrimaryCtxRelease(dev);
	return rc;
}
