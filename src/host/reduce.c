/* Portable reduce loops and the run-time choice between them and the AVX-512 ones. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

#define OP_SUM(acc, x) ((acc) + (x))
/* Written as in the vector code (max_ps(a,b) = a > b ? a : b) so both give the same bits. */
#define OP_MAX(acc, x) ((acc) > (x) ? (acc) : (x))
#define OP_MIN(acc, x) ((acc) < (x) ? (acc) : (x))

static inline float ld_f32(const void *p, size_t i) { float v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
static inline float ld_f16(const void *p, size_t i) { uint16_t v; memcpy(&v, (const char *)p + 2 * i, 2); return symcoll__f16_to_f32(v); }
static inline float ld_bf16(const void *p, size_t i) { uint16_t v; memcpy(&v, (const char *)p + 2 * i, 2); return symcoll__bf16_to_f32(v); }
static inline void st_f32(void *p, size_t i, float f) { memcpy((char *)p + 4 * i, &f, 4); }
static inline void st_f16(void *p, size_t i, float f) { uint16_t v = symcoll__f32_to_f16(f); memcpy((char *)p + 2 * i, &v, 2); }
static inline void st_bf16(void *p, size_t i, float f) { uint16_t v = symcoll__f32_to_bf16(f); memcpy((char *)p + 2 * i, &v, 2); }

#define DEFINE_SCALAR(T, OPN, OPM)                                                      \
  static void reduce_##T##_##OPN(void *dst, const void *const *srcs, int nsrc, size_t n) { \
    for (size_t i = 0; i < n; i++) {                                                    \
      float acc = ld_##T(srcs[0], i);                                                   \
      for (int s = 1; s < nsrc; s++) acc = OPM(acc, ld_##T(srcs[s], i));               \
      st_##T(dst, i, acc);                                                              \
    }                                                                                   \
  }
#define DEFINE_ALL_OPS(T) DEFINE_SCALAR(T, sum, OP_SUM) DEFINE_SCALAR(T, max, OP_MAX) DEFINE_SCALAR(T, min, OP_MIN)
DEFINE_ALL_OPS(f32)
DEFINE_ALL_OPS(f16)
DEFINE_ALL_OPS(bf16)

const symcoll__reduce_fn symcoll__reduce_scalar[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS] = {
    [SYMCOLL_FLOAT32] = {reduce_f32_sum, reduce_f32_max, reduce_f32_min},
    [SYMCOLL_FLOAT16] = {reduce_f16_sum, reduce_f16_max, reduce_f16_min},
    [SYMCOLL_BFLOAT16] = {reduce_bf16_sum, reduce_bf16_max, reduce_bf16_min},
};

static const symcoll__reduce_fn (*chosen)[SYMCOLL_NUM_OPS] = symcoll__reduce_scalar;
static const char *chosen_name = "scalar";

static void choose_once(void) {
  const char *want = symcoll__env_str("SYMCOLL_HOST_SIMD", "auto");
#if defined(__x86_64__)
  bool have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl");
  if (strcmp(want, "scalar") != 0 && have) {
    chosen = symcoll__reduce_avx512;
    chosen_name = "avx512";
  } else if (!strcmp(want, "avx512") && !have) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_HOST_SIMD=avx512 but this CPU lacks AVX-512; using scalar");
  }
#else
  (void)want;
#endif
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "CPU reduce loops: %s", chosen_name);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

symcoll__reduce_fn symcoll__host_reduce_fn(symcoll_dtype_t dtype, symcoll_op_t op) {
  pthread_once(&once, choose_once);
  return chosen[dtype][op];
}

const char *symcoll__host_simd_name(void) {
  pthread_once(&once, choose_once);
  return chosen_name;
}
