// The host-event source (NCCL_HOOKS_SOURCE=host): NCCL's own profiler events
// turned into the device hook's events, on NCCL's threads, in C.
//
// NCCL without the device hook still reports, per kernel channel, the GPU
// timer at the channel's start and stop (ncclProfileKernelCh, from the proxy
// thread that watches the kernel's profiler counters), with the Coll or P2p
// event of the work as its parent. Each becomes a START and a STOP
// ncclProfilerDevEvent_t: timestamp = the GPU timer, channelId, a
// workCounter per (communicator, channel), and a funcId from the table below,
// named as NCCL names its device functions. The events go straight into the
// profile's hooks, compiled for the host (the cpu backend): their record
// buffers are the lock-free batches the drainer reads, with the same exact
// accounting as on the GPU, so no Go code runs per event and an event is
// never lost outside that accounting.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exports.h"

// ---- the function table ----
//
// NCCL's device functions are named Coll[_RedOp_Type]_ALGO_PROTO
// (src/device/generate.py): "SendRecv", "AllGather_RING_LL",
// "AllReduce_Sum_f32_RING_LL". Host events do not name the reduction
// operator (no descriptor of v5-v7 carries it): reductions are named with
// Sum, and, as NCCL's Sum kernels do, signed integer types with their
// unsigned twin (equivalent_primary in generate.py).
static const char* const colls[] = {"AllGather", "Broadcast", "AllReduce", "Reduce", "ReduceScatter"};
#define NCOLL 5
#define NREDUCING_FROM 2 // colls[2:] reduce
static const char* const tyNames[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
static const char* const tyNccl[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                     "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                     "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
#define NTY 12
static const int tyReduced[NTY] = {1, 1, 3, 3, 5, 5, 6, 7, 8, 9, 10, 11}; // signed -> unsigned
#define NTYR 9                                                       // distinct reduced types
static const int tyRank[NTY] = {0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8};     // reduced type -> 0..NTYR-1
static const char* const algos[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
#define NALGO 7
static const char* const protos[] = {"LL", "LL128", "SIMPLE"};
#define NPROTO 3

#define ID_SENDRECV 0
#define ID_UNKNOWN 1
#define ID_FIRST 2
#define NIDS (ID_FIRST + 2 * NALGO * NPROTO + 3 * NTYR * NALGO * NPROTO)

static char funcNames[NIDS][48];
static pthread_once_t funcOnce = PTHREAD_ONCE_INIT;

static int collBase(int c) {
  if (c < NREDUCING_FROM) return ID_FIRST + c * NALGO * NPROTO;
  return ID_FIRST + NREDUCING_FROM * NALGO * NPROTO + (c - NREDUCING_FROM) * NTYR * NALGO * NPROTO;
}

static int collId(int c, int ty, int a, int p) {
  if (c < NREDUCING_FROM) return collBase(c) + a * NPROTO + p;
  return collBase(c) + (tyRank[ty] * NALGO + a) * NPROTO + p;
}

static void buildNames(void) {
  snprintf(funcNames[ID_SENDRECV], sizeof funcNames[0], "SendRecv");
  snprintf(funcNames[ID_UNKNOWN], sizeof funcNames[0], "Unknown");
  for (int c = 0; c < NCOLL; c++)
    for (int t = 0; t < (c < NREDUCING_FROM ? 1 : NTY); t++) {
      if (c >= NREDUCING_FROM && tyReduced[t] != t) continue;
      for (int a = 0; a < NALGO; a++)
        for (int p = 0; p < NPROTO; p++) {
          char* n = funcNames[collId(c, t, a, p)];
          if (c < NREDUCING_FROM)
            snprintf(n, sizeof funcNames[0], "%s_%s_%s", colls[c], algos[a], protos[p]);
          else
            snprintf(n, sizeof funcNames[0], "%s_Sum_%s_%s_%s", colls[c], tyNames[t], algos[a], protos[p]);
        }
    }
}

const char* hooks_host_func_name(int id) {
  pthread_once(&funcOnce, buildNames);
  return id >= 0 && id < NIDS ? funcNames[id] : NULL;
}

static int indexOf(const char* s, const char* const* list, int n) {
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(s, list[i]) == 0) return i;
  return -1;
}

// The function id of a Coll descriptor's strings.
static uint32_t collFuncId(const char* func, const char* datatype, const char* algo, const char* proto) {
  int c = indexOf(func, colls, NCOLL), a = indexOf(algo, algos, NALGO), p = indexOf(proto, protos, NPROTO);
  if (c < 0 || a < 0 || p < 0) return ID_UNKNOWN;
  int t = 0;
  if (c >= NREDUCING_FROM) {
    if ((t = indexOf(datatype, tyNccl, NTY)) < 0) return ID_UNKNOWN;
    t = tyReduced[t];
  }
  return (uint32_t)collId(c, t, a, p);
}

// ---- the device a communicator runs on ----

// The CUDA device current on the calling thread (NCCL's init thread has its
// communicator's device current): the driver's current context, else the
// runtime's current device where a shared CUDA runtime is loaded (torch's);
// 0 without either (the tests' drivers). Nothing is loaded or initialised.
int hooks_current_device(void) {
  int dev = 0;
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (cuda) {
    int (*ctxDevice)(int*) = (int (*)(int*))dlsym(cuda, "cuCtxGetDevice");
    int ok = ctxDevice && ctxDevice(&dev) == 0;
    dlclose(cuda);
    if (ok) return dev;
  }
  int (*rtDevice)(int*) = (int (*)(int*))dlsym(RTLD_DEFAULT, "cudaGetDevice");
  if (rtDevice && rtDevice(&dev) == 0) return dev;
  return 0;
}

// ---- the events ----

// A Coll or P2p event's handle is its function id, tagged in the low bit: it
// needs no memory, and NCCL only hands it back (as a kernel channel's
// parentObj, and to stopEvent).
#define TAGGED(fn) ((void*)(((uintptr_t)(fn) << 1) | 1))
#define IS_TAGGED(h) (((uintptr_t)(h) & 1) != 0)
#define TAG_FUNC(h) ((uint32_t)((uintptr_t)(h) >> 1))

// A kernel channel between its start and its stop.
typedef struct {
  hk_comm* c;
  uint64_t workCounter;
  uint32_t funcId;
  uint8_t channel;
  uint8_t stopped;
} kernelCh;

static void emit(hk_comm* c, uint8_t ch, uint64_t wc, uint32_t fn, uint64_t ts, uint8_t phase) {
  ncclProfilerDevEvent_t ev = {ts, wc, fn, ch, phase, 0};
  c->entry(&ev, c->ctx);
}

void hooks_host_start(hk_comm* c, void** eHandle, const ncclProfilerEventDescr_v5_t* d) {
  switch (d->type) {
  case NCCLHOOKS_PROFILE_COLL:
    *eHandle = TAGGED(collFuncId(d->coll.func, d->coll.datatype, d->coll.algo, d->coll.proto));
    return;
  case NCCLHOOKS_PROFILE_P2P:
    *eHandle = TAGGED(ID_SENDRECV);
    return;
  case NCCLHOOKS_PROFILE_KERNEL_CH: {
    kernelCh* k = (kernelCh*)malloc(sizeof *k);
    if (!k) {
      __atomic_fetch_add(&c->lost, 1, __ATOMIC_RELAXED); // counted, reported at finalize
      return;
    }
    k->c = c;
    k->channel = d->kernelCh.channelId;
    k->workCounter = __atomic_add_fetch(&c->workCounter[k->channel], 1, __ATOMIC_RELAXED);
    // A parent that is not a handle this source gave (NULL, an event of
    // a type it did not ask for, a later NCCL's) names no function.
    k->funcId = IS_TAGGED(d->parentObj) && TAG_FUNC(d->parentObj) < NIDS ? TAG_FUNC(d->parentObj) : ID_UNKNOWN;
    k->stopped = 0;
    emit(c, k->channel, k->workCounter, k->funcId, d->kernelCh.pTimer, NCCLHOOKS_PHASE_START);
    *eHandle = k;
    return;
  }
  default:
    return; // not asked for
  }
}

void hooks_host_state(void* eHandle, int state, const ncclProfilerEventStateArgs_v5_t* args) {
  if (!eHandle || IS_TAGGED(eHandle) || state != NCCLHOOKS_STATE_KERNEL_CH_STOP || !args) return;
  kernelCh* k = (kernelCh*)eHandle;
  if (k->stopped) return;
  k->stopped = 1;
  emit(k->c, k->channel, k->workCounter, k->funcId, args->kernelCh.pTimer, NCCLHOOKS_PHASE_STOP);
}

void hooks_host_stop(void* eHandle) {
  if (eHandle && !IS_TAGGED(eHandle)) free(eHandle);
}
