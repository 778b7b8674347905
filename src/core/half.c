/* fp16 conversions in software (half.h), for the CPU transport and the exact references. */
#include "internal.h"

/* IEEE half conversions, round to nearest even (matches F16C / CUDA __float2half_rn). */
float symcoll__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400u));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  union {
    uint32_t u;
    float f;
  } v = {.u = bits};
  return v.f;
}

uint16_t symcoll__f32_to_f16(float f) {
  union {
    uint32_t u;
    float f;
  } v = {.f = f};
  uint32_t x = v.u, sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu)); /* NaN */
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                          /* overflow to inf */
  if (absx < 0x38800000u) {                                                            /* result is subnormal or zero */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t q = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}
