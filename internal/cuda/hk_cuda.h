// Declarations for the dlopen bindings of package nvrtc. No CUDA header is
// used: the handful of types and constants below are declared here, with the
// values of the CUDA 12/13 headers. Every handle crosses into Go as an
// integer (uintptr_t / unsigned long long) so Go never holds a C pointer it
// could mistake for its own.
#ifndef NCCLHOOKS_HK_CUDA_H
#define NCCLHOOKS_HK_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef uintptr_t hk_h; // any opaque CUDA / NVRTC / nvJitLink handle

// Function pointer tables filled by Go through hk_sym (dlsym). A NULL entry is
// a symbol the loaded library lacks; every wrapper checks it.
typedef struct {
	void *cuInit, *cuDriverGetVersion, *cuGetErrorName, *cuGetErrorString;
	void *cuDeviceGetCount, *cuDeviceGet, *cuDeviceGetAttribute, *cuDeviceGetName;
	void *cuDeviceGetUuid, *cuDeviceGetPCIBusId;
	void *cuDevicePrimaryCtxRetain, *cuDevicePrimaryCtxRelease;
	void *cuCtxGetCurrent, *cuCtxSetCurrent, *cuCtxSynchronize;
	void *cuModuleLoadData, *cuModuleUnload, *cuModuleGetGlobal, *cuModuleGetFunction;
	void *cuMemAlloc, *cuMemFree, *cuMemHostAlloc, *cuMemHostGetDevicePointer, *cuMemFreeHost;
	void *cuStreamCreate, *cuStreamSynchronize, *cuStreamDestroy;
	void *cuMemcpyHtoDAsync, *cuMemcpyDtoHAsync, *cuMemcpyDtoDAsync, *cuMemsetD8Async;
	void *cuLaunchKernel;
	void *cuEventCreate, *cuEventRecord, *cuEventSynchronize, *cuEventElapsedTime, *cuEventDestroy;
	void *cuStreamBeginCapture, *cuStreamEndCapture, *cuGraphInstantiateWithFlags, *cuGraphLaunch,
	    *cuGraphExecDestroy, *cuGraphDestroy;
	void *cuLinkCreate, *cuLinkAddData, *cuLinkComplete, *cuLinkDestroy;
} hk_cu_t;

typedef struct {
	void *nvrtcVersion, *nvrtcGetErrorString, *nvrtcCreateProgram, *nvrtcCompileProgram,
	    *nvrtcGetProgramLogSize, *nvrtcGetProgramLog, *nvrtcGetCUBINSize, *nvrtcGetCUBIN,
	    *nvrtcDestroyProgram;
} hk_nvrtc_t;

typedef struct {
	void *create, *destroy, *addData, *complete, *getLinkedCubinSize, *getLinkedCubin,
	    *getErrorLogSize, *getErrorLog;
} hk_jl_t;

extern hk_cu_t hk_cu;
extern hk_nvrtc_t hk_nvrtc;
extern hk_jl_t hk_jl;

// Result a wrapper returns when the library lacks the function it needs.
#define HK_MISSING (-424242)

// Constants (CUDA 12/13 headers).
#define HK_ATTR_MULTIPROCESSOR_COUNT 16
#define HK_ATTR_CAN_MAP_HOST_MEMORY 19
#define HK_ATTR_UNIFIED_ADDRESSING 41
#define HK_ATTR_CC_MAJOR 75
#define HK_ATTR_CC_MINOR 76

// dl
hk_h hk_dlopen(const char *path, int noload, char *err, size_t errlen); // err: dlerror of a failure
void *hk_sym(hk_h lib, const char *name);

// driver: no context needed
int hk_cuInit(void);
int hk_cuDriverGetVersion(int *v);
const char *hk_cuErrorName(int r);
const char *hk_cuErrorString(int r);
int hk_cuDeviceGetCount(int *n);
int hk_cuDeviceGet(int *dev, int ordinal);
int hk_cuDeviceGetAttribute(int *v, int attr, int dev);
int hk_cuDeviceGetName(char *buf, int n, int dev);
int hk_cuDeviceGetUuid(unsigned char uuid[16], int dev);
int hk_cuDeviceGetPCIBusId(char *buf, int n, int dev);
int hk_cuPrimaryCtxRetain(hk_h *ctx, int dev);
int hk_cuPrimaryCtxRelease(int dev);

// driver: each makes ctx current for the call and restores the previous one
int hk_cuCtxSynchronize(hk_h ctx);
int hk_cuModuleLoadData(hk_h ctx, hk_h *mod, const void *img);
int hk_cuModuleUnload(hk_h ctx, hk_h mod);
int hk_cuModuleGetGlobal(hk_h ctx, unsigned long long *dptr, size_t *size, hk_h mod, const char *name);
int hk_cuModuleGetFunction(hk_h ctx, hk_h *fn, hk_h mod, const char *name);
int hk_cuMemAllocZero(hk_h ctx, unsigned long long *dptr, size_t n, hk_h s);
int hk_cuMemFree(hk_h ctx, unsigned long long dptr);
int hk_cuMemHostAllocMapped(hk_h ctx, void **host, unsigned long long *dptr, size_t n);
int hk_cuMemFreeHost(hk_h ctx, void *host);
int hk_cuStreamCreateNonBlocking(hk_h ctx, hk_h *s);
int hk_cuStreamSynchronize(hk_h ctx, hk_h s);
int hk_cuStreamDestroy(hk_h ctx, hk_h s);
int hk_cuCopyHtoD(hk_h ctx, unsigned long long dst, const void *src, size_t n, hk_h s);
int hk_cuCopyDtoH(hk_h ctx, void *dst, unsigned long long src, size_t n, hk_h s);
int hk_cuMemset(hk_h ctx, unsigned long long dst, unsigned char v, size_t n, hk_h s);
int hk_cuLaunch(hk_h ctx, hk_h fn, const unsigned int *grid, const unsigned int *block, unsigned int shmem,
                hk_h s, void **params);
int hk_cuEventCreate(hk_h ctx, hk_h *e);
int hk_cuEventRecord(hk_h ctx, hk_h e, hk_h s);
int hk_cuEventSynchronize(hk_h ctx, hk_h e);
int hk_cuEventElapsedTime(hk_h ctx, float *ms, hk_h start, hk_h end);
int hk_cuEventDestroy(hk_h ctx, hk_h e);
int hk_cuStreamBeginCaptureRelaxed(hk_h ctx, hk_h s);
int hk_cuStreamEndCapture(hk_h ctx, hk_h s, hk_h *graph);
int hk_cuGraphInstantiate(hk_h ctx, hk_h *exec, hk_h graph);
int hk_cuGraphLaunch(hk_h ctx, hk_h exec, hk_h s);
int hk_cuGraphDestroy(hk_h ctx, hk_h exec, hk_h graph);
// cuLink*: inputs are cubins or PTX (kind 0 = cubin, 1 = PTX).
int hk_cuLink(hk_h ctx, int n, const void *const *data, const size_t *sizes, const int *kinds, void **out,
              size_t *outSize, char *log, size_t logSize);

// NVRTC
int hk_nvrtcVersion(int *major, int *minor);
const char *hk_nvrtcErrorString(int r);
int hk_nvrtcCreateProgram(hk_h *prog, const char *src, const char *name);
int hk_nvrtcCompileProgram(hk_h prog, int n, const char *const *opts);
int hk_nvrtcGetLog(hk_h prog, char **log, size_t *n); // *log malloc'd
int hk_nvrtcGetCUBIN(hk_h prog, char **out, size_t *n); // *out malloc'd
int hk_nvrtcDestroyProgram(hk_h prog);

// nvJitLink: inputs as for hk_cuLink; *out and *log malloc'd.
int hk_jlLink(int n, const char *const *opts, int nopts, const void *const *data, const size_t *sizes,
              const int *kinds, void **out, size_t *outSize, char **log);

#endif
