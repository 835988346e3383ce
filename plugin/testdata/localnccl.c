// localnccl plays NCCL as torch loads it: a shared library dlopened with
// local symbols (localmain.c), so that nothing it defines is found through
// dlsym(RTLD_DEFAULT). It exports ncclGetVersion (2.30.7) and
// ncclProfilerDevFuncName, carries a .nv_fatbin (FATBIN: the path of a fat
// binary, the ptxas fixture of internal/fatbin), and localnccl_run inits one
// communicator with the plugin, asks for its device hook and finalizes it.
// Build: cc -shared -fPIC -DFATBIN='"path"' -I../internal/abi localnccl.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "ncclhooks_abi.h"
#include "driverlog.h"

#define STR2(x) #x
#define STR(x) STR2(x)
__asm__(".section .nv_fatbin, \"a\"\n.balign 8\n.incbin " STR(FATBIN) "\n.previous\n");

__attribute__((visibility("default"))) int ncclGetVersion(int* v) {
  *v = 23007;
  return 0;
}

__attribute__((visibility("default"))) const char* ncclProfilerDevFuncName(int id) { return id == 0 ? "SendRecv" : NULL; }

__attribute__((visibility("default"))) int localnccl_run(const char* plugin) {
  void* lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("ERROR dlopen %s\n", dlerror());
    return 1;
  }
  ncclProfiler_v7_t* p = (ncclProfiler_v7_t*)dlsym(lib, "ncclProfiler_v7");
  if (!p) {
    printf("ERROR no ncclProfiler_v7\n");
    return 1;
  }
  void* ctx = NULL;
  int mask = 0;
  p->init(&ctx, 0x1234, &mask, "local", 1, 1, 0, logger);
  void *hook = NULL, *devCtx = NULL;
  p->getDeviceHook(0, &hook, &devCtx);
  printf("HOOK %p\n", hook);
  p->finalize(ctx);
  printf("DONE\n");
  fflush(stdout);
  return 0;
}
