#ifndef NCCLHOOKS_HARNESS_H
#define NCCLHOOKS_HARNESS_H
#include <stdint.h>

// The event, the hook type, the profiler structs and NCCL's log levels come
// from abi/ncclhooks_abi.h.
#include "ncclhooks_abi.h"

int hh_open(const char* path, char* err, int errlen);
int hh_version(void);
int hh_init(void** ctx, uint64_t commId, const char* name, int nNodes, int nranks, int rank);
int hh_get_device_hook(int dev, void** hook, void** ctx);
int hh_init_with_hook(void** ctx, uint64_t commId, const char* name, int nNodes, int nranks, int rank, int dev, void** hook,
                      void** devCtx);
int hh_finalize(void* ctx);
int hh_log_take(char* buf, int len);
int hh_func_count(void);
const char* ncclProfilerDevFuncName(int funcId);

typedef struct {
  void* hook;      // ncclProfilerDevHook_t, kept as a data pointer for cgo
  void* ctx;
  int channel;
  uint64_t counterBase; // the first work item's workCounter (1 or above, as NCCL's)
  int items;       // work items
  int batch;       // START for `batch` items, work, then their STOPs
  int workFloats;  // floats summed per work item
  double slowdown; // > 1: each batch's work is stretched to this factor of its measured time (busy wait)
  const uint32_t* funcIds;
  int nFuncIds;
  int funcOffset;
  ncclProfilerDevEvent_t* log; // 2*items events, or NULL
  double sink;     // result of the work, so it is not optimised away
  // A collective between ranks (ncclhooks run --ranks): arrive counts this
  // (communicator, channel)'s STARTs over every rank, in memory the ranks'
  // processes share; a batch's STOPs wait until all nranks have started its
  // items, as a ring's work waits for its last rank. NULL: no barrier.
  uint32_t* arrive;
  int nranks;
  uint64_t delayNs; // this rank arrives late: sleeps this long before each batch's STARTs
  int timedOut;     // set when a barrier wait gave up (a rank never came)
  // Something done mid-run (a live profile reload, Config.MidRun): once
  // holdAt items are done the channel counts itself in *reached and, while
  // *hold is non-zero, goes on emitting one batch a millisecond, at most
  // holdMax items (then it waits), so that hooks are called while it is
  // done; then the rest of its items. hold NULL: none.
  int* hold;
  int* reached;
  int holdAt;
  int holdMax;
  int holdDone; // items emitted while held (out): the channel emits items + holdDone
} hh_channel_t;

// hh_run_channels runs one thread per channel descriptor, all released at once.
int hh_run_channels(hh_channel_t* chans, int n);

#endif
