/* NCCL as a peer column: ncclAllReduce on its own communicator, id sent by our bootstrap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef SYMCOLL_BENCH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

static int nccl_init(bctx_t *c, column_t *col) {
  if (!c->gpu) {
    snprintf(col->na, sizeof col->na, "CPU backend");
    return 1;
  }
  int ngpu = 0;
  cudaGetDeviceCount(&ngpu);
  /* Every rank must have a GPU of its own: NCCL refuses two ranks on one GPU. */
  if (c->nranks > ngpu) {
    snprintf(col->na, sizeof col->na, "n/a: NCCL refuses two ranks on one GPU (%d ranks, %d GPUs)",
             c->nranks, ngpu);
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

static int nccl_run(bctx_t *c, column_t *col, const void *send, void *recv, size_t count,
                    symcoll_dtype_t dt, symcoll_op_t op) {
  ncclDataType_t t = dt == SYMCOLL_FLOAT32 ? ncclFloat32 : dt == SYMCOLL_FLOAT16 ? ncclFloat16 : ncclBfloat16;
  ncclRedOp_t o = op == SYMCOLL_SUM ? ncclSum : op == SYMCOLL_MAX ? ncclMax : ncclMin;
  return ncclAllReduce(send, recv, count, t, o, *(ncclComm_t *)col->state, (cudaStream_t)c->stream) != ncclSuccess;
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
