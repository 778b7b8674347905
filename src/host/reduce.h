/* Reduce loops of the CPU transport: dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]). */
#ifndef SYMCOLL_HOST_REDUCE_H
#define SYMCOLL_HOST_REDUCE_H
#include <stddef.h>

#include "../core/internal.h"

/* Sources are combined in index order (floating types narrower than 32 bits in fp32, fp64 in
 * fp64, integers in their own type with wrap-around sums and products), so every rank that
 * passes the same sources in the same order gets the same bits, on every path below. AVG is
 * the sum divided once by nsrc: a call must pass every rank's source (an average of partial
 * averages is not the average). dst may equal a source. */
typedef void (*symcoll__reduce_fn)(void *dst, const void *const *srcs, int nsrc, size_t n);

/* One build of the loops (reduce_loops.h compiled for one instruction set). */
typedef struct symcoll__reduce_table {
  const char *name; /* "scalar", "sse2", "neon", "avx2", "avx512" */
  symcoll__reduce_fn fn[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS];
  /* n halves to and from fp32 (F16C where the build has it), for the fused norm's row loops */
  void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
  void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n);
} symcoll__reduce_table_t;

/* The table chosen at run time: SYMCOLL_HOST_SIMD, else the widest this CPU runs. */
SYMCOLL_HIDDEN symcoll__reduce_fn symcoll__host_reduce_fn(symcoll_dtype_t dtype, symcoll_op_t op);
/* The loops in use, whole. */
SYMCOLL_HIDDEN const symcoll__reduce_table_t *symcoll__host_reduce_table(void);
/* Name of the loops in use. */
SYMCOLL_HIDDEN const char *symcoll__host_simd_name(void);
/* Every table this CPU can run, widest first (for tests, which compare them bit for bit).
 * Returns how many were written to tables[0..max). */
SYMCOLL_HIDDEN int symcoll__host_reduce_tables(const symcoll__reduce_table_t **tables, int max);

/* The builds: the portable loops without and with the compiler's vectoriser at the
 * architecture's baseline (SSE2 on x86-64, NEON on aarch64), and x86-64 AVX2 / AVX-512. */
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_scalar;
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_baseline;
#if defined(__x86_64__)
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_avx2;
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_avx512;
#endif

/* The element conversions (fp16, bf16, fp8 to and from fp32) are inline, in core/half.h. */
#endif
