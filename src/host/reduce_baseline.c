/* The reduce loops vectorised for the architecture's baseline: SSE2 on x86-64, NEON on aarch64. */
#if defined(__x86_64__)
#define SYMCOLL_REDUCE_NAME "sse2"
#elif defined(__aarch64__)
#define SYMCOLL_REDUCE_NAME "neon"
#else
#define SYMCOLL_REDUCE_NAME "generic"
#endif
#define SYMCOLL_REDUCE_TABLE symcoll__reduce_baseline
#include "reduce_loops.h"
