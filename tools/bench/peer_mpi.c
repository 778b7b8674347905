/* Open MPI as a peer column of the CPU backend (symcoll-bench-mpi only): MPI_Allreduce,
 * MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce, MPI_Alltoall. MPI has no
 * 16-bit float types: fp16 and bf16 are MPI_UINT16_T with user-defined sum / max / min / prod
 * that widen to fp32, as users do; the fp8 types have none (n/a for the reductions), and no
 * type has an average (n/a for avg). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "core/half.h"

#ifdef SYMCOLL_BENCH_MPI
#include <mpi.h>

static int active;
int peer_mpi_active(void) {
  return active;
}
void peer_mpi_init(int *argc, char ***argv) {
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_RANK")) {
    MPI_Init(argc, argv);
    active = 1;
  }
}
void peer_mpi_finalize(void) {
  if (active) MPI_Finalize();
}
_Noreturn void peer_mpi_abort(int code) {
  if (active) MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

/* ---- 16-bit floats ------------------------------------------------------------------------ */
#define HALF_OP(NAME, TOF, FROMF, EXPR)                                \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *t) { \
    (void)t;                                                           \
    const uint16_t *a = in;                                            \
    uint16_t *b = inout;                                               \
    for (int i = 0; i < *len; i++) {                                   \
      float x = TOF(a[i]), y = TOF(b[i]);                              \
      b[i] = FROMF(EXPR);                                              \
    }                                                                  \
  }
HALF_OP(bf_sum, symcoll__bf16_to_f32, symcoll__f32_to_bf16, x + y)
HALF_OP(bf_max, symcoll__bf16_to_f32, symcoll__f32_to_bf16, x > y ? x : y)
HALF_OP(bf_min, symcoll__bf16_to_f32, symcoll__f32_to_bf16, x < y ? x : y)
HALF_OP(h_sum, symcoll__f16_to_f32, symcoll__f32_to_f16, x + y)
HALF_OP(h_max, symcoll__f16_to_f32, symcoll__f32_to_f16, x > y ? x : y)
HALF_OP(h_min, symcoll__f16_to_f32, symcoll__f32_to_f16, x < y ? x : y)
HALF_OP(bf_prod, symcoll__bf16_to_f32, symcoll__f32_to_bf16, x *y)
HALF_OP(h_prod, symcoll__f16_to_f32, symcoll__f32_to_f16, x *y)

typedef struct {
  MPI_Op half_ops[2][SYMCOLL_AVG]; /* [bf16, fp16][sum, max, min, prod] (symcoll_op_t's order) */
} mpi_state_t;

static int mpi_init(bctx_t *c, column_t *col, const bench_coll_t *coll) {
  if (!active || c->gpu) {
    snprintf(col->na, sizeof col->na, "n/a: not launched under mpirun");
    return 1;
  }
  if (c->inplace && coll->kind == SYMCOLL_COLL_REDUCE_SCATTER) { /* MPI's in-place result sits elsewhere */
    snprintf(col->na, sizeof col->na, "n/a: MPI_Reduce_scatter_block in place puts the result at the buffer's start");
    return 1;
  }
  if (coll->has_op && c->op == SYMCOLL_AVG) {
    snprintf(col->na, sizeof col->na, "n/a: MPI has no average");
    return 1;
  }
  mpi_state_t *st = calloc(1, sizeof *st);
  MPI_User_function *fns[2][SYMCOLL_AVG] = {{bf_sum, bf_max, bf_min, bf_prod}, {h_sum, h_max, h_min, h_prod}};
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < SYMCOLL_AVG; o++) MPI_Op_create(fns[t][o], 1, &st->half_ops[t][o]);
  col->state = st;
  return 0;
}

static int mpi_run(bctx_t *c, column_t *col, const bench_coll_t *coll, const void *send, void *recv, size_t count,
                   symcoll_dtype_t dt, symcoll_op_t op) {
  mpi_state_t *st = col->state;
  const int bytes = (int)(count * symcoll_dtype_size(dt)), me = c->rank;
  switch (coll->kind) { /* bytes are bytes */
    case SYMCOLL_COLL_ALL_GATHER: {
      const void *in = send == (const char *)recv + (size_t)me * (size_t)bytes ? MPI_IN_PLACE : send;
      return MPI_Allgather(in, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS;
    }
    case SYMCOLL_COLL_BROADCAST: /* MPI broadcasts one buffer: the root's input goes there first */
      if (me == c->root && send != recv) memcpy(recv, send, (size_t)bytes);
      return MPI_Bcast(recv, bytes, MPI_BYTE, c->root, MPI_COMM_WORLD) != MPI_SUCCESS;
    case SYMCOLL_COLL_ALL_TO_ALL:
      return MPI_Alltoall(send == recv ? MPI_IN_PLACE : send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD) !=
             MPI_SUCCESS;
    case SYMCOLL_COLL_ALL_REDUCE:
    case SYMCOLL_COLL_REDUCE_SCATTER:
    case SYMCOLL_COLL_REDUCE:
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  MPI_Datatype t;
  MPI_Op o = op == SYMCOLL_SUM ? MPI_SUM : op == SYMCOLL_MAX ? MPI_MAX : op == SYMCOLL_MIN ? MPI_MIN : MPI_PROD;
  switch (dt) {
    case SYMCOLL_FLOAT32:
      t = MPI_FLOAT;
      break;
    case SYMCOLL_FLOAT64:
      t = MPI_DOUBLE;
      break;
    case SYMCOLL_INT8:
      t = MPI_INT8_T;
      break;
    case SYMCOLL_UINT8:
      t = MPI_UINT8_T;
      break;
    case SYMCOLL_INT32:
      t = MPI_INT32_T;
      break;
    case SYMCOLL_UINT32:
      t = MPI_UINT32_T;
      break;
    case SYMCOLL_INT64:
      t = MPI_INT64_T;
      break;
    case SYMCOLL_UINT64:
      t = MPI_UINT64_T;
      break;
    case SYMCOLL_BFLOAT16:
      t = MPI_UINT16_T, o = st->half_ops[0][op];
      break;
    case SYMCOLL_FLOAT16:
      t = MPI_UINT16_T, o = st->half_ops[1][op];
      break;
    default:
      snprintf(col->err, sizeof col->err, "MPI has no %s reduction", symcoll_dtype_name(dt));
      return 1;
  }
  if (coll->kind == SYMCOLL_COLL_ALL_REDUCE)
    return MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, t, o, MPI_COMM_WORLD) != MPI_SUCCESS;
  if (coll->kind == SYMCOLL_COLL_REDUCE)
    return MPI_Reduce(me == c->root && send == recv ? MPI_IN_PLACE : send, recv, (int)count, t, o, c->root,
                      MPI_COMM_WORLD) != MPI_SUCCESS;
  return MPI_Reduce_scatter_block(send, recv, (int)count, t, o, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static void mpi_fini(bctx_t *c, column_t *col) {
  (void)c;
  mpi_state_t *st = col->state;
  if (!st) return;
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < SYMCOLL_AVG; o++) MPI_Op_free(&st->half_ops[t][o]);
  free(st);
}

int peer_mpi_column(column_t *col) {
  memset(col, 0, sizeof *col);
  col->name = "mpi";
  col->is_baseline = true;
  col->init = mpi_init;
  col->run = mpi_run;
  col->fini = mpi_fini;
  return 1;
}
#else
int peer_mpi_active(void) {
  return 0;
}
void peer_mpi_init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
}
void peer_mpi_finalize(void) {}
_Noreturn void peer_mpi_abort(int code) {
  _exit(code);
}
int peer_mpi_column(column_t *col) {
  (void)col;
  return 0;
}
#endif
