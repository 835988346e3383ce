// What a device hook's time inside NCCL goes to: a profiler plugin (PR 2285's
// ncclProfiler_v7, no host events) whose getDeviceHook hands NCCL one of a few
// hand-written hooks, picked by NCCLHOOKS_PROBE, each isolating one cost:
//   nop      nothing (the call and NCCL's event: the floor)
//   chainN   N xorshift-multiply steps, each waiting for the one before (latency-bound)
//   wideN    the same instructions as eight independent chains (issue-bound: the
//            same code bytes, an eighth of the dependent latency)
//   load1    one load of the context, cold (device memory; the value is compared)
//   load2    two dependent loads (a pointer in the context, then what it points at)
//   red1     one fire-and-forget reduction to the context
// Built by nvcc -rdc into a shared library (run.sh), as NCCL builds its kernels.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncclhooks_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;

// sink keeps a value alive: never true for these inputs, not provably so.
#define SINK(x) \
  if ((x) == 0x9e3779b9u) *(volatile u32*)ctx = (x)

__device__ __forceinline__ u32 step(u32 x) { return (x ^ (x >> 15)) * 0x2c1b3c6du; }

template <int N>
__device__ __forceinline__ u32 chain(u32 x) {
#pragma unroll
  for (int i = 0; i < N; i++) x = step(x);
  return x;
}

template <int N>
__device__ __forceinline__ u32 wide(u32 s) {
  u32 a[8];
#pragma unroll
  for (int j = 0; j < 8; j++) a[j] = s + 0x9e3779b9u * (u32)(j + 1);
#pragma unroll
  for (int i = 0; i < N / 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) a[j] = step(a[j]);
  u32 x = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) x ^= a[j];
  return x;
}

extern "C" {
__device__ void probe_nop(const ncclProfilerDevEvent_t* ev, void* ctx) {}
__device__ void probe_chain40(const ncclProfilerDevEvent_t* ev, void* ctx) { SINK(chain<40>((u32)ev->workCounter)); }
__device__ void probe_wide40(const ncclProfilerDevEvent_t* ev, void* ctx) { SINK(wide<40>((u32)ev->workCounter)); }
__device__ void probe_chain80(const ncclProfilerDevEvent_t* ev, void* ctx) { SINK(chain<80>((u32)ev->workCounter)); }
__device__ void probe_wide80(const ncclProfilerDevEvent_t* ev, void* ctx) { SINK(wide<80>((u32)ev->workCounter)); }
__device__ void probe_load1(const ncclProfilerDevEvent_t* ev, void* ctx) {
  u64 v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"((u64*)ctx + 32) : "memory");
  SINK((u32)v);
}
__device__ void probe_load2(const ncclProfilerDevEvent_t* ev, void* ctx) {
  u64 p, v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(p) : "l"(ctx) : "memory");
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  SINK((u32)v);
}
__device__ void probe_red1(const ncclProfilerDevEvent_t* ev, void* ctx) {
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;" : : "l"((u64*)ctx + 16 + (ev->phase & 1)) : "memory");
}
}

// static: an extern __device__ variable of a -rdc shared library has no host shadow.
#define PTR(name) static __device__ ncclProfilerDevHook_t name##_ptr = name;
PTR(probe_nop)
PTR(probe_chain40)
PTR(probe_wide40)
PTR(probe_chain80)
PTR(probe_wide80)
PTR(probe_load1)
PTR(probe_load2)
PTR(probe_red1)

static ncclResult_t pinit(void** context, uint64_t, int* mask, const char*, int, int, int, ncclDebugLogger_t) {
  *context = (void*)1;
  *mask = 0;  // no host events
  return ncclSuccess;
}
static ncclResult_t pstart(void*, void** h, void*) { *h = NULL; return ncclSuccess; }
static ncclResult_t pstop(void*) { return ncclSuccess; }
static ncclResult_t precord(void*, int, void*) { return ncclSuccess; }
static ncclResult_t pfinalize(void*) { return ncclSuccess; }

static ncclResult_t pgetDeviceHook(int cudaDev, void** hook, void** ctx) {
  const char* v = getenv("NCCLHOOKS_PROBE");
  v = v ? v : "nop";
  ncclProfilerDevHook_t h = NULL;
  cudaError_t e = cudaErrorInvalidValue;
#define PICK(name) \
  if (strcmp(v, #name) == 0) e = cudaMemcpyFromSymbol(&h, probe_##name##_ptr, sizeof h);
  PICK(nop) PICK(chain40) PICK(wide40) PICK(chain80) PICK(wide80) PICK(load1) PICK(load2) PICK(red1)
  if (e != cudaSuccess || h == NULL) {
    fprintf(stderr, "probe: no hook %s: %s\n", v, cudaGetErrorString(e));
    return ncclSuccess;  // no hook
  }
  u64* c = NULL;
  if (cudaMalloc(&c, 4096) != cudaSuccess || cudaMemset(c, 0, 4096) != cudaSuccess) return ncclSuccess;
  u64 self = (u64)(c + 64);  // load2 follows ctx[0] to ctx + 512 bytes
  cudaMemcpy(c, &self, sizeof self, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  *hook = (void*)h;
  *ctx = c;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclProfiler_v7_t ncclProfiler_v7 = {
    "probe", pinit, pstart, pstop, precord, pfinalize, pgetDeviceHook};
