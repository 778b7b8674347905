/* The reduce loops for x86-64 AVX-512 (F, BW, VL) + F16C, used only where the CPU has them. */
#if defined(__x86_64__)
#define SYMCOLL_REDUCE_TABLE symcoll__reduce_avx512
#define SYMCOLL_REDUCE_NAME "avx512"
#include "reduce_loops.h"
#endif
