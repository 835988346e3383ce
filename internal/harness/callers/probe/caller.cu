// Probe caller: a kernel built by nvcc (whole program or -rdc, any register
// cap) that calls a hook through a pointer, as NCCL's kernels do, with LIVE
// values held across every call and checked afterwards (a hook that
// clobbers a register the ABI says it must preserve shows up as wrong data).
//   caller so PATH          hook from a probe .so (probe_get)
//   caller cubin PATH       hook from a linked cubin, cuModuleLoadData
//   caller library PATH     hook from a linked cubin, cuLibraryLoadData
//   caller plugin PATH      hook from the ncclhooks plugin (ncclProfiler_v7 init + getDeviceHook)
//   caller local -          the RFC's counter hook in the caller's own module (the control:
//                           an indirect call that crosses no module)
// Prints one "RESULT ..." line; exit 0 only if the kernel ran and the data is right.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef LIVE
#define LIVE 4
#endif
#include "ncclhooks_abi.h" // the event, hook type and ncclProfiler_v7_t (run.sh and share.sh pass -I)

__device__ __forceinline__ uint64_t gtimer() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// The control hook: the RFC's counter, compiled into this module.
extern "C" __device__ __noinline__ void local_hook(const ncclProfilerDevEvent_t* ev, void* ctx) {
  atomicAdd(&((unsigned long long*)ctx)[ev->phase & 1], 1ULL);
}
__device__ ncclProfilerDevHook_t local_hook_ptr = local_hook;

// No __launch_bounds__: it would override -maxrregcount.
extern "C" __global__ void caller(ncclProfilerDevHook_t hook, void* ctx, int n, unsigned* data, unsigned long long* emitted) {
  unsigned v[LIVE];
#pragma unroll
  for (int j = 0; j < LIVE; j++) v[j] = data[(j * 256 + threadIdx.x) % 4096];
  for (int i = 0; i < n; i++) {
    if (threadIdx.x == 0) {
      ncclProfilerDevEvent_t ev; // work counters from 1, as NCCL's
      ev.timestamp = gtimer(); ev.workCounter = i / 2 + 1; ev.funcId = 3; ev.channelId = blockIdx.x; ev.phase = i & 1; ev.rsvd = 0;
      hook(&ev, ctx);
      atomicAdd(emitted, 1ULL);
    }
#pragma unroll
    for (int j = 0; j < LIVE; j++) v[j] = v[j] * 2654435761u + (unsigned)(i + j);
  }
  unsigned s = 0;
#pragma unroll
  for (int j = 0; j < LIVE; j++) s = s * 31u + v[j];
  data[4096 + blockIdx.x * 256 + threadIdx.x] = s;
}

static unsigned expect(const unsigned* in, int tid, int n) {
  unsigned v[LIVE];
  for (int j = 0; j < LIVE; j++) v[j] = in[(j * 256 + tid) % 4096];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < LIVE; j++) v[j] = v[j] * 2654435761u + (unsigned)(i + j);
  unsigned s = 0;
  for (int j = 0; j < LIVE; j++) s = s * 31u + v[j];
  return s;
}

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)level; (void)flags; (void)file; (void)line; (void)fmt;
}

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: caller so|cubin|library|plugin|local PATH [blocks] [events] [stacklimit]\n"); return 2; }
  const char* mode = argv[1];
  const char* path = argv[2];
  int blocks = argc > 3 ? atoi(argv[3]) : 8, n = argc > 4 ? atoi(argv[4]) : 2000;
  size_t stackLimit = argc > 5 ? strtoull(argv[5], 0, 0) : 0;
  cudaFree(0);
  if (stackLimit) cudaDeviceSetLimit(cudaLimitStackSize, stackLimit);
  size_t lim = 0; cudaDeviceGetLimit(&lim, cudaLimitStackSize);
  void* hook = 0; void* ctx = 0; void* pctx = 0; ncclProfiler_v7_t* prof = 0;
  if (!strcmp(mode, "so")) {
    void* h = dlopen(path, RTLD_NOW);
    if (!h) { printf("RESULT setup-failed %s\n", dlerror()); return 3; }
    int (*get)(void**, void**) = (int (*)(void**, void**))dlsym(h, "probe_get");
    if (!get || get(&hook, &ctx)) { printf("RESULT setup-failed probe_get\n"); return 3; }
  } else if (!strcmp(mode, "cubin") || !strcmp(mode, "library")) {
    FILE* f = fopen(path, "rb"); if (!f) { printf("RESULT setup-failed open\n"); return 3; }
    static char img[1 << 22]; size_t len = fread(img, 1, sizeof img, f); fclose(f); (void)len;
    CUdeviceptr p; size_t sz; CUresult r;
    if (!strcmp(mode, "cubin")) {
      CUmodule m; r = cuModuleLoadData(&m, img);
      if (r == CUDA_SUCCESS) r = cuModuleGetGlobal(&p, &sz, m, "probe_hook_ptr");
    } else {
#if CUDA_VERSION >= 12000
      CUlibrary l; r = cuLibraryLoadData(&l, img, 0, 0, 0, 0, 0, 0);
      if (r == CUDA_SUCCESS) r = cuLibraryGetGlobal(&p, &sz, l, "probe_hook_ptr");
#else
      r = CUDA_ERROR_NOT_SUPPORTED;
#endif
    }
    if (r != CUDA_SUCCESS) { const char* s; cuGetErrorName(r, &s); printf("RESULT setup-failed %s\n", s); return 3; }
    cudaMemcpy(&hook, (void*)p, sizeof hook, cudaMemcpyDeviceToHost);
    cudaMalloc(&ctx, 1 << 16); cudaMemset(ctx, 0, 1 << 16);
  } else if (!strcmp(mode, "local")) {
    if (cudaMemcpyFromSymbol(&hook, local_hook_ptr, sizeof hook) != cudaSuccess) { printf("RESULT setup-failed local\n"); return 3; }
    cudaMalloc(&ctx, 1 << 16); cudaMemset(ctx, 0, 1 << 16);
  } else if (!strcmp(mode, "plugin")) {
    void* h = dlopen(path, RTLD_NOW);
    if (!h) { printf("RESULT setup-failed %s\n", dlerror()); return 3; }
    prof = (ncclProfiler_v7_t*)dlsym(h, "ncclProfiler_v7");
    int mask = 0;
    if (!prof || prof->init(&pctx, 0x1234, &mask, "probe", 1, 1, 0, logger) || prof->getDeviceHook(0, &hook, &ctx)) {
      printf("RESULT setup-failed plugin\n"); return 3;
    }
    if (!hook) { printf("RESULT setup-failed plugin returned no hook\n"); return 3; }
  } else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }

  unsigned* data; unsigned long long* emitted;
  cudaMalloc(&data, (4096 + blocks * 256) * 4); cudaMalloc(&emitted, 8); cudaMemset(emitted, 0, 8);
  unsigned* in = (unsigned*)malloc(4096 * 4);
  for (int i = 0; i < 4096; i++) in[i] = i * 2654435761u + 17u;
  cudaMemcpy(data, in, 4096 * 4, cudaMemcpyHostToDevice);
  caller<<<blocks, 256>>>((ncclProfilerDevHook_t)hook, ctx, n, data, emitted);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("RESULT FAULT %s hook=%p stacklimit=%zu\n", cudaGetErrorName(e), hook, lim);
    return 1;
  }
  unsigned* out = (unsigned*)malloc(blocks * 256 * 4);
  cudaMemcpy(out, data + 4096, blocks * 256 * 4, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int b = 0; b < blocks; b++)
    for (int t = 0; t < 256; t++) bad += out[b * 256 + t] != expect(in, t, n);
  unsigned long long em = 0, cnt[2] = {0, 0};
  cudaMemcpy(&em, emitted, 8, cudaMemcpyDeviceToHost);
  if (!prof) cudaMemcpy(cnt, ctx, 16, cudaMemcpyDeviceToHost);
  if (prof) prof->finalize(pctx);
  printf("RESULT %s hook=%p stacklimit=%zu emitted=%llu counted=%llu wrong_values=%d\n", bad ? "CORRUPT" : "ok", hook, lim, em,
         cnt[0] + cnt[1], bad);
  return bad ? 1 : 0;
}
