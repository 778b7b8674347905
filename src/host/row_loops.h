/*
 * The fused norm's row loops (host_rmsnorm.c), written once and compiled once per instruction
 * set with the reduce loops: reduce_loops.h includes this file at its end, and the loops use
 * its conversions (core/half.h's, and its block loads and stores of halves where the build
 * converts them in hardware). Every build gives the same bits: fp32 arithmetic in the order
 * written (no contraction), conversions that round alike (test_internal compares the builds).
 * A sum of one row (ns == 1, the chain's pass) is a value of the dtype already: rounding it
 * again would change nothing (a signalling NaN becomes quiet, as the add after it makes it),
 * so it is not rounded twice.
 */
#include <math.h>

/* A sum of several rows (the fused pass: ns > 1) reads peers' rows, which lie in other cores'
 * caches. The loops that take 16 elements at a time through every stage (below: DEFINE_ROWS_VEC
 * and the AVX-512 BF16 rows) load a source's lines among their conversions and stores, and so
 * keep few of those misses in flight: they prefetch each source's line ROW_AHEAD bytes ahead,
 * one a step of 64 bytes. On 2 ranks of a 2-vCPU Xeon the fused call went 0.63-0.74x at 1-4
 * rows of 4096 and 8192 (bf16), 0.73-0.87x (fp16), unchanged from 8 rows; 512 and 1024 bytes
 * ahead alike, 4096 less (bench/results/host/rowprefetch). The element loops over blocks
 * (DEFINE_ROWS) read each source in a loop of its own, which streams: no prefetch there. */
#define ROW_AHEAD 1024
static inline void row_prefetch(const void *const *s, int ns, size_t at) {
  for (int k = 0; k < ns; k++) __builtin_prefetch((const char *)s[k] + at);
}

/* Element loops, which the compiler vectorises whole (one pass of a block of ROW_BLK elements
 * per step, in L1): TO_F / FROM_F convert one element (core/half.h's selects for bf16). */
#define ROW_BLK 256
#define DEFINE_ROWS(SUF, T, TO_F, FROM_F)                                                                       \
  static void row_load_##SUF(float *d, const void *s, size_t n) {                                               \
    const T *p = s;                                                                                             \
    for (size_t i = 0; i < n; i++) d[i] = TO_F(p[i]);                                                           \
  }                                                                                                             \
  static void row_sum_##SUF(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h) { \
    for (size_t b = 0; b < h; b += ROW_BLK) {                                                                   \
      const size_t m = h - b < ROW_BLK ? h - b : ROW_BLK;                                                       \
      float *acc = r + b;                                                                                       \
      const T *p0 = (const T *)s[0] + b, *q = res ? (const T *)res + b : NULL;                                  \
      T *o = res_out ? (T *)res_out + b : NULL;                                                                 \
      for (size_t i = 0; i < m; i++) acc[i] = TO_F(p0[i]);                                                      \
      for (int k = 1; k < ns; k++) {                                                                            \
        const T *pk = (const T *)s[k] + b;                                                                      \
        for (size_t i = 0; i < m; i++) acc[i] += TO_F(pk[i]);                                                   \
      }                                                                                                         \
      if (q && ns > 1)                                                                                          \
        for (size_t i = 0; i < m; i++) acc[i] = TO_F(FROM_F(acc[i])) + TO_F(q[i]);                              \
      else if (q)                                                                                               \
        for (size_t i = 0; i < m; i++) acc[i] += TO_F(q[i]);                                                    \
      if (o)                                                                                                    \
        for (size_t i = 0; i < m; i++) {                                                                        \
          const T t = FROM_F(acc[i]);                                                                           \
          o[i] = t, acc[i] = TO_F(t);                                                                           \
        }                                                                                                       \
      else                                                                                                      \
        for (size_t i = 0; i < m; i++) acc[i] = TO_F(FROM_F(acc[i]));                                           \
    }                                                                                                           \
  }                                                                                                             \
  static void row_scale_round_##SUF(float *r, float inv, const float *w, void *dst, size_t n) {                 \
    T *q = dst;                                                                                                 \
    if (q)                                                                                                      \
      for (size_t i = 0; i < n; i++) {                                                                          \
        const T t = FROM_F(r[i] * inv * w[i]);                                                                  \
        q[i] = t, r[i] = TO_F(t);                                                                               \
      }                                                                                                         \
    else                                                                                                        \
      for (size_t i = 0; i < n; i++) r[i] = TO_F(FROM_F(r[i] * inv * w[i]));                                    \
  }

/* Halves where the build converts them in hardware (HW_HALVES: F16C, AVX-512, AArch64), whose
 * conversions the compiler does not vectorise from element code: ROW_V elements a step through
 * every stage, with the block load LD and round trip RT (ld_f16, rt_f16), which unroll to a few
 * instructions at m == ROW_V, so that the values stay in registers. */
#define ROW_V 16
#define DEFINE_ROWS_VEC(SUF, T, LD, RT)                                                                          \
  static void row_load_##SUF(float *d, const void *s, size_t n) {                                                \
    LD(d, (const T *)s, n);                                                                                      \
  }                                                                                                              \
  /* v[0..m) <- v rounded to T, stored to dst if given; m <= ROW_V */                                            \
  static inline void row_round_v_##SUF(float *v, T *dst, size_t m) {                                             \
    if (m > ROW_V) __builtin_unreachable();                                                                      \
    RT(v, dst, m);                                                                                               \
  }                                                                                                              \
  static inline void row_sum_v_##SUF(float *r, const void *const *s, int ns, const T *res, T *res_out, size_t i, \
                                     size_t m) {                                                                 \
    float acc[ROW_V], x[ROW_V];                                                                                  \
    if (m > ROW_V) __builtin_unreachable();                                                                      \
    LD(acc, (const T *)s[0] + i, m);                                                                             \
    for (int k = 1; k < ns; k++) {                                                                               \
      LD(x, (const T *)s[k] + i, m);                                                                             \
      for (size_t j = 0; j < m; j++) acc[j] += x[j];                                                             \
    }                                                                                                            \
    if (res) {                                                                                                   \
      if (ns > 1) row_round_v_##SUF(acc, NULL, m); /* the all-reduce's result */                                 \
      LD(x, res + i, m);                                                                                         \
      for (size_t j = 0; j < m; j++) acc[j] += x[j];                                                             \
    }                                                                                                            \
    row_round_v_##SUF(acc, res_out ? res_out + i : NULL, m);                                                     \
    memcpy(r + i, acc, m * sizeof(float));                                                                       \
  }                                                                                                              \
  static void row_sum_##SUF(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h) {  \
    size_t i = 0;                                                                                                \
    for (; i + ROW_V <= h; i += ROW_V) {                                                                         \
      if (ns > 1 && (i * sizeof(T)) % 64 == 0) row_prefetch(s, ns, i * sizeof(T) + ROW_AHEAD);                   \
      row_sum_v_##SUF(r, s, ns, res, res_out, i, ROW_V);                                                         \
    }                                                                                                            \
    if (i < h) row_sum_v_##SUF(r, s, ns, res, res_out, i, h - i);                                                \
  }                                                                                                              \
  static inline void row_scale_round_v_##SUF(float *r, float inv, const float *w, T *dst, size_t i, size_t m) {  \
    float v[ROW_V];                                                                                              \
    if (m > ROW_V) __builtin_unreachable();                                                                      \
    for (size_t j = 0; j < m; j++) v[j] = r[i + j] * inv * w[i + j];                                             \
    row_round_v_##SUF(v, dst ? dst + i : NULL, m);                                                               \
    memcpy(r + i, v, m * sizeof(float));                                                                         \
  }                                                                                                              \
  static void row_scale_round_##SUF(float *r, float inv, const float *w, void *dst, size_t n) {                  \
    size_t i = 0;                                                                                                \
    for (; i + ROW_V <= n; i += ROW_V) row_scale_round_v_##SUF(r, inv, w, dst, i, ROW_V);                        \
    if (i < n) row_scale_round_v_##SUF(r, inv, w, dst, i, n - i);                                                \
  }

DEFINE_ROWS(f32, float, AS_IS, AS_IS)
#if defined(HW_BF16)
/* AVX-512 BF16: the rows in 512-bit registers, 16 elements a step (the element-at-a-time
 * selects of f2bf cost more than the rest of the row; a block's round trip through memory, as
 * DEFINE_ROWS_VEC makes it, cost more than it saved), the tail through DEFINE_ROWS_VEC's. */
static inline __m512 bf16_load16(const uint16_t *p) {
  return bf16_widen(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline __m512 rb16(__m512 x, uint16_t *dst) { /* x rounded to bf16, stored to dst if given */
  const __m256i h = bf16_narrow(x);
  if (dst) _mm256_storeu_si256((__m256i *)(void *)dst, h);
  return bf16_widen(h);
}
DEFINE_ROWS_VEC(bf16_tail, uint16_t, ld_bf16, rt_bf16)
#define row_load_bf16 row_load_bf16_tail
static void row_sum_bf16(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h) {
  const uint16_t *const *p = (const uint16_t *const *)s;
  const uint16_t *q = res;
  uint16_t *o = res_out;
  size_t i = 0;
  for (; i + 16 <= h; i += 16) {
    if (ns > 1 && (i & 31) == 0) row_prefetch(s, ns, i * 2 + ROW_AHEAD);
    __m512 acc = bf16_load16(p[0] + i);
    for (int k = 1; k < ns; k++) acc = _mm512_add_ps(acc, bf16_load16(p[k] + i));
    if (q) {
      if (ns > 1) acc = rb16(acc, NULL);
      acc = _mm512_add_ps(acc, bf16_load16(q + i));
    }
    _mm512_storeu_ps(r + i, rb16(acc, o ? o + i : NULL));
  }
  if (i < h) { /* the last h % 16 elements */
    const void *tail[SYMCOLL_MAX_RANKS];
    for (int k = 0; k < ns; k++) tail[k] = p[k] + i;
    row_sum_bf16_tail(r + i, tail, ns, q ? q + i : NULL, o ? o + i : NULL, h - i);
  }
}
static void row_scale_round_bf16(float *r, float inv, const float *w, void *dst, size_t n) {
  uint16_t *q = dst;
  const __m512 vinv = _mm512_set1_ps(inv);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(r + i), vinv), _mm512_loadu_ps(w + i));
    _mm512_storeu_ps(r + i, rb16(v, q ? q + i : NULL));
  }
  if (i < n) row_scale_round_bf16_tail(r + i, inv, w + i, q ? q + i : NULL, n - i);
}
#else
DEFINE_ROWS(bf16, uint16_t, bf2f, f2bf)
#endif
#if defined(HW_HALVES)
DEFINE_ROWS_VEC(f16, uint16_t, ld_f16, rt_f16)
#else
DEFINE_ROWS(f16, uint16_t, h2f, f2h)
#endif
#define ROWS(SUF) \
  { row_load_##SUF, row_sum_##SUF, row_scale_round_##SUF }

/* The sum of squares: 32 lanes, lane l summing elements l, l + 32, l + 64, ... in index
 * order (four independent chains of eight, so that the adds' latency overlaps), then a fixed
 * tree; the same bits whatever the vector width. */
static float row_sum_squares(const float *r, size_t h) {
  typedef float v8f __attribute__((vector_size(32)));
  v8f acc[4] = {{0}, {0}, {0}, {0}};
  const size_t whole = h & ~(size_t)31;
  for (size_t i = 0; i < whole; i += 32)
    for (int j = 0; j < 4; j++) {
      v8f v;
      memcpy(&v, r + i + 8 * j, sizeof v);
      acc[j] += v * v;
    }
  float lane[32], t[8];
  memcpy(lane, acc, sizeof lane);
  for (size_t l = 0; whole + l < h; l++) lane[l] += r[whole + l] * r[whole + l];
  for (int l = 0; l < 8; l++) t[l] = (lane[l] + lane[l + 8]) + (lane[l + 16] + lane[l + 24]);
  return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

/* The largest magnitude (NaNs skipped, as fmaxf does; max is exact in any order). */
static float row_abs_max(const float *r, size_t h) {
  float m = 0.0f;
  for (size_t i = 0; i < h; i++) {
    const float a = fabsf(r[i]);
    m = a > m ? a : m;
  }
  return m;
}

/* q = r x rcp as e4m3 (each product rounded to fp32, then to nearest even e4m3, saturating). */
static void row_to_e4m3(uint8_t *q, const float *r, float rcp, size_t h) {
  for (size_t i = 0; i < h; i++) q[i] = symcoll__f32_to_fp8(r[i] * rcp, 0);
}
