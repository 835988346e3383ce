package hookgen

// prelude maps the few device facilities the hooks use onto host
// equivalents, so that one source serves NVRTC and the system C compiler.
// The GPU branch includes nothing: NVRTC has no libc headers.
//
// Integer expression helpers give every operation defined, two's-complement
// results (expr-lang's int is Go's int64, which wraps): C signed overflow
// would be undefined behaviour.
const prelude = `/* ---- prelude: device intrinsics and their host equivalents ---- */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HK_GPU 1
#define HK_FN static __device__ __forceinline__
#define HK_VAR __device__
#define HK_RESTRICT __restrict__
#define HK_ENTRY __device__
#pragma nv_diag_suppress 177 /* helpers a profile does not use */
#else
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_getcpu, CLOCK_MONOTONIC_RAW */
#endif
#include <sched.h>
#include <time.h>
#define HK_FN static inline
#define HK_VAR
#define HK_RESTRICT __restrict
#define HK_ENTRY __attribute__((visibility("default")))
#endif
#ifdef __cplusplus
#define HK_EXTERN_C_BEGIN extern "C" {
#define HK_EXTERN_C_END }
#else
#define HK_EXTERN_C_BEGIN
#define HK_EXTERN_C_END
#endif

typedef unsigned char hk_u8;
typedef unsigned short hk_u16;
typedef unsigned int hk_u32;
typedef unsigned long long hk_u64;
typedef signed char hk_i8;
typedef short hk_i16;
typedef int hk_i32;
typedef long long hk_i64;

/* The event NCCL passes to the hook (NCCL pull request 2285), 24 bytes. */
typedef struct {
  hk_u64 timestamp;   /* device globaltimer, ns */
  hk_u64 workCounter; /* monotonic per channel */
  hk_u32 funcId;      /* index into NCCL's device function table */
  hk_u8 channelId;
  hk_u8 phase;        /* START = 0, STOP = 1 */
  hk_u16 rsvd;
} ncclProfilerDevEvent_t;

#ifdef HK_GPU
/* Every pointer the hook touches is global memory (device memory, or host-mapped memory
   through its device address), but reaches the hook as a generic pointer: spelled with
   .global, the accesses skip the generic-to-shared check and the atomics whose result is
   unused become fire-and-forget reductions (red). */
HK_FN hk_u64 hk_fetch_inc(hk_u64* p) {
  hk_u64 r;
  asm volatile("atom.global.add.u64 %0, [%1], 1;" : "=l"(r) : "l"(p) : "memory");
  return r;
}
HK_FN void hk_red_add(hk_u64* p, hk_u64 v) { asm volatile("red.global.add.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory"); }
HK_FN void hk_red_add_f64(hk_u64* p, double v) { asm volatile("red.global.add.f64 [%0], %1;" : : "l"(p), "d"(v) : "memory"); }
HK_FN void hk_red_max(hk_u64* p, hk_u64 v) { asm volatile("red.global.max.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory"); }
HK_FN hk_u64 hk_load64(const hk_u64* p) {
  hk_u64 r;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(r) : "l"(p) : "memory");
  return r;
}
HK_FN hk_u32 hk_load32(const hk_u32* p) {
  hk_u32 r;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
  return r;
}
HK_FN void hk_store64(hk_u64* p, hk_u64 v) { asm volatile("st.volatile.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory"); }
HK_FN void hk_store32(hk_u32* p, hk_u32 v) { asm volatile("st.volatile.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory"); }
/* p is 16-byte aligned: one vector store, each 8-byte half single-copy atomic. */
HK_FN void hk_store64x2(hk_u64* p, hk_u64 a, hk_u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" : : "l"(p), "l"(a), "l"(b) : "memory");
}
HK_FN hk_u32 hk_smid(void) { hk_u32 r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }
HK_FN hk_u32 hk_warpid(void) { hk_u32 r; asm volatile("mov.u32 %0, %%warpid;" : "=r"(r)); return r; }
HK_FN hk_u64 hk_globaltimer(void) { hk_u64 r; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(r)); return r; }
HK_FN hk_u64 hk_clock(void) { return (hk_u64)clock64(); }
HK_FN int hk_clz64(hk_u64 v) { return __clzll((long long)v); }
HK_FN hk_u32 hk_f32_bits(float f) { return __float_as_uint(f); }
HK_FN hk_u64 hk_f64_bits(double d) { return (hk_u64)__double_as_longlong(d); }
#else
HK_FN hk_u64 hk_fetch_inc(hk_u64* p) { return __atomic_fetch_add(p, 1ULL, __ATOMIC_RELAXED); }
HK_FN void hk_red_add(hk_u64* p, hk_u64 v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
HK_FN hk_u64 hk_load64(const hk_u64* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
HK_FN hk_u32 hk_load32(const hk_u32* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
HK_FN void hk_store64(hk_u64* p, hk_u64 v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
HK_FN void hk_store32(hk_u32* p, hk_u32 v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
HK_FN void hk_store64x2(hk_u64* p, hk_u64 a, hk_u64 b) { hk_store64(p, a); hk_store64(p + 1, b); }
HK_FN hk_u32 hk_f32_bits(float f) { union { float f; hk_u32 u; } x; x.f = f; return x.u; }
HK_FN hk_u64 hk_f64_bits(double d) { union { double d; hk_u64 u; } x; x.d = d; return x.u; }
HK_FN double hk_f64_from_bits(hk_u64 u) { union { double d; hk_u64 u; } x; x.u = u; return x.d; }
HK_FN void hk_red_add_f64(hk_u64* p, double v) {
  hk_u64 old = hk_load64(p);
  while (!__atomic_compare_exchange_n(p, &old, hk_f64_bits(hk_f64_from_bits(old) + v), 1,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}
HK_FN void hk_red_max(hk_u64* p, hk_u64 v) {
  hk_u64 old = hk_load64(p);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}
/* The multiprocessor stands for the CPU the calling thread runs on. */
HK_FN hk_u32 hk_smid(void) { int c = sched_getcpu(); return c < 0 ? 0u : (hk_u32)c; }
/* A thread keeps one slot id for its life, as a block keeps its warp slot. */
static hk_u32 hk_next_thread_slot;
static __thread hk_u32 hk_thread_slot;
HK_FN hk_u32 hk_warpid(void) {
  if (hk_thread_slot == 0) hk_thread_slot = 1u + __atomic_fetch_add(&hk_next_thread_slot, 1u, __ATOMIC_RELAXED);
  return hk_thread_slot - 1u;
}
HK_FN hk_u64 hk_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (hk_u64)ts.tv_sec * 1000000000ULL + (hk_u64)ts.tv_nsec;
}
HK_FN hk_u64 hk_globaltimer(void) { return hk_clock_ns(CLOCK_REALTIME); }
HK_FN hk_u64 hk_clock(void) { return hk_clock_ns(CLOCK_MONOTONIC_RAW); }
HK_FN int hk_clz64(hk_u64 v) { return v == 0 ? 64 : __builtin_clzll(v); }
#endif

/* Expression helpers: int64 with wrap-around, as expr-lang (Go) evaluates. */
HK_FN hk_i64 hk_add(hk_i64 a, hk_i64 b) { return (hk_i64)((hk_u64)a + (hk_u64)b); }
HK_FN hk_i64 hk_sub(hk_i64 a, hk_i64 b) { return (hk_i64)((hk_u64)a - (hk_u64)b); }
HK_FN hk_i64 hk_mul(hk_i64 a, hk_i64 b) { return (hk_i64)((hk_u64)a * (hk_u64)b); }
HK_FN hk_i64 hk_neg(hk_i64 a) { return (hk_i64)(0ULL - (hk_u64)a); }
HK_FN hk_i64 hk_abs(hk_i64 a) { return a < 0 ? hk_neg(a) : a; }
/* min keeps a unless it is greater than b, max unless it is less: expr-lang's order. */
HK_FN hk_i64 hk_min_i(hk_i64 a, hk_i64 b) { return a > b ? b : a; }
HK_FN hk_i64 hk_max_i(hk_i64 a, hk_i64 b) { return a < b ? b : a; }
HK_FN double hk_min_f(double a, double b) { return a > b ? b : a; }
HK_FN double hk_max_f(double a, double b) { return a < b ? b : a; }
HK_FN double hk_abs_f(double a) { return a < 0.0 ? -a : a; } /* keeps -0.0, as Go's abs does */
/* x % 0 is 0 on the device (expr-lang would fail the evaluation); x % -1 is 0 as in Go. */
HK_FN hk_i64 hk_mod(hk_i64 a, hk_i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
/* Shift counts as in Go; a negative count (an error in expr-lang) gives 0. */
HK_FN hk_i64 hk_shl(hk_i64 a, hk_i64 n) { return (n < 0 || n > 63) ? 0 : (hk_i64)((hk_u64)a << n); }
HK_FN hk_i64 hk_shr(hk_i64 a, hk_i64 n) { return n < 0 ? 0 : n > 63 ? (a < 0 ? -1 : 0) : (a >> n); }
HK_FN hk_i64 hk_ushr(hk_i64 a, hk_i64 n) { return (n < 0 || n > 63) ? 0 : (hk_i64)((hk_u64)a >> n); }
/* Float to integer field: truncate toward zero, saturate, NaN -> 0. */
HK_FN hk_i64 hk_f2i(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775807.0) return 9223372036854775807LL;
  if (x <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  return (hk_i64)x;
}
/* Aggregate encodings (docs/ARCHITECTURE.md): int64 ordered as uint64. */
HK_FN hk_u64 hk_enc(hk_i64 v) { return (hk_u64)v ^ 0x8000000000000000ULL; }
HK_FN hk_u32 hk_log2_bucket(hk_i64 v) { return v <= 0 ? 0u : (hk_u32)(64 - hk_clz64((hk_u64)v)); }
HK_FN hk_u32 hk_key(hk_u32 id, hk_u32 n) { return id < n ? id : n; }
`
