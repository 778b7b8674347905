/* The reduce loops for x86-64 AVX-512 (F, BW, VL) + F16C + BF16 (its fp32 to bf16 rounding),
 * used only where the CPU has them. */
#if defined(__x86_64__)
#define SYMCOLL_REDUCE_TABLE symcoll__reduce_avx512bf16
#define SYMCOLL_REDUCE_NAME "avx512bf16"
#define SYMCOLL_REDUCE_CLASS "avx512" /* the same vectors move the bytes: AVX-512's tuning rows serve */
#include "reduce_loops.h"
#endif
