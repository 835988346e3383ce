// cdriver plays NCCL against the plugin from plain C, as NCCL would: dlopen,
// ncclProfiler_v7 (or older), init and getDeviceHook per communicator (a
// context each), hook calls from one thread per channel per communicator,
// finalize. It
// repeats that `cycles` times in one process. Build: cc -O2 -pthread -rdynamic
// -I../abi cdriver.c -ldl. Output: "LOG <level> <msg>" per plugin log line, then
// "EMITTED <device> <events>" and "HOOK <cycle> <device> <0|1>".
//
// Faults, injected as they happen to a job (environment variables):
// CDRIVER_FSIZE=N: a file-size limit of N bytes (RLIMIT_FSIZE, SIGXFSZ
// ignored: writes fail with EFBIG as on a full disk) from after cycle 0's
// getDeviceHook until cycle 1's init (a transient full disk).
// CDRIVER_WORK=N: N multiply-adds between events instead of 64 (0: the
// hooks are called back to back, an overload).
// CDRIVER_SIGTERM=1: SIGTERM to itself after cycle 0's events, with no
// finalize (a job killed by its launcher).
// CDRIVER_EXIT=1: exit(0) after cycle 0's events, with no finalize (a
// torch job that never destroys its process group).
// CDRIVER_PLANT_FIFO=1: with CDRIVER_PLANT_DIR, a FIFO under the
// output's name instead of the symlink (opening it would block).
// CDRIVER_LOADFAIL=1: a file-size limit of 1 byte around cycle 0's
// getDeviceHook of device 1, so that loading the module there fails.
// CDRIVER_STAGGER=1: device 0's communicators are finalized as soon as
// their threads are done, while the other devices' threads (4x the items)
// keep emitting.
// CDRIVER_FORK=1: after cycle 0's events, a child is forked that calls
// device 0's hook, then sends itself SIGTERM; the parent waits for it (at
// most 30 s) and prints "CHILD exit N", "CHILD signal N" or "CHILD HUNG".
// CDRIVER_RELOAD=1: dlclose and dlopen the plugin again between cycles.
// CDRIVER_LINGER_UNTIL=F: after the last cycle, wait (at most 2 minutes)
// until the file F exists before exiting, as a job that goes on after
// destroying its communicators. Every cycle prints "FINALIZE_MS <cycle>
// <ms>", the time its finalize calls took.
// Built with -DCDRIVER_NO_MARKER, it lacks the harness marker symbol, as
// a real NCCL job does.
// CDRIVER_JOB_HANDLER=before|after: the job's own SIGTERM handler (it
// prints JOBHANDLER and exits with status 42), installed before loading the
// plugin or after the first init.
// CDRIVER_PLANT_DIR=D, CDRIVER_PLANT_TARGET=T: before loading the plugin, a
// symlink D/ncclhooks-<host>-<pid>.jsonl -> T (planted in a shared dump
// directory) and a regular file D/ncclhooks-<host>-<pid>.1.jsonl (an
// earlier run with the same host and pid).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ncclhooks_abi.h"

#ifndef CDRIVER_NO_MARKER
int ncclhooks_harness_cpu = 1;
#endif

static void jobHandler(int sig) {
  (void)sig;
  static const char msg[] = "JOBHANDLER\n";
  (void)!write(1, msg, sizeof msg - 1);
  _exit(42);
}

static void installJobHandler(const char* when) {
  const char* want = getenv("CDRIVER_JOB_HANDLER");
  if (!want || strcmp(want, when) != 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = jobHandler;
  sigaction(SIGTERM, &sa, NULL);
}
static const char* names[] = {"AllReduce_Sum_f32_RING_LL", "AllGather_RING_SIMPLE", "ReduceScatter_Sum_bf16_RING_LL128"};
const char* ncclProfilerDevFuncName(int id) { return id >= 0 && id < 3 ? names[id] : NULL; }

#include "driverlog.h"

typedef struct { ncclProfilerDevHook_t hook; void* ctx; int channel, items; uint64_t base; } chan_t;

static int work = 64; // CDRIVER_WORK: multiply-adds between events (0: overload)

static void* run(void* a) {
  chan_t* c = (chan_t*)a;
  volatile double sink = 0;
  for (int i = 0; i < c->items; i++) {
    ncclProfilerDevEvent_t e = {0};
    struct timespec ts;
    e.workCounter = c->base + (uint64_t)i;
    e.funcId = (uint32_t)((i + c->channel) % 3);
    e.channelId = (uint8_t)c->channel;
    for (int ph = NCCLHOOKS_PHASE_START; ph <= NCCLHOOKS_PHASE_STOP; ph++) {
      clock_gettime(CLOCK_REALTIME, &ts);
      e.timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
      e.phase = (uint8_t)ph;
      if (c->hook) c->hook(&e, c->ctx);
      for (int k = 0; k < work; k++) sink += k * 0.5;
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: cdriver PLUGIN DEVICES COMMS CHANNELS ITEMS CYCLES\n");
    return 2;
  }
  if (getenv("CDRIVER_WORK")) work = atoi(getenv("CDRIVER_WORK"));
  int devs = atoi(argv[2]), comms = atoi(argv[3]), chans = atoi(argv[4]), items = atoi(argv[5]), cycles = atoi(argv[6]);
  const char* plantDir = getenv("CDRIVER_PLANT_DIR");
  if (plantDir) {
    char host[256] = {0}, path[1024];
    gethostname(host, sizeof host - 1);
    for (char* c = host; *c; c++)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_')) *c = '_';
    snprintf(path, sizeof path, "%s/ncclhooks-%s-%d.jsonl", plantDir, host, (int)getpid());
    if (getenv("CDRIVER_PLANT_FIFO")) {
      if (mkfifo(path, 0666) != 0) { perror("mkfifo"); return 1; }
    } else if (symlink(getenv("CDRIVER_PLANT_TARGET"), path) != 0) { perror("symlink"); return 1; }
    snprintf(path, sizeof path, "%s/ncclhooks-%s-%d.1.jsonl", plantDir, host, (int)getpid());
    FILE* f = fopen(path, "w");
    if (!f) { perror(path); return 1; }
    fputs("{\"type\":\"header\",\"format\":1,\"profile\":\"old-run\"}\n", f);
    fclose(f);
  }
  installJobHandler("before");
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  // v6 is v7's prefix: read either through v7, getDeviceHook only for v7.
  ncclProfiler_v7_t* p = (ncclProfiler_v7_t*)dlsym(h, "ncclProfiler_v7");
  int v = 7;
  if (!p) { p = (ncclProfiler_v7_t*)dlsym(h, "ncclProfiler_v6"); v = 6; }
  if (!p) { fprintf(stderr, "no ncclProfiler_v7/v6\n"); return 1; }
  printf("VERSION %d %s\n", v, p->name);
  fflush(stdout);
  const char* fsize = getenv("CDRIVER_FSIZE");
  struct rlimit rl0;
  getrlimit(RLIMIT_FSIZE, &rl0);
  int stagger = getenv("CDRIVER_STAGGER") != NULL;
  for (int cy = 0; cy < cycles; cy++) {
    if (cy > 0 && getenv("CDRIVER_RELOAD")) {
      dlclose(h);
      h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
      if (!h) { fprintf(stderr, "dlopen again: %s\n", dlerror()); return 1; }
      p = (ncclProfiler_v7_t*)dlsym(h, v == 7 ? "ncclProfiler_v7" : "ncclProfiler_v6");
      printf("RELOADED\n");
    }
    if (fsize && cy == 1) setrlimit(RLIMIT_FSIZE, &rl0); // the disk has room again
    int n = devs * comms;
    void** ctx = calloc(n, sizeof(void*));
    void **hooks = calloc(n, sizeof(void*)), **hctx = calloc(n, sizeof(void*));
    for (int i = 0; i < n; i++) {
      int mask = 0, d = i / comms;
      char name[64];
      snprintf(name, sizeof name, "cdriver-%d-%d", cy, i);
      if (p->init(&ctx[i], 0x1000 + i, &mask, name, 1, devs, d, logger) != 0) { fprintf(stderr, "init failed\n"); return 1; }
      // NCCL asks for the device hook in each communicator's init, on the
      // thread that ran it: every communicator has a context of its own.
      struct rlimit one = rl0;
      one.rlim_cur = 1;
      int loadFail = getenv("CDRIVER_LOADFAIL") && cy == 0 && d == 1;
      if (loadFail) { signal(SIGXFSZ, SIG_IGN); setrlimit(RLIMIT_FSIZE, &one); }
      if (v == 7) p->getDeviceHook(d, &hooks[i], &hctx[i]);
      if (loadFail) setrlimit(RLIMIT_FSIZE, &rl0);
    }
    if (cy == 0) installJobHandler("after");
    for (int d = 0; d < devs; d++) printf("HOOK %d %d %d\n", cy, d, hooks[d * comms] != NULL); // its first communicator's
    if (fsize && cy == 0) {
      struct rlimit rl = rl0;
      rl.rlim_cur = (rlim_t)atol(fsize);
      signal(SIGXFSZ, SIG_IGN);
      setrlimit(RLIMIT_FSIZE, &rl);
    }
    int nt = n * chans;
    pthread_t* t = calloc(nt, sizeof(pthread_t));
    chan_t* cs = calloc(nt, sizeof(chan_t));
    for (int i = 0; i < nt; i++) {
      int comm = i / chans, d = comm / comms;
      int its = stagger && d > 0 ? 4 * items : items;
      cs[i] = (chan_t){(ncclProfilerDevHook_t)hooks[comm], hctx[comm], i % chans, its, ((uint64_t)cy << 48) | ((uint64_t)(comm % comms) << 40)};
      pthread_create(&t[i], NULL, run, &cs[i]);
    }
    int finalized = 0; // communicators finalized already
    if (stagger) {
      for (int i = 0; i < comms * chans; i++) pthread_join(t[i], NULL);
      for (int i = 0; i < comms; i++) p->finalize(ctx[i]);
      finalized = comms;
      printf("FINALIZED %d 0\n", cy);
      fflush(stdout);
    }
    for (int i = finalized * chans; i < nt; i++) pthread_join(t[i], NULL);
    for (int d = 0; d < devs; d++) {
      long emitted = 0;
      for (int k = d * comms; k < (d + 1) * comms; k++)
        if (hooks[k]) emitted += (long)chans * (stagger && d > 0 ? 4 * items : items) * 2;
      printf("EMITTED %d %d %ld\n", cy, d, emitted);
    }
    fflush(stdout);
    if (getenv("CDRIVER_FORK") && cy == 0) {
      pid_t child = fork();
      if (child == 0) {
        chan_t c = {(ncclProfilerDevHook_t)hooks[0], hctx[0], 0, 100, 0xfull << 44};
        run(&c);
        kill(getpid(), SIGTERM);
        for (;;) pause();
      }
      int st = 0, waited = 0;
      for (int ms = 0; ms < 30000 && !waited; ms += 10) {
        if (waitpid(child, &st, WNOHANG) == child) waited = 1;
        else usleep(10000);
      }
      if (!waited) { kill(child, SIGKILL); waitpid(child, &st, 0); printf("CHILD HUNG\n"); }
      else if (WIFSIGNALED(st)) printf("CHILD signal %d\n", WTERMSIG(st));
      else printf("CHILD exit %d\n", WEXITSTATUS(st));
      fflush(stdout);
    }
    if (getenv("CDRIVER_EXIT")) {
      printf("EXIT\n");
      fflush(stdout);
      exit(0);
    }
    if (getenv("CDRIVER_SIGTERM")) {
      printf("SIGTERM\n");
      fflush(stdout);
      kill(getpid(), SIGTERM);
      for (;;) pause();
    }
    struct timespec f0, f1;
    clock_gettime(CLOCK_MONOTONIC, &f0);
    for (int i = finalized; i < n; i++) p->finalize(ctx[i]);
    clock_gettime(CLOCK_MONOTONIC, &f1);
    printf("FINALIZE_MS %d %ld\n", cy, (long)((f1.tv_sec - f0.tv_sec) * 1000 + (f1.tv_nsec - f0.tv_nsec) / 1000000));
    fflush(stdout);
    p->finalize(NULL); // a communicator whose init failed: must be harmless
    free(ctx); free(hooks); free(hctx); free(t); free(cs);
  }
  const char* until = getenv("CDRIVER_LINGER_UNTIL");
  for (int ms = 0; until && ms < 120000 && access(until, F_OK) != 0; ms += 10) usleep(10000);
  dlclose(h); // NCCL does this; -z nodelete keeps the Go image resident
  printf("DONE\n");
  return 0;
}
