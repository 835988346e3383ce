// What reading records the GPU writes into host-mapped memory costs the host
// (bench/RESULTS.md, "The drain's host path, sixth session"): a 3 MiB buffer
// of 48-byte records (all-events' slot size), read as the poller reads it,
// one 8-byte load per word, after the GPU wrote it with 16-byte stores (as a
// hook does), after the copy engine wrote it (cudaMemcpy, whole lines), and
// after the CPU wrote it, with 1 and 4 reading threads; and while a kernel
// keeps writing it at a fixed rate, the reader following its head.
//   nvcc -O2 -arch=sm_90 -o hostread hostread.cu -lpthread && ./hostread
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RECS 65536
#define WORDS 6 /* 48 bytes */
#define CHECK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Every record once, three 16-byte stores each, as a record hook stores one. */
__global__ void fill(uint64_t *buf, uint32_t stamp) {
  for (uint64_t r = blockIdx.x * blockDim.x + threadIdx.x; r < RECS; r += gridDim.x * blockDim.x) {
    uint64_t s = (uint64_t)(stamp + r) << 32;
    for (int w = 0; w < WORDS; w += 2)
      asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(buf + r * WORDS + w), "l"(s | w), "l"(s | (w + 1)) : "memory");
  }
}

/* One writer per block, records in turn round the buffer, paced to `rate`
   records/s over all blocks; head[0] counts records written (a store after
   the record's, no fence: the reader checks stamps, as the drain does). */
__global__ void stream(uint64_t *buf, volatile uint64_t *head, uint64_t total, double rate) {
  if (threadIdx.x) return;
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (uint64_t r = blockIdx.x; r < total; r += gridDim.x) {
    uint64_t due = t0 + (uint64_t)(r / rate * 1e9), t;
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t < due);
    uint64_t s = (uint64_t)(uint32_t)(r + 1) << 32, *p = buf + (r % RECS) * WORDS;
    for (int w = 0; w < WORDS; w += 2)
      asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p + w), "l"(s | w), "l"(s | (w + 1)) : "memory");
    if (blockIdx.x == 0) *head = r;
  }
}

struct part { const uint64_t *buf; size_t from, to; uint64_t sum; };
static void *readPart(void *a) {
  struct part *p = (struct part *)a;
  uint64_t s = 0;
  for (size_t i = p->from * WORDS; i < p->to * WORDS; i++) s += __atomic_load_n(p->buf + i, __ATOMIC_RELAXED);
  p->sum = s;
  return 0;
}

/* ns per record to read the whole buffer with n threads. */
static double readAll(const uint64_t *buf, int n) {
  pthread_t th[8];
  struct part ps[8];
  double t = now();
  for (int i = 0; i < n; i++) {
    ps[i] = (struct part){buf, (size_t)RECS * i / n, (size_t)RECS * (i + 1) / n, 0};
    pthread_create(&th[i], 0, readPart, &ps[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], 0);
  return (now() - t) * 1e9 / RECS;
}

int main(void) {
  uint64_t *h, *d, *dev;
  size_t bytes = (size_t)RECS * WORDS * 8;
  CHECK(cudaHostAlloc((void **)&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
  CHECK(cudaMalloc((void **)&dev, bytes));
  static uint64_t plain[RECS * WORDS];
  for (int threads = 1; threads <= 4; threads *= 4) {
    double g = 0, c = 0, m = 0, p = 0;
    const int rounds = 20;
    for (int r = 0; r < rounds; r++) {
      fill<<<132, 128>>>(d, r);
      CHECK(cudaDeviceSynchronize());
      g += readAll(h, threads);
      m += readAll(h, threads); /* again: now in the host's caches */
      fill<<<132, 128>>>(dev, r);
      CHECK(cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost));
      c += readAll(h, threads);
      memset(plain, r, sizeof plain);
      p += readAll(plain, threads);
    }
    printf("threads %d: ns per 48-byte record: after GPU stores %.2f, read again %.2f, after cudaMemcpy %.2f, after CPU stores %.2f\n",
           threads, g / rounds, m / rounds, c / rounds, p / rounds);
  }
  /* Following a writer, as the poller does: read each record once its
     stamp is there, count the reads that found it not yet written. */
  volatile uint64_t *head;
  CHECK(cudaHostAlloc((void **)&head, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  uint64_t *dhead;
  CHECK(cudaHostGetDevicePointer((void **)&dhead, (void *)head, 0));
  for (double rate = 2e7; rate <= 6.1e7; rate += 2e7) {
    uint64_t total = (uint64_t)(rate * 0.1);
    *head = 0;
    memset(h, 0, bytes);
    stream<<<64, 32>>>(d, dhead, total, rate);
    double t0 = now();
    uint64_t r = 0, lost = 0, waits = 0, sum = 0;
    while (r < total) {
      const uint64_t *p = h + (r % RECS) * WORDS;
      uint64_t s = (uint64_t)(uint32_t)(r + 1), w0 = __atomic_load_n(p, __ATOMIC_RELAXED);
      if ((w0 >> 32) != s) {
        if ((uint32_t)((w0 >> 32) - s) < (1u << 31) && (w0 >> 32) != s) { /* lapped */
          uint64_t hd = *head;
          lost += hd > r ? hd - r : 1;
          r = hd > r ? hd : r + 1;
          continue;
        }
        waits++;
        continue;
      }
      uint64_t x = w0;
      for (int w = 1; w < WORDS; w++) x += __atomic_load_n(p + w, __ATOMIC_RELAXED);
      sum += x;
      r++;
    }
    CHECK(cudaDeviceSynchronize());
    double wall = now() - t0;
    printf("following a writer at %.0e rec/s: %lu records in %.1f ms, lapped %lu (%.1f%%), %lu polls found the next record not yet written (sum %lx)\n",
           rate, (unsigned long)total, wall * 1e3, (unsigned long)lost, 100.0 * lost / total, (unsigned long)waits, (unsigned long)sum & 0xf);
  }
  return 0;
}
