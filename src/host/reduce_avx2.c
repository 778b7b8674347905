/* The reduce loops for x86-64 AVX2 + F16C (-mavx2 -mf16c), used only where the CPU has them. */
#if defined(__x86_64__)
#define SYMCOLL_REDUCE_TABLE symcoll__reduce_avx2
#define SYMCOLL_REDUCE_NAME "avx2"
#include "reduce_loops.h"
#endif
