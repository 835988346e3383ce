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

// The profiler plugin, versions 5 and 6 (one layout). The event descriptors
// and state arguments are below (host events); the function types take them
// as void* so that one set of functions serves every version.
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

// ---- host events: NCCL's profiler event descriptors ----
//
// Written member by member from NCCL's published headers:
// src/include/plugin/nccl_profiler.h (event types, states) and
// src/include/plugin/profiler/profiler_v5.h and _v6.h at tags v2.28.9-1,
// v2.29.7-1 and v2.30.7-1, and profiler_v7.h of NVIDIA/nccl commit
// 889806836097808572f87a2019eefd01f27aae68 (NCCL 2.31's official v7). The
// plugin reads only the type, parentObj, coll.{func,datatype,algo,proto},
// p2p.func and kernelCh.{channelId,pTimer}; the asserts below hold that these
// are at the same offsets in every version, so one reader serves them all.
// Like NCCL's, they use anonymous unions: C11 or C++ (not C99).
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
#define NCCLHOOKS_ABI_HOST_EVENTS 1
#ifndef __cplusplus
#include <stdbool.h>
#endif
#include <stddef.h>

// Event types (eActivationMask bits and descriptor type values).
#define NCCLHOOKS_PROFILE_GROUP (1 << 0)
#define NCCLHOOKS_PROFILE_COLL (1 << 1)      // ncclProfileColl: a collective of a launched plan
#define NCCLHOOKS_PROFILE_P2P (1 << 2)       // ncclProfileP2p: a send or receive of a launched plan
#define NCCLHOOKS_PROFILE_PROXY_OP (1 << 3)
#define NCCLHOOKS_PROFILE_PROXY_STEP (1 << 4)
#define NCCLHOOKS_PROFILE_PROXY_CTRL (1 << 5)
#define NCCLHOOKS_PROFILE_KERNEL_CH (1 << 6) // ncclProfileKernelCh: one channel of a kernel, GPU timer at start and stop
#define NCCLHOOKS_PROFILE_NET_PLUGIN (1 << 7)
#define NCCLHOOKS_PROFILE_GROUP_API (1 << 8)
#define NCCLHOOKS_PROFILE_COLL_API (1 << 9)
#define NCCLHOOKS_PROFILE_P2P_API (1 << 10)
#define NCCLHOOKS_PROFILE_KERNEL_LAUNCH (1 << 11)
#define NCCLHOOKS_PROFILE_CE_COLL (1 << 12)      // v6
#define NCCLHOOKS_PROFILE_CE_SYNC (1 << 13)      // v6
#define NCCLHOOKS_PROFILE_CE_BATCH (1 << 14)     // v6
#define NCCLHOOKS_PROFILE_KERNEL_PHASE (1 << 15) // official v7 (NCCL 2.31)

// The event state the plugin reads (ncclProfilerEventState_t): the stop of a
// kernel channel, with its GPU timer in eStateArgs->kernelCh.pTimer. 22 in
// every version from v5 on.
#define NCCLHOOKS_STATE_KERNEL_CH_STOP 22

typedef struct {
  uint64_t type;   // event type: one NCCLHOOKS_PROFILE_* bit
  void* parentObj; // the parent event's handle (for a kernel channel: its Coll or P2p event)
  int rank;        // originating rank
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;     // "AllReduce" (ncclFuncToString)
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype; // "ncclFloat32" (ncclDatatypeToString)
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;     // "RING" (ncclAlgoToString)
      const char* proto;    // "LL" (ncclProtoToString)
      void* parentGroup;
    } coll;
    struct {
      const char* func;     // "Send" or "Recv"
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      int pid; // pid_t
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer; // GPU globaltimer at the channel's start
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

// The CE descriptors v6 adds to the union (NCCL 2.29 and 2.30).
#define NCCLHOOKS_DESCR_CE_V6(tag)                                                                             \
  struct {                                                                                                     \
    uint64_t seqNumber;                                                                                        \
    const char* func;                                                                                          \
    void const* sendBuff;                                                                                      \
    void* recvBuff;                                                                                            \
    size_t count;                                                                                              \
    int root;                                                                                                  \
    const char* datatype;                                                                                      \
    const char* syncStrategy;                                                                                  \
    bool intraBatchSync;                                                                                       \
    uint32_t batchSize;                                                                                        \
    uint32_t numBatches;                                                                                       \
    uint32_t ceSeqNum;                                                                                         \
    void* stream;                                                                                              \
    tag                                                                                                        \
  } ceColl;                                                                                                    \
  struct {                                                                                                     \
    bool isComplete;                                                                                           \
    int nRanks;                                                                                                \
  } ceCollSync;                                                                                                \
  struct {                                                                                                     \
    int numOps;                                                                                                \
    size_t totalBytes;                                                                                         \
    bool useIntraSync;                                                                                         \
  } ceCollBatch;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      int pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    NCCLHOOKS_DESCR_CE_V6()
  };
} ncclProfilerEventDescr_v6_t;

// NCCL 2.31's official v7 descriptor: userTag on the API, coll, p2p and CE
// descriptors, kernelVariant and isSymColl on coll, and the KernelPhase event.
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
      const char* kernelVariant;
      bool isSymColl;
      uint64_t userTag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
      uint64_t userTag;
    } p2p;
    struct {
      int pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    NCCLHOOKS_DESCR_CE_V6(uint64_t userTag;)
    struct {
      uint8_t channelId;
      uint8_t phaseId; // 0 initial_sync, 1 compute, 2 final_sync
      const char* phaseName;
      uint64_t pTimer;
    } kernelPhase;
  };
} ncclProfilerEventDescr_v7_t;

// State arguments (v5, v6 and official v7 alike).
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer; // GPU globaltimer at the channel's stop
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v7_t;

// What the plugin reads is where v5 has it in v6 and in the official v7.
#define NCCLHOOKS_ABI_DESCR(m)                                                                                \
  NCCLHOOKS_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v5_t, m) == offsetof(ncclProfilerEventDescr_v6_t, m) &&  \
                           offsetof(ncclProfilerEventDescr_v5_t, m) == offsetof(ncclProfilerEventDescr_v7_t, m), \
                       #m " is at one offset in v5, v6 and v7")
NCCLHOOKS_ABI_DESCR(type);
NCCLHOOKS_ABI_DESCR(parentObj);
NCCLHOOKS_ABI_DESCR(coll.func);
NCCLHOOKS_ABI_DESCR(coll.datatype);
NCCLHOOKS_ABI_DESCR(coll.algo);
NCCLHOOKS_ABI_DESCR(coll.proto);
NCCLHOOKS_ABI_DESCR(p2p.func);
NCCLHOOKS_ABI_DESCR(kernelCh.channelId);
NCCLHOOKS_ABI_DESCR(kernelCh.pTimer);
// On x86-64 and aarch64 (LP64), as NCCL's builds lay them out.
NCCLHOOKS_ABI_ASSERT(sizeof(void*) != 8 || (offsetof(ncclProfilerEventDescr_v5_t, coll.func) == 32 &&
                                            offsetof(ncclProfilerEventDescr_v5_t, coll.datatype) == 72 &&
                                            offsetof(ncclProfilerEventDescr_v5_t, coll.algo) == 88 &&
                                            offsetof(ncclProfilerEventDescr_v5_t, coll.proto) == 96 &&
                                            offsetof(ncclProfilerEventDescr_v5_t, kernelCh.channelId) == 24 &&
                                            offsetof(ncclProfilerEventDescr_v5_t, kernelCh.pTimer) == 32),
                     "LP64 descriptor offsets");

// NCCL 2.31's official ncclProfiler_v7 has v6's members (functions taking
// v7 descriptors); the PR 2285 struct above starts with the same six, so
// NCCL 2.31 reads the plugin's ncclProfiler_v7 as its own and never reads
// getDeviceHook.
typedef ncclProfiler_v6_t ncclProfiler_v7_nccl231_t;
NCCLHOOKS_ABI_ASSERT(sizeof(ncclProfiler_v7_nccl231_t) == 6 * sizeof(void*), "NCCL 2.31's v7 is six pointers");
#endif // C11 or C++
#endif // __CUDACC_RTC__

#endif // NCCLHOOKS_ABI_H
