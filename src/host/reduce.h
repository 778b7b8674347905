/* Reduce loops of the CPU transport: dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]). */
#ifndef SYMCOLL_HOST_REDUCE_H
#define SYMCOLL_HOST_REDUCE_H
#include <stddef.h>

#include "../core/internal.h"

/* Sources are combined in index order with fp32 accumulation, so every rank that passes
 * the same sources in the same order gets the same bits. dst may equal a source. */
typedef void (*symcoll__reduce_fn)(void *dst, const void *const *srcs, int nsrc, size_t n);

/* The table chosen at run time (SYMCOLL_HOST_SIMD, else AVX-512 when the CPU has it). */
SYMCOLL_HIDDEN symcoll__reduce_fn symcoll__host_reduce_fn(symcoll_dtype_t dtype, symcoll_op_t op);
/* Name of the loops in use: "avx512" or "scalar". */
SYMCOLL_HIDDEN const char *symcoll__host_simd_name(void);

extern SYMCOLL_HIDDEN const symcoll__reduce_fn symcoll__reduce_scalar[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS];
#if defined(__x86_64__)
extern SYMCOLL_HIDDEN const symcoll__reduce_fn symcoll__reduce_avx512[SYMCOLL_NUM_DTYPES][SYMCOLL_NUM_OPS];
#endif
#endif
