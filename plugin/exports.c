// The exported ncclProfiler_v7/v6/v5 structs and their trampolines into Go.
// cgo cannot export variables, and NCCL calls these on its own threads, so
// the C side keeps the structs, the logger and the dlsym'd name resolver.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "exports.h"
#include "_cgo_export.h"

static ncclDebugLogger_t logger; // first non-NULL logger NCCL gave us

void hooks_log(int level, const char* msg) {
  ncclDebugLogger_t l = __atomic_load_n(&logger, __ATOMIC_ACQUIRE);
  if (l) l(level, NCCL_PROFILE, "ncclhooks", 0, "%s", msg);
}

typedef const char* (*funcNameFn)(int);
typedef ncclResult_t (*getVersionFn)(int*);

// The NCCL that loaded the plugin, found once at the first init
// (findNCCL). torch loads NCCL as a dependency with local symbols, where
// dlsym(RTLD_DEFAULT) finds none of its functions, so NCCL is found by
// address: the library that holds the logger NCCL passed to init (its
// ncclDebugLog), else the caller of init.
static struct {
  int done;
  char path[4096];     // that library ("" unknown: why says why)
  char hookPath[4096]; // the library that exports ncclProfilerDevFuncName ("" none)
  char why[1536];
  funcNameFn funcName;
  int version; // its ncclGetVersion (2.28.9: 22809), 0 unknown
} nccl;
static pthread_mutex_t ncclMu = PTHREAD_MUTEX_INITIALIZER;

#define MAX_OBJECTS 4096

typedef struct {
  int n;
  const char* name[MAX_OBJECTS]; // the loader's names ("" for the program)
  uintptr_t base[MAX_OBJECTS];   // where each is mapped (dladdr's dli_fbase)
} objects;

static int addObject(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  objects* o = (objects*)data;
  if (o->n >= MAX_OBJECTS) return 1;
  uintptr_t lo = UINTPTR_MAX;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lo) lo = info->dlpi_phdr[i].p_vaddr;
  o->name[o->n] = info->dlpi_name ? info->dlpi_name : "";
  o->base[o->n] = info->dlpi_addr + (lo == UINTPTR_MAX ? 0 : lo);
  o->n++;
  return 0;
}

// pathOf writes the file of the object mapped at base into out: the
// program's through /proc/self/exe (dladdr may name it by argv[0]).
static void pathOf(const objects* o, uintptr_t base, const char* name, char* out, size_t n) {
  out[0] = 0;
  if ((o->n > 0 && base == o->base[0]) || !name || !name[0]) {
    ssize_t k = readlink("/proc/self/exe", out, n - 1);
    out[k > 0 ? k : 0] = 0;
    return;
  }
  char* r = realpath(name, NULL);
  snprintf(out, n, "%s", r ? r : name);
  free(r);
}

// handleOf opens the loaded object mapped at base without loading anything
// (NULL: the program's global scope); *ok is 0 when it cannot be opened.
static void* handleOf(const objects* o, uintptr_t base, const char* name, int* ok) {
  *ok = 1;
  if ((o->n > 0 && base == o->base[0]) || !name || !name[0]) return dlopen(NULL, RTLD_LAZY);
  void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) *ok = 0;
  return h;
}

// funcNameIn looks ncclProfilerDevFuncName up in h and writes the file of
// the object that defines it into nccl.hookPath.
static funcNameFn funcNameIn(const objects* o, void* h) {
  funcNameFn fn = (funcNameFn)dlsym(h, "ncclProfilerDevFuncName");
  Dl_info di;
  if (fn && dladdr((void*)fn, &di)) pathOf(o, (uintptr_t)di.dli_fbase, di.dli_fname, nccl.hookPath, sizeof nccl.hookPath);
  return fn;
}

// findNCCL finds the NCCL that called init (logfn: the logger it passed,
// ret: init's return address; either may be NULL), its version, and the
// library whose kernels call the device hook: the one that exports
// ncclProfilerDevFuncName, found in the global scope, in NCCL's own
// symbols, else in every loaded object. Nothing here can fail the job: what
// is not found stays empty, and why says what failed.
static void findNCCL(const void* logfn, const void* ret) {
  pthread_mutex_lock(&ncclMu);
  if (nccl.done) {
    pthread_mutex_unlock(&ncclMu);
    return;
  }
  static objects o; // under ncclMu; too large for NCCL's thread stacks
  o.n = 0;
  dl_iterate_phdr(addObject, &o);
  Dl_info di;
  const void* addrs[2] = {logfn, ret};
  void* h = NULL;
  for (int i = 0; i < 2 && !nccl.path[0]; i++) {
    if (!addrs[i] || !dladdr(addrs[i], &di)) continue;
    pathOf(&o, (uintptr_t)di.dli_fbase, di.dli_fname, nccl.path, sizeof nccl.path);
    int ok;
    h = handleOf(&o, (uintptr_t)di.dli_fbase, di.dli_fname, &ok);
    if (!ok) snprintf(nccl.why, sizeof nccl.why, "dlopen(RTLD_NOLOAD) of %.1024s: %.256s", nccl.path, dlerror());
  }
  if (!nccl.path[0] && !nccl.why[0]) snprintf(nccl.why, sizeof nccl.why, "dladdr found no library holding NCCL's logger or init's caller");
  getVersionFn get = h ? (getVersionFn)dlsym(h, "ncclGetVersion") : NULL;
  if (!get) get = (getVersionFn)dlsym(RTLD_DEFAULT, "ncclGetVersion");
  int v = 0;
  if (get && get(&v) == ncclSuccess) nccl.version = v;

  funcNameFn fn = funcNameIn(&o, RTLD_DEFAULT);
  if (!fn && h) fn = funcNameIn(&o, h);
  for (int i = 0; !fn && i < o.n; i++) {
    if (!o.name[i][0]) continue; // the program: its global symbols were searched
    int ok;
    void* oh = handleOf(&o, o.base[i], o.name[i], &ok);
    if (!oh) continue;
    fn = funcNameIn(&o, oh);
    dlclose(oh); // NOLOAD took a reference: give it back
  }
  if (!fn) nccl.hookPath[0] = 0;
  if (h) dlclose(h);
  nccl.funcName = fn;
  __atomic_store_n(&nccl.done, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&ncclMu);
}

static funcNameFn funcName(void) {
  if (!__atomic_load_n(&nccl.done, __ATOMIC_ACQUIRE)) findNCCL(NULL, NULL);
  return nccl.funcName;
}

const char* hooks_func_name(int funcId) {
  funcNameFn fn = funcName();
  return fn ? fn(funcId) : NULL;
}

int hooks_harness_present(void) { return dlsym(RTLD_DEFAULT, "ncclhooks_harness_cpu") != NULL; }

// NCCL built with the device hook (pull request 2285) exports the names of
// its device functions; released NCCL does not.
int hooks_nccl_has_device_hook(void) { return funcName() != NULL; }

int hooks_nccl_version(void) {
  funcName();
  return nccl.version;
}

const char* hooks_nccl_path(void) {
  funcName();
  return nccl.path;
}

const char* hooks_nccl_why(void) {
  funcName();
  return nccl.why;
}

const char* hooks_hook_lib(void) {
  funcName();
  return nccl.hookPath;
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
static ncclResult_t hk_init(int version, const void* caller, void** context, uint64_t commId, int* eActivationMask,
                            const char* commName, int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  findNCCL((const void*)logfn, caller);
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
    return hk_init(v, __builtin_return_address(0), context, commId, eActivationMask, commName, nNodes, nranks,  \
                   rank, logfn);                                                                                  \
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
