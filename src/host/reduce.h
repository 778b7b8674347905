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

/* The fused norm's loops over one row of n (or h) elements of one floating dtype, in fp32
 * (row_loops.h). Roundings are to the dtype and back, as the next layer reads the values. */
typedef struct symcoll__row_loops {
  void (*load)(float *d, const void *s, size_t n); /* d = s */
  /* r = the sum of ns rows in rank order, rounded (the all-reduce's result), + res (if given)
   * rounded, stored to res_out (if given): one pass, in blocks */
  void (*sum)(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h);
  void (*scale_round)(float *r, float inv, const float *w, void *dst, size_t n); /* r = r*inv*w rounded */
} symcoll__row_loops_t;

/* One build of the loops (reduce_loops.h and row_loops.h compiled for one instruction set). */
typedef struct symcoll__reduce_table {
  const char *name;       /* "scalar", "sse2", "neon", "avx2", "avx512", "avx512bf16" */
  const char *tune_class; /* the tuning table's class (docs/tuning.md): the name, but avx512bf16 is avx512 */
  symcoll__reduce_fn fn[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS];
  /* the norm's row loops: fp32, fp16 and bf16 (the other dtypes' entries are empty) */
  symcoll__row_loops_t rows[SYMCOLL_NUM_DTYPES];
  float (*sum_squares)(const float *r, size_t h);                   /* 32 lanes in index order, a fixed tree */
  float (*abs_max)(const float *r, size_t h);                       /* NaNs skipped */
  void (*to_e4m3)(uint8_t *q, const float *r, float rcp, size_t h); /* q = r x rcp, e4m3 */
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
 * architecture's baseline (SSE2 on x86-64, NEON on aarch64), and x86-64 AVX2 / AVX-512 /
 * AVX-512 with BF16. */
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_scalar;
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_baseline;
#if defined(__x86_64__)
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_avx2;
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_avx512;
extern SYMCOLL_HIDDEN const symcoll__reduce_table_t symcoll__reduce_avx512bf16;
#endif

/* The element conversions (fp16, bf16, fp8 to and from fp32) are inline, in core/half.h. */
#endif
