/* AVX-512 reduce loops (compiled with -mavx512f -mavx512bw -mavx512vl, used only when the CPU
 * has them). Conversions round to nearest even exactly as the scalar loops do. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

#include "reduce.h"

static inline __m512 ld_f32(const void *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void st_f32(void *p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
static inline __m512 ld_f16(const void *p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
static inline void st_f16(void *p, __m512 v, __mmask16 m) {
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline __m512 ld_bf16(const void *p, __mmask16 m) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
static inline void st_bf16(void *p, __m512 v, __mmask16 m) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  __m512i r = _mm512_mask_blend_epi32(nan, rounded, quiet);
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

#define V_SUM(a, x) _mm512_add_ps(a, x)
#define V_MAX(a, x) _mm512_max_ps(a, x)
#define V_MIN(a, x) _mm512_min_ps(a, x)

#define DEFINE_AVX(T, ES, OPN, OPV)                                                        \
  static void reduce_##T##_##OPN(void *dst, const void *const *srcs, int nsrc, size_t n) { \
    size_t i = 0;                                                                          \
    for (; i + 32 <= n; i += 32) { /* two vectors in flight per source */                 \
      __m512 a0 = ld_##T((const char *)srcs[0] + i * ES, 0xffff);                          \
      __m512 a1 = ld_##T((const char *)srcs[0] + (i + 16) * ES, 0xffff);                   \
      for (int s = 1; s < nsrc; s++) {                                                     \
        a0 = OPV(a0, ld_##T((const char *)srcs[s] + i * ES, 0xffff));                      \
        a1 = OPV(a1, ld_##T((const char *)srcs[s] + (i + 16) * ES, 0xffff));               \
      }                                                                                    \
      st_##T((char *)dst + i * ES, a0, 0xffff);                                            \
      st_##T((char *)dst + (i + 16) * ES, a1, 0xffff);                                     \
    }                                                                                      \
    for (; i < n; i += 16) {                                                               \
      __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);    \
      __m512 a = ld_##T((const char *)srcs[0] + i * ES, m);                                \
      for (int s = 1; s < nsrc; s++) a = OPV(a, ld_##T((const char *)srcs[s] + i * ES, m)); \
      st_##T((char *)dst + i * ES, a, m);                                                  \
    }                                                                                      \
  }
#define DEFINE_ALL(T, ES) DEFINE_AVX(T, ES, sum, V_SUM) DEFINE_AVX(T, ES, max, V_MAX) DEFINE_AVX(T, ES, min, V_MIN)
DEFINE_ALL(f32, 4)
DEFINE_ALL(f16, 2)
DEFINE_ALL(bf16, 2)

const symcoll__reduce_fn symcoll__reduce_avx512[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS] = {
    [SYMCOLL_FLOAT32] = {reduce_f32_sum, reduce_f32_max, reduce_f32_min},
    [SYMCOLL_FLOAT16] = {reduce_f16_sum, reduce_f16_max, reduce_f16_min},
    [SYMCOLL_BFLOAT16] = {reduce_bf16_sum, reduce_bf16_max, reduce_bf16_min},
};
#endif
