/*
 * The OVERLAP algorithm of the GEMM operations on GPU ranks. Two streams: the caller's (S:
 * barriers, GEMMs, the final reduction) and the communicator's copy-engine stream (CE: every
 * copy between ranks), ordered by events, so the GEMMs keep every SM while the shards move.
 * Everything is enqueued; nothing waits on the host; CE forks from S and joins it again
 * before the call returns, so the call can be captured in a CUDA graph. Rounds of rows keep
 * each rank's part within its staging buffer (the workspace's first part).
 *
 * all_gather_matmul, per round:
 *   S: stage own rows (unless the shard is symmetric), barrier (every rank staged; carries
 *      the signature), record E0
 *   CE: wait E0; copy each peer's rows into the gathered A, peers in rotated order, record Ej
 *   S: GEMM of own rows (from the shard itself), then per peer: wait Ej, GEMM of its rows;
 *      barrier (every rank's copies of our staging are done, so it may be restaged)
 * matmul_reduce_scatter, per round:
 *   S: barrier (every rank finished reducing the last round: staging is free)
 *   S: partial of each destination d in rotated order into one of two local buffers, record
 *      R[b]; CE: wait R[b], copy it into slot [rank] of d's staging, record F[b]; S waits F[b]
 *      before it reuses buffer b. Own partial last, straight into its own slot.
 *   S: wait CE, barrier (every partial landed), reduce the slots in rank order into c.
 * A peer in another call or a missing one makes the barriers record MISMATCH or TIMEOUT in
 * the async error (symcoll_comm_check); as with the copy engine's all_gather, the copies and
 * GEMMs already enqueued still run.
 */
#include <string.h>

#include "cuda_host.h"

static symcoll_status_t gemm_rows(symcoll_comm_t comm, const void *a, const void *b, void *c, size_t m, size_t n,
                                  size_t k, symcoll_dtype_t dt, void *stream) {
  const symcoll__gemm_t g = {
      .a = a, .b = b, .c = c, .m = m, .n = n, .k = k, .lda = k, .ldb = n, .ldc = n, .dtype = dt, .stream = stream};
  return symcoll__cuda_gemm_enqueue(comm, &g);
}

/* The stream the copies go on. While the caller's stream is being captured the copies stay on
 * it: the H200 graph test (4 ranks sharing the GPU, test_graph_matmul) replayed all_gather
 * GEMMs that read rows the forked copy stream had not written yet, a fault of this protocol's
 * events under capture that is not understood yet (the same calls run eagerly back to back with
 * the forked stream are correct). Correct first: in a graph the copies and GEMMs run in order
 * on one stream (copy engine still, no SM taken, but no overlap). */
static cudaStream_t capture_safe_ce(cuda_state_t *cs, cudaStream_t s) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) st = cudaStreamCaptureStatusActive;
  return st == cudaStreamCaptureStatusNone ? cs->ce : s;
}

static symcoll_status_t barrier(const symcoll__cuda_args_t *k, cudaStream_t s) {
  CUDA_TRY((cudaError_t)symcoll__cuda_ce_barrier(k, s));
  return SYMCOLL_OK;
}

static symcoll_status_t ag_overlap(symcoll_comm_t comm, cuda_state_t *cs, const symcoll__matmul_args_t *x,
                                   const symcoll__cuda_args_t *ka, char *g) {
  const int n = comm->nranks, me = comm->rank;
  const size_t es = symcoll_dtype_size(x->dtype), row = x->k * es;
  cudaStream_t s = (cudaStream_t)x->stream, ce = capture_safe_ce(cs, s);
  const bool zc = x->a_mem != NULL;
  const char *a = x->a;
  const size_t per = zc ? x->m_shard : cs->ws_bytes / row;
  for (size_t r0 = 0; r0 < x->m_shard; r0 += per) {
    const size_t mr = x->m_shard - r0 < per ? x->m_shard - r0 : per, bytes = mr * row;
    if (!zc) CUDA_TRY(cudaMemcpyAsync(ka->ws[me], a + r0 * row, bytes, cudaMemcpyDeviceToDevice, s));
    SYMCOLL_CHECK(barrier(ka, s));
    CUDA_TRY(cudaEventRecord(cs->ev[0], s));
    CUDA_TRY(cudaStreamWaitEvent(ce, cs->ev[0], 0));
    for (int j = 1; j < n; j++) {
      const int p = (me + j) % n;
      const char *from = zc ? (const char *)x->a_mem->ptrs[p] + x->a_off + r0 * row : ka->ws[p];
      CUDA_TRY(cudaMemcpyAsync(g + ((size_t)p * x->m_shard + r0) * row, from, bytes, cudaMemcpyDeviceToDevice, ce));
      CUDA_TRY(cudaEventRecord(cs->ev[j], ce));
    }
    char *own = g + ((size_t)me * x->m_shard + r0) * row;
    if (x->a_out && own != a + r0 * row)
      CUDA_TRY(cudaMemcpyAsync(own, a + r0 * row, bytes, cudaMemcpyDeviceToDevice, s));
    SYMCOLL_CHECK(gemm_rows(comm, a + r0 * row, x->b, (char *)x->c + ((size_t)me * x->m_shard + r0) * x->n * es, mr,
                            x->n, x->k, x->dtype, s));
    for (int j = 1; j < n; j++) {
      const int p = (me + j) % n;
      const size_t at = (size_t)p * x->m_shard + r0;
      CUDA_TRY(cudaStreamWaitEvent(s, cs->ev[j], 0));
      SYMCOLL_CHECK(gemm_rows(comm, g + at * row, x->b, (char *)x->c + at * x->n * es, mr, x->n, x->k, x->dtype, s));
    }
    SYMCOLL_CHECK(barrier(ka, s));
  }
  return SYMCOLL_OK;
}

static symcoll_status_t rs_overlap(symcoll_comm_t comm, cuda_state_t *cs, const symcoll__matmul_args_t *x,
                                   const symcoll__cuda_args_t *ka, char *tmp, size_t per) {
  const int n = comm->nranks, me = comm->rank;
  const size_t es = symcoll_dtype_size(x->dtype), cols = x->n;
  cudaStream_t s = (cudaStream_t)x->stream, ce = capture_safe_ce(cs, s);
  cudaEvent_t *ready = &cs->ev[0], *freed = &cs->ev[2];
  const char *a = x->a;
  for (size_t r0 = 0; r0 < x->m_shard; r0 += per) {
    const size_t mr = x->m_shard - r0 < per ? x->m_shard - r0 : per, slot = mr * cols * es;
    SYMCOLL_CHECK(barrier(ka, s));
    bool used[2] = {false, false};
    for (int j = 1; j <= n; j++) {
      const int d = (me + j) % n;
      const char *ad = a + ((size_t)d * x->m_shard + r0) * x->k * es;
      if (d == me) {
        SYMCOLL_CHECK(gemm_rows(comm, ad, x->b, ka->ws[me] + (size_t)me * slot, mr, cols, x->k, x->dtype, s));
        continue;
      }
      const int b = j & 1;
      char *t = tmp + (size_t)b * per * cols * es;
      if (used[b]) CUDA_TRY(cudaStreamWaitEvent(s, freed[b], 0));
      SYMCOLL_CHECK(gemm_rows(comm, ad, x->b, t, mr, cols, x->k, x->dtype, s));
      CUDA_TRY(cudaEventRecord(ready[b], s));
      CUDA_TRY(cudaStreamWaitEvent(ce, ready[b], 0));
      CUDA_TRY(cudaMemcpyAsync(ka->ws[d] + (size_t)me * slot, t, slot, cudaMemcpyDeviceToDevice, ce));
      CUDA_TRY(cudaEventRecord(freed[b], ce));
      used[b] = true;
    }
    /* CE runs in order: its last push's event covers every push of the round. */
    for (int b = 0; b < 2; b++)
      if (used[b]) CUDA_TRY(cudaStreamWaitEvent(s, freed[b], 0));
    SYMCOLL_CHECK(barrier(ka, s));
    CUDA_TRY((cudaError_t)symcoll__cuda_reduce_slots(ka->ws[me], mr * cols, n, (char *)x->c + r0 * cols * es, mr * cols,
                                                     (int)x->dtype, s));
  }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__cuda_matmul(symcoll_comm_t comm, const symcoll__matmul_args_t *x) {
  cuda_state_t *cs = comm->tp_state;
  SYMCOLL_CHECK(symcoll__cuda_failed(comm));
  const int n = comm->nranks;
  const size_t es = symcoll_dtype_size(x->dtype), rows = x->m_shard * (size_t)n;
  const bool ag = x->coll == SYMCOLL_COLL_ALL_GATHER_MATMUL;
  /* Rows per round, the same on every rank: a rank's rows of A (all_gather_matmul; a
   * symmetric shard needs no staging), or every rank's partial rows (matmul_reduce_scatter). */
  const size_t row_bytes = ag ? x->k * es : (size_t)n * x->n * es;
  if (!(ag && x->a_mem) && row_bytes > cs->ws_bytes) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "%s: one row (%zu bytes) is larger than the staging buffer (%zu bytes): "
                 "raise SYMCOLL_WORKSPACE_BYTES or use the sequential algorithm",
                 symcoll_coll_name(x->coll), row_bytes, cs->ws_bytes);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  symcoll__cuda_args_t ka = cs->args;
  ka.sig = cs->signature ? x->sig : 1;
  if (ag && x->a_mem && cs->signature) { /* ranks placing the shard differently must not meet */
    const uint32_t z = ka.sig ^ (0x9e3779b9u * (uint32_t)(x->a_mem->id + 1)) ^ (uint32_t)(x->a_off * 0x85ebca6bu);
    ka.sig = z ? z : 1;
  }
  dev_guard_t d;
  SYMCOLL_CHECK(dev_enter(comm, &d));
  symcoll_status_t s;
  void *tmp = NULL;
  if (ag) {
    char *g = x->a_out;
    s = g ? SYMCOLL_OK : symcoll__cuda_scratch_alloc(comm, rows * x->k * es, x->stream, &tmp);
    if (s == SYMCOLL_OK) s = ag_overlap(comm, cs, x, &ka, g ? g : tmp);
  } else {
    const size_t per_cap = cs->ws_bytes / row_bytes, per = x->m_shard < per_cap ? x->m_shard : per_cap;
    s = symcoll__cuda_scratch_alloc(comm, 2 * per * x->n * es, x->stream, &tmp);
    if (s == SYMCOLL_OK) s = rs_overlap(comm, cs, x, &ka, tmp, per);
  }
  if (tmp) symcoll__cuda_scratch_free(comm, tmp, x->stream);
  SYMCOLL_TRACE(SYMCOLL_SUBSYS_COLL, "rank %d: %s overlap enqueued: %s", comm->rank, symcoll_coll_name(x->coll),
                symcoll_status_string(s));
  dev_leave(comm, &d);
  return s;
}
