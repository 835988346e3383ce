// Wrappers that call through the dlsym'd pointer tables of hk_cuda.h (cgo
// cannot call a C function pointer). Handles are passed as hk_h (uintptr_t),
// which has the ABI of the pointer types the real prototypes use.
#define _GNU_SOURCE
#include "hk_cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hk_cu_t hk_cu;
hk_nvrtc_t hk_nvrtc;
hk_jl_t hk_jl;

// F(table, field, return type, parameter types...) is the typed pointer.
#define F(tab, name, ...) ((int (*)(__VA_ARGS__))tab.name)
#define NEED(tab, name) \
	if (!tab.name) return HK_MISSING

// hk_dlopen opens path; on failure it copies dlerror's message into err in
// the same call, before any other dl call on the thread can replace it.
hk_h hk_dlopen(const char *path, int noload, char *err, size_t errlen) {
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL | (noload ? RTLD_NOLOAD : 0));
	if (!h && err && errlen) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
	}
	return (hk_h)h;
}

void *hk_sym(hk_h lib, const char *name) { return dlsym((void *)lib, name); }

// ---- driver, no context ----

int hk_cuInit(void) { NEED(hk_cu, cuInit); return F(hk_cu, cuInit, unsigned)(0); }
int hk_cuDriverGetVersion(int *v) { NEED(hk_cu, cuDriverGetVersion); return F(hk_cu, cuDriverGetVersion, int *)(v); }

const char *hk_cuErrorName(int r) {
	const char *s = 0;
	if (hk_cu.cuGetErrorName) F(hk_cu, cuGetErrorName, int, const char **)(r, &s);
	return s;
}

const char *hk_cuErrorString(int r) {
	const char *s = 0;
	if (hk_cu.cuGetErrorString) F(hk_cu, cuGetErrorString, int, const char **)(r, &s);
	return s;
}

int hk_cuDeviceGetCount(int *n) { NEED(hk_cu, cuDeviceGetCount); return F(hk_cu, cuDeviceGetCount, int *)(n); }
int hk_cuDeviceGet(int *dev, int ordinal) { NEED(hk_cu, cuDeviceGet); return F(hk_cu, cuDeviceGet, int *, int)(dev, ordinal); }

int hk_cuDeviceGetAttribute(int *v, int attr, int dev) {
	NEED(hk_cu, cuDeviceGetAttribute);
	return F(hk_cu, cuDeviceGetAttribute, int *, int, int)(v, attr, dev);
}

int hk_cuDeviceGetName(char *buf, int n, int dev) {
	NEED(hk_cu, cuDeviceGetName);
	return F(hk_cu, cuDeviceGetName, char *, int, int)(buf, n, dev);
}

// CUuuid is a struct of 16 bytes, passed by pointer.
int hk_cuDeviceGetUuid(unsigned char uuid[16], int dev) {
	NEED(hk_cu, cuDeviceGetUuid);
	return F(hk_cu, cuDeviceGetUuid, unsigned char *, int)(uuid, dev);
}

int hk_cuDeviceGetPCIBusId(char *buf, int n, int dev) {
	NEED(hk_cu, cuDeviceGetPCIBusId);
	return F(hk_cu, cuDeviceGetPCIBusId, char *, int, int)(buf, n, dev);
}

int hk_cuPrimaryCtxRetain(hk_h *ctx, int dev) {
	NEED(hk_cu, cuDevicePrimaryCtxRetain);
	return F(hk_cu, cuDevicePrimaryCtxRetain, hk_h *, int)(ctx, dev);
}

int hk_cuPrimaryCtxRelease(int dev) {
	NEED(hk_cu, cuDevicePrimaryCtxRelease);
	return F(hk_cu, cuDevicePrimaryCtxRelease, int)(dev);
}

// ---- driver, in a context ----

// enter makes ctx current on this thread and remembers what was current, so
// a call made on a foreign thread (NCCL's, the harness's) leaves it as found.
static int enter(hk_h ctx, hk_h *prev) {
	*prev = 0;
	if (!hk_cu.cuCtxGetCurrent || !hk_cu.cuCtxSetCurrent) return HK_MISSING;
	int r = F(hk_cu, cuCtxGetCurrent, hk_h *)(prev);
	if (r) return r;
	if (*prev != ctx) return F(hk_cu, cuCtxSetCurrent, hk_h)(ctx);
	return 0;
}

static int leave(hk_h ctx, hk_h prev, int r) {
	if (prev != ctx) F(hk_cu, cuCtxSetCurrent, hk_h)(prev);
	return r;
}

// IN_CTX(ctx, table field, call): enter, check the symbol, call, leave.
#define IN_CTX(ctx, name, call)                               \
	do {                                                      \
		hk_h prev_;                                           \
		if (!hk_cu.name) return HK_MISSING;                   \
		int r_ = enter(ctx, &prev_);                          \
		if (r_) return r_;                                    \
		return leave(ctx, prev_, (call));                     \
	} while (0)

int hk_cuCtxSynchronize(hk_h ctx) { IN_CTX(ctx, cuCtxSynchronize, F(hk_cu, cuCtxSynchronize, void)()); }

int hk_cuModuleLoadData(hk_h ctx, hk_h *mod, const void *img) {
	IN_CTX(ctx, cuModuleLoadData, F(hk_cu, cuModuleLoadData, hk_h *, const void *)(mod, img));
}

int hk_cuModuleUnload(hk_h ctx, hk_h mod) { IN_CTX(ctx, cuModuleUnload, F(hk_cu, cuModuleUnload, hk_h)(mod)); }

int hk_cuModuleGetGlobal(hk_h ctx, unsigned long long *dptr, size_t *size, hk_h mod, const char *name) {
	IN_CTX(ctx, cuModuleGetGlobal,
	       F(hk_cu, cuModuleGetGlobal, unsigned long long *, size_t *, hk_h, const char *)(dptr, size, mod, name));
}

int hk_cuModuleGetFunction(hk_h ctx, hk_h *fn, hk_h mod, const char *name) {
	IN_CTX(ctx, cuModuleGetFunction, F(hk_cu, cuModuleGetFunction, hk_h *, hk_h, const char *)(fn, mod, name));
}

static int syncOn(int r, hk_h s);

// The zeroing goes on the private stream, and is waited for: cuMemsetD8 would
// run on the legacy default stream, which a non-blocking stream does not wait
// for, so a later copy on the private stream could land before it and be
// zeroed (seen on the H200 with six processes sharing the GPU: contexts
// written with cuMemcpyHtoDAsync read as zeros in NCCL's kernel).
static int allocZero(unsigned long long *dptr, size_t n, hk_h s) {
	if (!hk_cu.cuMemsetD8Async || !hk_cu.cuMemFree) return HK_MISSING;
	int r = F(hk_cu, cuMemAlloc, unsigned long long *, size_t)(dptr, n);
	if (r) return r;
	r = syncOn(F(hk_cu, cuMemsetD8Async, unsigned long long, unsigned char, size_t, hk_h)(*dptr, 0, n, s), s);
	if (r) {
		F(hk_cu, cuMemFree, unsigned long long)(*dptr);
		*dptr = 0;
	}
	return r;
}

int hk_cuMemAllocZero(hk_h ctx, unsigned long long *dptr, size_t n, hk_h s) { IN_CTX(ctx, cuMemAlloc, allocZero(dptr, n, s)); }

int hk_cuMemFree(hk_h ctx, unsigned long long dptr) { IN_CTX(ctx, cuMemFree, F(hk_cu, cuMemFree, unsigned long long)(dptr)); }

#define HK_MEMHOSTALLOC_PORTABLE 0x01
#define HK_MEMHOSTALLOC_DEVICEMAP 0x02

static int hostAllocMapped(void **host, unsigned long long *dptr, size_t n) {
	if (!hk_cu.cuMemHostGetDevicePointer || !hk_cu.cuMemFreeHost) return HK_MISSING;
	void *p = 0;
	int r = F(hk_cu, cuMemHostAlloc, void **, size_t, unsigned)(&p, n,
	                                                             HK_MEMHOSTALLOC_PORTABLE | HK_MEMHOSTALLOC_DEVICEMAP);
	if (r) return r;
	memset(p, 0, n);
	r = F(hk_cu, cuMemHostGetDevicePointer, unsigned long long *, void *, unsigned)(dptr, p, 0);
	if (r) {
		F(hk_cu, cuMemFreeHost, void *)(p);
		return r;
	}
	*host = p;
	return 0;
}

int hk_cuMemHostAllocMapped(hk_h ctx, void **host, unsigned long long *dptr, size_t n) {
	IN_CTX(ctx, cuMemHostAlloc, hostAllocMapped(host, dptr, n));
}

int hk_cuMemFreeHost(hk_h ctx, void *host) { IN_CTX(ctx, cuMemFreeHost, F(hk_cu, cuMemFreeHost, void *)(host)); }

#define HK_STREAM_NON_BLOCKING 0x1

int hk_cuStreamCreateNonBlocking(hk_h ctx, hk_h *s) {
	IN_CTX(ctx, cuStreamCreate, F(hk_cu, cuStreamCreate, hk_h *, unsigned)(s, HK_STREAM_NON_BLOCKING));
}

int hk_cuStreamSynchronize(hk_h ctx, hk_h s) { IN_CTX(ctx, cuStreamSynchronize, F(hk_cu, cuStreamSynchronize, hk_h)(s)); }
int hk_cuStreamDestroy(hk_h ctx, hk_h s) { IN_CTX(ctx, cuStreamDestroy, F(hk_cu, cuStreamDestroy, hk_h)(s)); }

// The copies are asynchronous on s and then wait for s, in one call, so the
// caller's (Go) buffer only has to live for the duration of this call.
static int syncOn(int r, hk_h s) {
	if (r) return r;
	if (!hk_cu.cuStreamSynchronize) return HK_MISSING;
	return F(hk_cu, cuStreamSynchronize, hk_h)(s);
}

int hk_cuCopyHtoD(hk_h ctx, unsigned long long dst, const void *src, size_t n, hk_h s) {
	IN_CTX(ctx, cuMemcpyHtoDAsync,
	       syncOn(F(hk_cu, cuMemcpyHtoDAsync, unsigned long long, const void *, size_t, hk_h)(dst, src, n, s), s));
}

int hk_cuCopyDtoH(hk_h ctx, void *dst, unsigned long long src, size_t n, hk_h s) {
	IN_CTX(ctx, cuMemcpyDtoHAsync,
	       syncOn(F(hk_cu, cuMemcpyDtoHAsync, void *, unsigned long long, size_t, hk_h)(dst, src, n, s), s));
}

int hk_cuMemset(hk_h ctx, unsigned long long dst, unsigned char v, size_t n, hk_h s) {
	IN_CTX(ctx, cuMemsetD8Async,
	       syncOn(F(hk_cu, cuMemsetD8Async, unsigned long long, unsigned char, size_t, hk_h)(dst, v, n, s), s));
}

int hk_cuLaunch(hk_h ctx, hk_h fn, const unsigned int *g, const unsigned int *b, unsigned int shmem, hk_h s,
                void **params) {
	IN_CTX(ctx, cuLaunchKernel,
	       F(hk_cu, cuLaunchKernel, hk_h, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, hk_h,
	         void **, void **)(fn, g[0], g[1], g[2], b[0], b[1], b[2], shmem, s, params, 0));
}

int hk_cuEventCreate(hk_h ctx, hk_h *e) { IN_CTX(ctx, cuEventCreate, F(hk_cu, cuEventCreate, hk_h *, unsigned)(e, 0)); }
int hk_cuEventRecord(hk_h ctx, hk_h e, hk_h s) { IN_CTX(ctx, cuEventRecord, F(hk_cu, cuEventRecord, hk_h, hk_h)(e, s)); }
int hk_cuEventSynchronize(hk_h ctx, hk_h e) { IN_CTX(ctx, cuEventSynchronize, F(hk_cu, cuEventSynchronize, hk_h)(e)); }

int hk_cuEventElapsedTime(hk_h ctx, float *ms, hk_h start, hk_h end) {
	IN_CTX(ctx, cuEventElapsedTime, F(hk_cu, cuEventElapsedTime, float *, hk_h, hk_h)(ms, start, end));
}

int hk_cuEventDestroy(hk_h ctx, hk_h e) { IN_CTX(ctx, cuEventDestroy, F(hk_cu, cuEventDestroy, hk_h)(e)); }

#define HK_STREAM_CAPTURE_MODE_RELAXED 2

int hk_cuStreamBeginCaptureRelaxed(hk_h ctx, hk_h s) {
	IN_CTX(ctx, cuStreamBeginCapture,
	       F(hk_cu, cuStreamBeginCapture, hk_h, int)(s, HK_STREAM_CAPTURE_MODE_RELAXED));
}

int hk_cuStreamEndCapture(hk_h ctx, hk_h s, hk_h *graph) {
	IN_CTX(ctx, cuStreamEndCapture, F(hk_cu, cuStreamEndCapture, hk_h, hk_h *)(s, graph));
}

int hk_cuGraphInstantiate(hk_h ctx, hk_h *exec, hk_h graph) {
	IN_CTX(ctx, cuGraphInstantiateWithFlags,
	       F(hk_cu, cuGraphInstantiateWithFlags, hk_h *, hk_h, unsigned long long)(exec, graph, 0));
}

int hk_cuGraphLaunch(hk_h ctx, hk_h exec, hk_h s) { IN_CTX(ctx, cuGraphLaunch, F(hk_cu, cuGraphLaunch, hk_h, hk_h)(exec, s)); }

static int graphDestroy(hk_h exec, hk_h graph) {
	int r = 0, r2 = 0;
	if (exec) r = F(hk_cu, cuGraphExecDestroy, hk_h)(exec);
	if (graph) r2 = F(hk_cu, cuGraphDestroy, hk_h)(graph);
	return r ? r : r2;
}

int hk_cuGraphDestroy(hk_h ctx, hk_h exec, hk_h graph) {
	if (!hk_cu.cuGraphExecDestroy) return HK_MISSING;
	IN_CTX(ctx, cuGraphDestroy, graphDestroy(exec, graph));
}

// cuLink*: CUjit_option values and input types of the CUDA headers.
#define HK_JIT_INFO_LOG_BUFFER 3
#define HK_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define HK_JIT_ERROR_LOG_BUFFER 5
#define HK_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define HK_JIT_INPUT_CUBIN 0
#define HK_JIT_INPUT_PTX 1

static int cuLinkAll(int n, const void *const *data, const size_t *sizes, const int *kinds, void **out,
                     size_t *outSize, char *log, size_t logSize) {
	if (!hk_cu.cuLinkAddData || !hk_cu.cuLinkComplete || !hk_cu.cuLinkDestroy) return HK_MISSING;
	int opts[2] = {HK_JIT_ERROR_LOG_BUFFER, HK_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)logSize};
	hk_h st = 0;
	int r = F(hk_cu, cuLinkCreate, unsigned, int *, void **, hk_h *)(2, opts, vals, &st);
	if (r) return r;
	for (int i = 0; i < n && !r; i++) {
		int kind = kinds[i] == 1 ? HK_JIT_INPUT_PTX : HK_JIT_INPUT_CUBIN;
		r = F(hk_cu, cuLinkAddData, hk_h, int, void *, size_t, const char *, unsigned, int *, void **)(
		    st, kind, (void *)data[i], sizes[i], "input", 0, 0, 0);
	}
	if (!r) {
		void *img = 0;
		size_t sz = 0;
		r = F(hk_cu, cuLinkComplete, hk_h, void **, size_t *)(st, &img, &sz);
		// The image belongs to the link state: copy it out before destroying it.
		if (!r) {
			*out = malloc(sz);
			memcpy(*out, img, sz);
			*outSize = sz;
		}
	}
	F(hk_cu, cuLinkDestroy, hk_h)(st);
	return r;
}

int hk_cuLink(hk_h ctx, int n, const void *const *data, const size_t *sizes, const int *kinds, void **out,
              size_t *outSize, char *log, size_t logSize) {
	IN_CTX(ctx, cuLinkCreate, cuLinkAll(n, data, sizes, kinds, out, outSize, log, logSize));
}

// ---- NVRTC ----

int hk_nvrtcVersion(int *major, int *minor) { NEED(hk_nvrtc, nvrtcVersion); return F(hk_nvrtc, nvrtcVersion, int *, int *)(major, minor); }

const char *hk_nvrtcErrorString(int r) {
	if (!hk_nvrtc.nvrtcGetErrorString) return 0;
	return ((const char *(*)(int))hk_nvrtc.nvrtcGetErrorString)(r);
}

int hk_nvrtcCreateProgram(hk_h *prog, const char *src, const char *name) {
	NEED(hk_nvrtc, nvrtcCreateProgram);
	return F(hk_nvrtc, nvrtcCreateProgram, hk_h *, const char *, const char *, int, const char *const *,
	         const char *const *)(prog, src, name, 0, 0, 0);
}

int hk_nvrtcCompileProgram(hk_h prog, int n, const char *const *opts) {
	NEED(hk_nvrtc, nvrtcCompileProgram);
	return F(hk_nvrtc, nvrtcCompileProgram, hk_h, int, const char *const *)(prog, n, opts);
}

// getBlob fetches a size-then-bytes output into a malloc'd buffer.
static int getBlob(void *sizeFn, void *getFn, hk_h prog, char **out, size_t *n) {
	if (!sizeFn || !getFn) return HK_MISSING;
	*out = 0;
	*n = 0;
	int r = ((int (*)(hk_h, size_t *))sizeFn)(prog, n);
	if (r) return r;
	*out = malloc(*n + 1);
	r = ((int (*)(hk_h, char *))getFn)(prog, *out);
	if (r) {
		free(*out);
		*out = 0;
		*n = 0;
	}
	return r;
}

int hk_nvrtcGetLog(hk_h prog, char **log, size_t *n) {
	return getBlob(hk_nvrtc.nvrtcGetProgramLogSize, hk_nvrtc.nvrtcGetProgramLog, prog, log, n);
}

int hk_nvrtcGetCUBIN(hk_h prog, char **out, size_t *n) {
	return getBlob(hk_nvrtc.nvrtcGetCUBINSize, hk_nvrtc.nvrtcGetCUBIN, prog, out, n);
}

int hk_nvrtcDestroyProgram(hk_h prog) {
	NEED(hk_nvrtc, nvrtcDestroyProgram);
	return F(hk_nvrtc, nvrtcDestroyProgram, hk_h *)(&prog);
}

// ---- nvJitLink ----

#define HK_NVJITLINK_INPUT_CUBIN 1
#define HK_NVJITLINK_INPUT_PTX 2


int hk_jlLink(int n, const char *const *opts, int nopts, const void *const *data, const size_t *sizes,
              const int *kinds, void **out, size_t *outSize, char **log) {
	if (!hk_jl.create || !hk_jl.destroy || !hk_jl.addData || !hk_jl.complete || !hk_jl.getLinkedCubinSize ||
	    !hk_jl.getLinkedCubin)
		return HK_MISSING;
	*log = 0;
	hk_h h = 0;
	int r = F(hk_jl, create, hk_h *, unsigned, const char *const *)(&h, nopts, opts);
	if (r) return r;
	for (int i = 0; i < n && !r; i++) {
		int kind = kinds[i] == 1 ? HK_NVJITLINK_INPUT_PTX : HK_NVJITLINK_INPUT_CUBIN;
		r = F(hk_jl, addData, hk_h, int, const void *, size_t, const char *)(h, kind, data[i], sizes[i], "input");
	}
	if (!r) r = F(hk_jl, complete, hk_h)(h);
	if (!r) {
		r = F(hk_jl, getLinkedCubinSize, hk_h, size_t *)(h, outSize);
		if (!r) {
			*out = malloc(*outSize);
			r = F(hk_jl, getLinkedCubin, hk_h, void *)(h, *out);
			if (r) {
				free(*out);
				*out = 0;
			}
		}
	}
	if (r && hk_jl.getErrorLogSize && hk_jl.getErrorLog) {
		size_t ln = 0;
		if (!F(hk_jl, getErrorLogSize, hk_h, size_t *)(h, &ln) && ln > 0) {
			*log = calloc(1, ln + 1);
			F(hk_jl, getErrorLog, hk_h, char *)(h, *log);
		}
	}
	F(hk_jl, destroy, hk_h *)(&h);
	return r;
}
