// Acceptance inside real NCCL built with the device hook (nccl/patches): 1-4
// one-rank communicators on one GPU, initialised concurrently from one thread
// each, each on its own stream, run grouped send/recv to self (distinct send
// and receive buffers: a real NCCL kernel, as 1-rank collectives launch none)
// in a loop, then the same captured in a CUDA graph and replayed; the
// received data is checked after every phase. With --time it measures the
// time per NCCL call instead (comm 0, back-to-back calls, then a graph).
//
//   accept [--comms N] [--iters I] [--graph-iters G] [--replays R] [--bytes B] [--time CALLS]
//
// Prints one "ACCEPT {json}" line. Exit 0 only when everything ran and the
// data is right. NCCL's own profiler plugin machinery (NCCL_PROFILER_PLUGIN)
// brings in ncclhooks; without it the same program is the baseline.
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#define CUDA_OK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fail(#x, cudaGetErrorName(e_)); } } while (0)
#define NCCL_OK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fail(#x, ncclGetErrorString(r_)); } } while (0)

static void fail(const char* what, const char* why) {
  printf("ACCEPT {\"ok\":false,\"error\":\"%s: %s\"}\n", what, why);
  fflush(stdout);
  exit(3);
}

struct Comm {
  int index;
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t stream;
  float *send, *recv;
  double initSeconds;
};

static size_t count;  // floats per message

static double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One communicator's init on its own thread, as a job's threads do: NCCL
// calls the profiler's init, then getDeviceHook, on this thread.
static void* initComm(void* arg) {
  Comm* c = (Comm*)arg;
  CUDA_OK(cudaSetDevice(0));
  double t0 = now();
  NCCL_OK(ncclCommInitRank(&c->comm, 1, c->id, 0));
  c->initSeconds = now() - t0;
  CUDA_OK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&c->send, count * sizeof(float)));
  CUDA_OK(cudaMalloc(&c->recv, count * sizeof(float)));
  std::vector<float> h(count);
  for (size_t i = 0; i < count; i++) h[i] = (float)((i * 7 + c->index * 1000003) % 65521);
  CUDA_OK(cudaMemcpy(c->send, h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  // A pageable cudaMemcpy may return before its DMA lands, and NCCL runs on a
  // non-blocking stream that does not wait for it.
  CUDA_OK(cudaDeviceSynchronize());
  return nullptr;
}

static void sendRecv(Comm* c) {
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(c->send, count, ncclFloat, 0, c->comm, c->stream));
  NCCL_OK(ncclRecv(c->recv, count, ncclFloat, 0, c->comm, c->stream));
  NCCL_OK(ncclGroupEnd());
}

// check compares what comm c received with what it sent, then clears it so
// that the next phase must deliver again.
static bool check(Comm* c) {
  std::vector<float> s(count), r(count);
  CUDA_OK(cudaStreamSynchronize(c->stream));
  CUDA_OK(cudaMemcpy(s.data(), c->send, count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(r.data(), c->recv, count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemset(c->recv, 0, count * sizeof(float)));
  CUDA_OK(cudaDeviceSynchronize());  // the memset runs on the legacy stream, which c->stream does not wait for
  return memcmp(s.data(), r.data(), count * sizeof(float)) == 0;
}

int main(int argc, char** argv) {
  int comms = 1, iters = 50, graphIters = 10, replays = 5, timeCalls = 0;
  size_t bytes = 1 << 20;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&](void) -> long { if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", a.c_str()); exit(2); } return atol(argv[++i]); };
    if (a == "--comms") comms = (int)val();
    else if (a == "--iters") iters = (int)val();
    else if (a == "--graph-iters") graphIters = (int)val();
    else if (a == "--replays") replays = (int)val();
    else if (a == "--bytes") bytes = (size_t)val();
    else if (a == "--time") timeCalls = (int)val();
    else { fprintf(stderr, "usage: accept [--comms N] [--iters I] [--graph-iters G] [--replays R] [--bytes B] [--time CALLS]\n"); return 2; }
  }
  if (comms < 1 || comms > 8 || bytes < 4 || bytes % 4) { fprintf(stderr, "accept: --comms 1..8, --bytes a multiple of 4\n"); return 2; }
  count = bytes / 4;
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CUDA_OK(cudaSetDevice(0));
  std::vector<Comm> cs(comms);
  for (int k = 0; k < comms; k++) {
    cs[k].index = k;
    NCCL_OK(ncclGetUniqueId(&cs[k].id));
  }
  std::vector<pthread_t> threads(comms);
  for (int k = 0; k < comms; k++) pthread_create(&threads[k], nullptr, initComm, &cs[k]);
  for (int k = 0; k < comms; k++) pthread_join(threads[k], nullptr);

  if (timeCalls > 0) {
    // Time per call: back-to-back calls on comm 0 (launch and kernel), and the
    // same calls replayed from a graph (kernel only); best of 5 rounds each.
    Comm* c = &cs[0];
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int w = 0; w < 200; w++) sendRecv(c);
    CUDA_OK(cudaStreamSynchronize(c->stream));
    std::vector<double> stream, graph;
    for (int round = 0; round < 5; round++) {
      CUDA_OK(cudaEventRecord(e0, c->stream));
      for (int i = 0; i < timeCalls; i++) sendRecv(c);
      CUDA_OK(cudaEventRecord(e1, c->stream));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      stream.push_back(ms * 1e3 / timeCalls);
    }
    cudaGraph_t g;
    cudaGraphExec_t ge;
    const int perGraph = 100;
    CUDA_OK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < perGraph; i++) sendRecv(c);
    CUDA_OK(cudaStreamEndCapture(c->stream, &g));
    CUDA_OK(cudaGraphInstantiateWithFlags(&ge, g, 0));
    CUDA_OK(cudaGraphLaunch(ge, c->stream));
    CUDA_OK(cudaStreamSynchronize(c->stream));
    const int launches = std::max(1, timeCalls / perGraph);
    for (int round = 0; round < 5; round++) {
      CUDA_OK(cudaEventRecord(e0, c->stream));
      for (int i = 0; i < launches; i++) CUDA_OK(cudaGraphLaunch(ge, c->stream));
      CUDA_OK(cudaEventRecord(e1, c->stream));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      graph.push_back(ms * 1e3 / (launches * perGraph));
    }
    bool ok = check(c);
    CUDA_OK(cudaGraphExecDestroy(ge));
    CUDA_OK(cudaGraphDestroy(g));
    for (auto& x : cs) NCCL_OK(ncclCommDestroy(x.comm));
    std::sort(stream.begin(), stream.end());
    std::sort(graph.begin(), graph.end());
    printf("ACCEPT {\"ok\":%s,\"nccl\":%d,\"bytes\":%zu,\"calls\":%d,\"us_per_call_stream\":%.4f,\"us_per_call_graph\":%.4f,"
           "\"stream_rounds_us\":[%.4f,%.4f,%.4f,%.4f,%.4f],\"graph_rounds_us\":[%.4f,%.4f,%.4f,%.4f,%.4f]}\n",
           ok ? "true" : "false", version, bytes, timeCalls, stream[0], graph[0], stream[0], stream[1], stream[2], stream[3],
           stream[4], graph[0], graph[1], graph[2], graph[3], graph[4]);
    return ok ? 0 : 1;
  }

  // Streams: every communicator's loop enqueued at once, so they run concurrently.
  bool ok = true;
  double t0 = now();
  for (int i = 0; i < iters; i++)
    for (auto& c : cs) sendRecv(&c);
  for (auto& c : cs) ok = check(&c) && ok;
  double streamSeconds = now() - t0;

  // Graphs: each communicator's calls captured once, replayed concurrently.
  std::vector<cudaGraphExec_t> execs(comms);
  for (auto& c : cs) {
    cudaGraph_t g;
    CUDA_OK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < graphIters; i++) sendRecv(&c);
    CUDA_OK(cudaStreamEndCapture(c.stream, &g));
    CUDA_OK(cudaGraphInstantiateWithFlags(&execs[c.index], g, 0));
    CUDA_OK(cudaGraphDestroy(g));
  }
  t0 = now();
  for (int r = 0; r < replays; r++)
    for (auto& c : cs) CUDA_OK(cudaGraphLaunch(execs[c.index], c.stream));
  for (auto& c : cs) ok = check(&c) && ok;
  double graphSeconds = now() - t0;
  for (auto& e : execs) CUDA_OK(cudaGraphExecDestroy(e));
  CUDA_OK(cudaDeviceSynchronize());
  for (auto& c : cs) {
    CUDA_OK(cudaFree(c.send));
    CUDA_OK(cudaFree(c.recv));
    CUDA_OK(cudaStreamDestroy(c.stream));
    NCCL_OK(ncclCommDestroy(c.comm));  // the profiler's finalize
  }
  printf("ACCEPT {\"ok\":%s,\"nccl\":%d,\"comms\":%d,\"bytes\":%zu,\"iters\":%d,\"graph_iters\":%d,\"replays\":%d,"
         "\"calls\":%d,\"stream_seconds\":%.4f,\"graph_seconds\":%.4f,\"max_init_seconds\":%.3f}\n",
         ok ? "true" : "false", version, comms, bytes, iters, graphIters, replays, comms * (iters + graphIters * replays),
         streamSeconds, graphSeconds, std::max_element(cs.begin(), cs.end(), [](const Comm& a, const Comm& b) { return a.initSeconds < b.initSeconds; })->initSeconds);
  return ok ? 0 : 1;
}
