/* The CUDA driver API subset seclaunch uses, loaded with dlopen("libcuda.so.1")
 * at run time: no build-time CUDA dependency, so the few types and entry
 * points are declared here, once, for the launcher's staging (stage_gpu.c)
 * and the job-side library (jobside/seclaunch_data.c). Header only: the
 * job-side library links nothing of seclaunch's.
 *
 * SECLAUNCH_LIBCUDA names another libcuda.so.1 (tests: the CPU stand-in). */
#ifndef SECLAUNCH_CUDA_API_H
#define SECLAUNCH_CUDA_API_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct {
	char reserved[64];
} CUipcMemHandle;
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

/* X(field, versioned name or NULL, name, parameter list): the versioned
 * name is tried first (the driver exports both). */
#define SL_CUDA_API(X)                                                                             \
	X(Init, NULL, "cuInit", (unsigned))                                                        \
	X(DeviceGetCount, NULL, "cuDeviceGetCount", (int *))                                       \
	X(DeviceGet, NULL, "cuDeviceGet", (CUdevice *, int))                                       \
	X(DeviceGetName, NULL, "cuDeviceGetName", (char *, int, CUdevice))                         \
	X(PrimaryCtxRetain, NULL, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))             \
	X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",          \
	  (CUdevice))                                                                              \
	X(CtxGetCurrent, NULL, "cuCtxGetCurrent", (CUcontext *))                                   \
	X(CtxSetCurrent, NULL, "cuCtxSetCurrent", (CUcontext))                                     \
	X(CtxSynchronize, NULL, "cuCtxSynchronize", (void))                                        \
	X(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc", (CUdeviceptr *, size_t))                        \
	X(MemFree, "cuMemFree_v2", "cuMemFree", (CUdeviceptr))                                     \
	X(MemHostAlloc, NULL, "cuMemHostAlloc", (void **, size_t, unsigned))                       \
	X(MemFreeHost, NULL, "cuMemFreeHost", (void *))                                            \
	X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync",                            \
	  (CUdeviceptr, const void *, size_t, CUstream))                                           \
	X(MemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH", (void *, CUdeviceptr, size_t))            \
	X(MemsetD8, "cuMemsetD8_v2", "cuMemsetD8", (CUdeviceptr, unsigned char, size_t))           \
	X(StreamCreate, NULL, "cuStreamCreate", (CUstream *, unsigned))                            \
	X(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", (CUstream))                      \
	X(StreamSynchronize, NULL, "cuStreamSynchronize", (CUstream))                              \
	X(EventCreate, NULL, "cuEventCreate", (CUevent *, unsigned))                               \
	X(EventRecord, NULL, "cuEventRecord", (CUevent, CUstream))                                 \
	X(EventSynchronize, NULL, "cuEventSynchronize", (CUevent))                                 \
	X(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy", (CUevent))                          \
	X(IpcGetMemHandle, NULL, "cuIpcGetMemHandle", (CUipcMemHandle *, CUdeviceptr))             \
	X(ModuleLoadData, NULL, "cuModuleLoadData", (CUmodule *, const void *))                    \
	X(ModuleUnload, NULL, "cuModuleUnload", (CUmodule))                                        \
	X(ModuleGetFunction, NULL, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))  \
	X(LaunchKernel, NULL, "cuLaunchKernel",                                                    \
	  (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
	   CUstream, void **, void **))                                                            \
	X(GetErrorName, NULL, "cuGetErrorName", (CUresult, const char **))

#define SL_CUDA_FIELD_(f, v2, v1, params) CUresult(*f) params;
struct sl_cuda_api {
	void *lib;
	SL_CUDA_API(SL_CUDA_FIELD_)
};
#undef SL_CUDA_FIELD_

/* One entry point of a dlopen()ed driver library, the versioned name first
 * (v2 may be NULL). */
static inline void *sl_cuda_sym_(void *lib, const char *v2, const char *v1)
{
	void *p = v2 != NULL ? dlsym(lib, v2) : NULL;
	return p != NULL ? p : dlsym(lib, v1);
}

/* Opens the driver and resolves every entry point above; false with why
 * (no driver, or a missing entry point) and nothing held otherwise. */
static inline int sl_cuda_api_load(struct sl_cuda_api *cu, char *why, size_t why_n)
{
	const char *path = getenv("SECLAUNCH_LIBCUDA");
	memset(cu, 0, sizeof(*cu));
	cu->lib =
	    dlopen(path != NULL && *path != '\0' ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cu->lib == NULL) {
		snprintf(why, why_n, "no CUDA driver: dlopen(libcuda.so.1) failed: %s", dlerror());
		return 0;
	}
#define SL_CUDA_LOAD_(f, v2, v1, params)                                                           \
	{                                                                                          \
		void *p_ = sl_cuda_sym_(cu->lib, v2, v1);                                          \
		if (p_ == NULL) {                                                                  \
			snprintf(why, why_n, "libcuda.so.1 lacks %s", v1);                         \
			dlclose(cu->lib);                                                          \
			memset(cu, 0, sizeof(*cu));                                                \
			return 0;                                                                  \
		}                                                                                  \
		memcpy(&cu->f, &p_, sizeof(p_));                                                   \
	}
	SL_CUDA_API(SL_CUDA_LOAD_)
#undef SL_CUDA_LOAD_
	return 1;
}

/* The driver's name for an error ("CUDA_ERROR_UNKNOWN" when it has none). */
static inline const char *sl_cuda_err(const struct sl_cuda_api *cu, CUresult r)
{
	const char *name = NULL;
	if (cu->GetErrorName == NULL || cu->GetErrorName(r, &name) != 0 || name == NULL)
		return "CUDA_ERROR_UNKNOWN";
	return name;
}

#endif
