package gpuharness

import (
	"strconv"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// CUDA sources compiled at run time by NVRTC (always with -rdc=true, so that
// calls through a function pointer into a separately loaded hook module
// resolve to absolute addresses: docs/ARCHITECTURE.md, "Safe for every
// caller"). They include no headers: NVRTC needs no CUDA toolkit headers for
// them, and the NCCL ABI comes as the text of abi's header.

// eventDecl is the NCCL ABI (the pull request 2285 event and hook type, from
// abi/ncclhooks_abi.h) and the short integer names, shared by every source
// of this package.
var eventDecl = abi.ModuleHeader + `
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

static __device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
`

// Kernel names in kernelSource.
const (
	kernelHarness  = "ncclhooks_harness"
	kernelFill     = "ncclhooks_harness_fill"
	kernelHookCost = "ncclhooks_hook_cost"
)

// threadsPerBlock is NCCL's block size for its collective kernels.
const threadsPerBlock = 256

// hookRegisters is the register budget of a hook: the register count of
// NCCL's kernels, up to which the plugin accepts a hook
// (backend/gpu.DefaultRegisterBudget; TestHookRegistersIsThePluginBudget).
// Every kernel here that calls a hook is allocated at least this many
// (reserveHookRegisters in kernelSource).
const hookRegisters = 96

// kernelSource plays NCCL's part. ncclhooks_harness is modelled on
// ncclKernelMain: one block per channel; per batch of work items, thread 0
// calls the hook at START for every item, the whole block does the items'
// work, then thread 0 calls the hook at STOP for every item.
var kernelSource = eventDecl + `
enum { NTHREADS = 256 };
enum { HOOK_REGISTERS = ` + strconv.Itoa(hookRegisters) + ` };

// A hook called through a pointer runs in its caller's registers: a kernel
// allocated fewer than the hook uses faults (CUDA_ERROR_ILLEGAL_INSTRUCTION),
// which NCCL's kernels (96 registers) never are for a hook the plugin
// accepts. reserveHookRegisters gives the kernel it is inlined into at least
// HOOK_REGISTERS, as NCCL's have; every kernel here that calls a hook calls
// it first (TestHookKernelsCallTheReservation). never must be false at run
// time but not provably so at compile time (a kernel argument that the host
// validates): the branch is never taken, but ptxas allocates for it. In it
// HOOK_REGISTERS values are live at once whatever the schedule (ptxas spills
// only over a register cap, 255 for these kernels): volatile loads, which the
// compiler may neither merge nor repeat, all needed again after their XOR.
// (A chain of products, which ptxas can compute as a wavefront over a few
// values at a time, gave 64 with ptxas 11.8.) Taken, it would read *src and
// write *sink, nothing else.
static __device__ __forceinline__ void reserveHookRegisters(bool never, const u32* src, u64* sink) {
  if (!never) return;
  const volatile u32* p = src;
  u32 v[HOOK_REGISTERS];
#pragma unroll
  for (int j = 0; j < HOOK_REGISTERS; j++) v[j] = *p;
  u32 x = 0;
#pragma unroll
  for (int j = 0; j < HOOK_REGISTERS; j++) x ^= v[j];
  u32 sum = 0;
#pragma unroll
  for (int j = 0; j < HOOK_REGISTERS; j++) sum += (v[j] ^ x) * (u32)(2 * j + 1);
  *sink = sum;
}

struct alignas(16) vec4 { u32 x, y, z, w; };

// Per (communicator, channel) state kept on the device, so that further
// launches and CUDA graph replays continue the work counter instead of
// repeating it (a graph replays its kernel parameters unchanged). The host
// starts workCounter at Config.FirstCounter, 1 or above, as NCCL's.
struct ChannelState {
  u64 workCounter; // next work item's counter
  u64 emitted;     // events passed to the hook so far
};

// emit builds one event and passes it to the hook, as NCCL's thread 0 does;
// with a log, it also keeps a copy so the host can check what the hook saw.
static __device__ __forceinline__ void emit(ncclProfilerDevHook_t hook, void* ctx,
    ncclProfilerDevEvent_t* log, u64 logCap, u64* emitted,
    u64 workCounter, u32 funcId, u32 channel, u32 phase) {
  ncclProfilerDevEvent_t ev;
  ev.timestamp = globaltimer();
  ev.workCounter = workCounter;
  ev.funcId = funcId;
  ev.channelId = (u8)channel;
  ev.phase = (u8)phase;
  ev.rsvd = 0;
  hook(&ev, ctx);
  if (log != 0 && *emitted < logCap) log[*emitted] = ev;
  *emitted += 1;
}

// ncclhooks_harness: grid = one block per channel, NTHREADS threads.
// src/dst: per channel itemsPerBatch regions of vecsPerItem 16-byte vectors;
// item i of every batch sum-reduces its source region into its destination
// region (dst += src, u32 lanes), so the host can check how often it ran.
// batchPeriodNs > 0 paces batch b to start no earlier than t0 + b*period
// (a schedule, not a per-batch sleep, so timer granularity does not drift).
extern "C" __global__ void __launch_bounds__(NTHREADS) ncclhooks_harness(
    ncclProfilerDevHook_t hook, void* ctx,
    const vec4* src, vec4* dst, u64 vecsPerItem,
    int batches, int itemsPerBatch,
    const u32* funcIds, int nFuncIds, int funcOffset,
    ChannelState* state, ncclProfilerDevEvent_t* log, u64 logCap,
    u64 batchPeriodNs) {
  reserveHookRegisters(batches < 0, funcIds, &state[blockIdx.x].emitted); // Validate: Batches >= 1
  const u32 channel = blockIdx.x;
  const u64 base = (u64)channel * itemsPerBatch * vecsPerItem;
  if (log != 0) log += (u64)channel * logCap;

  u64 workCounter = 0, emitted = 0, t0 = 0;
  u32 funcId = 0;
  if (threadIdx.x == 0) {
    workCounter = state[channel].workCounter;
    emitted = state[channel].emitted;
    t0 = globaltimer();
  }
  for (int b = 0; b < batches; b++) {
    if (threadIdx.x == 0) {
      if (batchPeriodNs != 0) {
        const u64 due = t0 + (u64)b * batchPeriodNs;
        while (globaltimer() < due) {}
      }
      funcId = funcIds[(funcOffset + b) % nFuncIds];
      if (hook != 0)
        for (int i = 0; i < itemsPerBatch; i++)
          emit(hook, ctx, log, logCap, &emitted, workCounter + i, funcId, channel, NCCLHOOKS_PHASE_START);
    }
    __syncthreads();
    for (int i = 0; i < itemsPerBatch; i++) {
      const vec4* s = src + base + (u64)i * vecsPerItem;
      vec4* d = dst + base + (u64)i * vecsPerItem;
      for (u64 v = threadIdx.x; v < vecsPerItem; v += NTHREADS) {
        const vec4 a = s[v];
        vec4 x = d[v];
        x.x += a.x; x.y += a.y; x.z += a.z; x.w += a.w;
        d[v] = x;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (hook != 0)
        for (int i = 0; i < itemsPerBatch; i++)
          emit(hook, ctx, log, logCap, &emitted, workCounter + i, funcId, channel, NCCLHOOKS_PHASE_STOP);
      workCounter += itemsPerBatch;
    }
  }
  if (threadIdx.x == 0) {
    state[channel].workCounter = workCounter;
    state[channel].emitted = emitted;
  }
}

// ncclhooks_harness_fill writes the source pattern; fillPattern in Go
// computes the same values for the check.
extern "C" __global__ void ncclhooks_harness_fill(u32* p, u64 n, u32 seed) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    p[i] = (u32)i * 2654435761u + seed;
}

// ncclhooks_hook_cost: thread 0 of each block calls the hook calls times
// back to back, building a fresh event each time as NCCL would (START and
// STOP of work counters 1, 2, ...), and records the loop's duration in ns
// (%globaltimer) and SM cycles (clock64) in out[2*block], out[2*block+1].
// Calls within a block are serial, so this is
// the latency the hook adds to NCCL's thread 0. It is allocated at least
// NCCL's registers (reserveHookRegisters; bench prints ptxas's "Used").
extern "C" __global__ void ncclhooks_hook_cost(ncclProfilerDevHook_t hook, void* ctx, int calls,
    const u32* funcIds, int nFuncIds, u64* out) {
  reserveHookRegisters(calls < 0, funcIds, out); // CostOptions: Calls >= 1
  if (threadIdx.x != 0) return;
  const u32 channel = blockIdx.x;
  int f = 0;
  ncclProfilerDevEvent_t ev;
  const u64 t0 = globaltimer();
  const long long c0 = clock64();
  for (int k = 0; k < calls; k++) {
    ev.timestamp = globaltimer();
    ev.workCounter = (u64)(k >> 1) + 1; // from 1, as NCCL's: a position-from-counter record drains from 2
    ev.funcId = funcIds[f];
    ev.channelId = (u8)channel;
    ev.phase = (u8)(k & 1);
    ev.rsvd = 0;
    hook(&ev, ctx);
    if ((k & 1) && ++f == nFuncIds) f = 0;
  }
  const long long c1 = clock64();
  const u64 t1 = globaltimer();
  out[2 * blockIdx.x] = t1 - t0;
  out[2 * blockIdx.x + 1] = (u64)(c1 - c0);
}
`

// nopHookSource is the floor every hook is measured against: the call and
// the event construction, nothing else.
var nopHookSource = eventDecl + `
extern "C" __device__ void ncclhooks_entry(const ncclProfilerDevEvent_t* ev, void* ctx) {}
` + entryResolvers

// countingHookSource counts events per phase with one fire-and-forget
// reduction: ctx points to two u64 counters (START, STOP) in device memory,
// allocated by the host. It is the tests' independent count, and the
// hand-written counter of the benchmarks (bench/profiles/count.yaml is the
// generated one). Spelled red.global: atomicAdd on a generic pointer compiles
// to an ATOM whose predicate (did the address fall in global memory?) the
// thread waits for, one round trip per call, with a shared-memory fallback.
var countingHookSource = eventDecl + `
extern "C" __device__ void ncclhooks_entry(const ncclProfilerDevEvent_t* ev, void* ctx) {
  asm volatile("red.global.add.u64 [%0], 1;" : : "l"((u64*)ctx + (ev->phase & 1)) : "memory");
}
` + entryResolvers

// regionHookSource is the record path of the region design, written by
// hand for the bench (not what hookgen generates): an all-events record whose
// position is the event's own, 2 * workCounter + phase, in a region of
// regionSlots slots per channel at a constant offset from ctx, stored with
// three 16-byte stores and nothing loaded but the event. ctx is host-mapped
// memory of 64 such regions (regionHookBytes).
var regionHookSource = eventDecl + `
extern "C" __device__ void ncclhooks_entry(const ncclProfilerDevEvent_t* event, void* ctx) {
  const ncclProfilerDevEvent_t ev = *event;
  const u64 pos = 2 * ev.workCounter + ev.phase;
  u64* slot = (u64*)ctx + 6 * ((u64)(ev.channelId % 64u) * ` + strconv.Itoa(regionSlots) + `ULL + pos % ` + strconv.Itoa(regionSlots) + `ULL);
  const u64 st = (u64)(u32)(pos + 1) << 32;
  const u32 c5 = (u32)ev.channelId | ((u32)ev.phase << 8);
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" : : "l"(slot), "l"(st | (u32)ev.timestamp), "l"(st | (u32)(ev.timestamp >> 32)) : "memory");
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" : : "l"(slot + 2), "l"(st | (u32)ev.workCounter), "l"(st | (u32)(ev.workCounter >> 32)) : "memory");
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" : : "l"(slot + 4), "l"(st | ev.funcId), "l"(st | c5) : "memory");
}
` + entryResolvers

// regionSlots is the region hook's slots per channel; regionHookBytes, the
// memory of its 64 channels' regions (48-byte slots).
const (
	regionSlots     = 1024
	regionHookBytes = 64 * regionSlots * 48
)

// entryResolvers publish a hook module's entry address two ways: the
// ncclhooks_entry_ptr variable of the module contract (typed: NVRTC refuses
// a (void*) cast of a function as dynamic initialisation) and a one-thread
// resolver kernel (both give the same address). The
// kernel is what resolveEntry relies on: on CUDA 13.0 / driver 580,
// cuModuleGetGlobal did not find ncclhooks_entry_ptr in a directly loaded
// -rdc cubin although the cubin's symbol table has it (TestEntryPointerForms).
const entryResolvers = `
extern "C" {
__device__ ncclProfilerDevHook_t ncclhooks_entry_ptr = ncclhooks_entry;
}
extern "C" __global__ void ncclhooks_resolve(u64* out) { *out = (u64)ncclhooks_entry; }
`
