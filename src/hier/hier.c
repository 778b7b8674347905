/*
 * Communicators spanning nodes (symcoll.h, "jobs across nodes"). Such a communicator is a
 * transport of its own, built from three parts: the node-local communicator (today's, over
 * the ranks of one host), the cross engine (among the ranks of equal local rank, one per node,
 * engine rank = node index) and the world engine (over all ranks: SYMCOLL_ALGO_ENGINE). The
 * engines are NCCL, MPI (libsymcoll_mpi) or, for nodes emulated on one host, symcoll
 * communicators split from the one-host communicator (src/engine/registry.h). Every step below is a
 * collective call of one of those parts, so bounded waits, signatures and stream order come
 * from them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../engine/registry.h"

typedef struct symcoll__hier {
  symcoll_comm_t local; /* this node's ranks */
  symcoll_comm_t flat;  /* emulated nodes: the one-host communicator over all ranks (owned) */
  symcoll__engine_t cross, world;
  bool has_cross, has_world; /* world.coll NULL: no ENGINE algorithm */
  symcoll__engine_t mpi;     /* MPI over the whole job when it is only the exchange (NCCL engines) */
  bool has_mpi;
  int node, nnodes, lrank, lsize;
  bool node_major;              /* global rank = node * lsize + local rank */
  int grank[SYMCOLL_MAX_RANKS]; /* global rank of (node n, local rank l) at n * lsize + l */
  /* The exchange among all ranks that the communicator's set-up, barrier and SYMCOLL_CHECK use. */
  int (*xchg)(void *ctx, const void *send, void *recv, size_t bytes);
  void *xchg_ctx;
} symcoll__hier_t;

/* The exchange over the one-host communicator of emulated nodes. */
static int flat_xchg(void *ctx, const void *send, void *recv, size_t bytes) {
  symcoll_comm_t c = ctx;
  return c->oob->allgather(c, send, recv, bytes) == SYMCOLL_OK ? 0 : -1;
}

/* ---- the exchange of the communicator (its oob) ---------------------------------------------- */

static symcoll_status_t hier_allgather(symcoll_comm_t c, const void *in, void *out, size_t bytes) {
  symcoll__hier_t *h = c->tp_state;
  SYMCOLL_CHECK(symcoll__comm_status(c));
  if (h->xchg(h->xchg_ctx, in, out, bytes) != 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: the exchange among the job's ranks failed", c->job_id);
    symcoll__comm_fail(c, SYMCOLL_ERR_PEER_LOST);
    return SYMCOLL_ERR_PEER_LOST;
  }
  return SYMCOLL_OK;
}
/* Rank 0's bytes to every rank: the one-host communicator's own broadcast where nodes are
 * emulated, else through the exchange, a few KiB at a time (so that it stays small). */
static symcoll_status_t hier_bcast(symcoll_comm_t c, void *buf, size_t bytes) {
  symcoll__hier_t *h = c->tp_state;
  if (h->flat) return h->flat->oob->bcast(h->flat, buf, bytes);
  const size_t chunk = 8192;
  char *all = malloc(chunk * (size_t)c->nranks);
  if (!all) return SYMCOLL_ERR_NO_MEMORY;
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t off = 0; s == SYMCOLL_OK && off < bytes; off += chunk) {
    const size_t n = bytes - off < chunk ? bytes - off : chunk;
    s = hier_allgather(c, (char *)buf + off, all, n);
    if (s == SYMCOLL_OK) memcpy((char *)buf + off, all, n);
  }
  free(all);
  return s;
}
static symcoll_status_t hier_exchange_fd(symcoll_comm_t c, int fd, int *fds) {
  (void)c, (void)fd, (void)fds;
  return SYMCOLL_ERR_UNSUPPORTED; /* memory is node-local: the local communicator maps it */
}
static void hier_oob_destroy(symcoll_comm_t c) {
  (void)c;
}
static const symcoll__oob_t hier_oob = {
    .allgather = hier_allgather, .bcast = hier_bcast, .exchange_fd = hier_exchange_fd, .destroy = hier_oob_destroy};

/* ---- the collectives ------------------------------------------------------------------------- */

/* A node-local step of call `a` on the node's communicator, through core's inner entry (the
 * table's algorithm and placement; the outer call's signature folded into the step's); the
 * outer call's arguments were checked once, at its entry. */
static symcoll_status_t local_step_at(symcoll__hier_t *h, const symcoll__coll_args_t *a, symcoll_coll_t coll,
                                      const void *send, void *recv, size_t count, int root) {
  symcoll__coll_args_t c = {.coll = coll,
                            .send = send,
                            .recv = recv,
                            .count = count,
                            .dtype = a->dtype,
                            .op = symcoll__coll_desc(coll)->takes_op ? a->op : SYMCOLL_SUM,
                            .root = root,
                            .stream = a->stream,
                            .sig = a->sig};
  h->local->coll_seq++; /* the local communicator's call count, which its WARNs name */
  return symcoll__coll_inner(h->local, &c);
}
/* A step of a collective without a root. */
static symcoll_status_t local_step(symcoll__hier_t *h, const symcoll__coll_args_t *a, symcoll_coll_t coll,
                                   const void *send, void *recv, size_t count) {
  return local_step_at(h, a, coll, send, recv, count, 0);
}

#define STEP(call)                 \
  do {                             \
    s = (call);                    \
    if (s != SYMCOLL_OK) goto out; \
  } while (0)

static symcoll_status_t scratch(symcoll__hier_t *h, size_t bytes, void *stream, void **p) {
  return h->local->tp->scratch_alloc(h->local, bytes, stream, p);
}
static void scratch_free(symcoll__hier_t *h, void *p, void *stream) {
  if (p) h->local->tp->scratch_free(h->local, p, stream);
}
static symcoll_status_t copy(symcoll__hier_t *h, void *dst, const void *src, size_t bytes, void *stream) {
  return dst == src ? SYMCOLL_OK : h->local->tp->copy(h->local, dst, src, bytes, stream);
}

/* all_reduce: local reduce_scatter into this rank's block of recv, the engine's all_reduce of
 * that block, local all_gather in place; the last count % L elements by local all_reduce and
 * the engine. In place the reduce_scatter is in place too, so no scratch is needed. */
static symcoll_status_t hier_all_reduce(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype), L = (size_t)h->lsize;
  const size_t per = a->count / L, rem = a->count % L;
  const char *send = a->send;
  char *recv = a->recv;
  symcoll_status_t s = SYMCOLL_OK;
  if (L == 1) return h->cross.coll(h->cross.ctx, a->coll, send, recv, a->count, a->dtype, a->op, 0, a->stream);
  if (per) {
    char *blk = recv + (size_t)h->lrank * per * es;
    STEP(local_step(h, a, SYMCOLL_COLL_REDUCE_SCATTER, send, blk, per));
    STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_ALL_REDUCE, blk, blk, per, a->dtype, a->op, 0, a->stream));
    STEP(local_step(h, a, SYMCOLL_COLL_ALL_GATHER, blk, recv, per));
  }
  if (rem) {
    const size_t off = per * L * es;
    STEP(local_step(h, a, SYMCOLL_COLL_ALL_REDUCE, send + off, recv + off, rem));
    STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_ALL_REDUCE, recv + off, recv + off, rem, a->dtype, a->op, 0,
                       a->stream));
  }
out:
  return s;
}

/* all_gather: the engine gathers the blocks of equal local ranks (one per node), then each
 * node's blocks are gathered locally, one call per node, into that node's ranks' places. */
static symcoll_status_t hier_all_gather(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype), blk = a->count * es, N = (size_t)h->nnodes, L = (size_t)h->lsize;
  char *recv = a->recv, *tmp = NULL, *row = NULL;
  symcoll_status_t s;
  STEP(scratch(h, N * blk + (h->node_major ? 0 : L * blk), a->stream, (void **)&tmp));
  row = tmp + N * blk;
  STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_ALL_GATHER, a->send, tmp, a->count, a->dtype, SYMCOLL_SUM, 0,
                     a->stream));
  for (size_t n = 0; n < N; n++) {
    const int *g = &h->grank[n * L];
    if (h->node_major) {
      STEP(local_step(h, a, SYMCOLL_COLL_ALL_GATHER, tmp + n * blk, recv + (size_t)g[0] * blk, a->count));
      continue;
    }
    STEP(local_step(h, a, SYMCOLL_COLL_ALL_GATHER, tmp + n * blk, row, a->count));
    for (size_t l = 0; l < L; l++) STEP(copy(h, recv + (size_t)g[l] * blk, row + l * blk, blk, a->stream));
  }
out:
  scratch_free(h, tmp, a->stream);
  return s;
}

/* reduce_scatter: for each node m, the local reduce_scatter of m's ranks' blocks (this rank
 * keeps the local sum of the block of (m, its local rank)); then the engine's reduce_scatter
 * over nodes leaves each rank its own block. */
static symcoll_status_t hier_reduce_scatter(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype), blk = a->count * es, N = (size_t)h->nnodes, L = (size_t)h->lsize;
  const char *send = a->send;
  char *tmp = NULL, *ordered = NULL;
  symcoll_status_t s;
  STEP(scratch(h, N * blk + (h->node_major ? 0 : N * L * blk), a->stream, (void **)&tmp));
  if (!h->node_major) { /* the input in (node, local rank) order */
    ordered = tmp + N * blk;
    for (size_t i = 0; i < N * L; i++)
      STEP(copy(h, ordered + i * blk, send + (size_t)h->grank[i] * blk, blk, a->stream));
  }
  for (size_t m = 0; m < N; m++) {
    const char *src = h->node_major ? send + (size_t)h->grank[m * L] * blk : ordered + m * L * blk;
    STEP(local_step(h, a, SYMCOLL_COLL_REDUCE_SCATTER, src, tmp + m * blk, a->count));
  }
  STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_REDUCE_SCATTER, tmp, a->recv, a->count, a->dtype, a->op, 0, a->stream));
out:
  scratch_free(h, tmp, a->stream);
  return s;
}
/* Where global rank g lives: its node and local rank. */
static void place_of(const symcoll__hier_t *h, int g, int *node, int *lrank) {
  *node = *lrank = 0;
  for (int i = 0; i < h->nnodes * h->lsize; i++)
    if (h->grank[i] == g) *node = i / h->lsize, *lrank = i % h->lsize;
}

/* broadcast: the engine, among the ranks of the root's local rank (one per node), broadcasts
 * from the root's node; then each node broadcasts from that rank. The root's input crosses
 * between nodes once per node, and reaches the node's other ranks over the node's own links. */
static symcoll_status_t hier_broadcast(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  int rnode, rl;
  place_of(h, a->root, &rnode, &rl);
  symcoll_status_t s = SYMCOLL_OK;
  if (h->lrank == rl)
    STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_BROADCAST, a->send, a->recv, a->count, a->dtype, SYMCOLL_SUM, rnode,
                       a->stream));
  if (h->lsize > 1)
    STEP(local_step_at(h, a, SYMCOLL_COLL_BROADCAST, h->lrank == rl ? a->recv : NULL, a->recv, a->count, rl));
out:
  return s;
}

/* reduce: each node reduces to its rank of the root's local rank (the root itself reduces its
 * node into its recv, the other nodes' into scratch), then the engine reduces among those
 * ranks to the root's node. As all_reduce here, a node's part is rounded to the dtype once
 * before the step between nodes, so the root gets what hier_all_reduce gives it. */
static symcoll_status_t hier_reduce(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  int rnode, rl;
  place_of(h, a->root, &rnode, &rl);
  const bool leader = h->lrank == rl, is_root = leader && h->node == rnode;
  const void *part = a->send; /* what this rank hands the engine */
  void *tmp = NULL;
  symcoll_status_t s = SYMCOLL_OK;
  if (h->lsize > 1) {
    void *dst = is_root ? a->recv : NULL;
    if (leader && !is_root) STEP(scratch(h, a->count * symcoll_dtype_size(a->dtype), a->stream, &tmp));
    if (tmp) dst = tmp;
    STEP(local_step_at(h, a, SYMCOLL_COLL_REDUCE, a->send, dst, a->count, rl));
    part = dst;
  }
  if (leader)
    STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_REDUCE, part, is_root ? a->recv : NULL, a->count, a->dtype, a->op,
                       rnode, a->stream));
out:
  scratch_free(h, tmp, a->stream);
  return s;
}

/* all_to_all: the engine exchanges, among the ranks of equal local rank, all the blocks bound
 * for one node at once (L blocks per peer: each rank sends nnodes - 1 messages between nodes
 * instead of nranks - L), then the node's ranks exchange what they received. In between, the
 * blocks are rearranged (copies on the stream): with x[n][k] the block for (node n, local
 * rank k), the engine leaves y[n][k] = (n, our local rank) -> (our node, k); transposed to
 * x[k][n], the local exchange gives local rank l its x[l][n], that is (n, l) -> us, which
 * lands at recv's block of (n, l). In place is fine: send is read only by the first step. */
static symcoll_status_t hier_all_to_all(symcoll__hier_t *h, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype), blk = a->count * es, N = (size_t)h->nnodes, L = (size_t)h->lsize;
  const size_t all = N * L * blk;
  if (L == 1 && h->node_major) /* the engine's ranks are the communicator's */
    return h->cross.coll(h->cross.ctx, SYMCOLL_COLL_ALL_TO_ALL, a->send, a->recv, a->count, a->dtype, SYMCOLL_SUM, 0,
                         a->stream);
  const char *src = a->send;
  char *recv = a->recv, *x = NULL, *y;
  symcoll_status_t s;
  STEP(scratch(h, 2 * all, a->stream, (void **)&x));
  y = x + all;
  if (!h->node_major) { /* the input in (node, local rank) order */
    for (size_t i = 0; i < N * L; i++) STEP(copy(h, x + i * blk, src + (size_t)h->grank[i] * blk, blk, a->stream));
    src = x;
  }
  STEP(h->cross.coll(h->cross.ctx, SYMCOLL_COLL_ALL_TO_ALL, src, y, L * a->count, a->dtype, SYMCOLL_SUM, 0, a->stream));
  for (size_t n = 0; n < N; n++)
    for (size_t k = 0; k < L; k++) STEP(copy(h, x + (k * N + n) * blk, y + (n * L + k) * blk, blk, a->stream));
  STEP(local_step(h, a, SYMCOLL_COLL_ALL_TO_ALL, x, y, N * a->count));
  for (size_t l = 0; l < L; l++)
    for (size_t n = 0; n < N; n++)
      STEP(copy(h, recv + (size_t)h->grank[n * L + l] * blk, y + (l * N + n) * blk, blk, a->stream));
out:
  scratch_free(h, x, a->stream);
  return s;
}
#undef STEP

static void hier_engines_abort(symcoll__hier_t *h);

static symcoll_status_t hier_coll(symcoll_comm_t c, const symcoll__coll_args_t *a) {
  symcoll__hier_t *h = c->tp_state;
  symcoll_status_t s = SYMCOLL_ERR_INTERNAL;
  /* AVG is the sum over all ranks divided once by their number: the steps of a hierarchy sum
   * per level (rounding narrow types to the dtype in between) and an engine's AVG divides by
   * its own ranks only, so an average of averages is all they could give. The world engine
   * runs it whole, as SYMCOLL_ALGO_ENGINE would (PROD, being associative, takes the steps). */
  const bool whole = a->algo == SYMCOLL_ALGO_ENGINE || (symcoll__coll_desc(a->coll)->takes_op && a->op == SYMCOLL_AVG);
  if (whole && !(h->has_world && h->world.coll)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s %s across nodes needs the engine over all ranks, which this job lacks",
                 symcoll_coll_name(a->coll), symcoll_op_name(a->op));
    s = SYMCOLL_ERR_UNSUPPORTED;
  } else if (whole) {
    s = h->world.coll(h->world.ctx, a->coll, a->send, a->recv, a->count, a->dtype, a->op, a->root, a->stream);
  } else {
    switch (a->coll) {
      case SYMCOLL_COLL_ALL_REDUCE:
        s = hier_all_reduce(h, a);
        break;
      case SYMCOLL_COLL_ALL_GATHER:
        s = hier_all_gather(h, a);
        break;
      case SYMCOLL_COLL_REDUCE_SCATTER:
        s = hier_reduce_scatter(h, a);
        break;
      case SYMCOLL_COLL_BROADCAST:
        s = hier_broadcast(h, a);
        break;
      case SYMCOLL_COLL_REDUCE:
        s = hier_reduce(h, a);
        break;
      case SYMCOLL_COLL_ALL_TO_ALL:
        s = hier_all_to_all(h, a);
        break;
      case SYMCOLL_COLL_ALL_GATHER_MATMUL:
      case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
      case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
      case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
      case SYMCOLL_NUM_COLL_KINDS:
        s = SYMCOLL_NO_ENTRY("the hierarchical transport", a->coll);
        break;
    }
  }
  /* A part that failed leaves the others out of step: the communicator stops, as after a
   * lost peer, and later calls say why. */
  if (s != SYMCOLL_OK) {
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d: %s across nodes failed: %s", c->rank, symcoll_coll_name(a->coll),
                 symcoll_status_string(s));
    symcoll__comm_fail(c, s);
    hier_engines_abort(h); /* and no engine waits for peers at the end (MPI_Finalize) */
  }
  return s;
}

/* ---- the rest of the transport ------------------------------------------------------------- */

static symcoll_status_t hier_comm_init(symcoll_comm_t c) {
  (void)c;
  return SYMCOLL_OK;
}

static void hier_engines_abort(symcoll__hier_t *h) {
  if (h->has_cross) h->cross.abort(h->cross.ctx);
  if (h->has_world) h->world.abort(h->world.ctx);
  if (h->local) symcoll_comm_abort(h->local);
}

static void hier_free(symcoll__hier_t *h) {
  if (!h) return;
  if (h->local) symcoll_comm_destroy(h->local);
  if (h->has_cross) h->cross.destroy(h->cross.ctx);
  if (h->has_world) h->world.destroy(h->world.ctx);
  if (h->has_mpi) h->mpi.destroy(h->mpi.ctx);
  if (h->flat) symcoll_comm_destroy(h->flat);
  free(h);
}

static void hier_comm_fini(symcoll_comm_t c) {
  hier_free(c->tp_state);
  c->tp_state = NULL;
}

/* Memory: allocated on the node-local communicator; visible at the global ranks of this node. */
static symcoll_status_t hier_mem_alloc(symcoll_comm_t c, size_t bytes, struct symcoll_mem *m) {
  symcoll__hier_t *h = c->tp_state;
  struct symcoll_mem *inner;
  SYMCOLL_CHECK(symcoll__mem_alloc_internal(h->local, bytes, &inner));
  m->tp = inner;
  for (int l = 0; l < h->lsize; l++) m->ptrs[h->grank[h->node * h->lsize + l]] = inner->ptrs[l];
  return SYMCOLL_OK;
}
static void hier_mem_free(struct symcoll_mem *m) {
  struct symcoll_mem *inner = m->tp;
  symcoll_comm_t local = inner->comm;
  for (struct symcoll_mem **pp = &local->mems; *pp; pp = &(*pp)->next)
    if (*pp == inner) {
      *pp = inner->next;
      break;
    }
  local->tp->mem_free(inner);
  free(inner);
}
static symcoll_status_t hier_mem_device_view(struct symcoll_mem *m, symcoll_device_view_t *view) {
  struct symcoll_mem *inner = m->tp;
  return symcoll_mem_device_view(inner, view);
}

static symcoll_status_t hier_copy(symcoll_comm_t c, void *dst, const void *src, size_t bytes, void *stream) {
  symcoll__hier_t *h = c->tp_state;
  return copy(h, dst, src, bytes, stream);
}

/* A scaled input is this rank's own work: the node's transport does it. */
static symcoll_status_t hier_scale(symcoll_comm_t c, void *dst, const void *src, size_t count, symcoll_dtype_t dtype,
                                   const void *scale, bool on_device, void *stream) {
  symcoll__hier_t *h = c->tp_state;
  if (!h->local->tp->scale) return SYMCOLL_ERR_UNSUPPORTED;
  return h->local->tp->scale(h->local, dst, src, count, dtype, scale, on_device, stream);
}

/* all_reduce_rmsnorm across nodes is SEQUENTIAL (the all-reduce above, then this): the local
 * add + norm pass runs on the node's transport. */
static symcoll_status_t hier_norm(symcoll_comm_t c, const symcoll__norm_args_t *a) {
  symcoll__hier_t *h = c->tp_state;
  if (a->algo != SYMCOLL_ALGO_SEQUENTIAL || !h->local->tp->norm)
    return SYMCOLL_NO_ENTRY("the hierarchical transport's norm", SYMCOLL_COLL_ALL_REDUCE_RMSNORM);
  return h->local->tp->norm(h->local, a);
}
static symcoll_status_t hier_scratch_alloc(symcoll_comm_t c, size_t bytes, void *stream, void **p) {
  return scratch(c->tp_state, bytes, stream, p);
}
static void hier_scratch_free(symcoll_comm_t c, void *p, void *stream) {
  scratch_free(c->tp_state, p, stream);
}

static symcoll_status_t hier_check(symcoll_comm_t c) {
  symcoll__hier_t *h = c->tp_state;
  symcoll_status_t s = symcoll_comm_check(h->local);
  if (s == SYMCOLL_OK && h->has_cross && h->cross.check) s = h->cross.check(h->cross.ctx);
  if (s == SYMCOLL_OK && h->has_world && h->world.check) s = h->world.check(h->world.ctx);
  return s;
}

static bool hier_has_algo(symcoll_comm_t c, symcoll_coll_t coll, symcoll_algo_t algo) {
  symcoll__hier_t *h = c->tp_state;
  (void)coll;
  return algo == SYMCOLL_ALGO_HIERARCHICAL || (algo == SYMCOLL_ALGO_ENGINE && h->has_world && h->world.coll);
}

static void hier_abort(symcoll_comm_t c, symcoll_status_t status) {
  (void)status;
  if (c->tp_state) hier_engines_abort(c->tp_state);
}

const symcoll__transport_t symcoll__hier_transport = {
    .name = "hier",
    .comm_init = hier_comm_init,
    .comm_fini = hier_comm_fini,
    .mem_alloc = hier_mem_alloc,
    .mem_free = hier_mem_free,
    .mem_device_view = hier_mem_device_view,
    .coll = hier_coll,
    .copy = hier_copy,
    .scale = hier_scale,
    .check = hier_check,
    .has_algo = hier_has_algo,
    .scratch_alloc = hier_scratch_alloc,
    .scratch_free = hier_scratch_free,
    .norm = hier_norm,
    .abort = hier_abort,
};

/* ---- layout ----------------------------------------------------------------------------------- */

/* What each rank says about itself when the job is laid out. */
typedef struct {
  int32_t lrank, lsize, device_kind, pad;
  uint64_t host;    /* host name, boot and network namespace: ranks with equal keys share a node */
  uint64_t machine; /* boot id only: ranks with equal ones share this machine's cores */
} place_t;

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t machine_key(void) {
  char buf[256] = "";
  uint64_t h = 1469598103934665603ull;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (fgets(buf, sizeof buf, f)) h = fnv(h, buf);
    fclose(f);
  }
  return h;
}

static uint64_t host_key(void) {
  char buf[256] = "";
  uint64_t h = machine_key();
  if (gethostname(buf, sizeof buf - 1) == 0) h = fnv(h, buf);
  ssize_t n = readlink("/proc/self/ns/net", buf, sizeof buf - 1); /* abstract sockets are per namespace */
  if (n > 0) buf[n] = 0, h = fnv(h, buf);
  return h;
}

/* Fills node, nnodes, lsize and grank from every rank's place; MISMATCH / UNSUPPORTED name
 * what is wrong. Nodes are numbered in order of their lowest global rank. */
static symcoll_status_t lay_out(symcoll__hier_t *h, const place_t *all, int nranks, int me) {
  int node_of[SYMCOLL_MAX_RANKS], count[SYMCOLL_MAX_RANKS] = {0};
  uint64_t keys[SYMCOLL_MAX_RANKS];
  int nn = 0;
  for (int r = 0; r < nranks; r++) {
    int n = 0;
    while (n < nn && keys[n] != all[r].host) n++;
    if (n == nn) keys[nn++] = all[r].host;
    node_of[r] = n;
    count[n]++;
  }
  const int L = count[0];
  for (int n = 0; n < nn; n++)
    if (count[n] != L) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "nodes of unequal size: node 0 has %d ranks, node %d has %d (every node must "
                   "hold the same number)",
                   L, n, count[n]);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
  for (int i = 0; i < nn * L; i++) h->grank[i] = -1;
  for (int r = 0; r < nranks; r++) {
    const int n = node_of[r], l = all[r].lrank;
    if (all[r].lsize != L || l < 0 || l >= L || h->grank[n * L + l] >= 0 || all[r].device_kind != all[me].device_kind) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "rank %d says local rank %d of %d (%s), but its node holds %d ranks%s", r, l,
                   all[r].lsize, all[r].device_kind ? "GPU" : "CPU", L,
                   l >= 0 && l < L && h->grank[n * L + l] >= 0 ? " and another has that local rank" : "");
      return SYMCOLL_ERR_MISMATCH;
    }
    h->grank[n * L + l] = r;
  }
  h->nnodes = nn, h->lsize = L, h->node = node_of[me], h->lrank = all[me].lrank;
  h->node_major = true;
  for (int i = 0; i < nn * L; i++) h->node_major &= h->grank[i] == i;
  return SYMCOLL_OK;
}

/* ---- creation --------------------------------------------------------------------------------- */

static int engine_xchg(void *ctx, const void *send, void *recv, size_t bytes) {
  symcoll__engine_t *e = ctx;
  return e->allgather(e->ctx, send, recv, bytes) == SYMCOLL_OK ? 0 : -1;
}

/* Whether the MPI communicator's rank and size are the job's (-1: take them from it). */
static symcoll_status_t mpi_matches(const symcoll__engine_t *mpi, int *rank, int *nranks) {
  if ((*rank >= 0 && *rank != mpi->rank) || (*nranks >= 0 && *nranks != mpi->nranks)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "job config says rank %d of %d, the MPI communicator rank %d of %d (is this an "
                 "MPI job? CPU ranks across nodes need MPI: launch with mpirun or srun)",
                 *rank, *nranks, mpi->rank, mpi->nranks);
    return SYMCOLL_ERR_MISMATCH;
  }
  *rank = mpi->rank, *nranks = mpi->nranks;
  return SYMCOLL_OK;
}

/* The hierarchical communicator around h, whose parts exist: tuning, and the checks every
 * communicator makes at creation. */
static symcoll_status_t hier_finish(symcoll__hier_t *h, const char *job_id, int rank, int nranks, int device,
                                    int timeout_ms, symcoll_comm_t *comm_p) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = job_id, cfg.rank = rank, cfg.nranks = nranks, cfg.device = device, cfg.timeout_ms = timeout_ms;
  symcoll_comm_t c;
  symcoll_status_t s = symcoll__comm_new(&cfg, &c);
  if (s != SYMCOLL_OK) {
    hier_free(h);
    return s;
  }
  c->tp = &symcoll__hier_transport;
  c->tp_state = h;
  c->hier = h;
  c->oob = &hier_oob;
  /* SYMCOLL_ALGO: the node-local part takes the one-node algorithms, this one its own two. */
  for (int k = 0; k < SYMCOLL_NUM_COLL_KINDS; k++) {
    const symcoll_algo_t f = c->forced_algo[k];
    const bool across = f == SYMCOLL_ALGO_HIERARCHICAL || f == SYMCOLL_ALGO_ENGINE;
    if (!across) c->forced_algo[k] = SYMCOLL_ALGO_AUTO;
    if (across) h->local->forced_algo[k] = SYMCOLL_ALGO_AUTO;
    if (f == SYMCOLL_ALGO_ENGINE && !(h->has_world && h->world.coll)) c->forced_algo[k] = SYMCOLL_ALGO_AUTO;
  }
  s = symcoll__comm_setup(c);
  if (s != SYMCOLL_OK) {
    symcoll__comm_free(c);
    return s;
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "rank %d of %d: node %d of %d, local rank %d of %d, engine %s%s", rank, nranks,
               h->node, h->nnodes, h->lrank, h->lsize, h->cross.name, h->node_major ? "" : " (ranks not node-major)");
  *comm_p = c;
  return SYMCOLL_OK;
}

int symcoll__hier_node_ranks(int nranks) {
  const int k = (int)symcoll__env_int("SYMCOLL_NODE_RANKS");
  if (k <= 0 || nranks % k != 0) {
    if (k > 0 && nranks > 1)
      symcoll__env_warn("SYMCOLL_NODE_RANKS", "SYMCOLL_NODE_RANKS=%d does not divide %d ranks: ignored", k, nranks);
    return 0;
  }
  return k;
}

/* The NCCL engines (cross and world) through the exchange h->xchg. */
static symcoll_status_t nccl_engines(symcoll__hier_t *h, int rank, int nranks, int device) {
  symcoll__engine_args_t a = {.rank = rank,
                              .nranks = nranks,
                              .device = device,
                              .color = h->lrank,
                              .key = h->node,
                              .xchg = h->xchg,
                              .xchg_ctx = h->xchg_ctx};
  SYMCOLL_CHECK(symcoll__engine_open(SYMCOLL_ENGINE_NCCL, &a, &h->cross));
  h->has_cross = true;
  a.color = 0, a.key = rank;
  SYMCOLL_CHECK(symcoll__engine_open(SYMCOLL_ENGINE_NCCL, &a, &h->world));
  h->has_world = true;
  return SYMCOLL_OK;
}

/* The MPI engine over mpi_comm (NULL: MPI_COMM_WORLD) into h->mpi. */
static symcoll_status_t mpi_engine(symcoll__hier_t *h, int timeout_ms, const void *mpi_comm) {
  const symcoll__engine_args_t a = {.timeout_ms = timeout_ms, .mpi_comm = mpi_comm};
  SYMCOLL_CHECK(symcoll__engine_open(SYMCOLL_ENGINE_MPI, &a, &h->mpi));
  h->has_mpi = true;
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__hier_from_flat(symcoll_comm_t flat, int k, symcoll_comm_t *comm_p) {
  symcoll__hier_t *h = calloc(1, sizeof *h);
  if (!h) {
    symcoll_comm_destroy(flat);
    return SYMCOLL_ERR_NO_MEMORY;
  }
  h->flat = flat;
  const int rank = flat->rank, n = flat->nranks;
  h->nnodes = n / k, h->lsize = k, h->node = rank / k, h->lrank = rank % k, h->node_major = true;
  for (int i = 0; i < n; i++) h->grank[i] = i;
  h->xchg = flat_xchg, h->xchg_ctx = flat;
  symcoll_status_t s;
  symcoll_comm_t cross = NULL;
  SYMCOLL_CHECK_GOTO(symcoll_comm_split(flat, h->node, rank, &h->local), s, err);
  const symcoll_engine_t kind = symcoll__engine_choice(SYMCOLL_ENGINE_AUTO, flat->device, true);
  if (kind == SYMCOLL_ENGINE_NCCL) {
    SYMCOLL_CHECK_GOTO(nccl_engines(h, rank, n, flat->device), s, err);
  } else {
    if (kind == SYMCOLL_ENGINE_MPI)
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "SYMCOLL_NODE_RANKS emulates nodes with symcoll between them, not MPI: launch "
                   "on real nodes (or network namespaces) for the MPI engine");
    SYMCOLL_CHECK_GOTO(symcoll_comm_split(flat, h->lrank, h->node, &cross), s, err);
    symcoll__engine_open(SYMCOLL_ENGINE_SYMCOLL, &(symcoll__engine_args_t){.comm = cross, .owned = true}, &h->cross);
    h->has_cross = true;
    symcoll__engine_open(SYMCOLL_ENGINE_SYMCOLL, &(symcoll__engine_args_t){.comm = flat}, &h->world);
    h->has_world = true;
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "SYMCOLL_NODE_RANKS=%d: rank %d of %d on emulated node %d", k, rank, n, h->node);
  return hier_finish(h, flat->job_id, rank, n, flat->device, flat->timeout_ms, comm_p); /* flat lives in h */
err:
  hier_free(h);
  return s;
}

void symcoll_job_config_init(symcoll_job_config_t *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->rank = cfg->nranks = -1;
  cfg->local_rank = cfg->local_nranks = -1;
  cfg->device = SYMCOLL_DEVICE_HOST;
}

/* The job configuration's own fields (the rank and size may still come from MPI). */
static symcoll_status_t job_config_check(const symcoll_job_config_t *cfg) {
  if (cfg->struct_size != sizeof *cfg) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job config struct_size %zu, expected %zu (call symcoll_job_config_init)",
                 cfg->struct_size, sizeof *cfg);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if ((unsigned)cfg->engine > SYMCOLL_ENGINE_SYMCOLL || cfg->engine == SYMCOLL_ENGINE_SYMCOLL) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "job config: engine %d (auto, nccl or mpi; the symcoll engine is for nodes "
                 "emulated with SYMCOLL_NODE_RANKS)",
                 (int)cfg->engine);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (cfg->local_nranks < 1 || cfg->local_nranks > SYMCOLL_MAX_RANKS || cfg->local_rank < 0 ||
      cfg->local_rank >= cfg->local_nranks || cfg->device < SYMCOLL_DEVICE_HOST || cfg->timeout_ms < 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job config: local rank %d of %d, device %d, timeout %d ms", cfg->local_rank,
                 cfg->local_nranks, cfg->device, cfg->timeout_ms);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_create_job(const symcoll_job_config_t *cfg, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  if (!cfg || !comm_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(job_config_check(cfg));
  const symcoll_engine_t kind = symcoll__engine_choice(cfg->engine, cfg->device, false);
  if (kind == SYMCOLL_ENGINE_SYMCOLL) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_ENGINE=symcoll is for nodes emulated with SYMCOLL_NODE_RANKS");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  symcoll__hier_t *h = calloc(1, sizeof *h);
  if (!h) return SYMCOLL_ERR_NO_MEMORY;
  const int timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : (int)symcoll__env_int("SYMCOLL_TIMEOUT_MS");
  symcoll_status_t s;
  int rank = cfg->rank, nranks = cfg->nranks;
  /* The exchange: the user's, else MPI's (which is also the MPI engine's world). */
  if (cfg->oob_allgather) {
    h->xchg = cfg->oob_allgather, h->xchg_ctx = cfg->oob_ctx;
  } else {
    SYMCOLL_CHECK_GOTO(mpi_engine(h, timeout_ms, kind == SYMCOLL_ENGINE_MPI ? cfg->mpi_comm : NULL), s, err);
    SYMCOLL_CHECK_GOTO(mpi_matches(&h->mpi, &rank, &nranks), s, err);
    h->xchg = engine_xchg, h->xchg_ctx = &h->mpi;
  }
  if (nranks < 1 || nranks > SYMCOLL_MAX_RANKS || rank < 0 || rank >= nranks) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job config: rank %d of %d (1 to %d ranks in all)", rank, nranks,
                 SYMCOLL_MAX_RANKS);
    s = SYMCOLL_ERR_INVALID_ARGUMENT;
    goto err;
  }
  place_t mine = {.lrank = cfg->local_rank,
                  .lsize = cfg->local_nranks,
                  .device_kind = cfg->device != SYMCOLL_DEVICE_HOST,
                  .host = host_key(),
                  .machine = machine_key()};
  place_t all[SYMCOLL_MAX_RANKS];
  if (h->xchg(h->xchg_ctx, &mine, all, sizeof mine) != 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job: the exchange of the node layout failed");
    s = SYMCOLL_ERR_PEER_LOST;
    goto err;
  }
  SYMCOLL_CHECK_GOTO(lay_out(h, all, nranks, rank), s, err);
  /* The node-local communicator: named after the job and the node. */
  char job[SYMCOLL_JOB_ID_MAX + 1], local_job[SYMCOLL_JOB_ID_MAX + 1];
  snprintf(job, sizeof job, "%s", cfg->job_id && *cfg->job_id ? cfg->job_id : "job");
  snprintf(local_job, sizeof local_job, "%.56s.n%d", job, h->node);
  symcoll_config_t lc;
  symcoll_config_init(&lc);
  lc.job_id = local_job, lc.rank = h->lrank, lc.nranks = h->lsize, lc.device = cfg->device;
  lc.timeout_ms = timeout_ms, lc.workspace_bytes = cfg->workspace_bytes;
  SYMCOLL_CHECK_GOTO(symcoll__comm_create_flat(&lc, 0, &h->local), s, err);
  /* Nodes that share one machine (containers, namespaces) share its cores: where the ranks on
   * it outnumber them, a waiting rank gives its core away early, as on an oversubscribed node. */
  int on_machine = 0;
  for (int r = 0; r < nranks; r++) on_machine += all[r].machine == mine.machine;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cfg->device == SYMCOLL_DEVICE_HOST && cores > 0 && on_machine > cores) h->local->spin_before_yield = 64;
  if (h->nnodes == 1) { /* one node: the ordinary communicator */
    symcoll_comm_t local = h->local;
    h->local = NULL;
    hier_free(h);
    *comm_p = local;
    return SYMCOLL_OK;
  }
  if (kind == SYMCOLL_ENGINE_MPI) { /* world: the job's MPI communicator; cross: split from it */
    if (!h->has_mpi) {              /* the user's exchange did the layout: MPI only now */
      SYMCOLL_CHECK_GOTO(mpi_engine(h, timeout_ms, cfg->mpi_comm), s, err);
      int r = rank, n = nranks;
      SYMCOLL_CHECK_GOTO(mpi_matches(&h->mpi, &r, &n), s, err);
    }
    SYMCOLL_CHECK_GOTO(h->mpi.split(h->mpi.ctx, h->lrank, h->node, &h->cross), s, err);
    h->has_cross = true;
    h->world = h->mpi, h->has_world = true, h->has_mpi = false;
    h->xchg_ctx = &h->world;
  } else {
    SYMCOLL_CHECK_GOTO(nccl_engines(h, rank, nranks, cfg->device), s, err);
  }
  return hier_finish(h, job, rank, nranks, cfg->device, timeout_ms, comm_p);
err:
  hier_free(h);
  return s;
}

symcoll_comm_t symcoll_comm_local(symcoll_comm_t comm) {
  return comm && comm->hier ? comm->hier->local : comm;
}

int symcoll_comm_nnodes(symcoll_comm_t comm) {
  return !comm ? -1 : comm->hier ? comm->hier->nnodes : 1;
}
