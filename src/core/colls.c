/* What each collective is: one row per collective (the way nccl-tests' testColl and NCCL's
 * ncclInfo describe theirs). Core derives a call's byte counts, in-place test, zero-copy
 * placement, algorithm list and fallback from the row; transports get the resolved call.
 * Adding a collective: docs/adding-a-collective.md. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define BIT SYMCOLL__ALGO_BIT
/* Across nodes, every plain collective runs these two (and only there). */
#define ACROSS (BIT(SYMCOLL_ALGO_HIERARCHICAL) | BIT(SYMCOLL_ALGO_ENGINE))

const symcoll__coll_desc_t symcoll__coll_rows[] = {
    [SYMCOLL_COLL_ALL_REDUCE] = {.takes_op = true,
                                 .finds_recv = true, /* the GPU two-shot */
                                 .in_place = SYMCOLL__IN_PLACE_SAME,
                                 .algos = BIT(SYMCOLL_ALGO_ONE_SHOT) | BIT(SYMCOLL_ALGO_TWO_SHOT) |
                                          BIT(SYMCOLL_ALGO_ONE_SHOT_DB) | BIT(SYMCOLL_ALGO_LAMPORT) |
                                          BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                                 .fallback = SYMCOLL_ALGO_TWO_SHOT,
                                 .busbw_factor = 2},
    [SYMCOLL_COLL_ALL_GATHER] = {.recv_all = true,
                                 .moves_all = true,
                                 .finds_recv = true,
                                 .in_place = SYMCOLL__IN_PLACE_SEND_IN_RECV,
                                 .algos = BIT(SYMCOLL_ALGO_PULL) | BIT(SYMCOLL_ALGO_PUSH) | BIT(SYMCOLL_ALGO_LAMPORT) |
                                          BIT(SYMCOLL_ALGO_COPY_ENGINE) | BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                                 .fallback = SYMCOLL_ALGO_PULL,
                                 .busbw_factor = 1},
    [SYMCOLL_COLL_REDUCE_SCATTER] = {.takes_op = true,
                                     .send_all = true,
                                     .moves_all = true,
                                     .in_place = SYMCOLL__IN_PLACE_RECV_IN_SEND,
                                     .algos = BIT(SYMCOLL_ALGO_PULL) | BIT(SYMCOLL_ALGO_LAMPORT) |
                                              BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                                     .fallback = SYMCOLL_ALGO_PULL,
                                     .busbw_factor = 1},
    [SYMCOLL_COLL_ALL_GATHER_MATMUL] = {.fused = true,
                                        .gemm = true,
                                        .moves_all = true,
                                        .algos = BIT(SYMCOLL_ALGO_OVERLAP) | BIT(SYMCOLL_ALGO_SEQUENTIAL),
                                        .fallback = SYMCOLL_ALGO_OVERLAP,
                                        .busbw_factor = 1},
    [SYMCOLL_COLL_MATMUL_REDUCE_SCATTER] = {.fused = true,
                                            .gemm = true,
                                            .moves_all = true, /* always a sum */
                                            .algos = BIT(SYMCOLL_ALGO_OVERLAP) | BIT(SYMCOLL_ALGO_SEQUENTIAL),
                                            .fallback = SYMCOLL_ALGO_OVERLAP,
                                            .busbw_factor = 1},
    [SYMCOLL_COLL_BROADCAST] = {.in_place = SYMCOLL__IN_PLACE_SAME,
                                .root = SYMCOLL__ROOT_SENDS,
                                .algos = BIT(SYMCOLL_ALGO_PULL) | BIT(SYMCOLL_ALGO_LAMPORT) |
                                         BIT(SYMCOLL_ALGO_COPY_ENGINE) | BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                                .fallback = SYMCOLL_ALGO_PULL,
                                .busbw_factor = 1,
                                .busbw_whole = true},
    [SYMCOLL_COLL_REDUCE] = {.takes_op = true,
                             .in_place = SYMCOLL__IN_PLACE_SAME,
                             .root = SYMCOLL__ROOT_RECEIVES,
                             .algos = BIT(SYMCOLL_ALGO_ONE_SHOT) | BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                             .fallback = SYMCOLL_ALGO_ONE_SHOT,
                             .busbw_factor = 1,
                             .busbw_whole = true},
    [SYMCOLL_COLL_ALL_TO_ALL] = {.send_all = true,
                                 .recv_all = true,
                                 .moves_all = true,
                                 .finds_recv = true,
                                 .in_place = SYMCOLL__IN_PLACE_SAME,
                                 .algos = BIT(SYMCOLL_ALGO_PULL) | BIT(SYMCOLL_ALGO_PUSH) | BIT(SYMCOLL_ALGO_LAMPORT) |
                                          BIT(SYMCOLL_ALGO_COPY_ENGINE) | BIT(SYMCOLL_ALGO_NCCL) | ACROSS,
                                 .fallback = SYMCOLL_ALGO_PULL,
                                 .busbw_factor = 1},
    /* Always a sum; the size class is x's bytes (rows x hidden), as all_reduce's. Across
     * nodes: the all-reduce through the hierarchical path, then the local pass. */
    [SYMCOLL_COLL_ALL_REDUCE_RMSNORM] = {.fused = true,
                                         .algos = BIT(SYMCOLL_ALGO_ONE_SHOT) | BIT(SYMCOLL_ALGO_TWO_SHOT) |
                                                  BIT(SYMCOLL_ALGO_LAMPORT) | BIT(SYMCOLL_ALGO_SEQUENTIAL),
                                         .fallback = SYMCOLL_ALGO_SEQUENTIAL,
                                         .busbw_factor = 2},
    /* Always a sum; x holds every rank's rows (nranks x rows x hidden), the size class, as
     * reduce_scatter's. Across nodes: the reduce-scatter through the hierarchical path, then
     * the local pass. */
    [SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM] = {.fused = true,
                                             .send_all = true,
                                             .moves_all = true,
                                             .algos = BIT(SYMCOLL_ALGO_PULL) | BIT(SYMCOLL_ALGO_SEQUENTIAL),
                                             .fallback = SYMCOLL_ALGO_SEQUENTIAL,
                                             .busbw_factor = 1},
};
_Static_assert(SYMCOLL_NUM_ALGOS <= 32, "the rows hold algorithms as bits of a uint32_t");
_Static_assert(sizeof symcoll__coll_rows / sizeof symcoll__coll_rows[0] == SYMCOLL_NUM_COLL_KINDS,
               "every collective of SYMCOLL_COLL_MAP has a row here");

int symcoll_coll_is_fused(symcoll_coll_t coll) {
  const symcoll__coll_desc_t *d = symcoll__coll_desc(coll);
  return d ? d->fused : -1;
}

bool symcoll__algo_of(symcoll_coll_t coll, symcoll_algo_t algo) {
  const symcoll__coll_desc_t *d = symcoll__coll_desc(coll);
  return d && (unsigned)algo < SYMCOLL_NUM_ALGOS && (d->algos & BIT(algo)) != 0;
}

size_t symcoll__coll_bytes(symcoll_coll_t coll, size_t count, size_t esize, int nranks) {
  return count * esize * (symcoll__coll_rows[coll].moves_all ? (size_t)nranks : 1);
}

const char *symcoll__algo_list(symcoll_coll_t coll, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (int a = 0; a < SYMCOLL_NUM_ALGOS; a++)
    if (symcoll__algo_of(coll, (symcoll_algo_t)a) && used < n) {
      int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", symcoll_algo_name((symcoll_algo_t)a));
      used += w > 0 ? (size_t)w : 0;
    }
  return buf;
}
