// The C half of the NCCL-contract harness: it loads the plugin the way NCCL
// does, exports NCCL's ncclProfilerDevFuncName, and calls cpu hooks from one
// thread per channel, like thread 0 of each block of an NCCL kernel.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

// Any version's struct, read through v7's layout (v5 and v6 are its
// prefix); getDeviceHook is touched only for version 7.
static ncclProfiler_v7_t* prof;
static int profVersion;

// Marker the plugin looks for before it hands out host-callable (cpu) hooks.
__attribute__((visibility("default"))) int ncclhooks_harness_cpu = 1;

// NCCL-style device function names, indexed by funcId.
static const char* funcNames[] = {
  "AllReduce_Sum_f32_RING_LL", "AllReduce_Sum_f32_RING_LL128", "AllReduce_Sum_f32_RING_SIMPLE",
  "AllReduce_Sum_bf16_RING_LL", "AllReduce_Sum_bf16_RING_SIMPLE", "AllReduce_Sum_f16_TREE_LL",
  "AllReduce_Sum_f32_TREE_SIMPLE", "AllReduce_Max_f32_RING_LL", "AllReduce_Sum_f32_NVLS_SIMPLE",
  "AllGather_RING_LL", "AllGather_RING_LL128", "AllGather_RING_SIMPLE", "AllGather_PAT_SIMPLE",
  "ReduceScatter_Sum_f32_RING_LL", "ReduceScatter_Sum_f32_RING_SIMPLE", "ReduceScatter_Sum_bf16_RING_SIMPLE",
  "ReduceScatter_Sum_f32_PAT_SIMPLE", "Broadcast_RING_LL", "Broadcast_RING_SIMPLE", "Reduce_Sum_f32_RING_LL",
  "Reduce_Sum_f32_RING_SIMPLE", "SendRecv", "AllToAll_SendRecv",
};

__attribute__((visibility("default"))) const char* ncclProfilerDevFuncName(int funcId) {
  if (funcId < 0 || funcId >= (int)(sizeof(funcNames) / sizeof(funcNames[0]))) return NULL;
  return funcNames[funcId];
}

int hh_func_count(void) { return (int)(sizeof(funcNames) / sizeof(funcNames[0])); }

// The logger NCCL would pass: lines are kept for the harness to read.
static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static char logBuf[1 << 20];
static int logLen;

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  char msg[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&logMu);
  int n = snprintf(logBuf + logLen, sizeof logBuf - logLen, "%s %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  if (n > 0 && logLen + n < (int)sizeof logBuf) logLen += n;
  pthread_mutex_unlock(&logMu);
}

int hh_log_take(char* buf, int len) {
  pthread_mutex_lock(&logMu);
  int n = logLen < len - 1 ? logLen : len - 1;
  memcpy(buf, logBuf, n);
  buf[n] = 0;
  memmove(logBuf, logBuf + n, logLen - n);
  logLen -= n;
  pthread_mutex_unlock(&logMu);
  return n;
}

int hh_open(const char* path, char* err, int errlen) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errlen, "%s", dlerror());
    return -1;
  }
  // NCCL's order: newest version first.
  static const char* names[] = {"ncclProfiler_v7", "ncclProfiler_v6", "ncclProfiler_v5"};
  for (int i = 0; i < 3; i++) {
    ncclProfiler_v7_t* p = (ncclProfiler_v7_t*)dlsym(h, names[i]);
    if (p) {
      prof = p;
      profVersion = 7 - i;
      return 0;
    }
  }
  snprintf(err, errlen, "%s exports none of ncclProfiler_v7, _v6, _v5", path);
  return -1;
}

int hh_version(void) { return profVersion; }

int hh_init(void** ctx, uint64_t commId, const char* name, int nNodes, int nranks, int rank) {
  int mask = -1;
  return prof->init(ctx, commId, &mask, name, nNodes, nranks, rank, logger);
}

int hh_get_device_hook(int dev, void** hook, void** ctx) {
  *hook = NULL;
  *ctx = NULL;
  if (profVersion < 7) return 0;
  return prof->getDeviceHook(dev, hook, ctx);
}

// NCCL's order for one communicator, on one thread: init, then
// getDeviceHook for its device (the plugin pairs the two by thread).
int hh_init_with_hook(void** ctx, uint64_t commId, const char* name, int nNodes, int nranks, int rank, int dev, void** hook,
                      void** devCtx) {
  int rc = hh_init(ctx, commId, name, nNodes, nranks, rank);
  if (rc != 0) return rc;
  return hh_get_device_hook(dev, hook, devCtx);
}

int hh_finalize(void* ctx) { return prof->finalize(ctx); }

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_barrier_t startLine;

// How long a rank waits at a collective for the others before it gives up.
#define BARRIER_TIMEOUT_NS (120ull * 1000000000ull)

// arrive counts one START of the collective; the one that completes the
// batch (every rank's STARTs of it) wakes the ranks waiting for it. futex
// without FUTEX_PRIVATE_FLAG: the word lies in memory the processes share.
static void arrive(hh_channel_t* c, uint32_t target) {
  uint32_t v = __atomic_add_fetch(c->arrive, 1, __ATOMIC_SEQ_CST);
  if (v == target) syscall(SYS_futex, c->arrive, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

// awaitAll waits until every rank has started the batch; 0 if one never did.
static int awaitAll(hh_channel_t* c, uint32_t target) {
  uint64_t deadline = 0;
  for (;;) {
    uint32_t v = __atomic_load_n(c->arrive, __ATOMIC_SEQ_CST);
    if (v >= target) return 1;
    struct timespec now, tick = {0, 100 * 1000000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    if (!deadline) deadline = t + BARRIER_TIMEOUT_NS;
    if (t > deadline) return 0;
    syscall(SYS_futex, c->arrive, FUTEX_WAIT, v, &tick, NULL, 0);
  }
}

static void* runChannel(void* arg) {
  hh_channel_t* c = (hh_channel_t*)arg;
  // Page-aligned, so that where it lies in a page is the same in every
  // process (with malloc's, it changed from process to process, and so did
  // the speed of the work: see sink below).
  size_t workBytes = sizeof(float) * (size_t)(c->workFloats > 0 ? c->workFloats : 1);
  float* work = (float*)aligned_alloc(4096, (workBytes + 4095) / 4096 * 4096);
  for (int i = 0; i < c->workFloats; i++) work[i] = (float)(i % 7);
  // What one clock reading costs, for the planted slowdown below.
  uint64_t clockCost = 0;
  if (c->slowdown > 1) {
    uint64_t t = nowNs();
    for (int k = 0; k < 63; k++) (void)nowNs();
    clockCost = (nowNs() - t) / 64;
  }
  pthread_barrier_wait(&startLine);
  uint64_t counter = c->counterBase; // the first item's: never 0, as in NCCL
  int logged = 0;
  // The work's result stays in a register until the end. Stored into *c
  // after every item, it made the work up to 1.6x slower in some processes,
  // depending on where the heap put c (most likely a false dependency of the
  // work's loads on that store, 4K aliasing): per-run p50 1.35-1.75 us
  // against 1.05-1.15 us; over 16 runs, CV 19.5% against 2.6% without it.
  double sink = 0;
  int limit = c->items, held = 0;
  for (int done = 0; done < limit;) {
    if (c->hold && held == 0 && done >= c->holdAt) {
      held = 1;
      __atomic_add_fetch(c->reached, 1, __ATOMIC_SEQ_CST);
    }
    if (held == 1) {
      struct timespec pause = {0, 1000 * 1000};
      if (!__atomic_load_n(c->hold, __ATOMIC_ACQUIRE)) {
        held = 2;
      } else if (c->holdDone + c->batch <= c->holdMax) {
        limit += c->batch;
        c->holdDone += c->batch;
        nanosleep(&pause, NULL);
      } else {
        struct timespec ms = {0, 1000 * 1000};
        while (__atomic_load_n(c->hold, __ATOMIC_ACQUIRE)) nanosleep(&ms, NULL);
        held = 2;
      }
    }
    int n = limit - done < c->batch ? limit - done : c->batch;
    ncclProfilerDevEvent_t ev[64];
    uint64_t firstStop = 0; // set by the planted slowdown
    uint32_t target = (uint32_t)(c->nranks * (done + n)); // every rank's STARTs up to this batch's last
    if (c->delayNs) { // a straggler: late at every collective, whatever the others do
      struct timespec d = {(time_t)(c->delayNs / 1000000000ull), (long)(c->delayNs % 1000000000ull)};
      while (nanosleep(&d, &d) != 0) {
      }
    }
    for (int phase = NCCLHOOKS_PHASE_START; phase <= NCCLHOOKS_PHASE_STOP; phase++) {
      for (int i = 0; i < n; i++) {
        ncclProfilerDevEvent_t* e = &ev[i];
        if (phase == NCCLHOOKS_PHASE_START) {
          memset(e, 0, sizeof *e);
          e->workCounter = counter + i;
          e->funcId = c->funcIds[(c->funcOffset + done + i) % c->nFuncIds];
          e->channelId = (uint8_t)c->channel;
        }
        e->phase = (uint8_t)phase;
        e->timestamp = phase == NCCLHOOKS_PHASE_STOP && i == 0 && firstStop ? firstStop : nowNs();
        if (c->hook) ((ncclProfilerDevHook_t)c->hook)(e, c->ctx);
        if (c->log) c->log[logged++] = *e;
        if (phase == NCCLHOOKS_PHASE_START && c->arrive) arrive(c, target);
      }
      if (phase == NCCLHOOKS_PHASE_START) { // the work the STOPs time
        for (int i = 0; i < n; i++) {
          double s = 0;
          for (int k = 0; k < c->workFloats; k++) s += work[k] * (float)(i + 1);
          sink += s;
        }
        // A planted regression (--slowdown F): busy-wait until the time
        // since the batch's first START is F times what it took to here, so
        // that every work item of the batch lasts F times as long, in
        // whatever state the machine is in (a fixed delay would not scale).
        // The wait's last clock reading stamps the first STOP: readings come
        // one clock cost apart, so it lands on average half a reading after
        // `until`, which `until` takes off. (Measured on 1.1 us items, 40
        // runs against 40: +6.1% at 1.05 and +20.7% at 1.2 so; taking a whole
        // reading off, +3.8% and +19.6%, as this predicts; each about +-1.5%
        // from run-to-run noise.)
        if (c->slowdown > 1) {
          uint64_t t0 = ev[0].timestamp, t1 = nowNs(), now;
          uint64_t until = t0 + (uint64_t)((double)(t1 - t0) * c->slowdown) - clockCost / 2;
          do now = nowNs();
          while (now < until);
          firstStop = now;
        }
        // The STOPs come after the last rank's START: a ring's work cannot
        // finish before every rank has joined it.
        // The wait stamps the STOPs afresh (not the planted slowdown's).
        if (c->arrive) {
          if (!awaitAll(c, target)) { // a rank never came: finish alone, the run fails
            c->timedOut = 1;
            c->arrive = NULL;
          }
          firstStop = 0;
        }
      }
    }
    counter += n;
    done += n;
    // On a GPU the channels run on the device and leave the host's cores to
    // the plugin's drain; here they share the cores, so give them up between
    // batches.
    sched_yield();
  }
  c->sink = sink;
  free(work);
  return NULL;
}

int hh_run_channels(hh_channel_t* chans, int n) {
  if (n <= 0 || n > 65536) return -1;
  for (int i = 0; i < n; i++)
    if (chans[i].batch < 1 || chans[i].batch > 64) return -1;
  pthread_t* t = (pthread_t*)calloc((size_t)n, sizeof(pthread_t));
  pthread_barrier_init(&startLine, NULL, n);
  int started = 0, rc = 0;
  for (; started < n; started++)
    if (pthread_create(&t[started], NULL, runChannel, &chans[started]) != 0) { rc = -2; break; }
  if (rc != 0) { // cannot release the barrier with fewer threads: fail loudly
    fprintf(stderr, "harness: pthread_create failed after %d threads\n", started);
    abort();
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&startLine);
  free(t);
  return rc;
}
