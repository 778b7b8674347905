/* NCCL as a peer column: ncclAllReduce / ncclAllGather / ncclReduceScatter on its own
 * communicator, its id sent through the bench's control communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef SYMCOLL_BENCH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

static int nccl_init(bctx_t *c, column_t *col, const bench_coll_t *coll) {
  (void)coll;
  if (!c->gpu) {
    snprintf(col->na, sizeof col->na, "CPU backend");
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

static int nccl_run(bctx_t *c, column_t *col, const bench_coll_t *coll, const void *send, void *recv, size_t count,
                    symcoll_dtype_t dt, symcoll_op_t op) {
  const ncclDataType_t t = (ncclDataType_t)nccl_dtype[dt];
  const ncclRedOp_t o = op == SYMCOLL_SUM ? ncclSum : op == SYMCOLL_MAX ? ncclMax : ncclMin;
  const ncclComm_t nc = *(ncclComm_t *)col->state;
  cudaStream_t s = (cudaStream_t)c->stream;
  ncclResult_t r = coll->kind == SYMCOLL_COLL_ALL_REDUCE   ? ncclAllReduce(send, recv, count, t, o, nc, s)
                   : coll->kind == SYMCOLL_COLL_ALL_GATHER ? ncclAllGather(send, recv, count, t, nc, s)
                                                           : ncclReduceScatter(send, recv, count, t, o, nc, s);
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
