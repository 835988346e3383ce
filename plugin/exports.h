// The NCCL profiler plugin ABI this library exports (v5, v6 and the v7 of
// NCCL pull request 2285: v6 plus getDeviceHook).
#ifndef NCCLHOOKS_EXPORTS_H
#define NCCLHOOKS_EXPORTS_H

#include <stdint.h>

typedef int ncclResult_t;
#define ncclSuccess 0
#define ncclInternalError 3

typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

#define NCCL_LOG_WARN 2
#define NCCL_LOG_INFO 3
#define NCCL_PROFILE 16384

// Event descriptors and state arguments are never read: the plugin asks for
// no host events (eActivationMask = 0), so they stay opaque.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, void* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

typedef ncclProfiler_v5_t ncclProfiler_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, void* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*getDeviceHook)(int cudaDev, void** devHook, void** devCtx);
} ncclProfiler_v7_t;

void hooks_log(int level, const char* msg);
const char* hooks_func_name(int funcId);
int hooks_have_func_names(void);
int hooks_harness_present(void);

#endif
