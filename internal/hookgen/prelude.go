package hookgen

import "github.com/ncclhooks/ncclhooks/internal/abi"

// prelude maps the few device facilities the hooks use onto host
// equivalents, so that one source serves NVRTC and the system C compiler.
// The GPU branch includes nothing: NVRTC has no libc headers.
//
// The NCCL ABI (the event, the hook type, the phases) is the text of
// abi/ncclhooks_abi.h, embedded whole (abiSection) rather than included:
// neither NVRTC nor the cpu backend's compiler is given an include path.
//
// Integer expression helpers give every operation defined, two's-complement
// results (expr-lang's int is Go's int64, which wraps): C signed overflow
// would be undefined behaviour.
var prelude = `/* ---- prelude: device intrinsics and their host equivalents ---- */
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

` + abiSection + `
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
/* p is 16-byte aligned: one vector load, the counterpart of hk_store64x2. */
HK_FN void hk_load64x2(const hk_u64* p, hk_u64* a, hk_u64* b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}
/* hk_load64x2 through the L1, for the pairing entry: this thread's own START wrote it, so
   the L1 holds either that entry or, after the block moved to another multiprocessor, a
   stale one whose tag does not match (a lost pairing, never a wrong duration); a load
   that must reach the L2 costs the STOP a round trip (docs/ARCHITECTURE.md "Duration pairing"). */
HK_FN void hk_load64x2_l1(const hk_u64* p, hk_u64* a, hk_u64* b) {
  asm volatile("ld.global.ca.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}
/* Memory the host fills before the hook is handed out and never changes while a kernel
   runs (the function-id sets): through the read-only data cache. */
HK_FN hk_u32 hk_load32_ro(const hk_u32* p) {
  hk_u32 r;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
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
/* The second word first, the first with release: a reader that loads the first word
   with acquire (hk_load64x2) and finds the value it expects also finds the second. */
HK_FN void hk_store64x2(hk_u64* p, hk_u64 a, hk_u64 b) {
  hk_store64(p + 1, b);
  __atomic_store_n(p, a, __ATOMIC_RELEASE);
}
HK_FN void hk_load64x2(const hk_u64* p, hk_u64* a, hk_u64* b) {
  *a = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  *b = hk_load64(p + 1);
}
HK_FN void hk_load64x2_l1(const hk_u64* p, hk_u64* a, hk_u64* b) { hk_load64x2(p, a, b); }
HK_FN hk_u32 hk_load32_ro(const hk_u32* p) { return hk_load32(p); }
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

/* ---- division and remainder without a call (docs/ARCHITECTURE.md "Safe for every
   caller"): the compiler implements double division and 64-bit remainder by a
   non-constant with subroutine calls, and a call needs a stack frame, which a hook
   called from another module must not have. ---- */
#if defined(HK_GPU) || defined(HK_SOFT_DIV)
#ifdef HK_GPU
HK_FN double hk_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
HK_FN double hk_dmul(double a, double b) { return __dmul_rn(a, b); }
HK_FN hk_u64 hk_dbits(double d) { return (hk_u64)__double_as_longlong(d); }
HK_FN double hk_bitsd(hk_u64 u) { return __longlong_as_double((long long)u); }
/* The reciprocal estimate the compiler's own division starts from (MUFU.RCP64H). */
HK_FN double hk_rcp_approx(double b) { double y; asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(b)); return y; }
#else /* host build of the device algorithm, for its tests */
HK_FN double hk_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
HK_FN double hk_dmul(double a, double b) { return a * b; }
HK_FN hk_u64 hk_dbits(double d) { union { double d; hk_u64 u; } x; x.d = d; return x.u; }
HK_FN double hk_bitsd(hk_u64 u) { union { double d; hk_u64 u; } x; x.u = u; return x.d; }
/* A deliberately coarse estimate (about 2^-23 relative, like the hardware's): the two
   Newton steps must make up for it. Subnormal b gives +-inf, as with .ftz. */
HK_FN double hk_rcp_approx(double b) {
  const hk_u64 e = (hk_dbits(b) >> 52) & 0x7ffu;
  if (e == 0) return hk_bitsd((hk_dbits(b) & 0x8000000000000000ULL) | 0x7ff0000000000000ULL);
  const float f = 1.0f / (float)b;
  return hk_bitsd(hk_dbits((double)f) & 0xffffffff00000000ULL);
}
#endif

/* The compiler's fast path, step for step: an estimate, two Newton steps, the quotient
   and one residual correction. Correctly rounded while a, b and the quotient stay
   inside the range hk_div_fast_ok checks (the compiler's own conditions). */
HK_FN double hk_div_fast(double a, double b) {
  double y = hk_rcp_approx(b);
  double e = hk_fma(-b, y, 1.0);
  e = hk_fma(e, e, e);
  y = hk_fma(y, e, y);
  e = hk_fma(-b, y, 1.0);
  y = hk_fma(y, e, y);
  const double q = hk_dmul(a, y);
  const double r = hk_fma(-b, q, a);
  return hk_fma(y, r, q);
}

HK_FN int hk_div_fast_ok(double a, double b, double q) {
  const hk_u32 ahi = (hk_u32)(hk_dbits(a) >> 32) & 0x7fffffffu;
  const hk_u32 bhi = (hk_u32)(hk_dbits(b) >> 32);
  const hk_u32 qhi = (hk_u32)(hk_dbits(q) >> 32) & 0x7fffffffu;
  return ahi > 0x035b7333u && (bhi & 0x7f800000u) != 0x7f800000u && qhi > 0x00055555u && qhi <= 0x7f800000u;
}

/* |x| as m * 2^e with m in [1, 2), for finite nonzero x (subnormals included). */
HK_FN double hk_frexp1(double x, int* e) {
  hk_u64 u = hk_dbits(x) & 0x7fffffffffffffffULL;
  int be = (int)(u >> 52);
  hk_u64 m = u & 0x000fffffffffffffULL;
  if (be == 0) { /* subnormal: normalise the mantissa */
    const int lz = hk_clz64(m) - 11;
    m = (m << lz) & 0x000fffffffffffffULL;
    be = 1 - lz;
  }
  *e = be - 1023;
  return hk_bitsd(0x3ff0000000000000ULL | m);
}

/* Everything the fast path leaves: NaN, infinities, zeros, and operands or quotients
   near the ends of the range. The mantissas are divided in the safe range, then the
   result is scaled and, when it is subnormal, rounded once by hand. */
HK_FN double hk_div_slow(double a, double b) {
  const hk_u64 ua = hk_dbits(a), ub = hk_dbits(b);
  const hk_u64 sign = (ua ^ ub) & 0x8000000000000000ULL;
  const hk_u64 aa = ua & 0x7fffffffffffffffULL, ab = ub & 0x7fffffffffffffffULL;
  const hk_u64 inf = 0x7ff0000000000000ULL;
  if (aa > inf || ab > inf) return a + b; /* NaN in, (quiet) NaN out */
  if (aa == inf) return ab == inf ? hk_bitsd(0x7ff8000000000000ULL) : hk_bitsd(sign | inf);
  if (ab == inf) return hk_bitsd(sign);
  if (ab == 0) return aa == 0 ? hk_bitsd(0x7ff8000000000000ULL) : hk_bitsd(sign | inf);
  if (aa == 0) return hk_bitsd(sign);
  int ea, eb;
  const double ma = hk_frexp1(a, &ea), mb = hk_frexp1(b, &eb);
  const double qm = hk_div_fast(ma, mb); /* in (0.5, 2): correctly rounded */
  const double rm = hk_fma(-mb, qm, ma); /* exact: > 0 if the quotient is above qm */
  hk_u64 uq = hk_dbits(qm);
  int e = (int)(uq >> 52) - 1023 + ea - eb; /* unbiased exponent of the result */
  if (e > 1023) return hk_bitsd(sign | inf);
  if (e >= -1022) return hk_bitsd(sign | ((hk_u64)(e + 1023) << 52) | (uq & 0x000fffffffffffffULL));
  /* Subnormal: drop s low bits of the 53-bit mantissa, rounding to nearest even on the
     exact quotient (the remainder's sign breaks ties and near-ties). */
  const int s = -1022 - e;
  if (s > 54) return hk_bitsd(sign);
  const hk_u64 m = (uq & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
  hk_u64 q = m >> s;
  const hk_u64 rest = m & ((1ULL << s) - 1ULL), half = 1ULL << (s - 1);
  if (rest > half || (rest == half && (rm > 0.0 || (rm == 0.0 && (q & 1ULL))))) q++;
  return hk_bitsd(sign | q); /* a carry into bit 52 is the smallest normal, as it should be */
}

/* a / b, correctly rounded as IEEE 754 (and Go) divides. */
HK_FN double hk_div(double a, double b) {
  const double q = hk_div_fast(a, b);
  return hk_div_fast_ok(a, b, q) ? q : hk_div_slow(a, b);
}

/* a % b for a divisor only known at run time: shift and subtract (at most 64 steps).
   A constant divisor uses the C operator, which compiles to a multiplication. */
HK_FN hk_u64 hk_urem(hk_u64 n, hk_u64 d) {
  if (n < d) return n;
  int s = hk_clz64(d) - hk_clz64(n);
  hk_u64 dd = d << s;
  for (; s >= 0; s--) {
    if (n >= dd) n -= dd;
    dd >>= 1;
  }
  return n;
}
HK_FN hk_i64 hk_mod(hk_i64 a, hk_i64 b) { /* sign of the dividend, as Go's % */
  if (b == 0 || b == -1) return 0;
  const hk_u64 ua = a < 0 ? 0ULL - (hk_u64)a : (hk_u64)a, ub = b < 0 ? 0ULL - (hk_u64)b : (hk_u64)b;
  const hk_u64 r = hk_urem(ua, ub);
  return a < 0 ? (hk_i64)(0ULL - r) : (hk_i64)r;
}
#else
HK_FN double hk_div(double a, double b) { return a / b; }
/* x % 0 is 0 on the device (expr-lang would fail the evaluation); x % -1 is 0 as in Go. */
HK_FN hk_i64 hk_mod(hk_i64 a, hk_i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
#endif
/* a % k for a constant k other than 0 and -1 (the generator checks). */
#define hk_mod_const(a, k) ((hk_i64)(a) % (hk_i64)(k))

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

// abiSection is abi/ncclhooks_abi.h in the generated source, between two
// marker lines.
var abiSection = "/* ---- abi/ncclhooks_abi.h: the NCCL ABI ---- */\n" + abi.ModuleHeader + "/* ---- end of abi/ncclhooks_abi.h ---- */\n"
