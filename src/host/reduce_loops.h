/*
 * The CPU reduce loops, written once and compiled once per instruction set (reduce_*.c
 * define SYMCOLL_REDUCE_TABLE and SYMCOLL_REDUCE_NAME, then include this file; the build
 * gives each its -m flags). The loops are shaped for the compiler's vectoriser: elements go
 * in blocks of BLK, and for each block every source is combined into a local accumulator
 * array by a loop over the block, so the inner loop is a plain loop over contiguous
 * elements (the source loop inside the element loop, through the pointer table, is what
 * defeats vectorisation). Conversions are written with selects instead of branches so they
 * vectorise too; where the instruction set converts halves itself (F16C, AArch64), that is
 * used. Every build computes the same function bit for bit: tests compare them.
 */
#include <stdint.h>
#include <string.h>

#include "reduce.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define BLK 64

/* ---- element conversions ------------------------------------------------------------- */

/* core/half.h's, which vectorise (selects, no branches). */
#define h2f symcoll__f16_to_f32
#define f2h symcoll__f32_to_f16
#define bf2f symcoll__bf16_to_f32
#define f2bf symcoll__f32_to_bf16

/* ---- block loads and stores (acc <- BLK or fewer elements) ------------------------------ */

#define LOADER(NAME, T, A, CONV)                                          \
  static inline void NAME(A *restrict a, const T *restrict p, size_t m) { \
    for (size_t j = 0; j < m; j++) a[j] = CONV(p[j]);                     \
  }
#define STORER(NAME, T, A, CONV)                                          \
  static inline void NAME(T *restrict p, const A *restrict a, size_t m) { \
    for (size_t j = 0; j < m; j++) p[j] = CONV(a[j]);                     \
  }
#define AS_IS(x) (x)
#define F8_4(x) symcoll__fp8_to_f32((x), 0)
#define F8_5(x) symcoll__fp8_to_f32((x), 1)
#define TO_F8_4(x) symcoll__f32_to_fp8((x), 0)
#define TO_F8_5(x) symcoll__f32_to_fp8((x), 1)

#if defined(__AVX512F__)
/* Block loads and stores of 16-bit floats a 512-bit vector at a time (WIDEN / NARROW convert
 * 16 elements), the element conversion for the tail. */
#define VEC16_LOADER(NAME, WIDEN, ELEM)                                                           \
  static inline void NAME(float *restrict a, const uint16_t *restrict p, size_t m) {              \
    size_t j = 0;                                                                                 \
    for (const size_t full = m & ~(size_t)15; j < full; j += 16)                                  \
      _mm512_storeu_ps(a + j, WIDEN(_mm256_loadu_si256((const __m256i *)(const void *)(p + j)))); \
    for (; j < m; j++) a[j] = ELEM(p[j]);                                                         \
  }
#define VEC16_STORER(NAME, NARROW, ELEM)                                               \
  static inline void NAME(uint16_t *restrict p, const float *restrict a, size_t m) {   \
    size_t j = 0;                                                                      \
    for (const size_t full = m & ~(size_t)15; j < full; j += 16)                       \
      _mm256_storeu_si256((__m256i *)(void *)(p + j), NARROW(_mm512_loadu_ps(a + j))); \
    for (; j < m; j++) p[j] = ELEM(a[j]);                                              \
  }
#endif
/* v[0..m) <- v rounded through ST's 16-bit type and back with LD, stored to dst if given (m <= 16:
 * the block loads and stores unroll, and v stays in registers) */
#define ROUND_TRIP(NAME, LD, ST)                                                 \
  static inline void NAME(float *restrict v, uint16_t *restrict dst, size_t m) { \
    uint16_t t[16];                                                              \
    ST(t, v, m);                                                                 \
    if (dst) memcpy(dst, t, m * sizeof *t);                                      \
    LD(v, t, m);                                                                 \
  }

#if defined(__AVX512BF16__)
/* AVX-512 BF16 rounds fp32 to bf16 as f2bf does (to nearest even, NaNs quiet with the top of
 * their payload) but flushes subnormal inputs to zero: a vector holding one takes f2bf. */
#define HW_BF16 1 /* ld_bf16 / st_bf16 convert a vector at a time; bf16_narrow / bf16_widen */
static inline __m256i bf16_narrow(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 sub = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007fffff)) &
                        _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
  if (!sub) return (__m256i)_mm512_cvtneps_pbh(x);
  float v[16];
  uint16_t t[16];
  _mm512_storeu_ps(v, x);
  for (int k = 0; k < 16; k++) t[k] = f2bf(v[k]);
  return _mm256_loadu_si256((const __m256i *)(const void *)t);
}
static inline __m512 bf16_widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
VEC16_LOADER(ld_bf16, bf16_widen, bf2f)
VEC16_STORER(st_bf16, bf16_narrow, f2bf)
ROUND_TRIP(rt_bf16, ld_bf16, st_bf16)
#else
LOADER(ld_bf16, uint16_t, float, bf2f)
STORER(st_bf16, uint16_t, float, f2bf)
#endif
LOADER(ld_fp8_e4m3, uint8_t, float, F8_4)
STORER(st_fp8_e4m3, uint8_t, float, TO_F8_4)
LOADER(ld_fp8_e5m2, uint8_t, float, F8_5)
STORER(st_fp8_e5m2, uint8_t, float, TO_F8_5)

#if defined(__aarch64__) || defined(__AVX512F__) || defined(__F16C__)
#define HW_HALVES 1 /* ld_f16 / st_f16 below convert in hardware, a vector at a time */
#endif
#if defined(__aarch64__)
/* AArch64 converts halves itself, with the same rounding and NaN handling. */
static inline void ld_f16(float *restrict a, const uint16_t *restrict p, size_t m) {
  const __fp16 *h = (const __fp16 *)(const void *)p;
  for (size_t j = 0; j < m; j++) a[j] = (float)h[j];
}
static inline void st_f16(uint16_t *restrict p, const float *restrict a, size_t m) {
  __fp16 *h = (__fp16 *)(void *)p;
  for (size_t j = 0; j < m; j++) h[j] = (__fp16)a[j];
}
#elif defined(__AVX512F__)
static inline __m512 f16_widen(__m256i h) {
  return _mm512_cvtph_ps(h);
}
static inline __m256i f16_narrow(__m512 x) {
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
VEC16_LOADER(ld_f16, f16_widen, h2f)
VEC16_STORER(st_f16, f16_narrow, f2h)
#elif defined(__F16C__)
static inline void ld_f16(float *restrict a, const uint16_t *restrict p, size_t m) {
  size_t j = 0;
  const size_t full = m & ~(size_t)7;
  for (; j < full; j += 8)
    _mm256_storeu_ps(a + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + j))));
  for (; j < m; j++) a[j] = h2f(p[j]);
}
static inline void st_f16(uint16_t *restrict p, const float *restrict a, size_t m) {
  size_t j = 0;
  const size_t full = m & ~(size_t)7;
  for (; j < full; j += 8)
    _mm_storeu_si128((__m128i *)(void *)(p + j),
                     _mm256_cvtps_ph(_mm256_loadu_ps(a + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; j < m; j++) p[j] = f2h(a[j]);
}
#else
LOADER(ld_f16, uint16_t, float, h2f)
STORER(st_f16, uint16_t, float, f2h)
#endif
#if defined(HW_HALVES)
ROUND_TRIP(rt_f16, ld_f16, st_f16)
#endif

/* ---- the loops ------------------------------------------------------------------------ */

#define OP_SUM(a, x) ((a) + (x))
/* The same expressions as the GPU kernels (and x86 max/min instructions): NaN in x wins. */
#define OP_MAX(a, x) ((a) > (x) ? (a) : (x))
#define OP_MIN(a, x) ((a) < (x) ? (a) : (x))
/* Integers multiply in the unsigned type of their width, as they add: wrap-around, no
 * undefined overflow (8-bit operands promote to int, whose range holds their product). */
#define OP_PROD(a, x) ((a) * (x))
/* Floats: which NaN a sum or product of two NaNs returns depends on the operand order the
 * compiler picks (x86 returns the first operand's), and compilers commute them freely, each
 * build its own way. Where acc is a NaN the second operand is acc itself, so the result is
 * acc's NaN, quiet, whatever the order; otherwise at most one operand is a NaN, and one NaN
 * (or inf x 0, inf - inf) gives the same bits in either order. Written as a select between
 * loaded values (no branch), which every build vectorises (SSE2: cmpneq, and, andn, or).
 * PROD and AVG use it, and fp8 SUM, whose conversions cost far more than the select (an e4m3
 * NaN's code is its sign: builds of e4m3 sums differed there). Other floats' SUM keeps the
 * plain add, 5-20% faster in cache (bf16 at 256 KiB - 4 MiB: 4-11%); their two-NaN payload is
 * the one place where builds may still differ. */
#define OP_SUM_F(a, x) ((a) + ((a) == (a) ? (x) : (a)))
#define OP_PROD_F(a, x) ((a) * ((a) == (a) ? (x) : (a)))

/* What the accumulator becomes before it is stored: itself, or (AVG) the sum divided once by
 * the number of sources, in the accumulation type. Integer sums wrapped around in the unsigned
 * type; a signed average divides the signed value those bits hold (C's division, truncating
 * toward zero), so -7 / 2 is -3 on every rank and every build. */
#define FIN_KEEP(a, nsrc) (a)
static inline float avg_f32(float a, int nsrc) {
  return a / (float)nsrc;
}
static inline double avg_f64(double a, int nsrc) {
  return a / (double)nsrc;
}

/* One block of m elements starting at element i: acc <- srcs[0], acc op= srcs[s],
 * acc <- FIN(acc), dst <- acc. Inlined with m == BLK (a constant the vectoriser unrolls) and
 * once more for the tail. */
#define DEFINE_REDUCE(NAME, T, A, LD, ST, OP, FIN)                                             \
  static inline void NAME##_blk(T *d, const void *const *srcs, int nsrc, size_t i, size_t m) { \
    A acc[BLK], x[BLK];                                                                        \
    if (m > BLK) __builtin_unreachable(); /* tells the optimiser the arrays suffice */         \
    LD(acc, (const T *)srcs[0] + i, m);                                                        \
    for (int s = 1; s < nsrc; s++) {                                                           \
      LD(x, (const T *)srcs[s] + i, m);                                                        \
      for (size_t j = 0; j < m; j++) acc[j] = OP(acc[j], x[j]);                                \
    }                                                                                          \
    for (size_t j = 0; j < m; j++) acc[j] = FIN(acc[j], nsrc);                                 \
    ST(d + i, acc, m);                                                                         \
  }                                                                                            \
  static void NAME(void *dst, const void *const *srcs, int nsrc, size_t n) {                   \
    size_t i = 0;                                                                              \
    for (; i + BLK <= n; i += BLK) NAME##_blk((T *)dst, srcs, nsrc, i, BLK);                   \
    if (i < n) NAME##_blk((T *)dst, srcs, nsrc, i, n - i);                                     \
  }

/* Floating types: load into the accumulator type, store with rounding (AVG: once, after the
 * division). */
#define DEFINE_FLOAT(TAG, T, A, LD, ST, AVG, SUM)                       \
  DEFINE_REDUCE(reduce_##TAG##_sum, T, A, LD, ST, SUM, FIN_KEEP)        \
  DEFINE_REDUCE(reduce_##TAG##_max, T, A, LD, ST, OP_MAX, FIN_KEEP)     \
  DEFINE_REDUCE(reduce_##TAG##_min, T, A, LD, ST, OP_MIN, FIN_KEEP)     \
  DEFINE_REDUCE(reduce_##TAG##_prod, T, A, LD, ST, OP_PROD_F, FIN_KEEP) \
  DEFINE_REDUCE(reduce_##TAG##_avg, T, A, LD, ST, OP_SUM_F, AVG)
LOADER(ld_f32, float, float, AS_IS)
STORER(st_f32, float, float, AS_IS)
LOADER(ld_f64, double, double, AS_IS)
STORER(st_f64, double, double, AS_IS)
DEFINE_FLOAT(f32, float, float, ld_f32, st_f32, avg_f32, OP_SUM)
DEFINE_FLOAT(f64, double, double, ld_f64, st_f64, avg_f64, OP_SUM)
DEFINE_FLOAT(f16, uint16_t, float, ld_f16, st_f16, avg_f32, OP_SUM)
DEFINE_FLOAT(bf16, uint16_t, float, ld_bf16, st_bf16, avg_f32, OP_SUM)
DEFINE_FLOAT(e4m3, uint8_t, float, ld_fp8_e4m3, st_fp8_e4m3, avg_f32, OP_SUM_F)
DEFINE_FLOAT(e5m2, uint8_t, float, ld_fp8_e5m2, st_fp8_e5m2, avg_f32, OP_SUM_F)

/* Integers: max and min in their own type; sums and products in the unsigned type of the same
 * width, which wraps around by definition (the signed result has the same bits); the average
 * divides the wrapped sum read as T (GCC and Clang convert out-of-range values modulo 2^N).
 * Integer division does not vectorise on x86: the accumulation does, the division is a
 * scalar loop over the block. */
#define DEFINE_INT(TAG, T, U)                                                       \
  LOADER(ld_##TAG, T, T, AS_IS)                                                     \
  STORER(st_##TAG, T, T, AS_IS)                                                     \
  DEFINE_REDUCE(reduce_##TAG##_max, T, T, ld_##TAG, st_##TAG, OP_MAX, FIN_KEEP)     \
  DEFINE_REDUCE(reduce_##TAG##_min, T, T, ld_##TAG, st_##TAG, OP_MIN, FIN_KEEP)     \
  LOADER(ldu_##TAG, U, U, AS_IS)                                                    \
  STORER(stu_##TAG, U, U, AS_IS)                                                    \
  static inline U avg_##TAG(U a, int nsrc) {                                        \
    return (U)((T)a / nsrc);                                                        \
  }                                                                                 \
  DEFINE_REDUCE(reduce_##TAG##_sum, U, U, ldu_##TAG, stu_##TAG, OP_SUM, FIN_KEEP)   \
  DEFINE_REDUCE(reduce_##TAG##_prod, U, U, ldu_##TAG, stu_##TAG, OP_PROD, FIN_KEEP) \
  DEFINE_REDUCE(reduce_##TAG##_avg, U, U, ldu_##TAG, stu_##TAG, OP_SUM, avg_##TAG)
DEFINE_INT(i8, int8_t, uint8_t)
DEFINE_INT(u8, uint8_t, uint8_t)
DEFINE_INT(i32, int32_t, uint32_t)
DEFINE_INT(u32, uint32_t, uint32_t)
DEFINE_INT(i64, int64_t, uint64_t)
DEFINE_INT(u64, uint64_t, uint64_t)

#define OPS(TAG)                                                                                                \
  {                                                                                                             \
    [SYMCOLL_SUM] = reduce_##TAG##_sum, [SYMCOLL_MAX] = reduce_##TAG##_max, [SYMCOLL_MIN] = reduce_##TAG##_min, \
    [SYMCOLL_PROD] = reduce_##TAG##_prod, [SYMCOLL_AVG] = reduce_##TAG##_avg,                                   \
  }
_Static_assert(SYMCOLL_NUM_OPS == 5, "every op has a loop per dtype in OPS");

#include "row_loops.h"

#ifndef SYMCOLL_REDUCE_CLASS
#define SYMCOLL_REDUCE_CLASS SYMCOLL_REDUCE_NAME
#endif
const symcoll__reduce_table_t SYMCOLL_REDUCE_TABLE = {
    SYMCOLL_REDUCE_NAME,
    SYMCOLL_REDUCE_CLASS,
    {
        [SYMCOLL_FLOAT32] = OPS(f32),
        [SYMCOLL_FLOAT16] = OPS(f16),
        [SYMCOLL_BFLOAT16] = OPS(bf16),
        [SYMCOLL_INT8] = OPS(i8),
        [SYMCOLL_UINT8] = OPS(u8),
        [SYMCOLL_INT32] = OPS(i32),
        [SYMCOLL_UINT32] = OPS(u32),
        [SYMCOLL_INT64] = OPS(i64),
        [SYMCOLL_UINT64] = OPS(u64),
        [SYMCOLL_FLOAT64] = OPS(f64),
        [SYMCOLL_FLOAT8_E4M3] = OPS(e4m3),
        [SYMCOLL_FLOAT8_E5M2] = OPS(e5m2),
    },
    .rows = {[SYMCOLL_FLOAT32] = ROWS(f32), [SYMCOLL_FLOAT16] = ROWS(f16), [SYMCOLL_BFLOAT16] = ROWS(bf16)},
    .sum_squares = row_sum_squares,
    .abs_max = row_abs_max,
    .to_e4m3 = row_to_e4m3,
};
