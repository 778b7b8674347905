/* Exact-result data shared by the tests and symcoll-bench. */
#ifndef SYMCOLL_EXACT_H
#define SYMCOLL_EXACT_H
#include <stddef.h>
#include <stdint.h>

#include <symcoll.h>

/* Exact inputs: small integers (fp8: -1, 0, 1; int8: -4..4; unsigned types: 0..7; int64:
 * multiples of 2^32), so every order of combining gives the same result in every dtype, and
 * no result of up to 16 ranks has EXACT_POISON's bits. Element i of rank r's input is
 * exact_value(dt, r, i, seed). */
#define EXACT_POISON 0xa5 /* byte written over outputs before a call */
double exact_value(symcoll_dtype_t dt, int rank, size_t i, uint32_t seed);
/* host[0..count) = rank's elements first .. first + count. */
void exact_fill_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int rank, uint32_t seed);
void exact_fill(void *host, symcoll_dtype_t dt, size_t count, int rank, uint32_t seed);
/* host[0..count) = op over nranks ranks of elements first .. first + count. */
void exact_expect_range(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int nranks,
                        uint32_t seed);
void exact_expect(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int nranks, uint32_t seed);
void exact_store(void *host, symcoll_dtype_t dt, size_t i, double v);
double exact_load(const void *host, symcoll_dtype_t dt, size_t i);
#endif
