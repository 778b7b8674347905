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
 * every stage, with the block loads and stores ld_f16 / st_f16, which unroll to a few
 * instructions at m == ROW_V, so that the values stay in registers. */
#define ROW_V 16
#define DEFINE_ROWS_VEC(SUF, T, LD, ST)                                                                          \
  static void row_load_##SUF(float *d, const void *s, size_t n) {                                                \
    LD(d, (const T *)s, n);                                                                                      \
  }                                                                                                              \
  /* v[0..m) <- v rounded to T, stored to dst if given; m <= ROW_V */                                            \
  static inline void row_round_v_##SUF(float *v, T *dst, size_t m) {                                             \
    T t[ROW_V];                                                                                                  \
    if (m > ROW_V) __builtin_unreachable();                                                                      \
    ST(t, v, m);                                                                                                 \
    if (dst) memcpy(dst, t, m * sizeof(T));                                                                      \
    LD(v, t, m);                                                                                                 \
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
    for (; i + ROW_V <= h; i += ROW_V) row_sum_v_##SUF(r, s, ns, res, res_out, i, ROW_V);                        \
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
DEFINE_ROWS(bf16, uint16_t, bf2f, f2bf)
#if defined(HW_HALVES)
DEFINE_ROWS_VEC(f16, uint16_t, ld_f16, st_f16)
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

/* q = r / scale as e4m3 (correctly rounded quotients, saturating). */
static void row_to_e4m3(uint8_t *q, const float *r, float scale, size_t h) {
  for (size_t i = 0; i < h; i++) q[i] = symcoll__f32_to_fp8(r[i] / scale, 0);
}
