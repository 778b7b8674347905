/* Exact-result data shared by the tests and symcoll-bench. */
#ifndef SYMCOLL_EXACT_H
#define SYMCOLL_EXACT_H
#include <stddef.h>
#include <stdint.h>

#include <symcoll.h>

/* Exact inputs: small integers (fp8: -1, 0, 1; int8: -4..4; unsigned types: 0..7; int64:
 * multiples of 2^32), so every order of combining gives the same result in every dtype, and
 * no result of up to 16 ranks has EXACT_POISON's bits. Element i of rank r's input is
 * exact_value(dt, r, i, seed).
 *
 * A reduction's inputs depend on its op: exact_value_op(dt, op, r, i, seed) is exact_value for
 * SUM, MAX and MIN; PROD draws factors whose products stay exact and small in every dtype
 * (ranks 0..2: -2, -1, 1, 2; later ranks -1, 1; unsigned types 0, 1, 2 and 0, 1), so |product|
 * <= 8; AVG takes exact_value, times 4 on fp8 (so that no average rounds to the poison). Fill a
 * reduction's inputs with the _op versions; exact_fill / exact_fill_range are those of SUM.
 *
 * The collectives' references, for rank `me` of n (seed shared):
 *   all_reduce:     exact_expect(want, dt, op, count, n, seed), inputs exact_fill_op.
 *   reduce_scatter: exact_expect_range(want, dt, op, me * count, count, n, seed), inputs
 *                   exact_fill_op of n * count elements.
 *   all_gather:     block r of recv = exact_fill(.., count, r, seed).
 *   broadcast:      recv = root's input: exact_fill(want, dt, count, root, seed).
 *   reduce:         root's recv = exact_expect(want, dt, op, count, n, seed) (other ranks'
 *                   recv stays untouched).
 *   all_to_all:     rank r's send is exact_fill(send, dt, n * count, r, seed) (its block j:
 *                   elements j * count ...); so block p of rank me's recv is rank p's block me:
 *                   exact_fill_range(want + p * count * es, dt, me * count, count, p, seed).
 * exact_expect* handle every op: SUM, PROD, MAX, MIN combine exactly; AVG sums exactly, then
 * divides once by n in the accumulation type (floating types narrower than 64 bits: float q =
 * (float)sum / (float)n, then rounded to dt to nearest even, fp8 saturating; fp64: in double;
 * integers: C's division of the sum, truncating toward zero; unsigned: unsigned division), as
 * symcoll.h defines AVG. */
#define EXACT_POISON 0xa5 /* byte written over outputs before a call */
double exact_value(symcoll_dtype_t dt, int rank, size_t i, uint32_t seed);
double exact_value_op(symcoll_dtype_t dt, symcoll_op_t op, int rank, size_t i, uint32_t seed);
/* host[0..count) = rank's elements first .. first + count (of SUM's inputs, or of op's). */
void exact_fill_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int rank, uint32_t seed);
void exact_fill(void *host, symcoll_dtype_t dt, size_t count, int rank, uint32_t seed);
void exact_fill_range_op(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int rank,
                         uint32_t seed);
void exact_fill_op(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, uint32_t seed);
/* host[0..count) = op over nranks ranks of elements first .. first + count (op's inputs). */
void exact_expect_range(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int nranks,
                        uint32_t seed);
void exact_expect(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int nranks, uint32_t seed);
/* A sum of scaled inputs (the options' scale, NCCL's PreMulSum): rank r multiplies its SUM
 * input by exact_scale(r) (2 on even ranks, rank 0 included, so that one rank checks it too;
 * 1 on odd ones: every product and sum stays exact in every dtype). */
double exact_scale(int rank);
void exact_expect_scaled_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int nranks, uint32_t seed);
/* host[i] = v rounded to dt (to nearest even; fp8 saturating to the largest finite value). */
void exact_store(void *host, symcoll_dtype_t dt, size_t i, double v);
double exact_load(const void *host, symcoll_dtype_t dt, size_t i);
#endif
