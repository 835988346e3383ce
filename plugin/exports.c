// The exported ncclProfiler_v7/v6/v5 structs and their trampolines into Go.
// cgo cannot export variables, and NCCL calls these on its own threads, so
// the C side keeps the structs, the logger and the dlsym'd name resolver.
#define _GNU_SOURCE
#include <dlfcn.h>
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

// A communicator's context: a C allocation holding the Go-side id, so NCCL
// never holds a Go pointer.
typedef struct { uint64_t id; } commCtx;

// The communicator whose init ran last on this thread. NCCL (PR 2285) calls
// getDeviceHook from devCommSetup, on the thread that ran that communicator's
// init, after it: this is how a getDeviceHook call finds its communicator,
// also when several communicators initialise at once on different threads.
static __thread uint64_t pendingComm;

static ncclResult_t hk_init(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn) {
  if (logfn) {
    ncclDebugLogger_t none = NULL;
    __atomic_compare_exchange_n(&logger, &none, logfn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  if (eActivationMask) *eActivationMask = 0;
  if (context) *context = NULL;
  commCtx* c = (commCtx*)calloc(1, sizeof(commCtx));
  if (!c) return ncclSuccess; // no memory: stay inactive for this communicator
  c->id = hooksInit(commId, (char*)commName, nNodes, nranks, rank);
  pendingComm = c->id;
  if (context) *context = c; else free(c);
  return ncclSuccess;
}

static ncclResult_t hk_startEvent(void* context, void** eHandle, void* eDescr) {
  (void)context; (void)eDescr;
  if (eHandle) *eHandle = NULL;
  return ncclSuccess;
}

static ncclResult_t hk_stopEvent(void* eHandle) { (void)eHandle; return ncclSuccess; }

static ncclResult_t hk_recordEventState(void* eHandle, int eState, void* eStateArgs) {
  (void)eHandle; (void)eState; (void)eStateArgs;
  return ncclSuccess;
}

static ncclResult_t hk_finalize(void* context) {
  commCtx* c = (commCtx*)context;
  if (!c) return ncclSuccess; // init failed for this communicator
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

__attribute__((visibility("default"))) ncclProfiler_v7_t ncclProfiler_v7 = {
  "hooks", hk_init, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize, hk_getDeviceHook,
};
__attribute__((visibility("default"))) ncclProfiler_v6_t ncclProfiler_v6 = {
  "hooks", hk_init, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize,
};
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
  "hooks", hk_init, hk_startEvent, hk_stopEvent, hk_recordEventState, hk_finalize,
};
