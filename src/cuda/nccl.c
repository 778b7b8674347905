/*
 * NCCL as an engine beside the symmetric-memory protocols: a CUDA communicator may hold an
 * NCCL communicator over the same ranks, and SYMCOLL_ALGO_NCCL (a tuning-table row, or a
 * forced choice) sends a collective through it. libnccl.so.2 is opened at run time, so
 * libsymcoll neither links against NCCL nor needs its header: the few types used here are
 * NCCL's stable ABI (a 128-byte unique id passed by value, int enums, an opaque handle).
 *
 * SYMCOLL_NCCL=auto (default) holds one when the tuning table picks NCCL for some size;
 * 1 holds one in any case; 0 never. It needs every rank on a GPU of its own (NCCL refuses
 * two ranks on one GPU). Where a rank cannot hold one, no rank does, and the table's NCCL
 * rows fall back to the choice for the next smaller size.
 *
 * Every collective maps to NCCL's of the same name (all_to_all: ncclAlltoAll, NCCL 2.28, else
 * a group of ncclSend / ncclRecv per peer), every op to ncclRedOp_t's. One difference: NCCL's
 * ncclAvg of floating types multiplies each input by 1/n (rounded to the dtype) and sums the
 * products, where symcoll sums in the accumulation type and divides once; so an average through
 * NCCL may differ from symcoll's in the last bits when n is not a power of two (integers: both
 * divide the sum, the same bits). NCCL refuses ncclAvg on fp8: there the inputs are widened to
 * fp32, NCCL sums those, and one division and rounding back (convert.cu) give symcoll's AVG.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../engine/registry.h"
#include "../core/internal.h"
#include "cuda_internal.h"
#include "nccl_engine.h"

typedef struct {
  char internal[128];
} nccl_id_t;
/* ncclResult_t's success and unhandled CUDA error; ncclRedOp_t's built-in ops. */
enum { NCCL_OK = 0, NCCL_CUDA_ERROR = 1 };
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 };
/* ncclDataType_t: int8, uint8, int32, uint32, int64, uint64, f16, f32, f64, bf16, fp8 e4m3, e5m2. */
static const int nccl_dtype[SYMCOLL_NUM_DTYPES] = {
    [SYMCOLL_INT8] = 0,    [SYMCOLL_UINT8] = 1,    [SYMCOLL_INT32] = 2,        [SYMCOLL_UINT32] = 3,
    [SYMCOLL_INT64] = 4,   [SYMCOLL_UINT64] = 5,   [SYMCOLL_FLOAT16] = 6,      [SYMCOLL_FLOAT32] = 7,
    [SYMCOLL_FLOAT64] = 8, [SYMCOLL_BFLOAT16] = 9, [SYMCOLL_FLOAT8_E4M3] = 10, [SYMCOLL_FLOAT8_E5M2] = 11};

static struct {
  int (*GetUniqueId)(nccl_id_t *);
  int (*CommInitRank)(void **, int, nccl_id_t, int);
  int (*AllReduce)(const void *, void *, size_t, int, int, void *, void *);
  int (*AllGather)(const void *, void *, size_t, int, void *, void *);
  int (*ReduceScatter)(const void *, void *, size_t, int, int, void *, void *);
  int (*Broadcast)(const void *, void *, size_t, int, int, void *, void *);
  int (*Reduce)(const void *, void *, size_t, int, int, int, void *, void *);
  int (*AlltoAll)(const void *, void *, size_t, int, void *, void *); /* optional (NCCL 2.28) */
  int (*Send)(const void *, size_t, int, int, void *, void *);        /* optional (NCCL 2.7) */
  int (*Recv)(void *, size_t, int, int, void *, void *);              /* optional */
  int (*GroupStart)(void);                                            /* optional */
  int (*GroupEnd)(void);                                              /* optional */
  int (*CommDestroy)(void *);
  int (*CommAbort)(void *);
  const char *(*GetErrorString)(int);
  int (*CommGetAsyncError)(void *, int *); /* optional */
} lib;
static int lib_ok;

static void lib_load_once(void) {
  const char *names[] = {symcoll__env_str("SYMCOLL_NCCL_LIB", NULL), "libnccl.so.2",
#ifdef SYMCOLL_NCCL_PATH
                         SYMCOLL_NCCL_PATH,
#endif
                         NULL};
  void *h = NULL;
  for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
    if (names[i]) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "NCCL engine: libnccl.so.2 not found (%s)", dlerror());
    return;
  }
  struct {
    const char *name;
    void **fn;
  } t[] = {
      {"ncclGetUniqueId", (void **)&lib.GetUniqueId}, {"ncclCommInitRank", (void **)&lib.CommInitRank},
      {"ncclAllReduce", (void **)&lib.AllReduce},     {"ncclCommDestroy", (void **)&lib.CommDestroy},
      {"ncclAllGather", (void **)&lib.AllGather},     {"ncclReduceScatter", (void **)&lib.ReduceScatter},
      {"ncclCommAbort", (void **)&lib.CommAbort},     {"ncclGetErrorString", (void **)&lib.GetErrorString},
      {"ncclBroadcast", (void **)&lib.Broadcast},     {"ncclReduce", (void **)&lib.Reduce},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!(*t[i].fn = dlsym(h, t[i].name))) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "NCCL engine: %s missing from libnccl", t[i].name);
      return;
    }
  lib.CommGetAsyncError = (int (*)(void *, int *))dlsym(h, "ncclCommGetAsyncError");
  lib.AlltoAll = (int (*)(const void *, void *, size_t, int, void *, void *))dlsym(h, "ncclAlltoAll");
  lib.Send = (int (*)(const void *, size_t, int, int, void *, void *))dlsym(h, "ncclSend");
  lib.Recv = (int (*)(void *, size_t, int, int, void *, void *))dlsym(h, "ncclRecv");
  lib.GroupStart = (int (*)(void))dlsym(h, "ncclGroupStart");
  lib.GroupEnd = (int (*)(void))dlsym(h, "ncclGroupEnd");
  lib_ok = 1;
}

static bool lib_load(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, lib_load_once);
  return lib_ok;
}

/* Whether rank 0's table (adopted by all) picks NCCL for some size. */
static bool table_wants(symcoll_comm_t comm) {
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++)
      for (int b = 0; b < SYMCOLL_TUNE_BUCKETS; b++)
        if (comm->tune[c][d].bucket[b].algo == SYMCOLL_ALGO_NCCL) return true;
  return false;
}

symcoll_status_t symcoll__nccl_setup(symcoll_comm_t comm, symcoll__nccl_t *nc) {
  memset(nc, 0, sizeof *nc);
  pthread_mutex_init(&nc->lock, NULL);
  const int mode = symcoll__env_choice("SYMCOLL_NCCL"); /* auto, 1, 0 */
  bool forced = false;
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++) forced |= comm->forced_algo[c] == SYMCOLL_ALGO_NCCL;
  int want = mode == 1 || forced ? 1 : mode == 2 ? 0 : table_wants(comm);
  /* Rank 0 decides whether to try; every rank says whether it can. */
  int wants[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(comm->oob->allgather(comm, &want, wants, sizeof want));
  if (!wants[0]) {
    symcoll__tune_drop_algo(comm, SYMCOLL_ALGO_NCCL);
    return SYMCOLL_OK;
  }
  int can = comm->ranks_on_my_device == 1 && lib_load(), cans[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(comm->oob->allgather(comm, &can, cans, sizeof can));
  for (int r = 0; r < comm->nranks; r++)
    if (!cans[r]) {
      SYMCOLL_LOG(
          mode == 1 ? SYMCOLL_LOG_WARN : SYMCOLL_LOG_INFO, SYMCOLL_SUBSYS_INIT, "no NCCL engine: rank %d %s", r,
          comm->ranks_on_my_device > 1 ? "shares its GPU (NCCL takes one rank per GPU)" : "cannot load libnccl.so.2");
      symcoll__tune_drop_algo(comm, SYMCOLL_ALGO_NCCL);
      return SYMCOLL_OK;
    }
  nccl_id_t id, ids[SYMCOLL_MAX_RANKS];
  memset(&id, 0, sizeof id);
  int rc = comm->rank == 0 ? lib.GetUniqueId(&id) : NCCL_OK;
  SYMCOLL_CHECK(comm->oob->allgather(comm, &id, ids, sizeof id));
  if (rc == NCCL_OK) rc = lib.CommInitRank(&nc->comm, comm->nranks, ids[0], comm->rank);
  int ok = rc == NCCL_OK, oks[SYMCOLL_MAX_RANKS];
  if (!ok) SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "NCCL engine: ncclCommInitRank: %s", lib.GetErrorString(rc));
  SYMCOLL_CHECK(comm->oob->allgather(comm, &ok, oks, sizeof ok));
  for (int r = 0; r < comm->nranks; r++)
    if (!oks[r]) {
      if (nc->comm) lib.CommDestroy(nc->comm);
      nc->comm = NULL;
      symcoll__tune_drop_algo(comm, SYMCOLL_ALGO_NCCL);
      return SYMCOLL_OK;
    }
  nc->nranks = comm->nranks;
  nc->rank = comm->rank;
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "rank %d holds an NCCL communicator of %d ranks", comm->rank, comm->nranks);
  return SYMCOLL_OK;
}

/* Whether this NCCL has an all_to_all: its own, or the send / receive pairs it is made of. */
static bool has_all_to_all(void) {
  return lib.AlltoAll || (lib.Send && lib.Recv && lib.GroupStart && lib.GroupEnd);
}

/* all_to_all: ncclAlltoAll where the library has it, else one ncclSend and one ncclRecv per
 * peer (itself included) in a group, which is what ncclAlltoAll does. NCCL defines no in-place
 * all_to_all, so with send == recv the input is first copied to scratch, allocated and freed
 * in stream order (capturable). Returns an ncclResult_t. */
static int nccl_all_to_all(symcoll__nccl_t *nc, const symcoll__coll_args_t *a, int dt) {
  const size_t block = a->count * symcoll_dtype_size(a->dtype), bytes = block * (size_t)nc->nranks;
  cudaStream_t st = a->stream;
  const void *send = a->send;
  void *tmp = NULL;
  if (send == a->recv) {
    if (cudaMallocAsync(&tmp, bytes, st) != cudaSuccess) return NCCL_CUDA_ERROR;
    if (cudaMemcpyAsync(tmp, send, bytes, cudaMemcpyDeviceToDevice, st) != cudaSuccess) {
      cudaFreeAsync(tmp, st);
      return NCCL_CUDA_ERROR;
    }
    send = tmp;
  }
  int rc;
  if (lib.AlltoAll) {
    rc = lib.AlltoAll(send, a->recv, a->count, dt, nc->comm, st);
  } else {
    rc = lib.GroupStart();
    const int started = rc == NCCL_OK;
    for (int p = 0; rc == NCCL_OK && p < nc->nranks; p++) {
      rc = lib.Send((const char *)send + (size_t)p * block, a->count, dt, p, nc->comm, st);
      if (rc == NCCL_OK) rc = lib.Recv((char *)a->recv + (size_t)p * block, a->count, dt, p, nc->comm, st);
    }
    if (started) { /* a group once opened is closed, whatever failed inside it */
      const int end = lib.GroupEnd();
      if (rc == NCCL_OK) rc = end;
    }
  }
  if (tmp && cudaFreeAsync(tmp, st) != cudaSuccess && rc == NCCL_OK) rc = NCCL_CUDA_ERROR;
  return rc;
}

/* An fp8 AVG (all_reduce, reduce_scatter, reduce), which ncclAvg refuses: the inputs widened
 * to fp32 in a temporary, ncclSum over those, the sum divided once by the ranks and rounded
 * back to the dtype (on the root only, for reduce). In place works: the inputs are read into
 * the temporary before anything is written. */
static int nccl_fp8_avg(symcoll__nccl_t *nc, const symcoll__coll_args_t *a) {
  if (a->count == 0) return NCCL_OK; /* every rank alike: nothing to move */
  const int f32 = nccl_dtype[SYMCOLL_FLOAT32];
  const size_t in_n = a->coll == SYMCOLL_COLL_REDUCE_SCATTER ? a->count * (size_t)nc->nranks : a->count;
  cudaStream_t st = a->stream;
  float *in = NULL;
  if (cudaMallocAsync((void **)&in, (in_n + a->count) * sizeof(float), st) != cudaSuccess) return NCCL_CUDA_ERROR;
  float *sum = in + in_n;
  int rc = symcoll__cuda_fp8_widen(in, a->send, in_n, a->dtype, st) == cudaSuccess ? NCCL_OK : NCCL_CUDA_ERROR;
  if (rc == NCCL_OK) {
    if (a->coll == SYMCOLL_COLL_ALL_REDUCE)
      rc = lib.AllReduce(in, sum, a->count, f32, NCCL_SUM, nc->comm, st);
    else if (a->coll == SYMCOLL_COLL_REDUCE_SCATTER)
      rc = lib.ReduceScatter(in, sum, a->count, f32, NCCL_SUM, nc->comm, st);
    else
      rc = lib.Reduce(in, sum, a->count, f32, NCCL_SUM, a->root, nc->comm, st);
  }
  const bool writes = a->coll != SYMCOLL_COLL_REDUCE || nc->rank == a->root;
  if (rc == NCCL_OK && writes &&
      symcoll__cuda_fp8_narrow_avg(a->recv, sum, a->count, nc->nranks, a->dtype, st) != cudaSuccess)
    rc = NCCL_CUDA_ERROR;
  if (cudaFreeAsync(in, st) != cudaSuccess && rc == NCCL_OK) rc = NCCL_CUDA_ERROR;
  return rc;
}

static bool is_fp8(symcoll_dtype_t dt) {
  return dt == SYMCOLL_FLOAT8_E4M3 || dt == SYMCOLL_FLOAT8_E5M2;
}

symcoll_status_t symcoll__nccl_coll(symcoll__nccl_t *nc, const symcoll__coll_args_t *a) {
  static const int op[SYMCOLL_NUM_OPS] = {[SYMCOLL_SUM] = NCCL_SUM,
                                          [SYMCOLL_MAX] = NCCL_MAX,
                                          [SYMCOLL_MIN] = NCCL_MIN,
                                          [SYMCOLL_PROD] = NCCL_PROD,
                                          [SYMCOLL_AVG] = NCCL_AVG};
  const int dt = nccl_dtype[a->dtype];
  /* The lock keeps an abort (from another thread) from freeing the communicator under us. */
  pthread_mutex_lock(&nc->lock);
  int rc = -1;
  if (nc->comm && a->op == SYMCOLL_AVG && is_fp8(a->dtype) && symcoll__coll_desc(a->coll)->takes_op) {
    rc = nccl_fp8_avg(nc, a);
  } else if (nc->comm) {
    switch (a->coll) {
      case SYMCOLL_COLL_ALL_REDUCE:
        rc = lib.AllReduce(a->send, a->recv, a->count, dt, op[a->op], nc->comm, a->stream);
        break;
      case SYMCOLL_COLL_ALL_GATHER:
        rc = lib.AllGather(a->send, a->recv, a->count, dt, nc->comm, a->stream);
        break;
      case SYMCOLL_COLL_REDUCE_SCATTER:
        rc = lib.ReduceScatter(a->send, a->recv, a->count, dt, op[a->op], nc->comm, a->stream);
        break;
      case SYMCOLL_COLL_BROADCAST: /* send is read on the root only; in place when send == recv */
        rc = lib.Broadcast(a->send, a->recv, a->count, dt, a->root, nc->comm, a->stream);
        break;
      case SYMCOLL_COLL_REDUCE: /* recv is written on the root only */
        rc = lib.Reduce(a->send, a->recv, a->count, dt, op[a->op], a->root, nc->comm, a->stream);
        break;
      case SYMCOLL_COLL_ALL_TO_ALL:
        if (!has_all_to_all()) {
          pthread_mutex_unlock(&nc->lock);
          SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "NCCL all_to_all: this libnccl has neither ncclAlltoAll nor ncclSend");
          return SYMCOLL_ERR_UNSUPPORTED;
        }
        rc = nccl_all_to_all(nc, a, dt);
        break;
      case SYMCOLL_COLL_ALL_GATHER_MATMUL:
      case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
      case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
      case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
      case SYMCOLL_NUM_COLL_KINDS:
        pthread_mutex_unlock(&nc->lock);
        return SYMCOLL_NO_ENTRY("the NCCL engine", a->coll);
    }
  }
  pthread_mutex_unlock(&nc->lock);
  if (rc == -1) return SYMCOLL_ERR_ABORTED;
  if (rc != NCCL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "NCCL %s: %s", symcoll_coll_name(a->coll), lib.GetErrorString(rc));
    return SYMCOLL_ERR_CUDA;
  }
  return SYMCOLL_OK;
}

void symcoll__nccl_abort(symcoll__nccl_t *nc) {
  pthread_mutex_lock(&nc->lock);
  if (nc->comm) lib.CommAbort(nc->comm); /* NCCL kernels waiting for a dead peer end */
  nc->comm = NULL;
  pthread_mutex_unlock(&nc->lock);
}

void symcoll__nccl_fini(symcoll__nccl_t *nc) {
  if (nc->comm) lib.CommDestroy(nc->comm);
  nc->comm = NULL;
  pthread_mutex_destroy(&nc->lock);
}

/* ---- NCCL as the engine between nodes (hier.c) ------------------------------------------- */

static symcoll_status_t eng_coll(void *ctx, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream) {
  const symcoll__coll_args_t a = {.coll = coll,
                                  .send = send,
                                  .recv = recv,
                                  .count = count,
                                  .dtype = dtype,
                                  .op = op,
                                  .root = root,
                                  .stream = stream};
  return symcoll__nccl_coll(ctx, &a);
}
static symcoll_status_t eng_check(void *ctx) {
  symcoll__nccl_t *nc = ctx;
  int err = NCCL_OK;
  pthread_mutex_lock(&nc->lock);
  if (nc->comm && lib.CommGetAsyncError) lib.CommGetAsyncError(nc->comm, &err);
  const bool gone = nc->comm == NULL;
  pthread_mutex_unlock(&nc->lock);
  if (gone) return SYMCOLL_ERR_ABORTED;
  if (err == NCCL_OK || err == 7 /* ncclInProgress */) return SYMCOLL_OK;
  SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "NCCL engine: %s", lib.GetErrorString(err));
  return err == 6 /* ncclRemoteError: a peer failed */ ? SYMCOLL_ERR_PEER_LOST : SYMCOLL_ERR_CUDA;
}
static void eng_abort(void *ctx) {
  symcoll__nccl_abort(ctx);
}
static void eng_destroy(void *ctx) {
  symcoll__nccl_fini(ctx);
  free(ctx);
}

symcoll_status_t symcoll__nccl_engine(int (*xchg)(void *, const void *, void *, size_t), void *xchg_ctx, int rank,
                                      int nranks, int device, int color, int key, symcoll__engine_t *out) {
  if (!lib_load()) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "NCCL engine: libnccl.so.2 cannot be opened (SYMCOLL_NCCL_LIB)");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  /* The group: ranks of our color by key; its first rank makes the unique id. */
  typedef struct {
    int32_t color, key;
  } who_t;
  who_t me = {color, key}, *all = calloc((size_t)nranks, sizeof *all);
  nccl_id_t *ids = calloc((size_t)nranks, sizeof *ids);
  symcoll__nccl_t *nc = calloc(1, sizeof *nc);
  symcoll_status_t s = SYMCOLL_ERR_NO_MEMORY;
  if (!all || !ids || !nc) goto out;
  s = SYMCOLL_ERR_PEER_LOST;
  if (xchg(xchg_ctx, &me, all, sizeof me) != 0) goto out;
  int gsize = 0, grank = 0, root = -1;
  for (int r = 0; r < nranks; r++) {
    if (all[r].color != color) continue;
    gsize++;
    if (all[r].key < key || (all[r].key == key && r < rank)) grank++;
    if (root < 0 || all[r].key < all[root].key) root = r;
  }
  nccl_id_t id;
  memset(&id, 0, sizeof id);
  int rc = rank == root ? lib.GetUniqueId(&id) : NCCL_OK;
  if (xchg(xchg_ctx, &id, ids, sizeof id) != 0) goto out;
  pthread_mutex_init(&nc->lock, NULL);
  cudaSetDevice(device);
  if (rc == NCCL_OK) rc = lib.CommInitRank(&nc->comm, gsize, ids[root], grank);
  nc->nranks = gsize;
  nc->rank = grank;
  if (rc != NCCL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "NCCL engine: ncclCommInitRank (rank %d of %d): %s", grank, gsize,
                 lib.GetErrorString(rc));
    pthread_mutex_destroy(&nc->lock);
    s = SYMCOLL_ERR_CUDA;
    goto out;
  }
  *out = (symcoll__engine_t){.name = "nccl",
                             .ctx = nc,
                             .rank = grank,
                             .nranks = gsize,
                             .coll = eng_coll,
                             .check = eng_check,
                             .abort = eng_abort,
                             .destroy = eng_destroy};
  nc = NULL;
  s = SYMCOLL_OK;
out:
  free(all);
  free(ids);
  free(nc);
  return s;
}
