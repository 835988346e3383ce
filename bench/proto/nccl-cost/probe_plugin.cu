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
//   pair     the latency hook's pairing alone: START stores {tag, timestamp} at an entry of
//            the context, STOP loads it through the L1 and adds the duration with a reduction
//   pairpf   pair, and START prefetches the entry's line into the L1
//   paircg   pair, and STOP's load goes to the L2 (ld.cg)
//   pairnold pair without STOP's load (STOP adds its own timestamp): what the load costs
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

template <int MODE> // 0: ld.ca, 1: prefetch at START, 2: ld.cg, 3: no load
__device__ __forceinline__ void pair(const ncclProfilerDevEvent_t* ev, void* ctx) {
  const u64 wc = ev->workCounter, ts = ev->timestamp;
  u64* e = (u64*)ctx + 64 + 2 * (((u64)ev->channelId % 64) * 64 + wc % 64);
  const u64 tag = ((u64)ev->channelId << 48) | (wc + 1);
  if (ev->phase == 0) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" : : "l"(e), "l"(tag), "l"(ts) : "memory");
    if (MODE == 1) asm volatile("prefetch.global.L1 [%0];" : : "l"(e));
    return;
  }
  u64 seen = tag, start = 0;
  if (MODE == 0) asm volatile("ld.global.ca.v2.u64 {%0, %1}, [%2];" : "=l"(seen), "=l"(start) : "l"(e) : "memory");
  if (MODE == 1) asm volatile("ld.global.ca.v2.u64 {%0, %1}, [%2];" : "=l"(seen), "=l"(start) : "l"(e) : "memory");
  if (MODE == 2) asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];" : "=l"(seen), "=l"(start) : "l"(e) : "memory");
  if (seen == tag)
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" : : "l"((u64*)ctx + 16), "l"(ts - start) : "memory");
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
__device__ void probe_pair(const ncclProfilerDevEvent_t* ev, void* ctx) { pair<0>(ev, ctx); }
__device__ void probe_pairpf(const ncclProfilerDevEvent_t* ev, void* ctx) { pair<1>(ev, ctx); }
__device__ void probe_paircg(const ncclProfilerDevEvent_t* ev, void* ctx) { pair<2>(ev, ctx); }
__device__ void probe_pairnold(const ncclProfilerDevEvent_t* ev, void* ctx) { pair<3>(ev, ctx); }
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
PTR(probe_pair)
PTR(probe_pairpf)
PTR(probe_paircg)
PTR(probe_pairnold)

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
  PICK(pair) PICK(pairpf) PICK(paircg) PICK(pairnold)
  if (e != cudaSuccess || h == NULL) {
    fprintf(stderr, "probe: no hook %s: %s\n", v, cudaGetErrorString(e));
    return ncclSuccess;  // no hook
  }
  u64* c = NULL;
  const size_t bytes = 512 + 64 * 64 * 16;  // the pointer, the loads' words, then the pairing table
  if (cudaMalloc(&c, bytes) != cudaSuccess || cudaMemset(c, 0, bytes) != cudaSuccess) return ncclSuccess;
  u64 self = (u64)(c + 32);  // load2 follows ctx[0] to ctx + 256 bytes
  cudaMemcpy(c, &self, sizeof self, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  *hook = (void*)h;
  *ctx = c;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclProfiler_v7_t ncclProfiler_v7 = {
    "probe", pinit, pstart, pstop, precord, pfinalize, pgetDeviceHook};
