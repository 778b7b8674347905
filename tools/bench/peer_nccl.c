/* NCCL as a peer column: ncclAllReduce / ncclAllGather / ncclReduceScatter / ncclBroadcast /
 * ncclReduce / ncclAlltoAll (before NCCL 2.28: ncclSend / ncclRecv per peer) on its own
 * communicator, its id sent through the bench's control communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef SYMCOLL_BENCH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

static int nccl_init(bctx_t *c, column_t *col, const bench_coll_t *coll) {
  if (!c->gpu) {
    snprintf(col->na, sizeof col->na, "CPU backend");
    return 1;
  }
  /* ncclAvg of floating types multiplies each input by 1/n and sums: other bits than symcoll's
   * average (one division of the sum) unless n is a power of two. */
  if (coll->has_op && c->op == SYMCOLL_AVG && (c->nranks & (c->nranks - 1)) != 0) {
    snprintf(col->na, sizeof col->na, "n/a: ncclAvg premultiplies by 1/%d (other bits than one division)", c->nranks);
    return 1;
  }
  int ngpu = 0;
  cudaGetDeviceCount(&ngpu);
  /* Every rank must have a GPU of its own: NCCL refuses two ranks on one GPU. */
  if (c->nranks > ngpu) {
    snprintf(col->na, sizeof col->na, "n/a: NCCL refuses two ranks on one GPU (%d ranks, %d GPUs)", c->nranks, ngpu);
    return 1;
  }
  ncclUniqueId id;
  if (c->rank == 0) ncclGetUniqueId(&id);
  bench_bcast(c, &id, sizeof id);
  ncclComm_t *nc = malloc(sizeof *nc);
  ncclResult_t r = ncclCommInitRank(nc, c->nranks, id, c->rank);
  if (r != ncclSuccess) {
    snprintf(col->na, sizeof col->na, "n/a: ncclCommInitRank: %s", ncclGetErrorString(r));
    free(nc);
    return 1;
  }
  col->state = nc;
  return 0;
}

/* ncclDataType_t by value (the fp8 types exist from NCCL 2.24 on). */
static const int nccl_dtype[SYMCOLL_NUM_DTYPES] = {
    [SYMCOLL_INT8] = 0,    [SYMCOLL_UINT8] = 1,    [SYMCOLL_INT32] = 2,        [SYMCOLL_UINT32] = 3,
    [SYMCOLL_INT64] = 4,   [SYMCOLL_UINT64] = 5,   [SYMCOLL_FLOAT16] = 6,      [SYMCOLL_FLOAT32] = 7,
    [SYMCOLL_FLOAT64] = 8, [SYMCOLL_BFLOAT16] = 9, [SYMCOLL_FLOAT8_E4M3] = 10, [SYMCOLL_FLOAT8_E5M2] = 11};

/* all_to_all as users write it: ncclAlltoAll (NCCL 2.28), else a send and a receive per peer
 * in a group. In place (send == recv, which NCCL does not define) the bench's column is as a
 * user would have it: through a copy of the input first. */
static ncclResult_t all_to_all(const void *send, void *recv, size_t count, size_t es, ncclDataType_t t, int n,
                               ncclComm_t nc, cudaStream_t s) {
  const size_t block = count * es;
  void *tmp = NULL;
  if (send == recv) {
    if (cudaMallocAsync(&tmp, block * (size_t)n, s) != cudaSuccess) return ncclUnhandledCudaError;
    cudaMemcpyAsync(tmp, send, block * (size_t)n, cudaMemcpyDeviceToDevice, s);
    send = tmp;
  }
  ncclResult_t r;
#if NCCL_VERSION_CODE >= 22803
  r = ncclAlltoAll(send, recv, count, t, nc, s);
#else
  r = ncclGroupStart();
  for (int p = 0; r == ncclSuccess && p < n; p++) {
    r = ncclSend((const char *)send + (size_t)p * block, count, t, p, nc, s);
    if (r == ncclSuccess) r = ncclRecv((char *)recv + (size_t)p * block, count, t, p, nc, s);
  }
  ncclResult_t e = ncclGroupEnd();
  if (r == ncclSuccess) r = e;
#endif
  if (tmp) cudaFreeAsync(tmp, s);
  return r;
}

static int nccl_run(bctx_t *c, column_t *col, const bench_coll_t *coll, const void *send, void *recv, size_t count,
                    symcoll_dtype_t dt, symcoll_op_t op) {
  const ncclDataType_t t = (ncclDataType_t)nccl_dtype[dt];
  static const ncclRedOp_t ops[SYMCOLL_NUM_OPS] = {[SYMCOLL_SUM] = ncclSum,
                                                   [SYMCOLL_PROD] = ncclProd,
                                                   [SYMCOLL_MAX] = ncclMax,
                                                   [SYMCOLL_MIN] = ncclMin,
                                                   [SYMCOLL_AVG] = ncclAvg};
  const ncclRedOp_t o = ops[op];
  const ncclComm_t nc = *(ncclComm_t *)col->state;
  cudaStream_t s = (cudaStream_t)c->stream;
  ncclResult_t r = ncclInvalidUsage;
  switch (coll->kind) {
    case SYMCOLL_COLL_ALL_REDUCE:
      r = ncclAllReduce(send, recv, count, t, o, nc, s);
      break;
    case SYMCOLL_COLL_ALL_GATHER:
      r = ncclAllGather(send, recv, count, t, nc, s);
      break;
    case SYMCOLL_COLL_REDUCE_SCATTER:
      r = ncclReduceScatter(send, recv, count, t, o, nc, s);
      break;
    case SYMCOLL_COLL_BROADCAST:
      r = ncclBroadcast(send, recv, count, t, c->root, nc, s);
      break;
    case SYMCOLL_COLL_REDUCE:
      r = ncclReduce(send, recv, count, t, o, c->root, nc, s);
      break;
    case SYMCOLL_COLL_ALL_TO_ALL:
      r = all_to_all(send, recv, count, symcoll_dtype_size(dt), t, c->nranks, nc, s);
      break;
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  if (r != ncclSuccess) snprintf(col->err, sizeof col->err, "%s", ncclGetErrorString(r));
  return r != ncclSuccess;
}

static void nccl_fini(bctx_t *c, column_t *col) {
  (void)c;
  if (col->state) ncclCommDestroy(*(ncclComm_t *)col->state);
  free(col->state);
}

int peer_nccl_column(column_t *col) {
  memset(col, 0, sizeof *col);
  col->name = "nccl";
  col->is_baseline = true;
  col->init = nccl_init;
  col->run = nccl_run;
  col->fini = nccl_fini;
  return 1;
}
#else
int peer_nccl_column(column_t *col) {
  (void)col;
  return 0;
}
#endif
