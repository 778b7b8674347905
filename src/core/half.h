/* The narrow float formats in software, for the CPU transport, the engines and the tests'
 * references: IEEE half, bfloat16 and OCP fp8 (e4m3, e5m2) to fp32 (exact), and fp32 to each
 * rounding to nearest even (fp8 saturating to the largest finite value, as CUDA's
 * __nv_cvt_float_to_fp8 with __NV_SATFINITE; half and bf16 overflow to inf, as F16C and
 * __float2bfloat16_rn). A NaN stays a NaN, quiet, keeping the top of its payload.
 *
 * Written as selects between integer and float expressions, with no branch and no call, so a
 * loop of them vectorises (the CPU transport's reduce and row loops are built per instruction
 * set); inline, one definition for every user. Included through internal.h. */
#ifndef SYMCOLL_HALF_H
#define SYMCOLL_HALF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symcoll.h"

static inline float symcoll__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t symcoll__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* ---- bfloat16: the top half of an fp32 --------------------------------------------------- */

static inline float symcoll__bf16_to_f32(uint16_t h) {
  return symcoll__bits_f32((uint32_t)h << 16);
}
static inline uint16_t symcoll__f32_to_bf16(float f) {
  const uint32_t u = symcoll__f32_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

/* ---- IEEE half ----------------------------------------------------------------------------- */

static inline float symcoll__f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, exp = em & 0x7c00u;
  const uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
  const uint32_t special = (em << 13) | 0x7f800000u | (em & 0x3ffu ? 0x400000u : 0u);
  const float sub = (float)(int32_t)em * 0x1p-24f; /* subnormal or zero: exact */
  const uint32_t mag = exp == 0x7c00u ? special : exp == 0 ? symcoll__f32_bits(sub) : normal;
  return symcoll__bits_f32(sign | mag);
}
static inline uint16_t symcoll__f32_to_f16(float f) {
  const uint32_t x = symcoll__f32_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  /* normal range: the 13 dropped bits rounded to nearest even (a carry moves the exponent) */
  const uint32_t norm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  /* below 2^-14: adding 0.5 makes the FPU round at the half's last subnormal bit */
  const uint32_t sub = symcoll__f32_bits(symcoll__bits_f32(a) + 0.5f) - 0x3f000000u;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t r = a > 0x7f800000u ? nan : a >= 0x477ff000u ? 0x7c00u : a < 0x38800000u ? sub : norm;
  return (uint16_t)(sign | r);
}

/* ---- OCP fp8 -------------------------------------------------------------------------------- */

/* e5m2 is the top byte of an IEEE half; e4m3 has no infinities and one NaN (0x7f / 0xff),
 * which widens to 0x7fffe000 as CUDA widens it. */
static inline float symcoll__fp8_to_f32(uint8_t b, int e5m2) {
  if (e5m2) return symcoll__f16_to_f32((uint16_t)(b << 8));
  const uint32_t sign = (uint32_t)(b & 0x80u) << 24, em = b & 0x7fu;
  const float sub = (float)(int32_t)(em & 7u) * 0x1p-9f; /* exponent field 0: m x 2^-9 */
  const uint32_t normal = (em << 20) + (120u << 23);
  const uint32_t mag = em == 0x7fu ? 0x7fffe000u : em < 8u ? symcoll__f32_bits(sub) : normal;
  return symcoll__bits_f32(sign | mag);
}

/* m mantissa bits, exponent bias b: normal values keep the top m bits of fp32's mantissa,
 * rounded to nearest even (a carry moves the exponent); below 2^(1-b) the value is a whole
 * number of 2^(1-b-m) units, which the FPU rounds when it is added to 1.5 x 2^23; values that
 * round past the largest finite one saturate to it (inf included); NaN: e4m3's one NaN, or
 * e5m2's quiet NaN with the top of the payload. */
static inline uint8_t symcoll__f32_to_fp8(float f, int e5m2) {
  const uint32_t x = symcoll__f32_bits(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  const uint32_t m = e5m2 ? 2u : 3u, bias = e5m2 ? 15u : 7u, drop = 23u - m;
  const uint32_t norm = ((a + (1u << (drop - 1)) - 1u + ((a >> drop) & 1u)) >> drop) - ((127u - bias) << m);
  const float units = symcoll__bits_f32(a) * (e5m2 ? 0x1p16f : 0x1p9f) + 0x1.8p23f;
  const uint32_t sub = symcoll__f32_bits(units) - 0x4b400000u;
  const uint32_t min_normal = (127u + 1u - bias) << 23;
  /* the smallest magnitude that rounds past the largest finite value: 464 (e4m3), 61440 (e5m2) */
  const uint32_t too_big = e5m2 ? 0x47700000u : 0x43e80000u;
  const uint32_t max_finite = e5m2 ? 0x7bu : 0x7eu;
  const uint32_t nan = e5m2 ? 0x7eu | ((a >> 21) & 1u) : 0x7fu;
  const uint32_t r = a > 0x7f800000u ? nan : a >= too_big ? max_finite : a < min_normal ? sub : norm;
  return (uint8_t)(sign | r);
}

#endif /* SYMCOLL_HALF_H */
