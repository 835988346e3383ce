// Probe hooks for the root-cause experiments (docs/ARCHITECTURE.md "Why hooks
// faulted"): built by nvcc -rdc into shared libraries, each exporting
// probe_get, which returns the hook's absolute address and a zeroed context.
//   -DKIND_COUNT        the RFC's example: one atomicAdd per event
//   -DKIND_REGS=N       keeps N values live: with -maxrregcount it sets the hook's register count
//   -DKIND_STACK=BYTES  a stack frame of BYTES (a volatile local array)
#include <cuda_runtime.h>
#include <stdint.h>
#include "ncclhooks_abi.h" // the event and hook type (run.sh and share.sh pass -I)

extern "C" __device__ void probe_hook(const ncclProfilerDevEvent_t* ev, void* ctx) {
  unsigned long long* c = (unsigned long long*)ctx;
#if defined(KIND_COUNT)
  atomicAdd(&c[ev->phase & 1], 1ULL);
#elif defined(KIND_REGS)
  volatile unsigned* p = (volatile unsigned*)(c + 8);
  unsigned v[KIND_REGS];
#pragma unroll
  for (int i = 0; i < KIND_REGS; i++) v[i] = p[i];
  unsigned s = (unsigned)ev->workCounter;
#pragma unroll
  for (int i = 0; i < KIND_REGS; i++) s ^= v[i] * (v[(i + 1) % KIND_REGS] | 1u);
#pragma unroll
  for (int i = 0; i < KIND_REGS; i++) p[KIND_REGS + i] = v[i] + s;
  atomicAdd(&c[ev->phase & 1], 1ULL);
#elif defined(KIND_STACK)
  volatile unsigned char buf[KIND_STACK]; // indexed by run-time values: it must live on the stack
  const unsigned off = (unsigned)ev->workCounter;
  for (int i = 0; i < KIND_STACK; i += 64) buf[(off + i) % KIND_STACK] = (unsigned char)(off + i);
  unsigned s = 0;
  for (int i = 0; i < KIND_STACK; i += 64) s += buf[(off * 7 + i) % KIND_STACK];
  c[2] += s;
  atomicAdd(&c[ev->phase & 1], 1ULL);
#endif
}

#ifdef PROBE_CUBIN
// A cubin for cuModuleLoadData / cuLibraryLoadData: the caller looks the pointer up by name.
extern "C" __device__ ncclProfilerDevHook_t probe_hook_ptr = probe_hook;
#else
// static: an extern __device__ variable of a -rdc shared library has no host shadow.
static __device__ ncclProfilerDevHook_t probe_hook_ptr = probe_hook;

extern "C" int probe_get(void** hook, void** ctx) {
  ncclProfilerDevHook_t h = 0;
  if (cudaMemcpyFromSymbol(&h, probe_hook_ptr, sizeof h) != cudaSuccess) return 1;
  if (cudaMalloc(ctx, 1 << 16) != cudaSuccess || cudaMemset(*ctx, 0, 1 << 16) != cudaSuccess) return 2;
  *hook = (void*)h;
  return 0;
}
#endif
