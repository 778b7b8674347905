/* fp16 and bf16 conversions shared by the CPU transport and the tests (half.c). Included through internal.h. */
#ifndef SYMCOLL_HALF_H
#define SYMCOLL_HALF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifndef SYMCOLL_HIDDEN
#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#endif

static inline float symcoll__bf16_to_f32(uint16_t h) {
  union {
    uint32_t u;
    float f;
  } v = {.u = (uint32_t)h << 16};
  return v.f;
}
static inline uint16_t symcoll__f32_to_bf16(float f) {
  union {
    uint32_t u;
    float f;
  } v = {.f = f};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
  uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
  return (uint16_t)((v.u + rounding) >> 16);
}
SYMCOLL_HIDDEN float symcoll__f16_to_f32(uint16_t h);
SYMCOLL_HIDDEN uint16_t symcoll__f32_to_f16(float f);

#endif /* SYMCOLL_HALF_H */
