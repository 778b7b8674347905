/* Reduce-scatter on CPU ranks (pull): each rank stages its peers' blocks of its input (unless
 * the input is symmetric), then reduces its own block from every rank's copy, in rank order.
 * Each epoch moves one chunk of every block. LAMPORT runs the pull on CPU ranks. */
#include <string.h>

#include "host_internal.h"

static symcoll_status_t pull(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                             size_t cnt, size_t per) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es, count = a->count;
  const char *send = a->send;
  /* Zero-copy: peers read block [me] of our input in place; the offset of this chunk's
   * start, block 0, is what we publish. */
  struct symcoll_mem *zmem = a->send_mem;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, zmem, a->send_off + lo * es);
  char *mine = hs->data[me] + ep.half_off;
  const symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  const char *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  /* Where block q's chunk starts in a peer's input: staging holds chunks at q * per, a
   * symmetric input whole blocks at q * count. */
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    const size_t m = host_min(cnt - j, sub);
    if (!zmem)
      for (int q = 0; q < n; q++)
        if (q != me) memcpy(mine + ((size_t)q * per + j) * es, send + ((size_t)q * count + lo + j) * es, m * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    if (k == 0)
      for (int p = 0; p < n; p++)
        if (p != me) {
          const bool staged = hs->pad[p]->src_mem[ep.e & 1] < 0;
          const size_t span = ((size_t)(n - 1) * (staged ? per : count) + cnt) * es;
          if (!(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, span))) return SYMCOLL_ERR_MISMATCH;
          base[p] += (size_t)me * (staged ? per : count) * es;
        }
    for (int p = 0; p < n; p++) srcs[p] = p == me ? send + ((size_t)me * count + lo + j) * es : base[p] + j * es;
    reduce((char *)a->recv + (lo + j) * es, srcs, n, m);
  }
  return symcoll__host_epoch_end(comm, hs, &ep, zmem != NULL);
}

symcoll_status_t symcoll__host_reduce_scatter(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype);
  const size_t per = hs->half / es / (size_t)comm->nranks; /* a chunk of every block fills a half */
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per)
    s = pull(comm, hs, a, lo, host_min(a->count - lo, per), per);
  return s;
}
