/* The run-time choice among the builds of the reduce loops, and the scalar fp8 conversions. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

/* ---- fp8 (OCP E4M3 / E5M2) --------------------------------------------------------------- */

float symcoll__fp8_to_f32(uint8_t b, int e5m2) {
  const uint32_t sign = (uint32_t)(b & 0x80u) << 24;
  uint32_t mag;
  float sub;
  if (!e5m2) {
    const uint32_t e = (b >> 3) & 15u, m = b & 7u;
    sub = (float)m * 0x1p-9f;
    if (e == 15 && m == 7)
      mag = 0x7fffe000u; /* NaN, as CUDA widens it */
    else if (e == 0)
      memcpy(&mag, &sub, 4);
    else
      mag = ((e + 120u) << 23) | (m << 20);
  } else { /* the top byte of an IEEE half */
    const uint32_t e = (b >> 2) & 31u, m = b & 3u;
    sub = (float)m * 0x1p-16f;
    if (e == 31)
      mag = 0x7f800000u | (m << 21) | (m ? 0x400000u : 0u);
    else if (e == 0)
      memcpy(&mag, &sub, 4);
    else
      mag = ((e + 112u) << 23) | (m << 21);
  }
  uint32_t u = sign | mag;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even, saturating to the largest finite value; the float is widened to
 * double (exactly) and rounded the way CUDA's software path for __nv_cvt_float_to_fp8 does,
 * which is what the hardware conversion computes. */
uint8_t symcoll__f32_to_fp8(float f, int e5m2) {
  const double x = (double)f;
  uint64_t xb;
  memcpy(&xb, &x, 8);
  const uint64_t sig_bits = e5m2 ? 3 : 4, mant_mask = e5m2 ? 3 : 7, bias = e5m2 ? 15 : 7;
  const uint64_t min_denorm_o2 = e5m2 ? 0x3EE0000000000000ull : 0x3F50000000000000ull;
  const uint64_t overflow = e5m2 ? 0x40EE000000000000ull - 1 : 0x407D000000000000ull;
  const uint64_t min_norm = e5m2 ? 0x3F10000000000000ull : 0x3F90000000000000ull;
  const uint8_t max_norm = e5m2 ? 0x7B : 0x7E;
  const uint64_t half_ulp = 1ull << (53 - sig_bits - 1);
  const uint8_t sign = (uint8_t)((xb >> 63) << 7);
  const uint8_t exp = (uint8_t)((((uint16_t)(xb >> 52)) & 0x7ffu) - 1023u + bias);
  uint8_t mant = (uint8_t)((xb >> (53 - sig_bits)) & mant_mask);
  const uint64_t absx = xb & 0x7fffffffffffffffull;
  uint8_t res;
  if (absx <= min_denorm_o2) {
    res = 0;
  } else if (absx > 0x7FF0000000000000ull) {
    res = e5m2 ? (uint8_t)(0x7E | mant) : 0x7F;
  } else if (absx > overflow) {
    res = max_norm;
  } else if (absx >= min_norm) {
    res = (uint8_t)((exp << (sig_bits - 1)) | mant);
    const uint64_t round = xb & ((half_ulp << 1) - 1);
    if (round > half_ulp || (round == half_ulp && (mant & 1))) res++;
  } else {
    const uint8_t shift = (uint8_t)(1u - exp);
    mant |= (uint8_t)(1u << (sig_bits - 1));
    res = (uint8_t)(mant >> shift);
    const uint64_t round = (xb | (1ull << 52)) & ((half_ulp << (shift + 1)) - 1);
    if (round > (half_ulp << shift) || (round == (half_ulp << shift) && (res & 1))) res++;
  }
  return (uint8_t)(res | sign);
}

/* ---- choice --------------------------------------------------------------------------------- */

static int cpu_runs(const symcoll__reduce_table_t *t) {
#if defined(__x86_64__)
  if (t == &symcoll__reduce_avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
  if (t == &symcoll__reduce_avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif
  (void)t;
  return 1;
}

/* Widest first. */
static const symcoll__reduce_table_t *const all_tables[] = {
#if defined(__x86_64__)
    &symcoll__reduce_avx512,
    &symcoll__reduce_avx2,
#endif
    &symcoll__reduce_baseline,
    &symcoll__reduce_scalar,
};
#define NTABLES (sizeof all_tables / sizeof all_tables[0])

int symcoll__host_reduce_tables(const symcoll__reduce_table_t **tables, int max) {
  int n = 0;
  for (size_t i = 0; i < NTABLES && n < max; i++)
    if (cpu_runs(all_tables[i])) tables[n++] = all_tables[i];
  return n;
}

static const symcoll__reduce_table_t *chosen;

static void choose_once(void) {
  (void)symcoll__env_choice("SYMCOLL_HOST_SIMD"); /* a value not among the choices gets its WARN */
  const char *want = symcoll__env_str("SYMCOLL_HOST_SIMD", "auto");
  for (size_t i = 0; i < NTABLES && !chosen; i++) {
    const symcoll__reduce_table_t *t = all_tables[i];
    if (strcmp(want, "auto") != 0 && strcmp(want, t->name) != 0) continue;
    if (cpu_runs(t))
      chosen = t;
    else
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_HOST_SIMD=%s: this CPU cannot run those loops", want);
  }
  if (!chosen) {
    /* An unknown name (warned above): the widest. */
    symcoll__host_reduce_tables(&chosen, 1);
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "CPU reduce loops: %s", chosen->name);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

symcoll__reduce_fn symcoll__host_reduce_fn(symcoll_dtype_t dtype, symcoll_op_t op) {
  pthread_once(&once, choose_once);
  return chosen->fn[dtype][op];
}

const char *symcoll__host_simd_name(void) {
  pthread_once(&once, choose_once);
  return chosen->name;
}
