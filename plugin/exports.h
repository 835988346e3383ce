// The plugin's C glue: the exported ncclProfiler_v7/v6/v5 structs (their
// types, NCCL's logger and log levels, the host event descriptors come from
// abi/ncclhooks_abi.h), the host-event source (hostsrc.c) and the C helpers
// the Go side calls.
#ifndef NCCLHOOKS_EXPORTS_H
#define NCCLHOOKS_EXPORTS_H

#include "ncclhooks_abi.h"

void hooks_log(int level, const char* msg);
const char* hooks_func_name(int funcId);
int hooks_harness_present(void);
int hooks_nccl_has_device_hook(void);
int hooks_nccl_version(void);
const char* hooks_nccl_path(void);
const char* hooks_nccl_why(void);
const char* hooks_hook_lib(void);

// A communicator's context, what NCCL holds as the plugin's context: the
// Go-side id, so NCCL never holds a Go pointer, and for the host-event
// source the hooks to feed and the work counters of its channels.
typedef struct {
  uint64_t id;
  int host; // 1: this communicator's host events feed the hooks
  ncclProfilerDevHook_t entry;
  void* ctx;
  uint64_t lost;         // kernel channels not fed to the hooks (out of memory)
  uint64_t workCounter[256];
} hk_comm;

// The host-event source (hostsrc.c).
const char* hooks_host_func_name(int id);
int hooks_current_device(void);
void hooks_host_start(hk_comm* c, void** eHandle, const ncclProfilerEventDescr_v5_t* d);
void hooks_host_state(void* eHandle, int state, const ncclProfilerEventStateArgs_v5_t* args);
void hooks_host_stop(void* eHandle);
int hooks_term_install(int timeoutMs);
void hooks_term_done(void);
int hooks_exit_install(void);

#endif
