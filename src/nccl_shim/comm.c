/*
 * The shim communicator's life cycle: a symcoll communicator made at ncclCommInitRank (or in a
 * thread of its own for non-blocking configs and inside groups), and a real NCCL communicator
 * made only when a call first needs one:
 *  - communicators of one ncclCommInitAll: the real ncclCommInitAll over the same devices;
 *  - the others: rank 0 makes a real ncclUniqueId, and the ranks exchange it (with their GPUs'
 *    PCI bus ids) through symcoll itself (an all_gather of a few bytes in device memory), then
 *    call the real ncclCommInitRank. Ranks that share a GPU learn it from the same exchange and
 *    all fail the call with the same error (NCCL takes one rank per GPU).
 * Never inside a CUDA graph capture: the exchange synchronises a stream.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_rt.h"

static shim_policy_t policy;

static void policy_init(void) {
  const char *bad = NULL;
  if (shim_policy_parse(getenv("SYMCOLL_NCCL_SHIM"), getenv("SYMCOLL_NCCL_SHIM_MAX_BYTES"), &policy, &bad) != 0)
    shim_log(SHIM_LOG_WARN,
             "%s=%s is not valid (SYMCOLL_NCCL_SHIM: auto|serve|forward; "
             "SYMCOLL_NCCL_SHIM_MAX_BYTES: bytes with K/M/G); using the default",
             bad, getenv(bad));
}

shim_policy_t shim_policy(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, policy_init);
  return policy;
}

static void env_prepare_once(void) {
  /* symcoll's own NCCL engine (SYMCOLL_NCCL, src/cuda/nccl.c) opens SYMCOLL_NCCL_LIB, else
   * "libnccl.so.2": under the shim that name is the shim. Point it at the real library, or,
   * where there is none, turn the engine off. */
  if (getenv("SYMCOLL_NCCL_LIB")) return;
  const shim_real_t *r = shim_real();
  if (r && shim_real_path()[0])
    setenv("SYMCOLL_NCCL_LIB", shim_real_path(), 1);
  else if (!getenv("SYMCOLL_NCCL"))
    setenv("SYMCOLL_NCCL", "0", 1);
}

void shim_env_prepare(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, env_prepare_once);
}

ncclComm_t shim_comm_new(int rank, int nranks, int device, const char *job_id, int blocking) {
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = SHIM_COMM_MAGIC;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  pthread_mutex_init(&c->real_lock, NULL);
  c->state = SHIM_PENDING;
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->blocking = blocking;
  if (job_id) snprintf(c->job_id, sizeof c->job_id, "%s", job_id);
  return c;
}

static void comm_done(ncclComm_t c, ncclResult_t rc) {
  pthread_mutex_lock(&c->lock);
  c->init_rc = rc;
  c->state = rc == ncclSuccess ? SHIM_READY : SHIM_FAILED;
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
}

/* ncclCommSplit's communicator: symcoll_comm_split of the parent (every rank of it takes part).
 * The parent is let go (splits_in_flight) before c is done: whoever waits on c may then destroy
 * the parent. */
static ncclResult_t split_create(ncclComm_t c) {
  ncclComm_t p = c->split_parent;
  symcoll_comm_t sub = NULL;
  const int prev = shim_device_enter(c->device);
  symcoll_status_t s = symcoll_comm_split(p->sc, c->split_color, c->split_key, &sub);
  shim_device_leave(c->device, prev);
  ncclResult_t rc = shim_result(s);
  if (s != SYMCOLL_OK) {
    shim_error("ncclCommSplit: symcoll_comm_split: %s (%s)", symcoll_status_string(s), symcoll_last_error());
  } else if (sub) {
    c->sc = sub;
    c->rank = symcoll_comm_rank(sub);
    c->nranks = symcoll_comm_nranks(sub);
    SHIM_INFO("ncclCommSplit: rank %d of %d (color %d)", c->rank, c->nranks, c->split_color);
  }
  if (c->in_flight) {
    pthread_mutex_lock(&p->lock);
    p->splits_in_flight--;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
  }
  comm_done(c, rc);
  return rc;
}

void shim_split_wait(ncclComm_t parent) {
  pthread_mutex_lock(&parent->lock);
  while (parent->splits_in_flight > 0) pthread_cond_wait(&parent->cond, &parent->lock);
  pthread_mutex_unlock(&parent->lock);
}

ncclResult_t shim_comm_create(ncclComm_t c) {
  if (c->split_parent) return split_create(c);
  shim_env_prepare();
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = c->job_id;
  cfg.rank = c->rank;
  cfg.nranks = c->nranks;
  cfg.device = c->device;
  const int prev = shim_device_enter(c->device);
  symcoll_status_t s = symcoll_comm_create(&cfg, &c->sc);
  shim_device_leave(c->device, prev);
  ncclResult_t rc = shim_result(s);
  if (s != SYMCOLL_OK)
    shim_error("ncclCommInitRank (rank %d of %d, GPU %d): symcoll_comm_create: %s (%s)", c->rank, c->nranks, c->device,
               symcoll_status_string(s), symcoll_last_error());
  else
    SHIM_INFO("rank %d of %d on GPU %d: symcoll communicator of job %s", c->rank, c->nranks, c->device, c->job_id);
  comm_done(c, rc);
  return rc;
}

/* A communicator, or a chain of one parent's splits in the order they were made. Each one's
 * successor is read before it is made: once done, it may be freed by whoever waits on it. */
static void *create_thread(void *arg) {
  for (ncclComm_t c = arg, next; c; c = next) {
    next = c->split_next;
    const bool self_free = c->self_free;
    shim_comm_create(c);
    if (self_free) {
      c->has_creator = false; /* this thread, detached */
      shim_comm_free(c);
    }
  }
  return NULL;
}

ncclResult_t shim_comm_create_async(ncclComm_t c) {
  const bool self_free = c->self_free; /* such a c may be freed by its thread at any time */
  pthread_t t;
  if (pthread_create(&t, NULL, create_thread, c) != 0) {
    shim_error("ncclCommInitRank / ncclCommSplit: cannot start a thread");
    for (ncclComm_t q = c; q; q = q->split_next) comm_done(q, ncclSystemError); /* no one waits forever */
    return ncclSystemError;
  }
  if (self_free) {
    pthread_detach(t);
  } else {
    c->creator = t;
    c->has_creator = true;
  }
  return ncclSuccess;
}

bool shim_comm_drop_ghost(ncclComm_t c) {
  if (!c->ghost) return false;
  pthread_mutex_lock(&c->lock);
  while (c->state == SHIM_PENDING) pthread_cond_wait(&c->cond, &c->lock);
  pthread_mutex_unlock(&c->lock);
  shim_comm_free(c);
  return true;
}

ncclResult_t shim_comm_ready(ncclComm_t c, const char *what) {
  if (!c || c->magic != SHIM_COMM_MAGIC) {
    shim_error("%s: not a communicator of libsymcoll_nccl", what);
    return ncclInvalidArgument;
  }
  if (shim_group_holds(c)) {
    shim_error("%s: the communicator is made at the ncclGroupEnd of the group that created it", what);
    return ncclInvalidUsage;
  }
  pthread_mutex_lock(&c->lock);
  while (c->state == SHIM_PENDING) pthread_cond_wait(&c->cond, &c->lock);
  const ncclResult_t rc = c->init_rc;
  pthread_mutex_unlock(&c->lock);
  return rc;
}

/* ---- the real communicator ---------------------------------------------------------------- */

typedef union {
  struct {
    int32_t ok; /* rank 0: its real ncclGetUniqueId succeeded */
    int32_t pad;
    char bus_id[16]; /* this rank's GPU (cudaDeviceGetPCIBusId) */
    ncclUniqueId id; /* rank 0's real id */
  } v;
  char bytes[256]; /* each rank's block stays 256-byte aligned for the all_gather */
} xchg_t;

/* The real communicators of k ranks of one job that this thread drives (k = 1: a rank of its
 * own; k > 1: the ranks one group made, as nccl-tests' single-process runs do). Rank 0's real
 * unique id and every rank's GPU travel through symcoll: each member's all_gather is launched
 * (never blocking the host), then all are awaited, so one thread can carry several ranks.
 * Then the real ncclCommInitRank of each, inside one real group where k > 1. Writes out[i];
 * 0, or -1 with why set. Long: one exchange and one real group, with every failure path
 * unwinding the same allocations. */
static int real_by_members(ncclComm_t *mem, int k, const shim_real_t *r, ncclComm_t *out, char *why, size_t why_size) {
  const int n = mem[0]->nranks;
  xchg_t *all = calloc((size_t)n, sizeof *all);
  void **dev = calloc((size_t)k, sizeof *dev);
  cudaStream_t *st = calloc((size_t)k, sizeof *st);
  int rc = -1, prev = -1;
  cudaGetDevice(&prev);
  if (!all || !dev || !st) {
    snprintf(why, why_size, "out of memory");
    goto out;
  }
  /* Every member's buffer first (a cudaMalloc beside a waiting kernel of this process can stall). */
  for (int i = 0; i < k; i++) {
    ncclComm_t c = mem[i];
    xchg_t me;
    memset(&me, 0, sizeof me);
    if (c->rank == 0) me.v.ok = r->GetUniqueId(&me.v.id) == ncclSuccess;
    cudaDeviceGetPCIBusId(me.v.bus_id, sizeof me.v.bus_id, c->device);
    cudaSetDevice(c->device);
    if (cudaMalloc(&dev[i], (size_t)n * sizeof me) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMemcpy((char *)dev[i] + (size_t)c->rank * sizeof me, &me, sizeof me, cudaMemcpyHostToDevice) !=
            cudaSuccess) {
      snprintf(why, why_size, "cudaMalloc / cudaStreamCreate / cudaMemcpy failed: %s",
               cudaGetErrorString(cudaGetLastError()));
      goto out;
    }
  }
  /* A rank of its own: its peers have allocated too before its kernel waits (a host barrier;
   * with k > 1 it would wait for this thread's other members). */
  symcoll_status_t s = k == 1 ? symcoll_comm_barrier(mem[0]->sc) : SYMCOLL_OK;
  symcoll_coll_opts_t opts;
  symcoll_coll_opts_init(&opts);
  opts.algo = SYMCOLL_ALGO_PULL; /* never NCCL: this is how the real communicator comes to be */
  for (int i = 0; i < k && s == SYMCOLL_OK; i++) {
    cudaSetDevice(mem[i]->device);
    char *mine = (char *)dev[i] + (size_t)mem[i]->rank * sizeof(xchg_t);
    s = symcoll_all_gather_ex(mem[i]->sc, mine, dev[i], sizeof(xchg_t), SYMCOLL_UINT8, st[i], &opts);
  }
  for (int i = 0; i < k && s == SYMCOLL_OK; i++) {
    cudaSetDevice(mem[i]->device);
    if (cudaStreamSynchronize(st[i]) != cudaSuccess) s = SYMCOLL_ERR_CUDA;
    if (s == SYMCOLL_OK) s = symcoll_comm_check(mem[i]->sc);
  }
  if (s != SYMCOLL_OK) {
    snprintf(why, why_size, "exchanging the real NCCL's unique id through symcoll failed: %s (%s)",
             symcoll_status_string(s), symcoll_last_error());
    goto out;
  }
  cudaSetDevice(mem[0]->device);
  if (cudaMemcpy(all, dev[0], (size_t)n * sizeof *all, cudaMemcpyDeviceToHost) != cudaSuccess) {
    snprintf(why, why_size, "cudaMemcpy failed");
    goto out;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (!strncmp(all[i].v.bus_id, all[j].v.bus_id, sizeof all[i].v.bus_id)) {
        snprintf(why, why_size,
                 "ranks %d and %d share GPU %.16s, and NCCL takes one rank per GPU (symcoll serves shared GPUs; "
                 "forwarded calls cannot run here)",
                 j, i, all[i].v.bus_id);
        goto out;
      }
  if (!all[0].v.ok) {
    snprintf(why, why_size, "rank 0's real ncclGetUniqueId failed");
    goto out;
  }
  ncclResult_t nrc = k > 1 ? r->GroupStart() : ncclSuccess;
  for (int i = 0; i < k && nrc == ncclSuccess; i++) {
    cudaSetDevice(mem[i]->device);
    nrc = r->CommInitRank(&out[i], n, all[0].v.id, mem[i]->rank);
  }
  if (k > 1) {
    ncclResult_t e = r->GroupEnd();
    if (nrc == ncclSuccess) nrc = e;
  }
  if (nrc != ncclSuccess) {
    snprintf(why, why_size, "the real ncclCommInitRank failed: %s (%s)", r->GetErrorString(nrc),
             r->GetLastError ? r->GetLastError(NULL) : "");
    goto out;
  }
  rc = 0;
out:
  for (int i = 0; i < k && st && dev; i++) {
    cudaSetDevice(mem[i]->device);
    if (st[i]) cudaStreamDestroy(st[i]);
    if (dev[i]) cudaFree(dev[i]);
  }
  if (prev >= 0) cudaSetDevice(prev);
  free(all);
  free(dev);
  free(st);
  return rc;
}

static void real_by_rank(ncclComm_t c, const shim_real_t *r) {
  ncclComm_t real = NULL;
  if (real_by_members(&c, 1, r, &real, c->real_why, sizeof c->real_why) == 0) {
    c->real = real;
    c->real_state = 1;
  }
}

static void real_by_clique(ncclComm_t c, const shim_real_t *r) {
  shim_clique_t *q = c->clique;
  pthread_mutex_lock(&q->lock);
  if (q->real_state == 0) {
    q->real_state = -1;
    for (int i = 0; i < q->n; i++)
      for (int j = 0; j < i && q->init_all; j++)
        if (q->devs[i] == q->devs[j]) {
          snprintf(q->why, sizeof q->why,
                   "ranks %d and %d share GPU %d, and NCCL takes one rank per GPU (symcoll serves shared GPUs; "
                   "forwarded calls cannot run here)",
                   j, i, q->devs[i]);
          goto done;
        }
    q->reals = calloc((size_t)q->n, sizeof *q->reals);
    int prev = -1;
    cudaGetDevice(&prev);
    int ok;
    if (!q->reals) {
      ok = 0;
      snprintf(q->why, sizeof q->why, "out of memory");
    } else if (q->init_all) {
      ncclResult_t rc = r->CommInitAll(q->reals, q->n, q->devs);
      if (!(ok = rc == ncclSuccess))
        snprintf(q->why, sizeof q->why, "the real ncclCommInitAll failed: %s", r->GetErrorString(rc));
    } else {
      ok = 1;
      for (int i = 0; i < q->n; i++)
        if (!q->comms[i]) {
          ok = 0;
          snprintf(q->why, sizeof q->why, "rank %d of this thread's group was destroyed already", i);
        }
      ok = ok && real_by_members(q->comms, q->n, r, q->reals, q->why, sizeof q->why) == 0;
    }
    if (prev >= 0) cudaSetDevice(prev);
    if (ok) {
      for (int i = 0; i < q->n; i++)
        if (!q->comms[i]) { /* its shim communicator is gone already */
          r->CommDestroy(q->reals[i]);
          q->reals[i] = NULL;
        }
      q->real_state = 1;
    }
  }
done:;
  /* Each member takes its own, under its own lock (never both locks at once). */
  ncclComm_t mine = q->real_state == 1 ? q->reals[c->clique_index] : NULL;
  if (!mine) snprintf(c->real_why, sizeof c->real_why, "%s", q->real_state < 0 ? q->why : "no real communicator");
  pthread_mutex_unlock(&q->lock);
  pthread_mutex_lock(&c->real_lock);
  if (mine && c->real_state == 0) {
    c->real = mine;
    c->real_state = 1;
  }
  pthread_mutex_unlock(&c->real_lock);
}

ncclComm_t shim_comm_real(ncclComm_t c, cudaStream_t stream, const char *what, ncclResult_t *rc) {
  pthread_mutex_lock(&c->real_lock);
  if (c->real_state == 0) {
    const shim_real_t *r = shim_real();
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (!r) {
      snprintf(c->real_why, sizeof c->real_why, "%s", shim_real_why());
      c->real_state = -1;
    } else if (stream && cudaStreamIsCapturing(stream, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone) {
      /* Not sticky: the same call outside the capture makes it. */
      pthread_mutex_unlock(&c->real_lock);
      shim_error(
          "%s needs the real NCCL communicator, which is made at the first forwarded call and cannot be "
          "made inside a CUDA graph capture: make one forwarded call before capturing",
          what);
      *rc = ncclInvalidUsage;
      return NULL;
    } else if (!c->sc) {
      snprintf(c->real_why, sizeof c->real_why, "no symcoll communicator to exchange the real NCCL's unique id");
      c->real_state = -1;
    } else {
      SHIM_INFO("rank %d of %d: making the real NCCL communicator for %s", c->rank, c->nranks, what);
      const int prev = shim_device_enter(c->device);
      if (c->clique) {
        pthread_mutex_unlock(&c->real_lock); /* real_by_clique takes it itself */
        real_by_clique(c, r);
        pthread_mutex_lock(&c->real_lock);
      } else {
        real_by_rank(c, r);
      }
      shim_device_leave(c->device, prev);
      if (c->real_state != 1) c->real_state = -1;
    }
  }
  ncclComm_t real = c->real_state == 1 ? c->real : NULL;
  pthread_mutex_unlock(&c->real_lock);
  if (!real) {
    shim_error("%s needs NCCL, but the real NCCL communicator could not be made: %s", what, c->real_why);
    *rc = ncclInvalidUsage;
  }
  return real;
}

void shim_comm_cohort(ncclComm_t *comms, int n) {
  for (int i = 0; i < n; i++) {
    ncclComm_t a = comms[i];
    if (a->clique || a->state != SHIM_READY) continue;
    int k = 0;
    for (int j = i; j < n; j++)
      if (!comms[j]->clique && comms[j]->state == SHIM_READY && comms[j]->nranks == a->nranks &&
          !strcmp(comms[j]->job_id, a->job_id))
        k++;
    if (k < 2) continue;
    shim_clique_t *q = calloc(1, sizeof *q);
    int *devs = calloc((size_t)k, sizeof *devs);
    ncclComm_t *members = calloc((size_t)k, sizeof *members);
    if (!q || !devs || !members) { /* each makes its own then (and may wait for the others) */
      free(q);
      free(devs);
      free(members);
      continue;
    }
    pthread_mutex_init(&q->lock, NULL);
    q->n = q->refs = k;
    q->devs = devs;
    q->comms = members;
    int m = 0;
    for (int j = i; j < n; j++) {
      ncclComm_t b = comms[j];
      if (b->clique || b->state != SHIM_READY || b->nranks != a->nranks || strcmp(b->job_id, a->job_id)) continue;
      devs[m] = b->device;
      members[m] = b;
      b->clique = q;
      b->clique_index = m++;
    }
  }
}

void shim_comm_free(ncclComm_t c) {
  if (c->has_creator) pthread_join(c->creator, NULL);
  if (c->clique) {
    shim_clique_t *q = c->clique;
    pthread_mutex_lock(&q->lock);
    q->comms[c->clique_index] = NULL;
    const int left = --q->refs;
    pthread_mutex_unlock(&q->lock);
    if (left == 0) {
      pthread_mutex_destroy(&q->lock);
      free(q->devs);
      free(q->comms);
      free(q->reals);
      free(q);
    }
  }
  c->magic = 0;
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->real_lock);
  free(c->premul);
  free(c);
}
