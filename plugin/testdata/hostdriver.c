// hostdriver plays released NCCL against the plugin: no device hook, only the
// host events of ncclProfiler_v5 (NCCL 2.28), _v6 (2.29, 2.30) or the
// official _v7 (2.31), called as NCCL calls them (src/plugin/profiler.cc,
// src/transport/profiler.cc): per communicator, init on its own thread;
// per collective a Coll (or P2p) event started at launch; per channel a
// KernelCh event started with the GPU timer of the channel's start, whose
// parent is the Coll event; the proxy starts every channel's event before it
// stops any (recordEventState(ncclProfilerKernelChStop) with the stop timer,
// then stopEvent); the Coll event stops when the launch returns, before the
// channels start; finalize.
//
// Usage: hostdriver PLUGIN VERSION COMMS COLLS CHANNELS. Build: cc -O2
// -pthread -rdynamic -I../internal/abi hostdriver.c -ldl. Output: "LOG
// <level> <msg>" per plugin log line, "MASK <comm> <mask>", "LOOP <comm> <ns>
// ..." (the time the communicator's calls took), then "DONE".
//
// HOSTDRIVER_NOISE=1 adds, per collective, what a later or misbehaving
// NCCL could hand the plugin, none of which may become a record, fail a
// call or crash: descriptors of event types NCCL adds later (and ones never
// asked for) with every other byte garbage, a kernel channel whose parent is
// not a handle the plugin gave, stops and states on NULL handles and on a
// handle never started, a second KernelChStop, states with NULL arguments
// and state ids the plugin does not know; and it stops the channels in
// reverse order of their starts (each STOP must still pair with its own
// START). HOSTDRIVER_RATE=N paces each communicator's thread to N events per
// second (0: as fast as it can).
//
// The descriptors are built from ncclhooks_abi.h's copies of NCCL's headers,
// of the version given. Timers and names follow from the indices (the test
// computes the same): collective k of communicator c uses colls[k % NCOLLS];
// channel ch starts at T(c, k, ch) and lasts D(k, ch).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ncclhooks_abi.h"

static ncclProfiler_v5_t* prof;
static int version, comms, colls, channels, noise;
static double rate; // events per second per communicator thread, 0: unpaced

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

// pace waits until event n of a thread that started at t0 is due,
// sleeping (a spinning thread per communicator would take the machine's
// cores from the drain); a thread behind its schedule goes on at once.
static void pace(uint64_t t0, uint64_t n) {
  if (rate <= 0) return;
  uint64_t due = t0 + (uint64_t)((double)n * 1e9 / rate), now = nowNs();
  if (now < due) {
    struct timespec ts = {(time_t)((due - now) / 1000000000ULL), (long)((due - now) % 1000000000ULL)};
    nanosleep(&ts, NULL);
  }
}

// garbage fills a descriptor-sized buffer with bytes that are no pointer a
// plugin could follow safely: only type (and parentObj) are meaningful.
static void garbage(void* p, size_t n, uint64_t type) {
  memset(p, 0xa5, n);
  memcpy(p, &type, sizeof type);
}

// noiseEvents is HOSTDRIVER_NOISE's per-collective noise (see above).
static void noiseEvents(void* ctx, void* task) {
  static const uint64_t types[] = {
    NCCLHOOKS_PROFILE_GROUP, NCCLHOOKS_PROFILE_PROXY_OP, NCCLHOOKS_PROFILE_PROXY_STEP, NCCLHOOKS_PROFILE_PROXY_CTRL,
    NCCLHOOKS_PROFILE_NET_PLUGIN, NCCLHOOKS_PROFILE_GROUP_API, NCCLHOOKS_PROFILE_COLL_API, NCCLHOOKS_PROFILE_P2P_API,
    NCCLHOOKS_PROFILE_KERNEL_LAUNCH, NCCLHOOKS_PROFILE_CE_COLL, NCCLHOOKS_PROFILE_CE_SYNC, NCCLHOOKS_PROFILE_CE_BATCH,
    NCCLHOOKS_PROFILE_KERNEL_PHASE, 1ULL << 16, 1ULL << 31, 1ULL << 63, 0, 3 /* two bits */,
  };
  // A descriptor larger than any version's, as a later NCCL's might be.
  uint64_t big[64];
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    garbage(big, sizeof big, types[i]);
    void* h = (void*)0x1;
    prof->startEvent(ctx, &h, big);
    if (h) {
      ncclProfilerEventStateArgs_v5_t a;
      memset(&a, 0xa5, sizeof a);
      prof->recordEventState(h, NCCLHOOKS_STATE_KERNEL_CH_STOP, &a);
      prof->recordEventState(h, 12345, &a);
      prof->stopEvent(h);
    }
  }
  (void)task;
  ncclProfilerEventStateArgs_v5_t a;
  memset(&a, 0, sizeof a);
  a.kernelCh.pTimer = 42;
  // Stops and states without a start.
  prof->stopEvent(NULL);
  prof->recordEventState(NULL, NCCLHOOKS_STATE_KERNEL_CH_STOP, &a);
  prof->recordEventState((void*)0x7, NCCLHOOKS_STATE_KERNEL_CH_STOP, &a); // a tagged handle never started
  prof->stopEvent((void*)0x7);
  prof->startEvent(ctx, NULL, big); // no handle to write
  prof->startEvent(ctx, &(void*){NULL}, NULL); // no descriptor
}

// ncclGetVersion of the NCCL this driver stands for.
int ncclGetVersion(int* v) {
  *v = version == 5 ? 22809 : version == 6 ? 23007 : 23102;
  return 0;
}

#include "driverlog.h"

// What the launches are: func, datatype, algo, proto (NULL for P2p), as
// NCCL's *ToString functions spell them.
typedef struct { const char *func, *datatype, *algo, *proto; } coll_t;
static const coll_t collTable[] = {
  {"AllReduce", "ncclFloat32", "RING", "LL"},
  {"Send", "ncclFloat32", NULL, NULL},
  {"AllGather", "ncclBfloat16", "RING", "SIMPLE"},
  {"ReduceScatter", "ncclInt32", "RING", "LL128"},
  {"AllReduce", "ncclBfloat16", "TREE", "SIMPLE"},
  {"Recv", "ncclFloat32", NULL, NULL},
};
#define NCOLLS (sizeof collTable / sizeof collTable[0])

#define T(c, k, ch) (1000000000000ULL + (uint64_t)(c) * 1000000000ULL + (uint64_t)(k) * 1000000ULL + (uint64_t)(ch) * 1000ULL)
#define D(k, ch) (100ULL + (uint64_t)(k) * 10ULL + (uint64_t)(ch))

// descr fills a descriptor of the driver's version: the members that matter
// are set through the struct of that version (their offsets agree, which the
// header asserts; this is what NCCL of each version writes).
typedef union {
  ncclProfilerEventDescr_v5_t v5;
  ncclProfilerEventDescr_v6_t v6;
  ncclProfilerEventDescr_v7_t v7;
} descr_t;

static void collDescr(descr_t* d, const coll_t* c, int rank) {
  memset(d, 0, sizeof *d);
  if (version == 7) {
    d->v7.rank = rank;
    if (!c->algo) {
      d->v7.type = NCCLHOOKS_PROFILE_P2P;
      d->v7.p2p.func = c->func;
      d->v7.p2p.datatype = c->datatype;
      d->v7.p2p.userTag = 7;
    } else {
      d->v7.type = NCCLHOOKS_PROFILE_COLL;
      d->v7.coll.func = c->func, d->v7.coll.datatype = c->datatype, d->v7.coll.algo = c->algo, d->v7.coll.proto = c->proto;
      d->v7.coll.kernelVariant = "default";
      d->v7.coll.userTag = 7;
    }
  } else if (version == 6) {
    d->v6.rank = rank;
    if (!c->algo) {
      d->v6.type = NCCLHOOKS_PROFILE_P2P;
      d->v6.p2p.func = c->func, d->v6.p2p.datatype = c->datatype;
    } else {
      d->v6.type = NCCLHOOKS_PROFILE_COLL;
      d->v6.coll.func = c->func, d->v6.coll.datatype = c->datatype, d->v6.coll.algo = c->algo, d->v6.coll.proto = c->proto;
    }
  } else {
    d->v5.rank = rank;
    if (!c->algo) {
      d->v5.type = NCCLHOOKS_PROFILE_P2P;
      d->v5.p2p.func = c->func, d->v5.p2p.datatype = c->datatype;
    } else {
      d->v5.type = NCCLHOOKS_PROFILE_COLL;
      d->v5.coll.func = c->func, d->v5.coll.datatype = c->datatype, d->v5.coll.algo = c->algo, d->v5.coll.proto = c->proto;
    }
  }
}

static void kernelChDescr(descr_t* d, void* parent, int ch, uint64_t start) {
  memset(d, 0, sizeof *d);
  if (version == 7) {
    d->v7.type = NCCLHOOKS_PROFILE_KERNEL_CH, d->v7.parentObj = parent;
    d->v7.kernelCh.channelId = (uint8_t)ch, d->v7.kernelCh.pTimer = start;
  } else if (version == 6) {
    d->v6.type = NCCLHOOKS_PROFILE_KERNEL_CH, d->v6.parentObj = parent;
    d->v6.kernelCh.channelId = (uint8_t)ch, d->v6.kernelCh.pTimer = start;
  } else {
    d->v5.type = NCCLHOOKS_PROFILE_KERNEL_CH, d->v5.parentObj = parent;
    d->v5.kernelCh.channelId = (uint8_t)ch, d->v5.kernelCh.pTimer = start;
  }
}

static void* comm(void* arg) {
  int c = (int)(intptr_t)arg;
  void* ctx = NULL;
  int mask = -1;
  char name[32];
  snprintf(name, sizeof name, "host-comm-%d", c);
  prof->init(&ctx, 0x1000 + (uint64_t)c, &mask, name, 1, comms, c, logger);
  pthread_mutex_lock(&mu);
  printf("MASK %d %d\n", c, mask);
  fflush(stdout);
  pthread_mutex_unlock(&mu);
  void** kch = calloc((size_t)channels, sizeof(void*));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t start = nowNs(), events = 0;
  for (int k = 0; k < colls; k++) {
    descr_t d;
    void* task = NULL;
    if (mask & (NCCLHOOKS_PROFILE_COLL | NCCLHOOKS_PROFILE_P2P)) {
      collDescr(&d, &collTable[k % NCOLLS], c);
      prof->startEvent(ctx, &task, &d);
      // NCCL stops the task events when the launch returns, before the
      // kernel runs; the channels still name the handle as their parent.
      if (task) prof->stopEvent(task);
    }
    if (noise) noiseEvents(ctx, task);
    if (!(mask & NCCLHOOKS_PROFILE_KERNEL_CH)) continue;
    for (int ch = 0; ch < channels; ch++) {
      kernelChDescr(&d, task, ch, T(c, k, ch));
      kch[ch] = NULL;
      pace(start, events++);
      prof->startEvent(ctx, &kch[ch], &d);
    }
    if (noise && channels > 1) {
      // A kernel channel whose parent is no handle of the plugin's (odd,
      // so it looks tagged, with a function id far beyond the table), on a
      // channel beyond the ones the test counts, stopped without
      // KernelChStop: its START alone is fed, as function Unknown, and the
      // test counts it.
      kernelChDescr(&d, (void*)(uintptr_t)0xa5a5a5a5a5a5a5a5ULL, channels, 1);
      void* h = NULL;
      prof->startEvent(ctx, &h, &d);
      if (h) prof->stopEvent(h); // a stop without KernelChStop
    }
    for (int i = 0; i < channels; i++) {
      int ch = noise ? channels - 1 - i : i; // out of order: the last started stops first
      if (!kch[ch]) continue;
      ncclProfilerEventStateArgs_v5_t a;
      memset(&a, 0, sizeof a);
      a.kernelCh.pTimer = T(c, k, ch) + D(k, ch);
      pace(start, events++);
      prof->recordEventState(kch[ch], NCCLHOOKS_STATE_KERNEL_CH_STOP, &a);
      if (noise) {
        ncclProfilerEventStateArgs_v5_t late = a;
        late.kernelCh.pTimer = 1; // a second stop state: ignored
        prof->recordEventState(kch[ch], NCCLHOOKS_STATE_KERNEL_CH_STOP, &late);
        prof->recordEventState(kch[ch], NCCLHOOKS_STATE_KERNEL_CH_STOP, NULL);
        prof->recordEventState(kch[ch], 999, &a);
      }
      prof->stopEvent(kch[ch]);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_mutex_lock(&mu);
  printf("LOOP %d %lld ns for %d collectives x %d channels\n", c,
         (long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)), colls, channels);
  pthread_mutex_unlock(&mu);
  free(kch);
  prof->finalize(ctx);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: hostdriver PLUGIN VERSION COMMS COLLS CHANNELS\n");
    return 2;
  }
  version = atoi(argv[2]), comms = atoi(argv[3]), colls = atoi(argv[4]), channels = atoi(argv[5]);
  noise = getenv("HOSTDRIVER_NOISE") && atoi(getenv("HOSTDRIVER_NOISE"));
  if (getenv("HOSTDRIVER_RATE")) rate = atof(getenv("HOSTDRIVER_RATE"));
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  char sym[32];
  snprintf(sym, sizeof sym, "ncclProfiler_v%d", version);
  prof = (ncclProfiler_v5_t*)dlsym(lib, sym);
  if (!prof) {
    fprintf(stderr, "no %s\n", sym);
    return 1;
  }
  pthread_t* th = calloc((size_t)comms, sizeof(pthread_t));
  for (int c = 0; c < comms; c++) pthread_create(&th[c], NULL, comm, (void*)(intptr_t)c);
  for (int c = 0; c < comms; c++) pthread_join(th[c], NULL);
  printf("DONE\n");
  return 0;
}
