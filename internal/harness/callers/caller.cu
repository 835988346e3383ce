// Foreign caller of the plugin's device hook: a kernel built by nvcc the way
// NCCL builds its kernels (-rdc, device-linked, -maxrregcount=96), playing
// NCCL's part against the real plugin. It loads ncclProfiler_v7, inits N
// communicators, pulls one hook per communicator, and launches an
// ncclKernelMain-like kernel (one block per channel, thread 0 calls the hook
// at every work item START and STOP) in streams or CUDA graphs. Every event
// handed to a hook is also logged on the device, so the Go side can check the
// plugin's output against exactly what the hook saw.
//
//   caller --plugin PATH [--comms N] [--threads] [--channels C] [--items I]
//          [--batch B] [--launches L] [--graph] [--replays R] [--bytes N]
//          [--events DIR] [--device D] [--kernel NAME] [--counter-stride S]
//
// Prints one "CALLER {json}" line on stdout. Exit 0: ran, data and live values
// right; 1: ran, but data or live values wrong; 2: usage; 3: setup failure or
// CUDA fault.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>

// Values thread 0 keeps live across every hook call. build.sh raises it so
// that the kernel really sits at (or above) its register budget.
#ifndef LIVE
#define LIVE 32
#endif

#ifdef __CUDACC_RDC__
#define CALLER_RDC 1
#else
#define CALLER_RDC 0
#endif

#ifndef CALLER_NAME
#if CALLER_RDC
#define CALLER_NAME "caller_rdc"
#else
#define CALLER_NAME "caller_wp"
#endif
#endif

// ---------------------------------------------------------------------------
// The NCCL side of the ABI (docs/ARCHITECTURE.md, "The event"): the event,
// the hook type, ncclProfiler_v7_t and the log levels, from
// abi/ncclhooks_abi.h (build.sh passes -I).
#include "ncclhooks_abi.h"

// NCCL exports this from libnccl; here the caller plays libnccl. As an
// executable (linked with --export-dynamic) the plugin finds it with
// dlsym(RTLD_DEFAULT); built as a shared library (CALLER_SHARED) that
// launch/launch.c loads with local symbols, as torch loads NCCL, it finds it in the
// library that holds the logger init was given.
static const char* const kFuncNames[] = {
    "AllReduce_Sum_f32_RING_LL",        "AllReduce_Sum_f32_RING_LL128",      "AllReduce_Sum_f32_RING_SIMPLE",
    "AllReduce_Sum_bf16_RING_LL",       "AllReduce_Sum_bf16_RING_SIMPLE",    "AllReduce_Sum_f16_TREE_LL",
    "AllReduce_Sum_f32_TREE_SIMPLE",    "AllReduce_Max_f32_RING_LL",         "AllReduce_Sum_f32_NVLS_SIMPLE",
    "AllGather_RING_LL",                "AllGather_RING_LL128",              "AllGather_RING_SIMPLE",
    "AllGather_PAT_SIMPLE",             "ReduceScatter_Sum_f32_RING_LL",     "ReduceScatter_Sum_f32_RING_SIMPLE",
    "ReduceScatter_Sum_bf16_RING_SIMPLE", "ReduceScatter_Sum_f32_PAT_SIMPLE", "Broadcast_RING_LL",
    "Broadcast_RING_SIMPLE",            "Reduce_Sum_f32_RING_LL",            "Reduce_Sum_f32_RING_SIMPLE",
    "SendRecv",                         "AllToAll_SendRecv",
};
constexpr int kNumFuncs = sizeof(kFuncNames) / sizeof(kFuncNames[0]);
static_assert(kNumFuncs == 23, "function ids 0..22");

extern "C" __attribute__((visibility("default"))) const char* ncclProfilerDevFuncName(int funcId) {
  return funcId >= 0 && funcId < kNumFuncs ? kFuncNames[funcId] : nullptr;
}

// ---------------------------------------------------------------------------
// Device side.

constexpr int kThreads = 256;

// Per-channel state that outlives a launch, like NCCL's channel workCounter:
// it lives in device memory so graph replays continue it too. workCounter
// starts at firstCounter, never 0, as NCCL's.
struct Channel {
  uint64_t workCounter;  // next work item's counter
  uint64_t batches;      // batches run so far (picks the funcId)
  uint64_t logged;       // events appended to this channel's log
};

struct KernelArgs {
  ncclProfilerDevHook_t hook;
  void* hookCtx;
  Channel* chans;      // [channels]
  ncclProfilerDevEvent_t* log; // [channels][logCap]
  uint64_t logCap;     // per channel
  const uint32_t* src; // [channels][items][words]
  uint32_t* dst;
  uint32_t words;      // u32 lanes of work per item
  int items;           // work items per channel per launch
  int batch;           // items per batch
  uint32_t* live;      // [channels][LIVE]: thread 0's live values, carried across launches
  uint32_t* liveMix;   // [channels]: their mix after the last launch
};

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One hook call, as NCCL makes it: the event is built on the stack right
// before the call. The same bytes go to the channel's log first.
__device__ __forceinline__ void emit(const KernelArgs& a, ncclProfilerDevEvent_t* log, uint64_t& logged,
                                     uint64_t workCounter, uint32_t funcId, uint8_t phase) {
#if CALLER_RDC
  ncclProfilerDevEvent_t ev;
  ev.timestamp = globaltimer();
  ev.workCounter = workCounter;
  ev.funcId = funcId;
  ev.channelId = (uint8_t)blockIdx.x;
  ev.phase = phase;
  ev.rsvd = 0;
  if (logged < a.logCap) log[logged] = ev;
  logged++;
  a.hook(&ev, a.hookCtx);
#else
  // Whole program: an indirect call into another module faults (its call
  // targets and return addresses are module-relative), so no call at all.
  (void)a; (void)log; (void)logged; (void)workCounter; (void)funcId; (void)phase;
#endif
}

// The step applied to every live value after each hook call site; the host
// replays it (checkComm) to check the values survived the calls.
__host__ __device__ __forceinline__ uint32_t liveStep(uint32_t v, uint32_t step, uint32_t j) {
  return v * 2654435761u + (step ^ j);
}

// No __launch_bounds__: it would override -maxrregcount.
extern "C" __global__ void caller_kernel(KernelArgs a) {
  const int tid = threadIdx.x;
  const int ch = blockIdx.x;
  Channel* chan = a.chans + ch;
  ncclProfilerDevEvent_t* log = a.log + (uint64_t)ch * a.logCap;

  // Thread 0 carries these across every hook call: a hook that clobbers
  // registers or stack it must preserve shows up in them.
  uint64_t workCounter = 0, batches = 0, logged = 0;
  uint32_t v[LIVE];
  if (tid == 0) {
    workCounter = chan->workCounter;
    batches = chan->batches;
    logged = chan->logged;
#pragma unroll
    for (int j = 0; j < LIVE; j++) v[j] = a.live[ch * LIVE + j];
  }
  uint32_t step = 0;

  for (int first = 0; first < a.items; first += a.batch) {
    const int n = min(a.batch, a.items - first);
    const uint32_t funcId = (uint32_t)(batches % kNumFuncs);
    if (tid == 0) {
      for (int i = 0; i < n; i++) {
        emit(a, log, logged, workCounter + i, funcId, NCCLHOOKS_PHASE_START);
#pragma unroll
        for (int j = 0; j < LIVE; j++) v[j] = liveStep(v[j], step, j);
        step++;
      }
    }
    __syncthreads();
    for (int i = 0; i < n; i++) {
      const uint64_t off = ((uint64_t)ch * a.items + first + i) * a.words;
      const uint32_t* s = a.src + off;
      uint32_t* d = a.dst + off;
      for (uint32_t w = tid; w < a.words; w += blockDim.x) d[w] += s[w];
    }
    __syncthreads();
    if (tid == 0) {
      for (int i = 0; i < n; i++) {
        emit(a, log, logged, workCounter + i, funcId, NCCLHOOKS_PHASE_STOP);
#pragma unroll
        for (int j = 0; j < LIVE; j++) v[j] = liveStep(v[j], step, j);
        step++;
      }
      workCounter += n;
      batches++;
    }
  }

  if (tid == 0) {
    chan->workCounter = workCounter;
    chan->batches = batches;
    chan->logged = logged;
    uint32_t mix = 0;
#pragma unroll
    for (int j = 0; j < LIVE; j++) {
      a.live[ch * LIVE + j] = v[j];
      mix = mix * 31u + v[j];
    }
    a.liveMix[ch] = mix;
  }
}

// ---------------------------------------------------------------------------
// Host side.

static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;

// The logger NCCL passes to init: variadic, one line per message on stderr.
static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  const char* tag = level == NCCL_LOG_VERSION ? "VERSION"
                    : level == NCCL_LOG_WARN  ? "WARN"
                    : level == NCCL_LOG_INFO  ? "INFO"
                    : level == NCCL_LOG_ABORT ? "ABORT"
                                              : "TRACE";
  pthread_mutex_lock(&logMu);
  fprintf(stderr, "NCCL %s ", tag);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  size_t n = fmt ? strlen(fmt) : 0;
  if (n == 0 || fmt[n - 1] != '\n') fputc('\n', stderr);
  pthread_mutex_unlock(&logMu);
}

// FNV-1a: a fixed commId per communicator name.
static uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Deterministic fill for work data and live seeds.
static uint32_t mix32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

static double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Options {
  const char* plugin = nullptr;
  int comms = 1;
  bool threads = false;
  int channels = 8;
  int items = 64;
  int batch = 4;
  int launches = 4;
  bool graph = false;
  int replays = 3;
  long long bytes = 4096;
  const char* events = nullptr;
  int device = 0;
  const char* kernel = CALLER_NAME;
  // Communicator k's counters start at k * counterStride + 1: 0 numbers
  // every communicator from 1, as NCCL does (profiles with work positions:
  // the drain takes a record's work counter from its position).
  uint64_t counterStride = 1ull << 40;
};

struct Comm {
  int index = 0;
  std::string name;
  uint64_t commId = 0;
  // Plugin side.
  void* ctx = nullptr;
  int initRc = -1;
  int hookRc = -1;
  void* hook = nullptr;
  void* devCtx = nullptr;
  // CUDA side.
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  KernelArgs args{};
  int executions = 0;  // kernel runs this communicator gets
  std::vector<uint32_t> src, liveSeed;
};

static ncclProfiler_v7_t* prof;
static Options opt;
static std::vector<Comm> comms;
static pthread_barrier_t initBarrier;

// First error wins; later ones only go to stderr.
static std::string firstError;
static bool fail(const std::string& err) {
  fprintf(stderr, "caller: %s\n", err.c_str());
  if (firstError.empty()) firstError = err;
  return false;
}
static bool ck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "caller: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  if (firstError.empty()) firstError = cudaGetErrorName(e);
  return false;
}

// NCCL's communicator init: device current on this thread, profiler init,
// then getDeviceHook on the same thread.
static void initComm(Comm& c) {
  int mask = 0;
  c.initRc = prof->init(&c.ctx, c.commId, &mask, c.name.c_str(), 1, 1, 0, logger);
  if (c.initRc != 0) {
    // NCCL disables the profiler for a communicator whose init failed.
    fprintf(stderr, "caller: comm %d: profiler init returned %d: no hook\n", c.index, c.initRc);
    c.ctx = nullptr;
    return;
  }
  c.hookRc = prof->getDeviceHook(opt.device, &c.hook, &c.devCtx);
  if (c.hookRc != 0) {
    fprintf(stderr, "caller: comm %d: getDeviceHook returned %d: no hook\n", c.index, c.hookRc);
    c.hook = c.devCtx = nullptr;
  }
}

static cudaError_t initThreadErr = cudaSuccess;

static void* initThread(void* p) {
  Comm& c = *(Comm*)p;
  // Each init thread makes the device current, as NCCL's does.
  cudaError_t e = cudaSetDevice(opt.device);
  if (e == cudaSuccess) e = cudaFree(0);
  if (e != cudaSuccess) {
    pthread_mutex_lock(&logMu);
    if (initThreadErr == cudaSuccess) initThreadErr = e;
    pthread_mutex_unlock(&logMu);
  }
  pthread_barrier_wait(&initBarrier);
  initComm(c);
  return nullptr;
}

static std::string jsonString(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') { o += '\\'; o += (char)ch; }
    else if (ch < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", ch); o += b; }
    else o += (char)ch;
  }
  return o + "\"";
}

struct Result {
  bool ok = false, dataOk = false, liveOk = false;
  int regs = -1;
  long long localBytes = -1;
  unsigned long long emitted = 0;
  double seconds = 0;
};

static std::string hex(const void* p) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)(uintptr_t)p);
  return b;
}

static void printSummary(const Result& r) {
  std::string hooks = "[";
  for (size_t i = 0; i < comms.size(); i++) {
    const Comm& c = comms[i];
    hooks += (i ? ",{\"comm\":" : "{\"comm\":") + std::to_string(c.index) + ",\"hook\":\"" + hex(c.hook) +
             "\",\"ctx\":\"" + hex(c.devCtx) + "\",\"null\":" + (c.hook ? "false}" : "true}");
  }
  hooks += "]";
  printf("CALLER {\"ok\":%s,\"error\":%s,\"kernel\":%s,\"rdc\":%s,\"regs\":%d,\"local_bytes\":%lld,\"comms\":%d,"
         "\"threads\":%s,\"graph\":%s,\"hook_call\":\"%s\",\"hooks\":%s,\"emitted\":%llu,\"data_ok\":%s,"
         "\"live_ok\":%s,\"seconds\":%.6f}\n",
         r.ok ? "true" : "false", jsonString(firstError).c_str(), jsonString(opt.kernel).c_str(),
         CALLER_RDC ? "true" : "false", r.regs, r.localBytes, opt.comms, opt.threads ? "true" : "false",
         opt.graph ? "true" : "false", CALLER_RDC ? "compiled" : "compiled out (whole-program caller)",
         hooks.c_str(), r.emitted, r.dataOk ? "true" : "false", r.liveOk ? "true" : "false", r.seconds);
  fflush(stdout);
}

static void finalizeAll() {
  for (Comm& c : comms)
    if (c.initRc == 0) {
      int rc = prof->finalize(c.ctx);
      if (rc != 0) fprintf(stderr, "caller: comm %d: finalize returned %d\n", c.index, rc);
    }
}

static void usage() {
  fprintf(stderr,
          "usage: caller --plugin PATH [--comms N(1..8)] [--threads] [--channels C(1..64)] [--items I]\n"
          "              [--batch B] [--launches L] [--graph] [--replays R] [--bytes N] [--events DIR]\n"
          "              [--device D] [--kernel NAME] [--counter-stride S]\n");
}

static bool parseInt(const char* s, long long lo, long long hi, long long* out) {
  if (!s) return false;
  char* end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool parseArgs(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    auto num = [&](long long lo, long long hi, long long* v) {
      if (i + 1 >= argc || !parseInt(argv[i + 1], lo, hi, v)) {
        fprintf(stderr, "caller: %s wants an integer in %lld..%lld\n", a, lo, hi);
        return false;
      }
      i++;
      return true;
    };
    auto str = [&](const char** v) {
      if (i + 1 >= argc) { fprintf(stderr, "caller: %s wants a value\n", a); return false; }
      *v = argv[++i];
      return true;
    };
    long long v;
    if (!strcmp(a, "--plugin")) { if (!str(&opt.plugin)) return false; }
    else if (!strcmp(a, "--comms")) { if (!num(1, 8, &v)) return false; opt.comms = (int)v; }
    else if (!strcmp(a, "--threads")) opt.threads = true;
    else if (!strcmp(a, "--channels")) { if (!num(1, 64, &v)) return false; opt.channels = (int)v; }
    else if (!strcmp(a, "--items")) { if (!num(1, 1 << 20, &v)) return false; opt.items = (int)v; }
    else if (!strcmp(a, "--batch")) { if (!num(1, 1 << 20, &v)) return false; opt.batch = (int)v; }
    else if (!strcmp(a, "--launches")) { if (!num(1, 1 << 20, &v)) return false; opt.launches = (int)v; }
    else if (!strcmp(a, "--graph")) opt.graph = true;
    else if (!strcmp(a, "--replays")) { if (!num(1, 1 << 20, &v)) return false; opt.replays = (int)v; }
    else if (!strcmp(a, "--bytes")) {
      if (!num(0, 1ll << 30, &v)) return false;
      if (v % 4) { fprintf(stderr, "caller: --bytes must be a multiple of 4 (u32 lanes)\n"); return false; }
      opt.bytes = v;
    }
    else if (!strcmp(a, "--events")) { if (!str(&opt.events)) return false; }
    else if (!strcmp(a, "--device")) { if (!num(0, 1 << 10, &v)) return false; opt.device = (int)v; }
    else if (!strcmp(a, "--kernel")) { if (!str(&opt.kernel)) return false; }
    else if (!strcmp(a, "--counter-stride")) { if (!num(0, 1ll << 56, &v)) return false; opt.counterStride = (uint64_t)v; }
    else { fprintf(stderr, "caller: unknown argument %s\n", a); return false; }
  }
  if (!opt.plugin) { fprintf(stderr, "caller: --plugin is required\n"); return false; }
  return true;
}

// The counter of communicator k's first work item on each channel: NCCL's
// per-(communicator, channel) workCounter starts at 1 (a record mode that
// takes positions from it, 2*workCounter + phase, drains from 2), and
// --counter-stride (default 1 << 40) keeps the communicators' (channel,
// workCounter) pairs apart.
static uint64_t firstCounter(int k) { return (uint64_t)k * opt.counterStride + 1; }

// Allocates and fills one communicator's device state.
static bool setupComm(Comm& c) {
  const int C = opt.channels;
  const uint64_t words = (uint64_t)(opt.bytes / 4);
  c.executions = c.hook ? (opt.graph ? opt.launches * opt.replays : opt.launches) : 0;
  KernelArgs& a = c.args;
  a.hook = (ncclProfilerDevHook_t)c.hook;
  a.hookCtx = c.devCtx;
  a.words = (uint32_t)words;
  a.items = opt.items;
  a.batch = opt.batch;
  // Exactly what the run emits: START and STOP per item per execution.
  a.logCap = (uint64_t)opt.items * 2 * c.executions;

  const uint64_t nWork = (uint64_t)C * opt.items * words;
  c.src.resize(nWork);
  for (uint64_t w = 0; w < nWork; w++) c.src[w] = mix32(((uint64_t)c.index << 48) ^ w);
  c.liveSeed.resize((size_t)C * LIVE);
  for (size_t j = 0; j < c.liveSeed.size(); j++) c.liveSeed[j] = mix32(((uint64_t)(c.index + 1) << 56) ^ j);
  std::vector<Channel> chans(C);
  for (Channel& ch : chans) ch = Channel{firstCounter(c.index), 0, 0};

  void *chansD, *logD, *srcD, *dstD, *liveD, *mixD;
  const size_t workBytes = nWork ? nWork * 4 : 4;
  if (!ck(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !ck(cudaMalloc(&chansD, C * sizeof(Channel)), "cudaMalloc channels") ||
      !ck(cudaMalloc(&logD, (C * a.logCap ? C * a.logCap : 1) * sizeof(ncclProfilerDevEvent_t)), "cudaMalloc event log") ||
      !ck(cudaMalloc(&srcD, workBytes), "cudaMalloc src") || !ck(cudaMalloc(&dstD, workBytes), "cudaMalloc dst") ||
      !ck(cudaMalloc(&liveD, c.liveSeed.size() * 4), "cudaMalloc live") ||
      !ck(cudaMalloc(&mixD, C * 4), "cudaMalloc live mix"))
    return false;
  a.chans = (Channel*)chansD;
  a.log = (ncclProfilerDevEvent_t*)logD;
  a.src = (const uint32_t*)srcD;
  a.dst = (uint32_t*)dstD;
  a.live = (uint32_t*)liveD;
  a.liveMix = (uint32_t*)mixD;
  return ck(cudaMemcpy(chansD, chans.data(), C * sizeof(Channel), cudaMemcpyHostToDevice), "cudaMemcpy channels") &&
         ck(cudaMemcpy(srcD, c.src.data(), nWork * 4, cudaMemcpyHostToDevice), "cudaMemcpy src") &&
         ck(cudaMemset(dstD, 0, workBytes), "cudaMemset dst") &&
         ck(cudaMemcpy(liveD, c.liveSeed.data(), c.liveSeed.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy live") &&
         ck(cudaMemset(mixD, 0, C * 4), "cudaMemset live mix") &&
         // cudaMemcpy from pageable memory may return before its DMA lands, and
         // cudaMemset is queued on the legacy stream: the kernels run on
         // non-blocking streams, which wait for neither (seen on the H200 as
         // live values read as zeros, whole-program caller included).
         ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize after setup");
}

static bool launch(Comm& c) {
  caller_kernel<<<opt.channels, kThreads, 0, c.stream>>>(c.args);
  return ck(cudaGetLastError(), "launch caller_kernel");
}

// Checks one communicator after the run: work output, thread 0's live values
// and channel counters. Adds the events its log holds to *emitted.
static void checkComm(Comm& c, bool* dataOk, bool* liveOk, unsigned long long* emitted,
                      std::vector<std::vector<ncclProfilerDevEvent_t>>* logs) {
  const int C = opt.channels;
  const uint32_t E = (uint32_t)c.executions;
  std::vector<uint32_t> dst(c.src.size()), mix(C);
  std::vector<Channel> chans(C);
  std::vector<ncclProfilerDevEvent_t> log((size_t)C * c.args.logCap);
  if (!ck(cudaMemcpy(dst.data(), c.args.dst, dst.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy dst") ||
      !ck(cudaMemcpy(mix.data(), c.args.liveMix, C * 4, cudaMemcpyDeviceToHost), "cudaMemcpy live mix") ||
      !ck(cudaMemcpy(chans.data(), c.args.chans, C * sizeof(Channel), cudaMemcpyDeviceToHost), "cudaMemcpy channels") ||
      !ck(cudaMemcpy(log.data(), c.args.log, log.size() * sizeof(ncclProfilerDevEvent_t), cudaMemcpyDeviceToHost), "cudaMemcpy log")) {
    *dataOk = *liveOk = false;
    return;
  }

  // Every item ran E times: dst = E * src (mod 2^32).
  uint64_t bad = 0;
  for (size_t w = 0; w < dst.size(); w++) bad += dst[w] != E * c.src[w];
  if (bad) {
    fprintf(stderr, "caller: comm %d: %llu of %zu work words wrong\n", c.index, (unsigned long long)bad, dst.size());
    *dataOk = false;
  }

  // Replay thread 0's live values and counters.
  const uint64_t nBatches = (opt.items + opt.batch - 1) / opt.batch;
  const uint64_t perRun = CALLER_RDC ? 2ull * opt.items : 0;
  for (int ch = 0; ch < C; ch++) {
    uint32_t v[LIVE], want = 0;
    for (int j = 0; j < LIVE; j++) v[j] = c.liveSeed[ch * LIVE + j];
    for (uint32_t e = 0; e < E; e++)
      for (uint32_t step = 0; step < 2u * opt.items; step++)
        for (int j = 0; j < LIVE; j++) v[j] = liveStep(v[j], step, j);
    if (E)
      for (int j = 0; j < LIVE; j++) want = want * 31u + v[j];
    const Channel& s = chans[ch];
    const Channel w{firstCounter(c.index) + (uint64_t)opt.items * E, nBatches * E, perRun * E};
    if (mix[ch] != want || s.workCounter != w.workCounter || s.batches != w.batches || s.logged != w.logged) {
      fprintf(stderr,
              "caller: comm %d channel %d: live mix %#x want %#x; workCounter %#llx want %#llx; batches %llu want "
              "%llu; logged %llu want %llu\n",
              c.index, ch, mix[ch], want, (unsigned long long)s.workCounter, (unsigned long long)w.workCounter,
              (unsigned long long)s.batches, (unsigned long long)w.batches, (unsigned long long)s.logged,
              (unsigned long long)w.logged);
      *liveOk = false;
    }
    uint64_t n = s.logged < c.args.logCap ? s.logged : c.args.logCap;
    *emitted += n;
    auto first = log.begin() + (size_t)ch * c.args.logCap;
    (*logs)[ch].assign(first, first + n);
  }
}

static void put32(FILE* f, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  fwrite(b, 1, 4, f);
}
static void put64(FILE* f, uint64_t v) {
  put32(f, (uint32_t)v);
  put32(f, (uint32_t)(v >> 32));
}

// DIR/events-dev<d>-comm<k>.bin: "NCHKEV1\0", u32 device, u32 comm, u64 count,
// then count 24-byte records, little endian, channel by channel in emission order.
static bool writeEvents(const Comm& c, const std::vector<std::vector<ncclProfilerDevEvent_t>>& logs) {
  char path[4096];
  snprintf(path, sizeof path, "%s/events-dev%d-comm%d.bin", opt.events, opt.device, c.index);
  FILE* f = fopen(path, "wb");
  if (!f) return fail(std::string("events: cannot write ") + path + ": " + strerror(errno));
  uint64_t count = 0;
  for (const auto& l : logs) count += l.size();
  fwrite("NCHKEV1\0", 1, 8, f);
  put32(f, (uint32_t)opt.device);
  put32(f, (uint32_t)c.index);
  put64(f, count);
  for (const auto& l : logs)
    for (const ncclProfilerDevEvent_t& e : l) {
      put64(f, e.timestamp);
      put64(f, e.workCounter);
      put32(f, e.funcId);
      unsigned char b[4] = {e.channelId, e.phase, (unsigned char)e.rsvd, (unsigned char)(e.rsvd >> 8)};
      fwrite(b, 1, 4, f);
    }
  bool ok = !ferror(f);
  if (fclose(f) || !ok) return fail(std::string("events: write failed: ") + path);
  return true;
}

#ifdef CALLER_SHARED
extern "C" __attribute__((visibility("default"))) int caller_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  if (!parseArgs(argc, argv)) {
    usage();
    return 2;
  }
  Result r;

  // Work buffers: src and dst per communicator, kept on the host too.
  const double workBytes = 2.0 * opt.comms * opt.channels * opt.items * (double)opt.bytes;
  if (workBytes > 8.0 * (1ull << 30)) {
    fprintf(stderr, "caller: %.1f GiB of work buffers: too much (comms x channels x items x bytes x 2)\n",
            workBytes / (1ull << 30));
    return 2;
  }

  comms.resize(opt.comms);
  for (int k = 0; k < opt.comms; k++) {
    comms[k].index = k;
    comms[k].name = "caller-comm" + std::to_string(k);
    comms[k].commId = fnv1a(comms[k].name);
  }

  void* lib = dlopen(opt.plugin, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fail(std::string("dlopen: ") + dlerror());
    printSummary(r);
    return 3;
  }
  prof = (ncclProfiler_v7_t*)dlsym(lib, "ncclProfiler_v7");
  if (!prof || !prof->init || !prof->getDeviceHook || !prof->finalize) {
    fail("plugin exports no usable ncclProfiler_v7");
    printSummary(r);
    return 3;
  }

  // Communicator init. A CUDA failure here is reported after init, so the
  // plugin still meets this (possibly GPU-less) machine as NCCL would.
  cudaError_t devErr = cudaSuccess;
  if (opt.threads) {
    std::vector<pthread_t> tids(opt.comms);
    pthread_barrier_init(&initBarrier, nullptr, opt.comms);
    for (int k = 0; k < opt.comms; k++)
      if (pthread_create(&tids[k], nullptr, initThread, &comms[k])) {
        fail("pthread_create failed");
        printSummary(r);
        return 3;  // the barrier would never open: exit without joining
      }
    for (pthread_t t : tids) pthread_join(t, nullptr);
    pthread_barrier_destroy(&initBarrier);
    devErr = initThreadErr;
  } else {
    devErr = cudaSetDevice(opt.device);
    if (devErr == cudaSuccess) devErr = cudaFree(0);
    for (Comm& c : comms) initComm(c);
  }
  for (Comm& c : comms)
    if (!c.hook) fprintf(stderr, "caller: comm %d: hook_null (no hook from the plugin): no launches\n", c.index);

  // Main thread's device (the init threads set theirs).
  if (!ck(devErr, "device setup") || !ck(cudaSetDevice(opt.device), "cudaSetDevice")) {
    printSummary(r);
    finalizeAll();
    return 3;
  }
  cudaFuncAttributes attr;
  if (ck(cudaFuncGetAttributes(&attr, caller_kernel), "cudaFuncGetAttributes")) {
    r.regs = attr.numRegs;
    r.localBytes = (long long)attr.localSizeBytes;
  }
  bool setupOk = firstError.empty();
  for (Comm& c : comms) setupOk = setupOk && setupComm(c);
  if (setupOk && opt.graph) {
    // Capture each communicator's launches into its own graph, as NCCL does
    // under a framework's graph capture.
    for (Comm& c : comms) {
      if (!c.hook) continue;
      setupOk = ck(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      for (int l = 0; setupOk && l < opt.launches; l++) setupOk = launch(c);
      cudaGraph_t g = nullptr;
      cudaError_t e = cudaStreamEndCapture(c.stream, &g);  // always end a begun capture
      c.graph = g;
      setupOk = setupOk && ck(e, "cudaStreamEndCapture") &&
                ck(cudaGraphInstantiateWithFlags(&c.exec, c.graph, 0), "cudaGraphInstantiate");
      if (!setupOk) break;
    }
  }
  if (!setupOk) {
    printSummary(r);
    finalizeAll();
    return 3;
  }

  // Run: every communicator's launches (or replays) interleaved on their own
  // streams so they overlap, then one sync. From here on an error may be a
  // kernel fault: the context is gone, so no finalize.
  const double t0 = now();
  bool runOk = true;
  const int rounds = opt.graph ? opt.replays : opt.launches;
  for (int i = 0; runOk && i < rounds; i++)
    for (Comm& c : comms) {
      if (!c.hook) continue;
      runOk = opt.graph ? ck(cudaGraphLaunch(c.exec, c.stream), "cudaGraphLaunch") : launch(c);
      if (!runOk) break;
    }
  runOk = ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize") && runOk;
  r.seconds = now() - t0;
  if (!runOk) {
    printSummary(r);
    return 3;
  }

  r.dataOk = r.liveOk = true;
  std::vector<std::vector<std::vector<ncclProfilerDevEvent_t>>> logs(
      comms.size(), std::vector<std::vector<ncclProfilerDevEvent_t>>(opt.channels));
  for (size_t k = 0; k < comms.size(); k++) checkComm(comms[k], &r.dataOk, &r.liveOk, &r.emitted, &logs[k]);
  if (opt.events)
    for (size_t k = 0; k < comms.size(); k++) writeEvents(comms[k], logs[k]);
  r.ok = firstError.empty();

  finalizeAll();
  printSummary(r);
  if (!r.ok) return 3;
  return r.dataOk && r.liveOk ? 0 : 1;
}
