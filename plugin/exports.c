// The exported ncclProfiler_v7/v6/v5 structs and their trampolines into Go.
// cgo cannot export variables, and NCCL calls these on its own threads, so
// the C side keeps the structs, the logger and the dlsym'd name resolver.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exports.h"
#include "_cgo_export.h"

static ncclDebugLogger_t logger; // first non-NULL logger NCCL gave us

void hooks_log(int level, const char* msg) {
  ncclDebugLogger_t l = __atomic_load_n(&logger, __ATOMIC_ACQUIRE);
  if (l) l(level, NCCL_PROFILE, "ncclhooks", 0, "%s", msg);
}

typedef const char* (*funcNameFn)(int);

static funcNameFn funcName(void) {
  static funcNameFn fn;
  static int looked;
  if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
    fn = (funcNameFn)dlsym(RTLD_DEFAULT, "ncclProfilerDevFuncName");
    __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
  }
  return fn;
}


const char* hooks_func_name(int funcId) {
  funcNameFn fn = funcName();
  return fn ? fn(funcId) : NULL;
}

int hooks_harness_present(void) { return dlsym(RTLD_DEFAULT, "ncclhooks_harness_cpu") != NULL; }

// NCCL built with the device hook (pull request 2285) exports the names of
// its device functions; released NCCL does not.
int hooks_nccl_has_device_hook(void) { return funcName() != NULL; }

// ncclGetVersion of the NCCL that loaded the plugin (2.28.9: 22809), 0 when
// it cannot be found.
int hooks_nccl_version(void) {
  ncclResult_t (*get)(int*) = (ncclResult_t(*)(int*))dlsym(RTLD_DEFAULT, "ncclGetVersion");
  int v = 0;
  if (!get || get(&v) != ncclSuccess) return 0;
  return v;
}

// The communicator whose init ran last on this thread. NCCL (PR 2285) calls
// getDeviceHook from devCommSetup, on the thread that ran that communicator's
// init, after it: this is how a getDeviceHook call finds its communicator,
// also when several communicators initialise at once on different threads.
static __thread uint64_t pendingComm;

// The events the host-event source asks for. NCCL keeps one mask for the
// process (every init writes the same one), so every communicator gets it.
#define HOST_EVENTS (NCCLHOOKS_PROFILE_COLL | NCCLHOOKS_PROFILE_P2P | NCCLHOOKS_PROFILE_KERNEL_CH)

// init of every version: version is the struct NCCL loaded (5, 6, 7).
static ncclResult_t hk_init(int version, void** context, uint64_t commId, int* eActivationMask, const char* commName,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  if (logfn) {
    ncclDebugLogger_t none = NULL;
    __atomic_compare_exchange_n(&logger, &none, logfn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  if (eActivationMask) *eActivationMask = 0;
  if (context) *context = NULL;
  hk_comm* c = (hk_comm*)calloc(1, sizeof(hk_comm));
  if (!c) return ncclSuccess; // no memory: stay inactive for this communicator
  int host = 0;
  uintptr_t entry = 0, ctx = 0;
  c->id = hooksInit(commId, (char*)commName, nNodes, nranks, rank, version, hooks_current_device(), &host, &entry, &ctx);
  if (host) {
    if (eActivationMask) *eActivationMask = HOST_EVENTS;
    if (entry && ctx) {
      c->entry = (ncclProfilerDevHook_t)entry;
      c->ctx = (void*)ctx;
      c->host = 1;
    }
  }
  pendingComm = c->id;
  if (context) *context = c; else free(c);
  return ncclSuccess;
}

#define HK_INIT(v)                                                                                                \
  static ncclResult_t hk_init_v##v(void** context, uint64_t commId, int* eActivationMask, const char* commName,  \
                                   int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {                  \
    return hk_init(v, context, commId, eActivationMask, commName, nNodes, nranks, rank, logfn);                   \
  }
HK_INIT(5)
HK_INIT(6)
HK_INIT(7)

// The descriptor is v5's, v6's or v7's: what the host source reads is at the
// same offsets in all three (ncclhooks_abi.h asserts it).
static ncclResult_t hk_startEvent(void* context, void** eHandle, void* eDescr) {
  if (eHandle) *eHandle = NULL;
  hk_comm* c = (hk_comm*)context;
  if (!c || !c->host || !eHandle || !eDescr) return ncclSuccess;
  hooks_host_start(c, eHandle, (const ncclProfilerEventDescr_v5_t*)eDescr);
  return ncclSuccess;
}

static ncclResult_t hk_stopEvent(void* eHandle) {
  hooks_host_stop(eHandle);
  return ncclSuccess;
}

static ncclResult_t hk_recordEventState(void* eHandle, int eState, void* eStateArgs) {
  hooks_host_state(eHandle, eState, (const ncclProfilerEventStateArgs_v5_t*)eStateArgs);
  return ncclSuccess;
}

static ncclResult_t hk_finalize(void* context) {
  hk_comm* c = (hk_comm*)context;
  if (!c) return ncclSuccess; // init failed for this communicator
  uint64_t lost = __atomic_load_n(&c->lost, __ATOMIC_RELAXED);
  if (lost) {
    char msg[160];
    snprintf(msg, sizeof msg, "ncclhooks: %llu kernel-channel events of this communicator were not fed to the hooks (out of memory)",
             (unsigned long long)lost);
    hooks_log(NCCL_LOG_WARN, msg);
  }
  hooksFinalize(c->id);
  free(c);
  return ncclSuccess;
}

static ncclResult_t hk_getDeviceHook(int cudaDev, void** devHook, void** devCtx) {
  uintptr_t hook = 0, ctx = 0;
  uint64_t comm = pendingComm; // 0: no init on this thread (the plugin then picks one)
  pendingComm = 0;
  hooksGetDeviceHook(cudaDev, comm, &hook, &ctx);
  if (devHook) *devHook = (void*)hook;
  if (devCtx) *devCtx = (void*)ctx;
  return ncclSuccess;
}

// One ncclProfiler_v7 serves two NCCLs: NCCL built with pull request 2285
// reads all seven members; NCCL 2.31's official v7 (ncclhooks_abi.h) has
// the first six only and never reads getDeviceHook.
__attribute__((visibility("default"))) ncclProfiler_v7_t ncclProfiler_v7 = {
  "hooks", hk_init_v7, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize, hk_getDeviceHook,
};
__attribute__((visibility("default"))) ncclProfiler_v6_t ncclProfiler_v6 = {
  "hooks", hk_init_v6, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize,
};
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
  "hooks", hk_init_v5, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize,
};
