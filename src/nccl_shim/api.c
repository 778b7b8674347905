/*
 * The exported entry points: every function libnccl.so.2 exports (ncclXxx and pncclXxx), as
 * nccl.h declares them. Collectives go through dispatch(): served by symcoll where shim_decide
 * says so, else forwarded to the real NCCL through the communicator's real NCCL communicator.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_rt.h"

/* Marks this library as the shim (real.c never loads a library exporting it as the real NCCL). */
SHIM_EXPORT const int symcoll_nccl_shim_version = SYMCOLL_VERSION_CODE;

/* ---- versions, ids, errors ---------------------------------------------------------------- */

SHIM_EXPORT ncclResult_t ncclGetVersion(int *version) {
  if (!version) return ncclInvalidArgument;
  const shim_real_t *r = shim_real();
  int v = NCCL_VERSION_CODE;
  if (r && r->GetVersion(&v) != ncclSuccess) v = NCCL_VERSION_CODE;
  /* Programs turn features on by version; what they call, the shim serves or forwards. */
  *version = v < NCCL_VERSION(2, 27, 0) ? NCCL_VERSION(2, 27, 0) : v;
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  char job[SHIM_JOB_ID_MAX];
  shim_job_id_new(job);
  if (shim_id_encode(job, id) != 0) return ncclInternalError;
  SHIM_INFO("ncclGetUniqueId: job %s", job);
  return ncclSuccess;
}

SHIM_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  return shim_result_string(result);
}

SHIM_EXPORT const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  if (shim_last_error()[0]) return shim_last_error();
  return symcoll_last_error();
}

/* ---- communicators ------------------------------------------------------------------------ */

SHIM_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t *config) {
  int blocking = 1;
  const char *why = NULL;
  ncclResult_t rc = shim_config_check(config, &blocking, &why);
  if (rc != ncclSuccess) {
    shim_error("ncclCommInitRankConfig: %s", why);
    return rc;
  }
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) {
    shim_error("ncclCommInitRank: invalid arguments (comm %p, rank %d of %d)", (void *)comm, rank, nranks);
    return ncclInvalidArgument;
  }
  char job[SHIM_JOB_ID_MAX];
  if (shim_id_decode(&commId, job) != 0) {
    shim_error(
        "ncclCommInitRank: the ncclUniqueId was not made by libsymcoll_nccl's ncclGetUniqueId (every rank "
        "must run on the shim)");
    return ncclInvalidArgument;
  }
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    shim_error("ncclCommInitRank: no current CUDA device: %s", cudaGetErrorString(cudaGetLastError()));
    return ncclUnhandledCudaError;
  }
  ncclComm_t c = shim_comm_new(rank, nranks, dev, job, blocking);
  if (!c) return ncclSystemError;
  *comm = c;
  if (shim_group_defer(c)) return blocking ? ncclSuccess : ncclInProgress;
  if (!blocking) {
    rc = shim_comm_create_async(c);
    return rc == ncclSuccess ? ncclInProgress : rc;
  }
  rc = shim_comm_create(c);
  if (rc != ncclSuccess) {
    shim_comm_free(c);
    *comm = NULL;
  }
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

SHIM_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId *commIds, ncclConfig_t *config) {
  if (nId < 1 || !commIds) return ncclInvalidArgument;
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config); /* one node: one id */
}

SHIM_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  if (!comms || ndev < 1) return ncclInvalidArgument;
  int *devs = malloc((size_t)ndev * sizeof *devs);
  symcoll_comm_t *scs = calloc((size_t)ndev, sizeof *scs);
  shim_clique_t *q = calloc(1, sizeof *q);
  ncclComm_t *members = calloc((size_t)ndev, sizeof *members);
  ncclResult_t rc = ncclSystemError;
  if (!devs || !scs || !q || !members) goto fail;
  for (int i = 0; i < ndev; i++) devs[i] = devlist ? devlist[i] : i;
  shim_env_prepare();
  int prev = -1;
  cudaGetDevice(&prev);
  symcoll_status_t s = symcoll_comm_create_all(ndev, devs, scs);
  if (prev >= 0) cudaSetDevice(prev);
  if (s != SYMCOLL_OK) {
    shim_error("ncclCommInitAll (%d ranks): symcoll_comm_create_all: %s (%s)", ndev, symcoll_status_string(s),
               symcoll_last_error());
    rc = shim_result(s);
    goto fail;
  }
  pthread_mutex_init(&q->lock, NULL);
  q->init_all = true;
  q->n = q->refs = ndev;
  q->devs = devs;
  q->comms = members;
  for (int i = 0; i < ndev; i++) {
    ncclComm_t c = shim_comm_new(i, ndev, devs[i], "", 1);
    if (!c) abort(); /* a few hundred bytes after symcoll made its communicators */
    c->sc = scs[i];
    c->state = SHIM_READY;
    c->clique = q;
    c->clique_index = i;
    members[i] = comms[i] = c;
  }
  SHIM_INFO("ncclCommInitAll: %d ranks in thread mode", ndev);
  free(scs);
  return ncclSuccess;
fail:
  free(devs);
  free(scs);
  free(q);
  free(members);
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  int blocking = 1;
  const char *why = NULL;
  ncclResult_t rc = shim_config_check(config, &blocking, &why);
  if (rc != ncclSuccess) {
    shim_error("ncclCommSplit: %s", why);
    return rc;
  }
  if (!newcomm) return ncclInvalidArgument;
  if ((rc = shim_comm_ready(comm, "ncclCommSplit")) != ncclSuccess) return rc;
  if (!comm->sc) {
    shim_error("ncclCommSplit of a communicator without symcoll (ncclCommShrink's) is not supported");
    return ncclInvalidUsage;
  }
  if (!config || config->blocking == NCCL_CONFIG_UNDEF_INT) blocking = comm->blocking; /* NCCL: inherited */
  shim_split_wait(comm); /* an earlier non-blocking split of comm goes first */
  /* Made by split_create (comm.c): now, at the group's end inside a group, or on a thread of
   * its own for a non-blocking config (a rank of no color too, the thread freeing its ghost). */
  ncclComm_t c = shim_comm_new(-1, 0, comm->device, "", blocking);
  if (!c) return ncclSystemError;
  c->split_parent = comm;
  c->split_color = color == NCCL_SPLIT_NOCOLOR ? SYMCOLL_SPLIT_NOCOLOR : color;
  c->split_key = key;
  c->ghost = color == NCCL_SPLIT_NOCOLOR;
  /* The name groups the ranks one thread makes (shim_comm_cohort): one per parent, split and
   * color. ncclCommInitAll's parents have no job name: their clique stands in; a name too long
   * to extend is hashed (FNV-1a), never cut. */
  char parent[SHIM_JOB_ID_MAX - 25]; /* room for "|s<split>:<color>" */
  if (!comm->job_id[0]) {
    snprintf(parent, sizeof parent, "q%p", (void *)comm->clique);
  } else if (strlen(comm->job_id) > SHIM_JOB_ID_MAX - 26) {
    unsigned long long hash = 1469598103934665603ull;
    for (const char *q = comm->job_id; *q; q++) hash = (hash ^ (unsigned char)*q) * 1099511628211ull;
    snprintf(parent, sizeof parent, "h%016llx", hash);
  } else {
    snprintf(parent, sizeof parent, "%s", comm->job_id);
  }
  snprintf(c->job_id, sizeof c->job_id, "%s|s%u:%d", parent, ++comm->splits, color);
  *newcomm = c->ghost ? NULL : c;
  if (shim_group_defer(c)) return blocking ? ncclSuccess : ncclInProgress;
  if (!blocking) {
    c->self_free = c->ghost;
    c->in_flight = true;
    pthread_mutex_lock(&comm->lock);
    comm->splits_in_flight++;
    pthread_mutex_unlock(&comm->lock);
    rc = shim_comm_create_async(c);
    if (rc != ncclSuccess) {
      pthread_mutex_lock(&comm->lock);
      comm->splits_in_flight--;
      pthread_mutex_unlock(&comm->lock);
      shim_comm_free(c);
      *newcomm = NULL;
      return rc;
    }
    return c->ghost ? ncclSuccess : ncclInProgress;
  }
  rc = shim_comm_create(c);
  if (!shim_comm_drop_ghost(c) && rc != ncclSuccess) {
    shim_comm_free(c);
    *newcomm = NULL;
  }
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                        ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  /* The excluded ranks do not call it, so symcoll_comm_split (every rank) cannot: the new
   * communicator is the real NCCL's shrunk one, every call forwarded. */
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommShrink");
  if (rc != ncclSuccess) return rc;
  const shim_real_t *r = shim_real();
  pthread_mutex_lock(&comm->real_lock);
  ncclComm_t real = comm->real_state == 1 ? comm->real : NULL;
  pthread_mutex_unlock(&comm->real_lock);
  if (!r || !real || !r->CommShrink || !newcomm) {
    shim_error(
        "ncclCommShrink needs the real NCCL communicator, made at the first forwarded call; this communicator "
        "has none (symcoll cannot shrink: its split needs every rank)");
    return ncclInvalidUsage;
  }
  ncclComm_t rnew = NULL;
  if ((rc = r->CommShrink(real, excludeRanksList, excludeRanksCount, &rnew, config, shrinkFlags)) != ncclSuccess)
    return rc;
  int rank = 0, n = 0;
  r->CommUserRank(rnew, &rank);
  r->CommCount(rnew, &n);
  ncclComm_t c = shim_comm_new(rank, n, comm->device, "", 1);
  if (!c) return ncclSystemError;
  c->real = rnew;
  c->real_state = 1;
  c->state = SHIM_READY;
  *newcomm = c;
  return ncclSuccess;
}

/* NCCL's ncclCommFinalize: every call of ours is done (device synchronised), and every peer has
 * got this far (a host barrier), so no peer sees this rank leave as a lost peer. Ranks one
 * thread drives together (ncclCommInitAll, several ncclCommInitRank in one group) skip the
 * barrier: their peers' finalize comes later on the same thread. */
SHIM_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommFinalize");
  if (rc != ncclSuccess) return rc;
  if (comm->finalized) return ncclSuccess;
  comm->finalized = true;
  if (comm->sc) {
    const int prev = shim_device_enter(comm->device);
    if (cudaDeviceSynchronize() != cudaSuccess) rc = ncclUnhandledCudaError;
    if (!comm->clique && !comm->same_thread_peers) {
      symcoll_status_t s = symcoll_comm_barrier(comm->sc);
      if (s != SYMCOLL_OK && rc == ncclSuccess) rc = shim_result(s);
    }
    shim_device_leave(comm->device, prev);
  }
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && r && r->CommFinalize) {
    ncclResult_t r2 = r->CommFinalize(comm->real);
    if (rc == ncclSuccess) rc = r2;
  }
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess; /* as NCCL */
  if (comm->magic != SHIM_COMM_MAGIC) return ncclInvalidArgument;
  if (shim_group_holds(comm)) return ncclInvalidUsage;
  shim_comm_ready(comm, "ncclCommDestroy"); /* a creation under way ends first; a failed one is freed too */
  if (comm->state == SHIM_READY && !comm->finalized) ncclCommFinalize(comm);
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && comm->real && r) r->CommDestroy(comm->real);
  if (comm->sc) symcoll_comm_destroy(comm->sc);
  shim_comm_free(comm);
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (comm->magic != SHIM_COMM_MAGIC) return ncclInvalidArgument;
  if (shim_group_holds(comm)) return ncclInvalidUsage;
  /* A creation still under way cannot be cut short: it ends within symcoll's timeout. */
  shim_comm_ready(comm, "ncclCommAbort");
  if (comm->sc) symcoll_comm_abort(comm->sc); /* every wait of this rank ends */
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && comm->real && r) r->CommAbort(comm->real);
  if (comm->sc) symcoll_comm_destroy(comm->sc);
  shim_comm_free(comm);
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommRevoke");
  if (rc != ncclSuccess) return rc;
  if (comm->sc) symcoll_comm_abort(comm->sc);
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && r && r->CommRevoke) rc = r->CommRevoke(comm->real, revokeFlags);
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  SHIM_FOREIGN_COMM(comm, CommGetAsyncError, comm, asyncError);
  if (!comm || !asyncError) return ncclInvalidArgument;
  pthread_mutex_lock(&comm->lock);
  const int state = comm->state;
  const ncclResult_t init_rc = comm->init_rc;
  pthread_mutex_unlock(&comm->lock);
  if (state == SHIM_PENDING) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if (state == SHIM_FAILED) {
    *asyncError = init_rc;
    return ncclSuccess;
  }
  symcoll_status_t s = comm->sc ? symcoll_comm_check(comm->sc) : SYMCOLL_OK;
  *asyncError = shim_result(s);
  const shim_real_t *r = shim_real();
  if (s == SYMCOLL_OK && comm->real_state == 1 && r && r->CommGetAsyncError)
    return r->CommGetAsyncError(comm->real, asyncError);
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  SHIM_FOREIGN_COMM(comm, CommCount, comm, count);
  if (!comm || !count) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  SHIM_FOREIGN_COMM(comm, CommCuDevice, comm, device);
  if (!comm || !device) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  SHIM_FOREIGN_COMM(comm, CommUserRank, comm, rank);
  if (!comm || !rank) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

/* ---- the collectives ----------------------------------------------------------------------- */

typedef struct {
  shim_call_t call;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int root; /* broadcast, reduce, gather, scatter; send/recv: the peer */
} call_t;

/* The communicator's PreMulSum op `op`, if it is one (and still alive); NULL otherwise. */
static shim_premul_t *premul_of(ncclComm_t c, ncclRedOp_t op) {
  const long i = (long)op - (long)ncclNumOps;
  return i >= 0 && i < c->npremul && c->premul[i].used ? &c->premul[i] : NULL;
}

/* pm: the call's PreMulSum op (dispatch found it), or NULL. */
static symcoll_status_t serve(ncclComm_t c, const call_t *a, const shim_premul_t *pm, cudaStream_t stream) {
  const symcoll_dtype_t dt = (symcoll_dtype_t)shim_dtype(a->dtype);
  const symcoll_op_t op = (symcoll_op_t)(pm ? SYMCOLL_SUM : shim_call_reduces(a->call) ? shim_op(a->op) : 0);
  symcoll_coll_opts_t opts; /* a PreMulSum: the sum with this rank's scalar */
  symcoll_coll_opts_init(&opts);
  if (pm) {
    opts.scale = pm->residence == ncclScalarDevice ? pm->device_scalar : (const void *)pm->value;
    opts.scale_on_device = pm->residence == ncclScalarDevice;
  }
  switch (a->call) {
    case SHIM_ALL_REDUCE:
      return symcoll_all_reduce_ex(c->sc, a->send, a->recv, a->count, dt, op, stream, &opts);
    case SHIM_ALL_GATHER:
      return symcoll_all_gather(c->sc, a->send, a->recv, a->count, dt, stream);
    case SHIM_REDUCE_SCATTER:
      return symcoll_reduce_scatter_ex(c->sc, a->send, a->recv, a->count, dt, op, stream, &opts);
    case SHIM_BROADCAST:
      return symcoll_broadcast(c->sc, a->send, a->recv, a->count, dt, a->root, stream);
    case SHIM_REDUCE:
      return symcoll_reduce_ex(c->sc, a->send, a->recv, a->count, dt, op, a->root, stream, &opts);
    case SHIM_ALL_TO_ALL:
      return symcoll_all_to_all(c->sc, a->send, a->recv, a->count, dt, stream);
    case SHIM_SEND:
    case SHIM_RECV:
    case SHIM_GATHER:
    case SHIM_SCATTER:
    case SHIM_NUM_CALLS:
      break;
  }
  return SYMCOLL_ERR_UNSUPPORTED;
}

/* The real NCCL's op for a forwarded call: the PreMulSum's own, made now if need be. */
static ncclResult_t real_op(ncclComm_t c, ncclComm_t real, const shim_real_t *r, ncclRedOp_t op, ncclRedOp_t *out) {
  shim_premul_t *pm = premul_of(c, op);
  *out = op;
  if (!pm) return ncclSuccess;
  if (!pm->has_real) {
    if (!r->RedOpCreatePreMulSum) return ncclInvalidUsage;
    void *scalar = pm->residence == ncclScalarDevice ? pm->device_scalar : (void *)pm->value;
    const ncclResult_t rc = r->RedOpCreatePreMulSum(&pm->real_op, scalar, pm->dtype, pm->residence, real);
    if (rc != ncclSuccess) return rc;
    pm->has_real = true;
  }
  *out = pm->real_op;
  return ncclSuccess;
}

static ncclResult_t forward(ncclComm_t c, const call_t *call, cudaStream_t stream) {
  ncclResult_t rc = ncclSuccess;
  const char *name = shim_call_name(call->call);
  ncclComm_t real = shim_comm_real(c, stream, name, &rc);
  if (!real) return rc;
  const shim_real_t *r = shim_real();
  call_t fwd = *call;
  if (shim_call_reduces(call->call) && (rc = real_op(c, real, r, call->op, &fwd.op)) != ncclSuccess) {
    shim_error("%s: making the real NCCL's PreMulSum op failed: %s", name, r->GetErrorString(rc));
    return rc;
  }
  const call_t *a = &fwd;
  if ((rc = shim_group_forwarding(r)) != ncclSuccess) return rc;
  switch (a->call) {
    case SHIM_ALL_REDUCE:
      rc = r->AllReduce(a->send, a->recv, a->count, a->dtype, a->op, real, stream);
      break;
    case SHIM_ALL_GATHER:
      rc = r->AllGather(a->send, a->recv, a->count, a->dtype, real, stream);
      break;
    case SHIM_REDUCE_SCATTER:
      rc = r->ReduceScatter(a->send, a->recv, a->count, a->dtype, a->op, real, stream);
      break;
    case SHIM_BROADCAST:
      rc = r->Broadcast(a->send, a->recv, a->count, a->dtype, a->root, real, stream);
      break;
    case SHIM_REDUCE:
      rc = r->Reduce(a->send, a->recv, a->count, a->dtype, a->op, a->root, real, stream);
      break;
    case SHIM_ALL_TO_ALL:
      rc = r->AlltoAll ? r->AlltoAll(a->send, a->recv, a->count, a->dtype, real, stream) : ncclInvalidUsage;
      break;
    case SHIM_SEND:
      rc = r->Send(a->send, a->count, a->dtype, a->root, real, stream);
      break;
    case SHIM_RECV:
      rc = r->Recv(a->recv, a->count, a->dtype, a->root, real, stream);
      break;
    case SHIM_GATHER:
      rc = r->Gather ? r->Gather(a->send, a->recv, a->count, a->dtype, a->root, real, stream) : ncclInvalidUsage;
      break;
    case SHIM_SCATTER:
      rc = r->Scatter ? r->Scatter(a->send, a->recv, a->count, a->dtype, a->root, real, stream) : ncclInvalidUsage;
      break;
    case SHIM_NUM_CALLS:
      rc = ncclInternalError;
      break;
  }
  if (rc != ncclSuccess && rc != ncclInProgress)
    shim_error("%s through the real NCCL: %s (%s)", name, r->GetErrorString(rc),
               r->GetLastError ? r->GetLastError(real) : "");
  return rc;
}

static ncclResult_t dispatch(ncclComm_t comm, const call_t *a, cudaStream_t stream) {
  const char *name = shim_call_name(a->call);
  ncclResult_t rc = shim_comm_ready(comm, name);
  if (rc != ncclSuccess) return rc;
  const shim_policy_t policy = shim_policy();
  const int coll = shim_call_coll(a->call), dt = shim_dtype(a->dtype);
  shim_comm_view_t view = {.capable = comm->sc != NULL, .table_algo = -1, .coll_refused = false};
  const shim_premul_t *pm = shim_call_reduces(a->call) ? premul_of(comm, a->op) : NULL;
  view.premul = pm && pm->dtype == a->dtype;
  if ((unsigned)a->call < SHIM_NUM_CALLS) view.coll_refused = comm->refused[a->call];
  if (coll >= 0 && dt >= 0 && comm->sc) {
    symcoll_algo_t algo;
    if (symcoll_coll_algo(comm->sc, (symcoll_coll_t)coll, a->count, (symcoll_dtype_t)dt, &algo) == SYMCOLL_OK)
      view.table_algo = (int)algo;
  }
  const size_t bytes = dt >= 0 ? a->count * symcoll_dtype_size((symcoll_dtype_t)dt) : 0;
  shim_decision_t d = shim_decide(&policy, a->call, a->dtype, a->op, bytes, &view);
  if (d.serve) {
    const int prev = shim_device_enter(comm->device);
    symcoll_status_t s = serve(comm, a, pm, stream);
    shim_device_leave(comm->device, prev);
    if (s == SYMCOLL_ERR_UNSUPPORTED) { /* the same answer on every rank: the same arguments */
      comm->refused[a->call] = true;
      d = (shim_decision_t){false, "symcoll answered UNSUPPORTED"};
      SHIM_INFO("rank %d: %s: symcoll refused it (%s)", comm->rank, name, symcoll_last_error());
    } else {
      SHIM_INFO("rank %d: %s count %zu %s: symcoll (%s%s%s)", comm->rank, name, a->count,
                dt >= 0 ? symcoll_dtype_name((symcoll_dtype_t)dt) : "?", d.why, view.table_algo >= 0 ? ": " : "",
                view.table_algo >= 0 ? symcoll_algo_name(view.table_algo) : "");
      if (s != SYMCOLL_OK) shim_error("%s on symcoll: %s (%s)", name, symcoll_status_string(s), symcoll_last_error());
      return shim_result(s);
    }
  }
  SHIM_INFO("rank %d: %s count %zu: NCCL (%s)", comm->rank, name, a->count, d.why);
  return forward(comm, a, stream);
}

SHIM_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  const call_t a = {SHIM_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

SHIM_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_REDUCE, sendbuff, recvbuff, count, datatype, op, root};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, ncclSum, 0};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  const call_t a = {SHIM_SEND, sendbuff, NULL, count, datatype, ncclSum, peer};
  return dispatch(comm, &a, stream);
}

SHIM_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  const call_t a = {SHIM_RECV, NULL, recvbuff, count, datatype, ncclSum, peer};
  return dispatch(comm, &a, stream);
}

/* ---- reduction ops ------------------------------------------------------------------------- */

/* The op is the shim's (premul_of): served calls pass the scalar to symcoll as the options'
 * scale; forwarded ones make the real NCCL's op at their first call (real_op). Local, as
 * NCCL's: no rank waits for another. */
SHIM_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  SHIM_FOREIGN_COMM(comm, RedOpCreatePreMulSum, op, scalar, datatype, residence, comm);
  ncclResult_t rc = shim_comm_ready(comm, "ncclRedOpCreatePreMulSum");
  if (rc != ncclSuccess) return rc;
  if (!op || !scalar || shim_dtype(datatype) < 0 ||
      (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
    shim_error("ncclRedOpCreatePreMulSum: op %p, scalar %p, datatype %d, residence %d: invalid", (void *)op, scalar,
               (int)datatype, (int)residence);
    return ncclInvalidArgument;
  }
  int i = 0;
  while (i < comm->npremul && comm->premul[i].used) i++;
  if (i == comm->npremul) {
    shim_premul_t *p = realloc(comm->premul, (size_t)(comm->npremul + 1) * sizeof *p);
    if (!p) return ncclSystemError;
    comm->premul = p;
    comm->npremul++;
  }
  shim_premul_t *pm = &comm->premul[i];
  memset(pm, 0, sizeof *pm);
  pm->used = true;
  pm->dtype = datatype;
  pm->residence = residence;
  if (residence == ncclScalarHostImmediate)
    memcpy(pm->value, scalar, symcoll_dtype_size((symcoll_dtype_t)shim_dtype(datatype)));
  else
    pm->device_scalar = scalar;
  *op = (ncclRedOp_t)(ncclNumOps + i);
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  SHIM_FOREIGN_COMM(comm, RedOpDestroy, op, comm);
  ncclResult_t rc = shim_comm_ready(comm, "ncclRedOpDestroy");
  if (rc != ncclSuccess) return rc;
  shim_premul_t *pm = premul_of(comm, op);
  if (!pm) {
    shim_error("ncclRedOpDestroy: op %d is not a PreMulSum op of this communicator", (int)op);
    return ncclInvalidArgument;
  }
  const shim_real_t *r = shim_real();
  if (pm->has_real && comm->real_state == 1 && r && r->RedOpDestroy) rc = r->RedOpDestroy(pm->real_op, comm->real);
  pm->used = false;
  return rc;
}

/* ---- NCCL's device API (host side): forwarded to the real NCCL ------------------------------- */

SHIM_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm);
SHIM_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *devComm);
SHIM_EXPORT shim_team_t ncclTeamWorld(ncclComm_t comm);
SHIM_EXPORT shim_team_t ncclTeamLsa(ncclComm_t comm);
SHIM_EXPORT shim_team_t ncclTeamRail(ncclComm_t comm);
SHIM_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, shim_team_t team, int rank);
SHIM_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, shim_team_t team, int rank);
SHIM_EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, shim_team_t team, int nBarriers,
                                                         void *outHandle, void *outReq);
SHIM_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(shim_team_t team, int nBarriers, void *outHandle,
                                                         void *outReq);
SHIM_EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
SHIM_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq);
SHIM_EXPORT void ncclResetDebugInitInternal(void);

/* The real communicator of a device-API call (made now if need be); NULL with *rc on failure. */
static ncclComm_t dev_real(ncclComm_t comm, const char *what, ncclResult_t *rc) {
  if ((*rc = shim_comm_ready(comm, what)) != ncclSuccess) return NULL;
  return shim_comm_real(comm, NULL, what, rc);
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm) {
  ncclResult_t rc;
  ncclComm_t real = dev_real(comm, "ncclDevCommCreate", &rc);
  if (!real) return rc;
  const shim_real_t *r = shim_real();
  return r->DevCommCreate ? r->DevCommCreate(real, reqs, outDevComm) : ncclInvalidUsage;
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *devComm) {
  ncclResult_t rc;
  ncclComm_t real = dev_real(comm, "ncclDevCommDestroy", &rc);
  if (!real) return rc;
  const shim_real_t *r = shim_real();
  return r->DevCommDestroy ? r->DevCommDestroy(real, devComm) : ncclInvalidUsage;
}

/* Teams: the real NCCL's answer where a real communicator exists; else one node's (the world is
 * the LSA team, the rail team is this rank alone). */
static ncclComm_t real_if_made(ncclComm_t comm) {
  return comm && comm->magic == SHIM_COMM_MAGIC && comm->real_state == 1 ? comm->real : NULL;
}

shim_team_t ncclTeamWorld(ncclComm_t comm) {
  const shim_real_t *r = shim_real();
  ncclComm_t real = real_if_made(comm);
  if (real && r && r->TeamWorld) return r->TeamWorld(real);
  return comm ? (shim_team_t){comm->nranks, comm->rank, 1} : (shim_team_t){0, 0, 0};
}

shim_team_t ncclTeamLsa(ncclComm_t comm) {
  const shim_real_t *r = shim_real();
  ncclComm_t real = real_if_made(comm);
  if (real && r && r->TeamLsa) return r->TeamLsa(real);
  return comm ? (shim_team_t){comm->nranks, comm->rank, 1} : (shim_team_t){0, 0, 0};
}

shim_team_t ncclTeamRail(ncclComm_t comm) {
  const shim_real_t *r = shim_real();
  ncclComm_t real = real_if_made(comm);
  if (real && r && r->TeamRail) return r->TeamRail(real);
  return comm ? (shim_team_t){1, 0, comm->nranks} : (shim_team_t){0, 0, 0};
}

int ncclTeamRankToWorld(ncclComm_t comm, shim_team_t team, int rank) {
  const shim_real_t *r = shim_real();
  ncclComm_t real = real_if_made(comm);
  if (real && r && r->TeamRankToWorld) return r->TeamRankToWorld(real, team, rank);
  return comm ? comm->rank + (rank - team.rank) * team.stride : -1;
}

int ncclTeamRankToLsa(ncclComm_t comm, shim_team_t team, int rank) {
  const shim_real_t *r = shim_real();
  ncclComm_t real = real_if_made(comm);
  if (real && r && r->TeamRankToLsa) return r->TeamRankToLsa(real, team, rank);
  return comm ? comm->rank + (rank - team.rank) * team.stride : -1;
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, shim_team_t team, int nBarriers, void *outHandle,
                                             void *outReq) {
  ncclResult_t rc;
  ncclComm_t real = dev_real(comm, "ncclGinBarrierCreateRequirement", &rc);
  if (!real) return rc;
  const shim_real_t *r = shim_real();
  return r->GinBarrierCreateRequirement ? r->GinBarrierCreateRequirement(real, team, nBarriers, outHandle, outReq)
                                        : ncclInvalidUsage;
}

ncclResult_t ncclLsaBarrierCreateRequirement(shim_team_t team, int nBarriers, void *outHandle, void *outReq) {
  const shim_real_t *r = shim_real();
  return r && r->LsaBarrierCreateRequirement ? r->LsaBarrierCreateRequirement(team, nBarriers, outHandle, outReq)
                                             : ncclInvalidUsage;
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  const shim_real_t *r = shim_real();
  return r && r->LLA2ACalcSlots ? r->LLA2ACalcSlots(maxElts, maxEltSize) : -1;
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq) {
  const shim_real_t *r = shim_real();
  return r && r->LLA2ACreateRequirement ? r->LLA2ACreateRequirement(nBlocks, nSlots, outHandle, outReq)
                                        : ncclInvalidUsage;
}

/* Deprecated in nccl.h (not part of NCCL's API), exported all the same. */
SHIM_EXPORT void ncclResetDebugInit(void) {
  const shim_real_t *r = shim_real();
  if (r && r->ResetDebugInit) r->ResetDebugInit();
}

void ncclResetDebugInitInternal(void) {
  const shim_real_t *r = shim_real();
  if (r && r->ResetDebugInit) r->ResetDebugInit();
}

/* ---- pncclXxx ------------------------------------------------------------------------------ */

SHIM_PALIAS(GetVersion)
SHIM_PALIAS(GetUniqueId)
SHIM_PALIAS(GetErrorString)
SHIM_PALIAS(GetLastError)
SHIM_PALIAS(CommInitRankConfig)
SHIM_PALIAS(CommInitRank)
SHIM_PALIAS(CommInitRankScalable)
SHIM_PALIAS(CommInitAll)
SHIM_PALIAS(CommSplit)
SHIM_PALIAS(CommShrink)
SHIM_PALIAS(CommFinalize)
SHIM_PALIAS(CommDestroy)
SHIM_PALIAS(CommAbort)
SHIM_PALIAS(CommRevoke)
SHIM_PALIAS(CommGetAsyncError)
SHIM_PALIAS(CommCount)
SHIM_PALIAS(CommCuDevice)
SHIM_PALIAS(CommUserRank)
SHIM_PALIAS(AllReduce)
SHIM_PALIAS(AllGather)
SHIM_PALIAS(ReduceScatter)
SHIM_PALIAS(Broadcast)
SHIM_PALIAS(Bcast)
SHIM_PALIAS(Reduce)
SHIM_PALIAS(AlltoAll)
SHIM_PALIAS(Gather)
SHIM_PALIAS(Scatter)
SHIM_PALIAS(Send)
SHIM_PALIAS(Recv)
SHIM_PALIAS(RedOpCreatePreMulSum)
SHIM_PALIAS(RedOpDestroy)
SHIM_PALIAS(DevCommCreate)
SHIM_PALIAS(DevCommDestroy)
SHIM_PALIAS(TeamWorld)
SHIM_PALIAS(TeamLsa)
SHIM_PALIAS(TeamRail)
SHIM_PALIAS(TeamRankToWorld)
SHIM_PALIAS(TeamRankToLsa)
SHIM_PALIAS(GinBarrierCreateRequirement)
SHIM_PALIAS(LsaBarrierCreateRequirement)
SHIM_PALIAS(LLA2ACalcSlots)
SHIM_PALIAS(LLA2ACreateRequirement)
extern void pncclResetDebugInit(void) __attribute__((alias("ncclResetDebugInit"), visibility("default")));
