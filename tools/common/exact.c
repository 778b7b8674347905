/* Exact-result data for tests and benchmarks: inputs every collective combines to the same
 * bits in any order, in every dtype (see exact.h). */
#include "exact.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Encoders round to nearest even, like every conversion symcoll makes: the inputs are small
 * integers (exact in every dtype), and AVG's results are not, so each encoder handles any
 * finite value, normal and subnormal. Written apart from the library's conversions (src/core/
 * half.c, src/host/reduce.c), so that the reference does not share their mistakes. */
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
/* The code of finite v in a binary format of `mbits` stored mantissa bits and exponent bias
 * `bias` (sign bit at 1 << sign_shift), rounded to nearest even; a magnitude whose code would
 * exceed max_code is max_code (fp8: saturation to the largest finite value; fp16: infinity).
 * The quantum (the spacing of representable values at v's exponent, or at the smallest normal
 * exponent for subnormals) scales v exactly, rint rounds to nearest even, and a mantissa that
 * rounds up to 2^(mbits+1) carries into the exponent field by itself. */
static uint32_t encode_rne(double v, int mbits, int bias, uint32_t max_code, int sign_shift) {
  const uint32_t sign = signbit(v) ? 1u << sign_shift : 0;
  const double a = fabs(v);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  const int emin = 1 - bias;
  const int lead = e - 1 < emin ? emin : e - 1; /* exponent of the leading bit; subnormals: emin */
  const double q = rint(ldexp(a, mbits - lead));
  uint32_t code;
  if (e - 1 < emin)
    code = (uint32_t)q; /* subnormal (q == 2^mbits: the smallest normal, which the same bits encode) */
  else
    code = ((uint32_t)(lead + bias) << mbits) + (uint32_t)(q - ldexp(1.0, mbits));
  return sign | (code > max_code ? max_code : code);
}
static uint16_t f32_to_f16(float f) {
  return (uint16_t)encode_rne(f, 10, 15, 0x7c00u, 15);
}
static float f16_to_f32_any(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? (float)m / 1024.0f / 16384.0f : (1.0f + (float)m / 1024.0f) * ldexpf(1.0f, e - 15);
  if (e == 31) v = m ? NAN : INFINITY;
  return (h & 0x8000) ? -v : v;
}
/* OCP fp8, saturating: e4m3's largest finite is 448 (0x7e; 0x7f is NaN), e5m2's 57344 (0x7b). */
static uint8_t f32_to_fp8(float f, int e5m2) {
  return (uint8_t)(e5m2 ? encode_rne(f, 2, 15, 0x7bu, 7) : encode_rne(f, 3, 7, 0x7eu, 7));
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

/* gcc 13.3 at -O2/-O3 (without interposition: -fvisibility=hidden or no -fPIC) miscompiles
 * exact_fill_op: inlined into its loop, exact_store takes its default branch (e5m2) for every
 * dtype, as if a range learnt in exact_value_op's fp8 test held on every path; exact_fill, the
 * same loop with op fixed, is right. Seen on the GPU machine: every reduction's reference
 * inputs were e5m2 bytes. The functions that branch on the dtype stay out of the
 * interprocedural passes (noipa: not inlined, cloned or range-propagated into). */
#if defined(__GNUC__) && !defined(__clang__)
#define EXACT_OPAQUE __attribute__((noipa))
#else
#define EXACT_OPAQUE
#endif

/* The range of each dtype's inputs: (x % mod) - off, times scale. */
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

EXACT_OPAQUE double exact_value(symcoll_dtype_t dt, int rank, size_t i, uint32_t seed) {
  const uint32_t x = mix((uint32_t)i * 2654435761u ^ (uint32_t)rank * 40503u ^ seed);
  const unsigned d = (unsigned)dt < SYMCOLL_NUM_DTYPES ? (unsigned)dt : 0;
  return (double)((int)(x % value_range[d].mod) - value_range[d].off) * value_range[d].scale;
}

static bool is_unsigned(symcoll_dtype_t dt) {
  return dt == SYMCOLL_UINT8 || dt == SYMCOLL_UINT32 || dt == SYMCOLL_UINT64;
}
static bool is_fp8(symcoll_dtype_t dt) {
  return dt == SYMCOLL_FLOAT8_E4M3 || dt == SYMCOLL_FLOAT8_E5M2;
}

/* PROD's factors: ranks 0..2 from {-2, -1, 1, 2} (unsigned types: {0, 1, 2}, 0 one time in
 * 7), ranks from 3 on from {-1, 1} (unsigned: 1, 0 one time in 16), so every product is 0 or
 * +-1, 2, ..., 8: exact in every dtype (fp8 included), never wrapping, never 0xa5.
 * AVG on fp8: the SUM inputs times 4 ({-4, 0, 4}): with -1..1, e4m3's -1/5 (n = 5, 10, 15)
 * rounds to -0.203125, whose bits are EXACT_POISON's; multiples of 4 give |sum / n| >= 1/4
 * for n <= 16 (or 0), beyond that band. */
EXACT_OPAQUE double exact_value_op(symcoll_dtype_t dt, symcoll_op_t op, int rank, size_t i, uint32_t seed) {
  if (op == SYMCOLL_AVG && is_fp8(dt)) return 4 * exact_value(dt, rank, i, seed);
  if (op != SYMCOLL_PROD) return exact_value(dt, rank, i, seed);
  const uint32_t x = mix((uint32_t)i * 2654435761u ^ (uint32_t)rank * 40503u ^ seed ^ 0x5bd1e995u);
  static const double early[4] = {-2, -1, 1, 2}, late[2] = {-1, 1};
  if (is_unsigned(dt)) return rank < 3 ? (x % 7 == 0 ? 0 : x % 7 <= 3 ? 1 : 2) : (x % 16 == 0 ? 0 : 1);
  return rank < 3 ? early[x % 4] : late[x % 2];
}

EXACT_OPAQUE void exact_store(void *host, symcoll_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case SYMCOLL_FLOAT32:
      ((float *)host)[i] = (float)v;
      break;
    case SYMCOLL_FLOAT16:
      ((uint16_t *)host)[i] = f32_to_f16((float)v);
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
      ((uint8_t *)host)[i] = f32_to_fp8((float)v, 0);
      break;
    default:
      ((uint8_t *)host)[i] = f32_to_fp8((float)v, 1);
      break;
  }
}

EXACT_OPAQUE double exact_load(const void *host, symcoll_dtype_t dt, size_t i) {
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

void exact_fill_range_op(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int rank,
                         uint32_t seed) {
  for (size_t i = 0; i < count; i++) exact_store(host, dt, i, exact_value_op(dt, op, rank, first + i, seed));
}

void exact_fill_op(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, uint32_t seed) {
  exact_fill_range_op(host, dt, op, 0, count, rank, seed);
}

void exact_fill_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int rank, uint32_t seed) {
  exact_fill_range_op(host, dt, SYMCOLL_SUM, first, count, rank, seed);
}

void exact_fill(void *host, symcoll_dtype_t dt, size_t count, int rank, uint32_t seed) {
  exact_fill_range(host, dt, 0, count, rank, seed);
}

/* AVG: the sum (exact: small integers), wrapped around in integer types as symcoll's sums are,
 * then one division by nranks in the accumulation type, then one rounding to dt (exact_store
 * rounds to nearest even; fp8 saturates). */
EXACT_OPAQUE static double average(symcoll_dtype_t dt, double sum, int nranks) {
  const int64_t s = (int64_t)sum, n = nranks;
  switch (dt) {
    case SYMCOLL_FLOAT32:
    case SYMCOLL_FLOAT16:
    case SYMCOLL_BFLOAT16:
    case SYMCOLL_FLOAT8_E4M3:
    case SYMCOLL_FLOAT8_E5M2:
      return (double)((float)sum / (float)nranks);
    case SYMCOLL_FLOAT64:
      return sum / nranks;
    case SYMCOLL_INT8:
      return (double)((int8_t)s / n); /* C's division truncates toward zero */
    case SYMCOLL_INT32:
      return (double)((int32_t)s / n);
    case SYMCOLL_INT64:
      return (double)(s / n);
    case SYMCOLL_UINT8:
      return (double)((uint8_t)s / (uint64_t)n);
    case SYMCOLL_UINT32:
      return (double)((uint32_t)s / (uint64_t)n);
    case SYMCOLL_UINT64:
      return (double)((uint64_t)s / (uint64_t)n);
    case SYMCOLL_NUM_DTYPES:
      break;
  }
  return sum / nranks;
}

void exact_expect_range(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int nranks,
                        uint32_t seed) {
  for (size_t i = 0; i < count; i++) {
    double acc = exact_value_op(dt, op, 0, first + i, seed);
    for (int r = 1; r < nranks; r++) {
      const double v = exact_value_op(dt, op, r, first + i, seed);
      switch (op) {
        case SYMCOLL_SUM:
        case SYMCOLL_AVG:
          acc += v;
          break;
        case SYMCOLL_PROD:
          acc *= v;
          break;
        case SYMCOLL_MAX:
          acc = v > acc ? v : acc;
          break;
        case SYMCOLL_MIN:
          acc = v < acc ? v : acc;
          break;
        case SYMCOLL_NUM_OPS:
          break;
      }
    }
    exact_store(host, dt, i, op == SYMCOLL_AVG ? average(dt, acc, nranks) : acc);
  }
}

double exact_scale(int rank) {
  return (rank & 1) ? 1.0 : 2.0;
}

void exact_expect_scaled_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int nranks, uint32_t seed) {
  for (size_t i = 0; i < count; i++) {
    double acc = 0;
    for (int r = 0; r < nranks; r++) acc += exact_scale(r) * exact_value_op(dt, SYMCOLL_SUM, r, first + i, seed);
    exact_store(host, dt, i, acc);
  }
}

void exact_expect(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int nranks, uint32_t seed) {
  exact_expect_range(host, dt, op, 0, count, nranks, seed);
}
