/* The OVERLAP algorithm of the GEMM operations on CPU ranks, over the epoch protocol
 * (host_internal.h), in rounds of rows that fit a workspace half:
 *  - all_gather_matmul: each rank stages its rows (unless its shard is symmetric), then
 *    multiplies its own rows and every peer's in rotated order, each GEMM reading the peer's
 *    rows where they lie (no gather copy; a_out, when asked for, is copied from there);
 *  - matmul_reduce_scatter: each rank computes the partial product of every destination's
 *    rows into its staging (rounded to the dtype, own rows last), then reduces the partials
 *    of its own rows from every rank's staging in rank order.
 * The first wait of each call compares calls, as for every collective, before any output
 * is written. */
#include <string.h>

#include "host_internal.h"

static symcoll_status_t ag_round(symcoll_comm_t comm, host_state_t *hs, const symcoll__matmul_args_t *x,
                                 const symcoll__coll_args_t *id, const float *b32, size_t r0, size_t mr) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(x->dtype), k = x->k, rb = mr * k * es;
  const char *mine = (const char *)x->a + r0 * k * es;
  struct symcoll_mem *zmem = x->a_mem;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, id, r0 == 0, zmem, x->a_off + r0 * k * es);
  if (!zmem) memcpy(hs->data[me] + ep.half_off, mine, rb);
  symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | 1);
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  const char *rows[SYMCOLL_MAX_RANKS];
  for (int p = 0; p < n; p++)
    if (p != me && !(rows[p] = symcoll__host_peer_input(comm, hs, &ep, p, rb))) return SYMCOLL_ERR_MISMATCH;
  rows[me] = mine;
  char *a_out = x->a_out;
  for (int j = 0; j < n; j++) { /* own rows first, then peers from rank + 1 on */
    const int p = (me + j) % n;
    const size_t row = (size_t)p * x->m_shard + r0;
    SYMCOLL_CHECK(
        symcoll__host_gemm_rows(hs, rows[p], k, b32, (char *)x->c + row * x->n * es, x->n, mr, x->n, k, x->dtype));
    if (a_out && a_out + row * k * es != rows[p]) memcpy(a_out + row * k * es, rows[p], rb);
  }
  return symcoll__host_epoch_end(comm, hs, &ep, zmem != NULL);
}

static symcoll_status_t rs_round(symcoll_comm_t comm, host_state_t *hs, const symcoll__matmul_args_t *x,
                                 const symcoll__coll_args_t *id, const float *b32, size_t r0, size_t mr) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(x->dtype), cols = x->n, slot = mr * cols * es;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, id, r0 == 0, NULL, 0);
  char *stage = hs->data[me] + ep.half_off;
  for (int j = 1; j <= n; j++) { /* destination rank + 1 first, own rows last */
    const int d = (me + j) % n;
    const char *a = (const char *)x->a + ((size_t)d * x->m_shard + r0) * x->k * es;
    SYMCOLL_CHECK(symcoll__host_gemm_rows(hs, a, x->k, b32, stage + (size_t)d * slot, cols, mr, cols, x->k, x->dtype));
  }
  symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | 1);
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (int p = 0; p < n; p++) {
    const char *base = p == me ? stage : symcoll__host_peer_input(comm, hs, &ep, p, (size_t)n * slot);
    if (!base) return SYMCOLL_ERR_MISMATCH;
    srcs[p] = base + (size_t)me * slot;
  }
  symcoll__host_reduce_fn(x->dtype, SYMCOLL_SUM)((char *)x->c + r0 * cols * es, srcs, n, mr * cols);
  return symcoll__host_epoch_end(comm, hs, &ep, false);
}

symcoll_status_t symcoll__host_matmul(symcoll_comm_t comm, const symcoll__matmul_args_t *x) {
  host_state_t *hs = comm->tp_state;
  const size_t es = symcoll_dtype_size(x->dtype);
  const bool ag = x->coll == SYMCOLL_COLL_ALL_GATHER_MATMUL;
  /* Rows per round: a rank's rows of A (all_gather_matmul), or every destination's partial
   * rows (matmul_reduce_scatter), within a workspace half; the same on every rank. */
  const size_t row_bytes = ag ? x->k * es : (size_t)comm->nranks * x->n * es;
  const size_t per = row_bytes > hs->half ? 0 : hs->half / row_bytes;
  if (per == 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "%s: one row (%zu bytes) is larger than the workspace half (%zu bytes): "
                 "raise SYMCOLL_WORKSPACE_BYTES or use the sequential algorithm",
                 symcoll_coll_name(x->coll), row_bytes, hs->half);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  /* What peers compare at the first wait: the call's identity (host_call_t). */
  const symcoll__coll_args_t id = {
      .coll = x->coll, .count = x->m_shard, .dtype = x->dtype, .op = SYMCOLL_SUM, .algo = x->algo, .sig = x->sig};
  const float *b32 = symcoll__host_gemm_b(hs, x->b, x->k, x->n, x->n, x->dtype);
  if (!b32) return SYMCOLL_ERR_NO_MEMORY;
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t r0 = 0; r0 < x->m_shard && s == SYMCOLL_OK; r0 += per) {
    const size_t mr = host_min(x->m_shard - r0, per);
    s = ag ? ag_round(comm, hs, x, &id, b32, r0, mr) : rs_round(comm, hs, x, &id, b32, r0, mr);
  }
  return s;
}
