/* Exact-result data for tests and benchmarks: inputs every collective combines to the same
 * bits in any order, in every dtype (see exact.h). */
#include "exact.h"

#include <math.h>
#include <string.h>

/* Only small integers are stored (and the fp8 types see -1, 0, 1), so every conversion
 * below is exact and every order of combining gives the same result. */
static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f32_to_f16_int(float f) {
  if (f == 0) return signbit(f) ? 0x8000 : 0;
  uint16_t sign = f < 0 ? 0x8000 : 0;
  float a = f < 0 ? -f : f;
  int e = 0;
  while (a >= 2.0f) {
    a /= 2;
    e++;
  }
  while (a < 1.0f) {
    a *= 2;
    e--;
  }
  return (uint16_t)(sign | ((e + 15) << 10) | (uint16_t)((a - 1.0f) * 1024.0f));
}
static float f16_to_f32_any(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? (float)m / 1024.0f / 16384.0f : (1.0f + (float)m / 1024.0f) * ldexpf(1.0f, e - 15);
  if (e == 31) v = m ? NAN : INFINITY;
  return (h & 0x8000) ? -v : v;
}
/* fp8 of -8..8 (integers; e4m3 and e5m2 hold them all exactly). */
static uint8_t f32_to_fp8_int(float f, int e5m2) {
  if (f == 0) return signbit(f) ? 0x80 : 0;
  uint8_t sign = f < 0 ? 0x80 : 0;
  float a = fabsf(f);
  int e = 0;
  while (a >= 2.0f) {
    a /= 2;
    e++;
  }
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  return (uint8_t)(sign | ((e + bias) << mbits) | (uint8_t)((a - 1.0f) * (float)(1 << mbits)));
}
static double fp8_to_f64(uint8_t b, int e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1);
  if (!e5m2 && e == 15 && m == 7) return NAN;
  if (e5m2 && e == 31) return m ? NAN : ((b & 0x80) ? -INFINITY : INFINITY);
  double v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp(1.0 + m / (double)(1 << mbits), e - bias);
  return (b & 0x80) ? -v : v;
}

static uint32_t mix(uint32_t x) {
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return x;
}

/* The range of each dtype's inputs: (x % mod) - off, times scale. A table rather than a
 * switch: gcc 13 at -O3 was seen to take the default branch of such a switch for int8 inside
 * exact_expect_range while exact_fill_range took the int8 one (the GPU machine's compiler). */
static const struct {
  uint32_t mod;
  int off;
  double scale;
} value_range[SYMCOLL_NUM_DTYPES] = {
    [SYMCOLL_FLOAT32] = {17, 8, 1},
    [SYMCOLL_FLOAT16] = {17, 8, 1},
    [SYMCOLL_BFLOAT16] = {17, 8, 1},
    [SYMCOLL_INT8] = {9, 4, 1}, /* sums of 16 fit int8 */
    [SYMCOLL_UINT8] = {8, 0, 1},
    [SYMCOLL_UINT32] = {8, 0, 1},
    [SYMCOLL_UINT64] = {8, 0, 1}, /* >= 0 */
    [SYMCOLL_INT32] = {17, 8, 1},
    [SYMCOLL_FLOAT64] = {17, 8, 1},
    [SYMCOLL_INT64] = {17, 8, 4294967296.0}, /* beyond 32 bits */
    [SYMCOLL_FLOAT8_E4M3] = {3, 1, 1},
    [SYMCOLL_FLOAT8_E5M2] = {3, 1, 1}, /* sums of 8 stay in -8..8 */
};

double exact_value(symcoll_dtype_t dt, int rank, size_t i, uint32_t seed) {
  const uint32_t x = mix((uint32_t)i * 2654435761u ^ (uint32_t)rank * 40503u ^ seed);
  const unsigned d = (unsigned)dt < SYMCOLL_NUM_DTYPES ? (unsigned)dt : 0;
  return (double)((int)(x % value_range[d].mod) - value_range[d].off) * value_range[d].scale;
}

void exact_store(void *host, symcoll_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case SYMCOLL_FLOAT32:
      ((float *)host)[i] = (float)v;
      break;
    case SYMCOLL_FLOAT16:
      ((uint16_t *)host)[i] = f32_to_f16_int((float)v);
      break;
    case SYMCOLL_BFLOAT16:
      ((uint16_t *)host)[i] = f32_to_bf16((float)v);
      break;
    case SYMCOLL_INT8:
      ((int8_t *)host)[i] = (int8_t)v;
      break;
    case SYMCOLL_UINT8:
      ((uint8_t *)host)[i] = (uint8_t)v;
      break;
    case SYMCOLL_INT32:
      ((int32_t *)host)[i] = (int32_t)v;
      break;
    case SYMCOLL_UINT32:
      ((uint32_t *)host)[i] = (uint32_t)v;
      break;
    case SYMCOLL_INT64:
      ((int64_t *)host)[i] = (int64_t)v;
      break;
    case SYMCOLL_UINT64:
      ((uint64_t *)host)[i] = (uint64_t)v;
      break;
    case SYMCOLL_FLOAT64:
      ((double *)host)[i] = v;
      break;
    case SYMCOLL_FLOAT8_E4M3:
      ((uint8_t *)host)[i] = f32_to_fp8_int((float)v, 0);
      break;
    default:
      ((uint8_t *)host)[i] = f32_to_fp8_int((float)v, 1);
      break;
  }
}

double exact_load(const void *host, symcoll_dtype_t dt, size_t i) {
  switch (dt) {
    case SYMCOLL_FLOAT32:
      return ((const float *)host)[i];
    case SYMCOLL_FLOAT16:
      return f16_to_f32_any(((const uint16_t *)host)[i]);
    case SYMCOLL_BFLOAT16:
      return bf16_to_f32(((const uint16_t *)host)[i]);
    case SYMCOLL_INT8:
      return ((const int8_t *)host)[i];
    case SYMCOLL_UINT8:
      return ((const uint8_t *)host)[i];
    case SYMCOLL_INT32:
      return ((const int32_t *)host)[i];
    case SYMCOLL_UINT32:
      return ((const uint32_t *)host)[i];
    case SYMCOLL_INT64:
      return (double)((const int64_t *)host)[i];
    case SYMCOLL_UINT64:
      return (double)((const uint64_t *)host)[i];
    case SYMCOLL_FLOAT64:
      return ((const double *)host)[i];
    case SYMCOLL_FLOAT8_E4M3:
      return fp8_to_f64(((const uint8_t *)host)[i], 0);
    default:
      return fp8_to_f64(((const uint8_t *)host)[i], 1);
  }
}

void exact_fill_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int rank, uint32_t seed) {
  for (size_t i = 0; i < count; i++) exact_store(host, dt, i, exact_value(dt, rank, first + i, seed));
}

void exact_fill(void *host, symcoll_dtype_t dt, size_t count, int rank, uint32_t seed) {
  exact_fill_range(host, dt, 0, count, rank, seed);
}

void exact_expect_range(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int nranks,
                        uint32_t seed) {
  for (size_t i = 0; i < count; i++) {
    double acc = exact_value(dt, 0, first + i, seed);
    for (int r = 1; r < nranks; r++) {
      double v = exact_value(dt, r, first + i, seed);
      acc = op == SYMCOLL_SUM ? acc + v : op == SYMCOLL_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
    }
    exact_store(host, dt, i, acc);
  }
}

void exact_expect(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int nranks, uint32_t seed) {
  exact_expect_range(host, dt, op, 0, count, nranks, seed);
}
