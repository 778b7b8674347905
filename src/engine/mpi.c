/*
 * libsymcoll_mpi: MPI as the engine between nodes for CPU ranks (engine.h), and
 * symcoll_comm_create_mpi (symcoll_mpi.h). Built against the MPI found at build time; libsymcoll
 * opens it at run time, so libsymcoll itself never depends on MPI.
 *
 * Every call is non-blocking (MPI_I*) and completed by polling MPI_Test, so that a wait is
 * bounded by the communicator's timeout and ends on an abort, as symcoll's own waits do; MPI's
 * errors are returned (MPI_ERRORS_RETURN) and become symcoll statuses. After a call that did
 * not complete, the engine is broken: its request is never freed, and later calls refuse.
 * Types MPI does not reduce (fp16, bf16, fp8) get user operations that run symcoll's reduce
 * loops, so they round as symcoll does everywhere else.
 *
 * AVG, which MPI lacks, is MPI_SUM followed by one division by the number of ranks, done the
 * way symcoll defines it (symcoll.h): fp32 and fp64 divide their sum in their own type,
 * integers divide their (wrapped-around) sum with C's division, truncating toward zero; fp16,
 * bf16 and fp8 are widened to fp32 first (symcoll's conversions, lent in the env), summed by
 * MPI as MPI_FLOAT, divided in fp32 and rounded back once, so their sum never rounds to the
 * narrow type before the division (a user operation over the narrow type would round at every
 * step, and an average of partial averages would divide more than once).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "engine.h"
#include "symcoll_mpi.h"

#define API __attribute__((visibility("default")))

typedef struct {
  MPI_Comm comm;
  const symcoll__engine_env_t *env;
  atomic_int aborted;
  int broken; /* a request was left pending: nothing more may run on comm */
  int rank, nranks;
} mpi_engine_t;

static symcoll__engine_env_t g_env; /* the first caller's (one libsymcoll per process) */
static int g_we_initialised, g_open_engines;
static MPI_Datatype g_half[SYMCOLL_NUM_DTYPES]; /* our types for the dtypes of user operations */
static MPI_Op g_user_op[SYMCOLL_NUM_OPS];

static void say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int level, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_env.log) g_env.log(level, buf);
}

static const char *mpi_error(int rc) {
  static _Thread_local char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, sizeof buf, "MPI error %d", rc);
  return buf;
}

/* ---- types and operations ----------------------------------------------------------------- */

static MPI_Datatype native_type(symcoll_dtype_t d) {
  switch (d) {
    case SYMCOLL_FLOAT32:
      return MPI_FLOAT;
    case SYMCOLL_FLOAT64:
      return MPI_DOUBLE;
    case SYMCOLL_INT8:
      return MPI_INT8_T;
    case SYMCOLL_UINT8:
      return MPI_UINT8_T;
    case SYMCOLL_INT32:
      return MPI_INT32_T;
    case SYMCOLL_UINT32:
      return MPI_UINT32_T;
    case SYMCOLL_INT64:
      return MPI_INT64_T;
    case SYMCOLL_UINT64:
      return MPI_UINT64_T;
    default:
      return MPI_DATATYPE_NULL;
  }
}

/* inout[i] = in[i] op inout[i], in symcoll's order: the lower rank's operand (in) first. */
#define USER_OP(name, OP)                                                   \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {     \
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++)                            \
      if (g_half[d] != MPI_DATATYPE_NULL && *dt == g_half[d]) {             \
        const void *srcs[2] = {in, inout};                                  \
        g_env.reduce((symcoll_dtype_t)d, OP, inout, srcs, 2, (size_t)*len); \
        return;                                                             \
      }                                                                     \
  }
USER_OP(op_sum, SYMCOLL_SUM)
USER_OP(op_max, SYMCOLL_MAX)
USER_OP(op_min, SYMCOLL_MIN)
USER_OP(op_prod, SYMCOLL_PROD)

static int types_init(void) {
  for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) {
    g_half[d] = MPI_DATATYPE_NULL;
    if (native_type((symcoll_dtype_t)d) != MPI_DATATYPE_NULL) continue;
    const int es = (int)symcoll_dtype_size((symcoll_dtype_t)d);
    if (MPI_Type_contiguous(es, MPI_BYTE, &g_half[d]) != MPI_SUCCESS || MPI_Type_commit(&g_half[d]) != MPI_SUCCESS)
      return -1;
  }
  /* Not commutative to MPI: it then combines in rank order, as symcoll promises. */
  if (MPI_Op_create(op_sum, 0, &g_user_op[SYMCOLL_SUM]) != MPI_SUCCESS ||
      MPI_Op_create(op_max, 0, &g_user_op[SYMCOLL_MAX]) != MPI_SUCCESS ||
      MPI_Op_create(op_min, 0, &g_user_op[SYMCOLL_MIN]) != MPI_SUCCESS ||
      MPI_Op_create(op_prod, 0, &g_user_op[SYMCOLL_PROD]) != MPI_SUCCESS)
    return -1;
  g_user_op[SYMCOLL_AVG] = MPI_OP_NULL; /* AVG never reaches MPI as such (avg_coll) */
  return 0;
}

static MPI_Datatype elem_type(symcoll_dtype_t d) {
  MPI_Datatype t = native_type(d);
  return t != MPI_DATATYPE_NULL ? t : g_half[d];
}
/* The MPI operation of op on d's elements (AVG is run as SUM: see avg_coll). */
static MPI_Op elem_op(symcoll_dtype_t d, symcoll_op_t op) {
  if (op == SYMCOLL_AVG) op = SYMCOLL_SUM;
  if (native_type(d) == MPI_DATATYPE_NULL) return g_user_op[op];
  switch (op) {
    case SYMCOLL_SUM:
    case SYMCOLL_AVG:
      return MPI_SUM;
    case SYMCOLL_MAX:
      return MPI_MAX;
    case SYMCOLL_MIN:
      return MPI_MIN;
    case SYMCOLL_PROD:
      return MPI_PROD;
    case SYMCOLL_NUM_OPS:
      break;
  }
  return MPI_OP_NULL;
}
static bool is_narrow_float(symcoll_dtype_t d) {
  return native_type(d) == MPI_DATATYPE_NULL;
}

/* buf[i] /= n for a type MPI sums itself, as symcoll's AVG divides: floating types in their
 * own precision, integers with C's division (signed: truncating toward zero). */
#define DIVIDE(T)                                                               \
  for (size_t i = 0; i < count; i++) ((T *)buf)[i] = (T)(((T *)buf)[i] / (T)n); \
  return
static void divide(symcoll_dtype_t d, void *buf, size_t count, int n) {
  switch (d) {
    case SYMCOLL_FLOAT32:
      DIVIDE(float);
    case SYMCOLL_FLOAT64:
      DIVIDE(double);
    case SYMCOLL_INT8:
      DIVIDE(int8_t);
    case SYMCOLL_UINT8:
      DIVIDE(uint8_t);
    case SYMCOLL_INT32:
      DIVIDE(int32_t);
    case SYMCOLL_UINT32:
      DIVIDE(uint32_t);
    case SYMCOLL_INT64:
      DIVIDE(int64_t);
    case SYMCOLL_UINT64:
      DIVIDE(uint64_t);
    case SYMCOLL_FLOAT16:
    case SYMCOLL_BFLOAT16:
    case SYMCOLL_FLOAT8_E4M3:
    case SYMCOLL_FLOAT8_E5M2:
    case SYMCOLL_NUM_DTYPES:
      return; /* divided in fp32 (avg_coll) */
  }
}
#undef DIVIDE

/* ---- bounded completion ----------------------------------------------------------------------- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static symcoll_status_t from_mpi(mpi_engine_t *e, int rc, const char *what) {
  int cls = 0;
  MPI_Error_class(rc, &cls);
  say(1, "MPI engine: %s: %s", what, mpi_error(rc));
  e->broken = 1;
  /* A lost peer shows as a failed process (ULFM) or as a broken connection. */
  return cls == MPI_ERR_OTHER || cls == MPI_ERR_INTERN ? SYMCOLL_ERR_PEER_LOST : SYMCOLL_ERR_SYSTEM;
}

static symcoll_status_t complete(mpi_engine_t *e, MPI_Request *req, int rc, const char *what) {
  if (rc != MPI_SUCCESS) return from_mpi(e, rc, what);
  const uint64_t start = now_ns(), deadline = start + (uint64_t)e->env->timeout_ms * 1000000ull;
  for (uint32_t spins = 0;; spins++) {
    int done = 0;
    rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return from_mpi(e, rc, what);
    if (done) return SYMCOLL_OK;
    if ((spins & 255) != 255) continue;
    if (atomic_load(&e->aborted)) {
      e->broken = 1;
      return SYMCOLL_ERR_ABORTED;
    }
    if (now_ns() >= deadline) {
      say(1, "MPI engine: %s did not complete within %d ms (rank %d of %d)", what, e->env->timeout_ms, e->rank,
          e->nranks);
      e->broken = 1;
      return SYMCOLL_ERR_TIMEOUT;
    }
    sched_yield(); /* ranks may outnumber cores */
  }
}

/* ---- the engine --------------------------------------------------------------------------------- */

/* A buffer of the engine's own, freed once no request that may still write it is pending (a
 * call that did not complete leaves the engine broken and its buffers allocated). */
static void scratch_free(mpi_engine_t *e, void *p) {
  if (!e->broken) free(p);
}

/* reduce_scatter. In place (recv is our block of send), MPI would write the result over the
 * input's first block: the result goes through a scratch block instead, so the other blocks
 * stay as they were. */
static symcoll_status_t reduce_scatter(mpi_engine_t *e, const void *send, void *recv, size_t count, size_t es,
                                       MPI_Datatype t, MPI_Op op) {
  const bool in_place = (char *)recv == (const char *)send + (size_t)e->rank * count * es;
  void *out = in_place ? malloc(count * es > 0 ? count * es : 1) : recv;
  if (!out) return SYMCOLL_ERR_NO_MEMORY;
  MPI_Request req;
  int rc = MPI_Ireduce_scatter_block(send, out, (int)count, t, op, e->comm, &req);
  symcoll_status_t s = complete(e, &req, rc, "MPI_Ireduce_scatter_block");
  if (in_place) {
    if (s == SYMCOLL_OK) memcpy(recv, out, count * es);
    scratch_free(e, out);
  }
  return s;
}

/* One collective over count elements of MPI type t (es bytes each) with MPI operation op. */
static symcoll_status_t mpi_coll(mpi_engine_t *e, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 size_t es, MPI_Datatype t, MPI_Op op, int root) {
  const int n = (int)count;
  MPI_Request req;
  int rc;
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, t, op, e->comm, &req);
      return complete(e, &req, rc, "MPI_Iallreduce");
    case SYMCOLL_COLL_ALL_GATHER: { /* bytes: any type */
      const bool in_place = (const char *)send == (char *)recv + (size_t)e->rank * count * es;
      rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, t, recv, n, t, e->comm, &req);
      return complete(e, &req, rc, "MPI_Iallgather");
    }
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return reduce_scatter(e, send, recv, count, es, t, op);
    case SYMCOLL_COLL_BROADCAST:
      /* MPI broadcasts one buffer: the root's input goes to its recv first (NCCL's rules: send
       * is read on the root only; in place when send == recv there). */
      if (e->rank == root && send != recv) memcpy(recv, send, count * es);
      rc = MPI_Ibcast(recv, n, t, root, e->comm, &req);
      return complete(e, &req, rc, "MPI_Ibcast");
    case SYMCOLL_COLL_REDUCE: { /* recv is the root's only (others may pass NULL) */
      const bool at_root = e->rank == root;
      rc = MPI_Ireduce(at_root && send == recv ? MPI_IN_PLACE : send, at_root ? recv : NULL, n, t, op, root, e->comm,
                       &req);
      return complete(e, &req, rc, "MPI_Ireduce");
    }
    case SYMCOLL_COLL_ALL_TO_ALL: /* MPI_IN_PLACE: each block is exchanged where it lies */
      rc = MPI_Ialltoall(send == recv ? MPI_IN_PLACE : send, n, t, recv, n, t, e->comm, &req);
      return complete(e, &req, rc, "MPI_Ialltoall");
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  say(1, "MPI engine: no entry for %s", symcoll_coll_name(coll));
  return SYMCOLL_ERR_UNSUPPORTED;
}

/* AVG of a reduction (all_reduce, reduce_scatter, reduce): MPI_SUM, then one division by the
 * number of ranks where the result lands (see the top of this file). */
static symcoll_status_t avg_coll(mpi_engine_t *e, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 symcoll_dtype_t dtype, int root) {
  const bool gets_result = coll != SYMCOLL_COLL_REDUCE || e->rank == root;
  if (!is_narrow_float(dtype)) {
    symcoll_status_t s =
        mpi_coll(e, coll, send, recv, count, symcoll_dtype_size(dtype), native_type(dtype), MPI_SUM, root);
    if (s == SYMCOLL_OK && gets_result) divide(dtype, recv, count, e->nranks);
    return s;
  }
  /* fp16, bf16, fp8: the input widened to fp32 (every rank's blocks for reduce_scatter), then
   * the fp32 result: separate buffers, so never in place for MPI. */
  const size_t in_n = coll == SYMCOLL_COLL_REDUCE_SCATTER ? count * (size_t)e->nranks : count;
  float *in = malloc((in_n + count) * sizeof(float)), *out = in + in_n;
  if (!in) return SYMCOLL_ERR_NO_MEMORY;
  e->env->to_f32(dtype, in, send, in_n);
  symcoll_status_t s = mpi_coll(e, coll, in, out, count, sizeof(float), MPI_FLOAT, MPI_SUM, root);
  if (s == SYMCOLL_OK && gets_result) {
    for (size_t i = 0; i < count; i++) out[i] = out[i] / (float)e->nranks;
    e->env->from_f32(dtype, recv, out, count);
  }
  scratch_free(e, in);
  return s;
}

static symcoll_status_t eng_coll(void *ctx, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream) {
  mpi_engine_t *e = ctx;
  (void)stream;
  if (e->broken) return SYMCOLL_ERR_ABORTED;
  if (count > INT_MAX) {
    say(1, "MPI engine: %zu elements in one call (MPI counts are int)", count);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  const bool reduction =
      coll == SYMCOLL_COLL_ALL_REDUCE || coll == SYMCOLL_COLL_REDUCE_SCATTER || coll == SYMCOLL_COLL_REDUCE;
  if (reduction && op == SYMCOLL_AVG) return avg_coll(e, coll, send, recv, count, dtype, root);
  return mpi_coll(e, coll, send, recv, count, symcoll_dtype_size(dtype), elem_type(dtype),
                  reduction ? elem_op(dtype, op) : MPI_OP_NULL, root);
}

static symcoll_status_t eng_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
  mpi_engine_t *e = ctx;
  if (e->broken) return SYMCOLL_ERR_ABORTED;
  MPI_Request req;
  int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, e->comm, &req);
  return complete(e, &req, rc, "MPI_Iallgather (set-up)");
}

static void eng_abort(void *ctx) {
  mpi_engine_t *e = ctx;
  atomic_store(&e->aborted, 1);
}

static symcoll_status_t eng_check(void *ctx) {
  mpi_engine_t *e = ctx;
  return atomic_load(&e->aborted) ? SYMCOLL_ERR_ABORTED : SYMCOLL_OK;
}

static void eng_destroy(void *ctx) {
  mpi_engine_t *e = ctx;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (atomic_load(&e->aborted)) e->broken = 1; /* peers may be gone: nothing collective now */
  if (!e->broken && !finalized) MPI_Comm_free(&e->comm);
  static int g_any_broken;
  g_any_broken |= e->broken;
  const int last = --g_open_engines == 0;
  /* MPI that we started ends with the last engine, unless a call was left pending (then the
   * process should exit: MPI_Finalize would wait for it). */
  if (last && g_we_initialised && !g_any_broken && !finalized) {
    for (int op = 0; op < SYMCOLL_NUM_OPS; op++)
      if (g_user_op[op] != MPI_OP_NULL) MPI_Op_free(&g_user_op[op]);
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++)
      if (g_half[d] != MPI_DATATYPE_NULL) MPI_Type_free(&g_half[d]);
    MPI_Finalize();
    g_we_initialised = 0;
  }
  free(e);
}

static symcoll_status_t wrap(MPI_Comm comm, const symcoll__engine_env_t *env, symcoll__engine_t *out);

static symcoll_status_t eng_split(void *ctx, int color, int key, symcoll__engine_t *out) {
  mpi_engine_t *e = ctx;
  MPI_Comm sub;
  int rc = MPI_Comm_split(e->comm, color, key, &sub);
  if (rc != MPI_SUCCESS) return from_mpi(e, rc, "MPI_Comm_split");
  return wrap(sub, e->env, out);
}

static symcoll_status_t wrap(MPI_Comm comm, const symcoll__engine_env_t *env, symcoll__engine_t *out) {
  mpi_engine_t *e = calloc(1, sizeof *e);
  if (!e) return SYMCOLL_ERR_NO_MEMORY;
  e->comm = comm, e->env = env;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &e->rank);
  MPI_Comm_size(comm, &e->nranks);
  g_open_engines++;
  *out = (symcoll__engine_t){.name = "mpi",
                             .ctx = e,
                             .rank = e->rank,
                             .nranks = e->nranks,
                             .coll = eng_coll,
                             .allgather = eng_allgather,
                             .split = eng_split,
                             .check = eng_check,
                             .abort = eng_abort,
                             .destroy = eng_destroy};
  return SYMCOLL_OK;
}

API symcoll_status_t symcoll__mpi_engine_open(const symcoll__engine_env_t *env, const void *mpi_comm,
                                              symcoll__engine_t *out) {
  if (!env || env->abi != SYMCOLL_ENGINE_ABI) return SYMCOLL_ERR_UNSUPPORTED;
  if (!g_env.reduce) g_env = *env;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) {
    say(1, "MPI engine: MPI was already finalised in this process");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  if (!inited) {
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      say(1, "MPI engine: MPI_Init_thread failed");
      return SYMCOLL_ERR_SYSTEM;
    }
    g_we_initialised = 1;
  }
  static int types_done;
  if (!types_done) {
    if (types_init() != 0) return SYMCOLL_ERR_SYSTEM;
    types_done = 1;
  }
  MPI_Comm dup;
  int rc = MPI_Comm_dup(mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD, &dup);
  if (rc != MPI_SUCCESS) {
    say(1, "MPI engine: MPI_Comm_dup: %s", mpi_error(rc));
    return SYMCOLL_ERR_SYSTEM;
  }
  return wrap(dup, &g_env, out);
}

/* ---- symcoll_comm_create_mpi ------------------------------------------------------------------- */

API symcoll_status_t symcoll_comm_create_mpi(MPI_Comm comm, int device, symcoll_comm_t *comm_p) {
  if (!comm_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  int rank, nranks, lrank, lsize;
  MPI_Comm node;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &nranks) != MPI_SUCCESS ||
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return SYMCOLL_ERR_SYSTEM;
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_size(node, &lsize);
  MPI_Comm_free(&node);
  /* A job id for the node-local rendezvous: rank 0's pid and a count of ours. */
  static int created;
  long id[2] = {(long)getpid(), created++};
  MPI_Bcast(id, 2, MPI_LONG, 0, comm);
  char job[64];
  snprintf(job, sizeof job, "mpi.%ld.%ld", id[0], id[1]);
  symcoll_job_config_t cfg;
  symcoll_job_config_init(&cfg);
  cfg.job_id = job, cfg.rank = rank, cfg.nranks = nranks, cfg.local_rank = lrank, cfg.local_nranks = lsize;
  cfg.device = device == SYMCOLL_DEVICE_LOCAL_RANK ? lrank : device;
  cfg.engine = device == SYMCOLL_DEVICE_HOST ? SYMCOLL_ENGINE_MPI : SYMCOLL_ENGINE_AUTO;
  cfg.mpi_comm = &comm;
  return symcoll_comm_create_job(&cfg, comm_p);
}
