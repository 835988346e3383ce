// ncclhooks_abi.h: the NCCL-facing ABI of ncclhooks, in one place.
//
// The device profiler hook of NCCL pull request 2285 (the event, the hook
// type, the phases), NCCL's log levels and profiler subsystem flag, and the
// profiler plugin structs ncclProfiler_v5/_v6/_v7 that the plugin exports
// and the harness and the callers load. Package abi (abi.go) is its Go twin;
// abi's tests check the two against each other. Change them together.
//
// It compiles as C11, C++11, CUDA (nvcc) and under NVRTC, which has no libc
// headers: the device part uses plain integer types (the same sizes on every
// platform CUDA supports) and the host part, which uses <stdint.h> as NCCL
// declares it, is left out under NVRTC. It stands in for NCCL's own profiler
// headers: do not include both in one translation unit.
#ifndef NCCLHOOKS_ABI_H
#define NCCLHOOKS_ABI_H

// Compile-time checks of the layouts below. NVRTC has no offsetof (no libc
// headers, no __builtin_offsetof): there the sizes are checked, and the
// offsets by every host compiler, whose layout CUDA's matches.
#if defined(__cplusplus) && __cplusplus >= 201103L
#define NCCLHOOKS_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define NCCLHOOKS_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#else // C++03 (NVRTC 11.8 without -std), C99: an array of negative size
#define NCCLHOOKS_ABI_CAT2(a, b) a##b
#define NCCLHOOKS_ABI_CAT(a, b) NCCLHOOKS_ABI_CAT2(a, b)
#define NCCLHOOKS_ABI_ASSERT(cond, msg) typedef char NCCLHOOKS_ABI_CAT(ncclhooks_abi_assert_, __LINE__)[(cond) ? 1 : -1]
#endif
#ifdef __CUDACC_RTC__
#define NCCLHOOKS_ABI_AT(type, member, offset) 1
#else
#define NCCLHOOKS_ABI_AT(type, member, offset) (__builtin_offsetof(type, member) == (offset))
#endif

// ---- device side (NCCL pull request 2285) ----

// The event NCCL passes to the device hook: 24 bytes, no padding.
typedef struct {
  unsigned long long timestamp;   // device globaltimer, ns
  unsigned long long workCounter; // monotonic per channel
  unsigned int funcId;            // index into NCCL's device function table
  unsigned char channelId;
  unsigned char phase;            // NCCLHOOKS_PHASE_START or NCCLHOOKS_PHASE_STOP
  unsigned short rsvd;
} ncclProfilerDevEvent_t;

// Values of ncclProfilerDevEvent_t.phase: the work item's boundary.
#define NCCLHOOKS_PHASE_START 0
#define NCCLHOOKS_PHASE_STOP 1

// The hook: called on lane 0 of each block, once per profiler-enabled work
// item and phase, with the devCtx that getDeviceHook returned.
typedef void (*ncclProfilerDevHook_t)(const ncclProfilerDevEvent_t* ev, void* devCtx);

NCCLHOOKS_ABI_ASSERT(sizeof(unsigned long long) == 8 && sizeof(unsigned int) == 4 && sizeof(unsigned short) == 2,
                     "the event's plain integer types have their fixed sizes");
NCCLHOOKS_ABI_ASSERT(sizeof(ncclProfilerDevEvent_t) == 24, "ncclProfilerDevEvent_t is 24 bytes");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, timestamp, 0), "timestamp at 0");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, workCounter, 8), "workCounter at 8");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, funcId, 16), "funcId at 16");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, channelId, 20), "channelId at 20");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, phase, 21), "phase at 21");
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfilerDevEvent_t, rsvd, 22), "rsvd at 22");

// ---- host side: logging and the profiler plugin structs ----
#ifndef __CUDACC_RTC__
#include <stdint.h>

typedef int ncclResult_t;
#define ncclSuccess 0

// NCCL's log levels (ncclDebugLogLevel); the plugin logs WARN and INFO.
#define NCCL_LOG_NONE 0
#define NCCL_LOG_VERSION 1
#define NCCL_LOG_WARN 2
#define NCCL_LOG_INFO 3
#define NCCL_LOG_ABORT 4
#define NCCL_LOG_TRACE 5
// The subsystem flag of profiler messages (NCCL_PROFILE in ncclDebugLogSubSys).
#define NCCL_PROFILE 16384

// NCCL's logger, variadic: call it with a fixed "%s" format.
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// The profiler plugin, versions 5 and 6 (one layout). Event descriptors and
// state arguments stay opaque: the plugin asks for no host events
// (eActivationMask = 0).
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

// Version 7 as NCCL pull request 2285 defines it: v6 plus getDeviceHook
// (NCCL 2.31's own ncclProfiler_v7 is another layout). A null *devHook means
// "no hook on this device". v5 and v6 are its prefix, so a loader may read
// any version through it and touch getDeviceHook only for version 7.
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

// Member k of v5 (and so v6) and v7 is at k pointers.
#define NCCLHOOKS_ABI_MEMBER(m, k)                                                                           \
  NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfiler_v5_t, m, k * sizeof(void*)) &&                           \
                           NCCLHOOKS_ABI_AT(ncclProfiler_v7_t, m, k * sizeof(void*)),                         \
                       #m " is member " #k)
NCCLHOOKS_ABI_MEMBER(name, 0);
NCCLHOOKS_ABI_MEMBER(init, 1);
NCCLHOOKS_ABI_MEMBER(startEvent, 2);
NCCLHOOKS_ABI_MEMBER(stopEvent, 3);
NCCLHOOKS_ABI_MEMBER(recordEventState, 4);
NCCLHOOKS_ABI_MEMBER(finalize, 5);
NCCLHOOKS_ABI_ASSERT(NCCLHOOKS_ABI_AT(ncclProfiler_v7_t, getDeviceHook, 6 * sizeof(void*)), "getDeviceHook follows");
NCCLHOOKS_ABI_ASSERT(sizeof(ncclProfiler_v5_t) == 6 * sizeof(void*) && sizeof(ncclProfiler_v7_t) == 7 * sizeof(void*),
                     "the profiler structs are 6 and 7 pointers");
#endif // __CUDACC_RTC__

#endif // NCCLHOOKS_ABI_H
