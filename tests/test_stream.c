/*
 * A stateful randomized differential test: long streams of calls through the public API,
 * checked against references computed independently on the host.
 *   test_stream --backend host|cuda --mode process|thread --ranks N [--calls K] [--no-gemm]
 *               [--no-norm] [--no-split] [--max-bytes B] [--trace]   (TH_SEED=S replays a run)
 *
 * Every rank draws the same decisions from one generator (so ranks agree on every call's
 * shape), and its own placement from a second one (plain buffers at offsets that differ from
 * rank to rank, as NCCL allows). Calls go in batches of 1 to 12, enqueued back to back with
 * no host synchronisation and no barrier between them; then the rank waits for its stream,
 * asks symcoll_comm_check, and compares every output (and guard elements around it) with the
 * reference. Calls: every plain collective (every dtype and op, roots, counts from 1 to 1 MiB a
 * rank on CPUs and 4 MiB on GPUs, every algorithm the communicator runs and auto, in and out of
 * place, plain or symmetric buffers), the GEMM operations (fp32 / fp16 / bf16, odd shapes, overlap,
 * sequential, auto, with and without the gathered A) and all_reduce_rmsnorm (fp32 / fp16 / bf16, 0
 * to 64 rows of odd and round hidden sizes (now and then 160 to 399 rows), every algorithm the
 * communicator runs and auto, residual or not, residual_out separate, in place or not asked for,
 * out separate, in place over x or not asked for, x and the outputs plain or symmetric, fp8 outputs
 * with a static scale or per-row scales), on the world communicator and on groups made by
 * symcoll_comm_split, and groups of those, all running at once; the groups are split again now and
 * then. Inputs are integers (exact.h; the GEMMs' entries -1, 0, 1), fresh for every call and
 * different on every rank and group (the norm's residual and weight: the same on every rank of a
 * group, as tensor parallelism has them), so every result is exact but the norm's out, which is
 * checked within a tolerance against an fp64 RMSNorm (its fp8 output bit for bit against the
 * quantisation of the out the call wrote). Every byte of a call's regions that is not an output it
 * asked for keeps what was put there (poison around and between the buffers, the inputs).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static th_launch_t launch = {"host", "process", 2, 20000, 900};
static long calls = 400;
static bool with_gemm = true, with_norm = true, with_split = true, trace;
/* The most one rank's part of a call moves (--max-bytes; 0: 4 MiB on GPUs, where the built-in
 * table changes algorithm and block size above 1 and 2 MiB, and 1 MiB on CPUs). */
static size_t max_bytes;
static uint32_t seed0;

#define LEVELS 3  /* the world, a split of it, a split of that */
#define BATCH 12  /* calls at most between two waits */
#define GUARD 16  /* poisoned elements checked on each side of an output */
#define MAX_OFF 7 /* plain buffers: elements of offset, differing between ranks */

static uint32_t below(uint32_t *s, uint32_t n) {
  return th_rng_next(s) % n;
}

enum {
  K_ALL_REDUCE,
  K_ALL_GATHER,
  K_REDUCE_SCATTER,
  K_BROADCAST,
  K_REDUCE,
  K_ALL_TO_ALL,
  K_AG_MATMUL, /* the GEMM operations, then the fused norm: kinds before them are plain collectives */
  K_MATMUL_RS,
  K_NORM,    /* all_reduce_rmsnorm */
  K_NORM_RS, /* reduce_scatter_rmsnorm */
  NUM_KINDS
};
static const symcoll_coll_t kind_coll[NUM_KINDS] = {SYMCOLL_COLL_ALL_REDUCE,
                                                    SYMCOLL_COLL_ALL_GATHER,
                                                    SYMCOLL_COLL_REDUCE_SCATTER,
                                                    SYMCOLL_COLL_BROADCAST,
                                                    SYMCOLL_COLL_REDUCE,
                                                    SYMCOLL_COLL_ALL_TO_ALL,
                                                    SYMCOLL_COLL_ALL_GATHER_MATMUL,
                                                    SYMCOLL_COLL_MATMUL_REDUCE_SCATTER,
                                                    SYMCOLL_COLL_ALL_REDUCE_RMSNORM,
                                                    SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM};
static bool is_norm(int kind) {
  return kind == K_NORM || kind == K_NORM_RS;
}
enum { P_PLAIN, P_SYMMETRIC, P_IN_PLACE };
static const char *const place_names[] = {"plain", "symmetric", "in place"};
/* all_reduce_rmsnorm: out and residual_out (O_IN_PLACE: over x, over residual); the fp8 output. */
enum { O_NONE, O_SEPARATE, O_IN_PLACE };
static const char *const norm_out_names[] = {"not asked for", "separate", "in place"};
enum { F_NONE, F_STATIC, F_DYNAMIC };

/* all_reduce_rmsnorm's buffers: bytes from the start of the call's region in the send buffer
 * (x, residual) or the recv buffer (out, residual_out, weight, fp8 output, per-row scales, the
 * static scale), each with GUARD elements of its own type on either side, at offsets that
 * differ between ranks in plain buffers (MAX_OFF elements at most), the same in symmetric ones. */
typedef struct {
  size_t x, res, send_end;
  size_t out, ro, w, q, sc, scale, recv_end;
} norm_layout_t;

/* One call of a batch, as drawn (the same on every rank), and where this rank put it. */
typedef struct {
  int kind, level;
  symcoll_dtype_t dt;
  symcoll_op_t op;
  symcoll_algo_t algo;
  int root;         /* broadcast, reduce */
  bool null_unused; /* broadcast, reduce: ranks other than the root pass NULL for the root's buffer */
  size_t count;     /* plain collectives: NCCL's count argument */
  size_t m, n, k;   /* GEMM operations: m per rank (all_gather_matmul) or in all (matmul_reduce_scatter) */
  int send_place, recv_place, a_out;
  uint32_t seed;
  /* the fused norms: send_place is x's region, recv_place the outputs' */
  size_t rows, hidden;
  size_t blocks; /* x holds blocks x rows rows: the group's size for reduce_scatter_rmsnorm, else 1 */
  bool residual;
  int out_mode, ro_mode, fp8; /* O_*, O_*, F_* */
  float eps, scale;           /* scale: the static one (F_STATIC) */
  /* this rank: */
  char *send, *recv, *a_out_p, *b;
  size_t recv_elems; /* the output checked */
  size_t x_first;    /* reduce_scatter_rmsnorm: this rank's first element of x's rows (its block) */
  norm_layout_t L;   /* all_reduce_rmsnorm */
} call_t;

typedef struct {
  symcoll_comm_t comm[LEVELS];
  symcoll_mem_t sym_send[LEVELS], sym_recv[LEVELS];
  uint32_t group_tag[LEVELS]; /* names this rank's group at each level: groups get different data */
  int levels;
  const th_buf_ops_t *ops;
  int world_rank;
  size_t slot; /* bytes of one call's region in each buffer */
  char *plain_send, *plain_recv;
  char *h_in, *h_out, *h_want;
  long failures, done;
  long kinds[NUM_KINDS];              /* calls drawn of each kind */
  long norm_algos[SYMCOLL_NUM_ALGOS]; /* all_reduce_rmsnorm's, by the algorithm asked for */
  uint32_t shared, own;
  bool gemm, norm;
} rank_t;

static size_t esz(symcoll_dtype_t dt) {
  return symcoll_dtype_size(dt);
}

/* ---- the GEMM operations' data and reference -------------------------------------------------- */

static double mm_a(uint32_t seed, int rank, size_t i, size_t j) {
  return (double)((int)((i * 7 + j * 13 + (size_t)rank * 5 + seed) % 3) - 1);
}
static double mm_b(uint32_t seed, int rank, size_t j, size_t l) {
  return (double)((int)((j * 5 + l * 11 + (size_t)rank * 3 + seed / 3) % 3) - 1);
}
/* v as the dtype holds it (round to nearest even for bf16; fp16 and fp32 hold these sums). */
static double as_dtype(symcoll_dtype_t dt, double v) {
  char tmp[8];
  exact_store(tmp, dt, 0, v);
  return exact_load(tmp, dt, 0);
}

/* ---- all_reduce_rmsnorm's data and layout ----------------------------------------------------- */

/* x: this rank's partial sums (SUM's exact inputs, different on every rank); residual and
 * weight: the same on every rank of the group (tensor parallelism's rule: TWO_SHOT normalises a
 * row on one rank and gives every rank its result). The weight is a multiple of 1/8 in [-1, 1].
 * One row in 8 is zero in x and residual: r = 0, out = 0, and a per-row scale at its floor. */
static bool norm_zero_row(size_t i, size_t hidden, uint32_t seed) {
  return (((uint32_t)(i / hidden) * 2654435761u) ^ seed) % 8 == 5;
}
static double norm_x(symcoll_dtype_t dt, int rank, size_t i, size_t hidden, uint32_t seed) {
  return norm_zero_row(i, hidden, seed) ? 0 : exact_value(dt, rank, i, seed);
}
static double norm_res(symcoll_dtype_t dt, size_t i, size_t hidden, uint32_t seed) {
  return norm_zero_row(i, hidden, seed) ? 0 : exact_value(dt, 0, i, seed ^ 0x9e3779b9u);
}
static double norm_w(symcoll_dtype_t dt, size_t j, uint32_t seed) {
  return exact_value(dt, 0, j, seed ^ 0x7f4a7c15u) / 8;
}
/* out's tolerance against the fp64 RMSNorm of r (relative; plus 1e-6 absolute), test_norm's. */
static double norm_tol(symcoll_dtype_t dt) {
  return dt == SYMCOLL_BFLOAT16 ? 1.1 / 128 : dt == SYMCOLL_FLOAT16 ? 1.1 / 1024 + 3e-5 : 3e-5;
}

static size_t up256(size_t b) {
  return (b + 255) & ~(size_t)255;
}

/* The layout of call c; own: this rank's generator of plain offsets, NULL for the largest. */
static norm_layout_t norm_layout(const call_t *c, uint32_t *own) {
  const size_t es = esz(c->dt), all = c->rows * c->hidden;
  norm_layout_t L;
  size_t at = 0;
  bool plain = c->send_place != P_SYMMETRIC;
#define NORM_PUT(field, elems, unit)                                         \
  do {                                                                       \
    const size_t off = !plain ? 0 : own ? below(own, MAX_OFF + 1) : MAX_OFF; \
    L.field = at + (GUARD + off) * (unit);                                   \
    at = up256(L.field + ((elems) + GUARD) * (unit));                        \
  } while (0)
  NORM_PUT(x, c->blocks * all, es);
  NORM_PUT(res, all, es);
  L.send_end = at;
  at = 0, plain = c->recv_place != P_SYMMETRIC;
  NORM_PUT(out, all, es);
  NORM_PUT(ro, all, es);
  NORM_PUT(w, c->hidden, es);
  NORM_PUT(q, all, 1);
  NORM_PUT(sc, c->rows, sizeof(float));
  NORM_PUT(scale, 1, sizeof(float));
  L.recv_end = at;
#undef NORM_PUT
  return L;
}

/* This rank's buffers of call c (after prepare). */
typedef struct {
  char *x, *res, *w, *out, *ro, *q, *sc, *scale;
} norm_ptrs_t;

static norm_ptrs_t norm_ptrs(const call_t *c) {
  norm_ptrs_t p;
  p.x = c->send + c->L.x;
  p.res = c->residual ? c->send + c->L.res : NULL;
  p.w = c->recv + c->L.w;
  p.out = c->out_mode == O_SEPARATE   ? c->recv + c->L.out
          : c->out_mode == O_IN_PLACE ? p.x + c->x_first * esz(c->dt) /* this rank's block of x */
                                      : NULL;
  p.ro = c->ro_mode == O_SEPARATE ? c->recv + c->L.ro : c->ro_mode == O_IN_PLACE ? p.res : NULL;
  p.q = c->fp8 != F_NONE ? c->recv + c->L.q : NULL;
  p.sc = c->fp8 == F_DYNAMIC ? c->recv + c->L.sc : NULL;
  p.scale = c->fp8 == F_STATIC ? c->recv + c->L.scale : NULL;
  return p;
}

/* ---- placement -------------------------------------------------------------------------------- */

static char *sym_ptr(rank_t *R, symcoll_mem_t m, int level) {
  return (char *)symcoll_mem_ptr(m, symcoll_comm_rank(R->comm[level]));
}

/* all_reduce_rmsnorm's prepare: both regions poisoned whole, then the inputs (and the static
 * scale, which lives in the recv region: device memory on GPU ranks) put in. */
static void prepare_norm(rank_t *R, call_t *c, int i) {
  const int me = symcoll_comm_rank(R->comm[c->level]);
  const size_t all = c->rows * c->hidden, at = (size_t)i * R->slot;
  c->x_first = c->kind == K_NORM_RS ? (size_t)me * all : 0;
  const uint32_t seed = c->seed ^ R->group_tag[c->level];
  c->L = norm_layout(c, &R->own);
  c->send = c->send_place == P_SYMMETRIC ? sym_ptr(R, R->sym_send[c->level], c->level) + at : R->plain_send + at;
  c->recv = c->recv_place == P_SYMMETRIC ? sym_ptr(R, R->sym_recv[c->level], c->level) + at : R->plain_recv + at;
  memset(R->h_in, TH_POISON, c->L.send_end);
  memset(R->h_out, TH_POISON, c->L.recv_end);
  for (size_t e = 0; e < c->blocks * all; e++)
    exact_store(R->h_in + c->L.x, c->dt, e, norm_x(c->dt, me, e, c->hidden, seed));
  for (size_t e = 0; c->residual && e < all; e++) /* reduce_scatter_rmsnorm: this rank's rows of it */
    exact_store(R->h_in + c->L.res, c->dt, e, norm_res(c->dt, c->x_first + e, c->hidden, seed));
  for (size_t j = 0; j < c->hidden; j++) exact_store(R->h_out + c->L.w, c->dt, j, norm_w(c->dt, j, seed));
  memcpy(R->h_out + c->L.scale, &c->scale, sizeof c->scale);
  R->ops->to_dev(c->send, R->h_in, c->L.send_end);
  R->ops->to_dev(c->recv, R->h_out, c->L.recv_end);
}

/* Puts call c (index i of its batch) in this rank's buffers, uploads its input and poisons
 * its outputs and the guards around them. */
static void prepare(rank_t *R, call_t *c, int i) {
  if (is_norm(c->kind)) {
    prepare_norm(R, c, i);
    return;
  }
  symcoll_comm_t comm = R->comm[c->level];
  const int me = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t es = esz(c->dt);
  const size_t sym_off = (size_t)i * R->slot + GUARD * es; /* the same on every rank */
  char *plain_s = R->plain_send + (size_t)i * R->slot + GUARD * es + below(&R->own, MAX_OFF + 1) * es;
  char *plain_r = R->plain_recv + (size_t)i * R->slot + GUARD * es + below(&R->own, MAX_OFF + 1) * es;
  char *sym_s = sym_ptr(R, R->sym_send[c->level], c->level) + sym_off;
  char *sym_r = sym_ptr(R, R->sym_recv[c->level], c->level) + sym_off;
  c->send = c->send_place == P_SYMMETRIC ? sym_s : plain_s;
  c->recv = c->recv_place == P_SYMMETRIC ? sym_r : plain_r;
  const uint32_t seed = c->seed ^ R->group_tag[c->level];
  size_t send_elems = 0;
  if (c->kind == K_ALL_REDUCE || c->kind == K_BROADCAST || c->kind == K_REDUCE) {
    send_elems = c->recv_elems = c->count;
    if (c->recv_place == P_IN_PLACE) c->recv = c->send;
    exact_fill_op(R->h_in, c->dt, c->op, c->count, me, seed);
  } else if (c->kind == K_ALL_TO_ALL) {
    send_elems = c->recv_elems = c->count * (size_t)n;
    if (c->recv_place == P_IN_PLACE) c->recv = c->send;
    exact_fill(R->h_in, c->dt, send_elems, me, seed);
  } else if (c->kind == K_ALL_GATHER) {
    send_elems = c->count, c->recv_elems = c->count * (size_t)n;
    if (c->recv_place == P_IN_PLACE) c->send = c->recv + (size_t)me * c->count * es;
    exact_fill(R->h_in, c->dt, c->count, me, seed);
  } else if (c->kind == K_REDUCE_SCATTER) {
    send_elems = c->count * (size_t)n, c->recv_elems = c->count;
    if (c->recv_place == P_IN_PLACE) c->recv = c->send + (size_t)me * c->count * es;
    exact_fill_op(R->h_in, c->dt, c->op, send_elems, me, seed);
  } else { /* GEMM operations: [A | B] in the send region, [C | gathered A] in the recv region */
    const size_t a_elems = c->m * c->k; /* the shard (all_gather_matmul), or the whole A */
    for (size_t x = 0; x < c->m; x++)
      for (size_t y = 0; y < c->k; y++) exact_store(R->h_in, c->dt, x * c->k + y, mm_a(seed, me, x, y));
    const size_t b_at = (a_elems * es + 255) & ~(size_t)255;
    for (size_t y = 0; y < c->k; y++)
      for (size_t z = 0; z < c->n; z++) exact_store(R->h_in + b_at, c->dt, y * c->n + z, mm_b(seed, me, y, z));
    send_elems = (b_at + c->k * c->n * es) / es;
    c->b = c->send + b_at;
    c->recv_elems = (c->kind == K_AG_MATMUL ? c->m * (size_t)n : c->m / (size_t)n) * c->n;
    c->a_out_p = c->a_out ? c->recv + (((c->recv_elems + 2 * GUARD) * es + 255) & ~(size_t)255) : NULL;
  }
  size_t out_span = (c->recv_elems + 2 * GUARD) * es;
  if (c->a_out_p) out_span = (size_t)(c->a_out_p - c->recv) + (c->m * (size_t)n * c->k + 2 * GUARD) * es;
  memset(R->h_out, TH_POISON, out_span);
  R->ops->to_dev(c->recv - GUARD * es, R->h_out, out_span);
  R->ops->to_dev(c->send, R->h_in, send_elems * es); /* in place: over the poisoned output */
}

/* What call c's output must be on this rank (h_want), and its gathered A (h_want + slot). */
static void reference(rank_t *R, const call_t *c) {
  symcoll_comm_t comm = R->comm[c->level];
  const int me = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t es = esz(c->dt);
  const uint32_t seed = c->seed ^ R->group_tag[c->level];
  if (c->kind == K_ALL_REDUCE) {
    exact_expect(R->h_want, c->dt, c->op, c->count, n, seed);
  } else if (c->kind == K_ALL_GATHER) {
    for (int r = 0; r < n; r++) exact_fill(R->h_want + (size_t)r * c->count * es, c->dt, c->count, r, seed);
  } else if (c->kind == K_REDUCE_SCATTER) {
    exact_expect_range(R->h_want, c->dt, c->op, (size_t)me * c->count, c->count, n, seed);
  } else if (c->kind == K_BROADCAST) {
    exact_fill(R->h_want, c->dt, c->count, c->root, seed);
  } else if (c->kind == K_REDUCE) { /* other ranks: recv as it was (in place: the input) */
    if (me == c->root)
      exact_expect(R->h_want, c->dt, c->op, c->count, n, seed);
    else if (c->recv_place == P_IN_PLACE)
      exact_fill_op(R->h_want, c->dt, c->op, c->count, me, seed);
    else
      memset(R->h_want, TH_POISON, c->count * es);
  } else if (c->kind == K_ALL_TO_ALL) { /* block r: rank r's block [me] */
    for (int r = 0; r < n; r++)
      exact_fill_range(R->h_want + (size_t)r * c->count * es, c->dt, (size_t)me * c->count, c->count, r, seed);
  } else if (c->kind == K_AG_MATMUL) { /* row x: row x % m of rank x / m's shard, times this rank's B */
    for (size_t x = 0; x < c->m * (size_t)n; x++)
      for (size_t z = 0; z < c->n; z++) {
        double v = 0;
        for (size_t y = 0; y < c->k; y++) v += mm_a(seed, (int)(x / c->m), x % c->m, y) * mm_b(seed, me, y, z);
        exact_store(R->h_want, c->dt, x * c->n + z, as_dtype(c->dt, v));
      }
    for (size_t x = 0; c->a_out && x < c->m * (size_t)n; x++)
      for (size_t y = 0; y < c->k; y++)
        exact_store(R->h_want + R->slot, c->dt, x * c->k + y, mm_a(seed, (int)(x / c->m), x % c->m, y));
  } else { /* this rank's rows of the sum of every rank's product, each partial in the dtype */
    const size_t m_shard = c->m / (size_t)n;
    for (size_t x = 0; x < m_shard; x++)
      for (size_t z = 0; z < c->n; z++) {
        double v = 0;
        for (int r = 0; r < n; r++) {
          double p = 0;
          for (size_t y = 0; y < c->k; y++) p += mm_a(seed, r, (size_t)me * m_shard + x, y) * mm_b(seed, r, y, z);
          v += as_dtype(c->dt, p);
        }
        exact_store(R->h_want, c->dt, x * c->n + z, as_dtype(c->dt, v));
      }
  }
}

static symcoll_status_t issue(rank_t *R, const call_t *c) {
  symcoll_comm_t comm = R->comm[c->level];
  void *st = R->ops->stream();
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = c->algo;
  const bool root = symcoll_comm_rank(comm) == c->root;
  switch (c->kind) {
    case K_ALL_REDUCE:
      return symcoll_all_reduce_ex(comm, c->send, c->recv, c->count, c->dt, c->op, st, &o);
    case K_ALL_GATHER:
      return symcoll_all_gather_ex(comm, c->send, c->recv, c->count, c->dt, st, &o);
    case K_REDUCE_SCATTER:
      return symcoll_reduce_scatter_ex(comm, c->send, c->recv, c->count, c->dt, c->op, st, &o);
    case K_BROADCAST:
      return symcoll_broadcast_ex(comm, c->null_unused && !root ? NULL : c->send, c->recv, c->count, c->dt, c->root, st,
                                  &o);
    case K_REDUCE:
      return symcoll_reduce_ex(comm, c->send, c->null_unused && !root ? NULL : c->recv, c->count, c->dt, c->op, c->root,
                               st, &o);
    case K_ALL_TO_ALL:
      return symcoll_all_to_all_ex(comm, c->send, c->recv, c->count, c->dt, st, &o);
    case K_NORM:
    case K_NORM_RS: {
      const norm_ptrs_t p = norm_ptrs(c);
      symcoll_norm_opts_t no;
      symcoll_norm_opts_init(&no);
      no.algo = c->algo;
      no.fp8_out = p.q;
      no.fp8_scale = (const float *)(const void *)p.scale;
      no.fp8_row_scales = (float *)(void *)p.sc;
      return (c->kind == K_NORM_RS ? symcoll_reduce_scatter_rmsnorm : symcoll_all_reduce_rmsnorm)(
          comm, p.x, p.res, p.w, c->eps, p.out, p.ro, c->rows, c->hidden, c->dt, &no, st);
    }
    default: {
      symcoll_matmul_opts_t mo;
      symcoll_matmul_opts_init(&mo);
      mo.algo = c->algo;
      mo.a_out = c->a_out_p;
      return c->kind == K_AG_MATMUL
                 ? symcoll_all_gather_matmul(comm, c->send, c->b, c->recv, c->m, c->n, c->k, c->dt, &mo, st)
                 : symcoll_matmul_reduce_scatter(comm, c->send, c->b, c->recv, c->m, c->n, c->k, c->dt, &mo, st);
    }
  }
}

static const char *kind_name(int kind) {
  return symcoll_coll_name(kind_coll[kind]);
}

static void describe(rank_t *R, const call_t *c, long index, char *buf, size_t n) {
  symcoll_comm_t comm = R->comm[c->level];
  symcoll_algo_t used = c->algo;
  const bool plain = c->kind < K_AG_MATMUL;
  const bool takes_op = c->kind == K_ALL_REDUCE || c->kind == K_REDUCE_SCATTER || c->kind == K_REDUCE;
  if (used == SYMCOLL_ALGO_AUTO && plain) symcoll_coll_algo(comm, kind_coll[c->kind], c->count, c->dt, &used);
  if (is_norm(c->kind)) {
    if (used == SYMCOLL_ALGO_AUTO) symcoll_coll_algo(comm, kind_coll[c->kind], c->rows * c->hidden, c->dt, &used);
    char fp8[48] = "no fp8";
    if (c->fp8 == F_STATIC) snprintf(fp8, sizeof fp8, "fp8 static scale %g", (double)c->scale);
    if (c->fp8 == F_DYNAMIC) snprintf(fp8, sizeof fp8, "fp8 per-row scales");
    snprintf(buf, n,
             "call %ld: %s %s rows %zu hidden %zu eps %g, %s%s (%s), %s, residual_out %s, out %s, %s, x %s, outputs "
             "%s (x %p out %p), level %d (rank %d of %d)",
             index, kind_name(c->kind), symcoll_dtype_name(c->dt), c->rows, c->hidden, (double)c->eps,
             symcoll_algo_name(c->algo), c->algo == SYMCOLL_ALGO_AUTO ? " ->" : "", symcoll_algo_name(used),
             c->residual ? "residual" : "no residual", norm_out_names[c->ro_mode], norm_out_names[c->out_mode], fp8,
             place_names[c->send_place], place_names[c->recv_place], (void *)(c->send + c->L.x),
             (void *)norm_ptrs(c).out, c->level, symcoll_comm_rank(comm), symcoll_comm_nranks(comm));
    return;
  }
  char root[48] = "";
  if (c->kind == K_BROADCAST || c->kind == K_REDUCE)
    snprintf(root, sizeof root, " root %d%s", c->root, c->null_unused ? " (others pass NULL)" : "");
  if (plain)
    snprintf(buf, n,
             "call %ld: %s %s %s count %zu%s, %s%s (%s), send %s, recv %s (send %p recv %p), level %d (rank %d of %d)",
             index, kind_name(c->kind), symcoll_dtype_name(c->dt), takes_op ? symcoll_op_name(c->op) : "", c->count,
             root, symcoll_algo_name(c->algo), c->algo == SYMCOLL_ALGO_AUTO ? " ->" : "", symcoll_algo_name(used),
             place_names[c->send_place], place_names[c->recv_place], (void *)c->send, (void *)c->recv, c->level,
             symcoll_comm_rank(comm), symcoll_comm_nranks(comm));
  else
    snprintf(buf, n, "call %ld: %s %s m %zu n %zu k %zu, %s, %s, shard %s, level %d (rank %d of %d)", index,
             kind_name(c->kind), symcoll_dtype_name(c->dt), c->m, c->n, c->k, symcoll_algo_name(c->algo),
             c->a_out ? "gathered A out" : "no gathered A", place_names[c->send_place], c->level,
             symcoll_comm_rank(comm), symcoll_comm_nranks(comm));
}

/* Compares one output of call c (and its guards) with the reference; 0 if right. */
static int verify_range(rank_t *R, const call_t *c, long index, const char *out, size_t elems, const char *want,
                        const char *name) {
  const size_t es = esz(c->dt), span = (elems + 2 * GUARD) * es;
  R->ops->to_host(R->h_out, out - GUARD * es, span);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < elems + 2 * GUARD; i++) {
    const bool inside = i >= GUARD && i < GUARD + elems;
    /* In place, the guards before and after may hold the input (all_gather: never past recv). */
    if (!inside && c->recv_place == P_IN_PLACE && c->kind == K_REDUCE_SCATTER) continue;
    const bool ok = inside ? !memcmp(R->h_out + i * es, want + (i - GUARD) * es, es)
                           : ((unsigned char)R->h_out[i * es] == TH_POISON &&
                              (unsigned char)R->h_out[i * es + es - 1] == TH_POISON);
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return 0;
  char what[512];
  describe(R, c, index, what, sizeof what);
  const bool inside = first >= GUARD && first < GUARD + elems;
  fprintf(stderr, "rank %d: %s: %s: %zu elements wrong, first at %zd of the %s: got %g", R->world_rank, what, name, bad,
          (ssize_t)first - GUARD, inside ? "output" : "guard (must stay untouched)",
          exact_load(R->h_out, c->dt, first));
  if (inside) fprintf(stderr, ", want %g", exact_load(want, c->dt, first - GUARD));
  fprintf(stderr, "\n");
  return 1;
}

/* The fused norms: both regions fetched whole; each output against its reference, each input
 * unchanged, then every other byte (guards, padding, buffers not asked for) still poison.
 * reduce_scatter_rmsnorm's results are this rank's rows of the sum (x_first ...). */
static int verify_norm(rank_t *R, const call_t *c, long index) {
  symcoll_comm_t comm = R->comm[c->level];
  const int n = symcoll_comm_nranks(comm), me = symcoll_comm_rank(comm);
  const symcoll_dtype_t dt = c->dt;
  const size_t es = esz(dt), h = c->hidden, all = c->rows * h, first = c->x_first;
  const uint32_t seed = c->seed ^ R->group_tag[c->level];
  const norm_layout_t L = c->L;
  char *rg = R->h_out, *sg = R->h_out + R->slot; /* the recv and send regions as fetched */
  R->ops->to_host(rg, c->recv, L.recv_end);
  R->ops->to_host(sg, c->send, L.send_end);
  /* r, as the library must round it (exact: integers), as floats */
  float *r = (float *)(void *)R->h_want;
  for (size_t e = 0; e < all; e++) {
    double s = 0;
    for (int p = 0; p < n; p++) s += norm_x(dt, p, first + e, h, seed);
    s = as_dtype(dt, s);
    r[e] = (float)(c->residual ? as_dtype(dt, s + norm_res(dt, first + e, h, seed)) : s);
  }
  char what[512], msg[256] = "";
  char *const ro = c->ro_mode == O_SEPARATE ? rg + L.ro : c->ro_mode == O_IN_PLACE ? sg + L.res : NULL;
  char *const out = c->out_mode == O_SEPARATE ? rg + L.out : c->out_mode == O_IN_PLACE ? sg + L.x + first * es : NULL;
  char *const q = c->fp8 != F_NONE ? rg + L.q : NULL;
  float *const sc = c->fp8 == F_DYNAMIC ? (float *)(void *)(rg + L.sc) : NULL;
  char tmp[8];
  /* inputs not written over: as they were put there (out in place: the rows it takes) */
  for (size_t e = 0; !msg[0] && e < c->blocks * all; e++) {
    if (c->out_mode == O_IN_PLACE && e >= first && e < first + all) continue;
    if (exact_store(tmp, dt, 0, norm_x(dt, me, e, h, seed)), memcmp(sg + L.x + e * es, tmp, es))
      snprintf(msg, sizeof msg, "x[%zu] changed to %g (x is an input here)", e, exact_load(sg + L.x, dt, e));
  }
  for (size_t e = 0; !msg[0] && c->residual && c->ro_mode != O_IN_PLACE && e < all; e++)
    if (exact_store(tmp, dt, 0, norm_res(dt, first + e, h, seed)), memcmp(sg + L.res + e * es, tmp, es))
      snprintf(msg, sizeof msg, "residual[%zu] changed to %g", e, exact_load(sg + L.res, dt, e));
  for (size_t j = 0; !msg[0] && j < h; j++)
    if (exact_store(tmp, dt, 0, norm_w(dt, j, seed)), memcmp(rg + L.w + j * es, tmp, es))
      snprintf(msg, sizeof msg, "weight[%zu] changed to %g", j, exact_load(rg + L.w, dt, j));
  if (!msg[0] && memcmp(rg + L.scale, &c->scale, sizeof c->scale))
    snprintf(msg, sizeof msg, "the static scale's buffer changed");
  /* residual_out: bit for bit */
  for (size_t e = 0; !msg[0] && ro && e < all; e++)
    if (exact_store(tmp, dt, 0, r[e]), memcmp(ro + e * es, tmp, es))
      snprintf(msg, sizeof msg, "residual_out[%zu] (row %zu) = %.9g, want %.9g", e, e / h, exact_load(ro, dt, e),
               (double)r[e]);
  /* out within the tolerance of the fp64 RMSNorm; fp8 bit for bit against quantising out as
   * written, or, without out, dequantised within e4m3's half ulp of the fp64 reference */
  const double tol = norm_tol(dt);
  for (size_t row = 0; !msg[0] && row < c->rows; row++) {
    const float *rr = r + row * h;
    double ss = 0;
    for (size_t j = 0; j < h; j++) ss += (double)rr[j] * rr[j];
    const double inv = 1.0 / sqrt(ss / (double)h + (double)c->eps);
    double amax_ref = 0;
    for (size_t j = 0; j < h; j++) amax_ref = fmax(amax_ref, fabs(rr[j] * inv * norm_w(dt, j, seed)));
    for (size_t j = 0; !msg[0] && out && j < h; j++) {
      const double want = rr[j] * inv * norm_w(dt, j, seed), got = exact_load(out, dt, row * h + j);
      if (!(fabs(got - want) <= tol * fabs(want) + 1e-6))
        snprintf(msg, sizeof msg, "out[%zu] (row %zu) = %.9g, want %.9g (tolerance %.2g relative)", row * h + j, row,
                 got, want, tol);
    }
    if (msg[0] || !q) continue;
    float scale = c->scale;
    if (sc && out) { /* bit for bit from out as written */
      float amax = 0;
      for (size_t j = 0; j < h; j++) amax = fmaxf(amax, fabsf((float)exact_load(out, dt, row * h + j)));
      scale = fmaxf(amax / 448.0f, 1.0f / (448.0f * 512.0f));
      if (memcmp(&sc[row], &scale, sizeof scale))
        snprintf(msg, sizeof msg, "fp8 row %zu's scale %.9g, want %.9g (from out as written)", row, (double)sc[row],
                 (double)scale);
    } else if (sc) { /* from the fp64 reference, within out's tolerance */
      scale = sc[row];
      const double want = fmax(amax_ref / 448.0, 1.0 / (448.0 * 512.0));
      if (!(fabs(scale - want) <= tol * want + 1e-6 / 448))
        snprintf(msg, sizeof msg, "fp8 row %zu's scale %.9g, want %.9g (from the fp64 reference)", row, (double)scale,
                 want);
    }
    for (size_t j = 0; !msg[0] && j < h; j++) {
      const size_t e = row * h + j;
      const double deq = exact_load(q, SYMCOLL_FLOAT8_E4M3, e) * scale;
      if (out) {
        const float o = (float)exact_load(out, dt, e);
        exact_store(tmp, SYMCOLL_FLOAT8_E4M3, 0, (double)(o * (1.0f / scale)));
        if ((unsigned char)tmp[0] != (unsigned char)q[e])
          snprintf(msg, sizeof msg, "fp8_out[%zu] (row %zu) = %.9g x scale %.9g, want %.9g x scale (out %.9g)", e, row,
                   exact_load(q, SYMCOLL_FLOAT8_E4M3, e), (double)scale, exact_load(tmp, SYMCOLL_FLOAT8_E4M3, 0),
                   (double)o);
      } else { /* saturated at +-448 x scale */
        const double ref = rr[j] * inv * norm_w(dt, j, seed);
        const double want = fabs(ref) > 448.0 * scale ? copysign(448.0 * scale, ref) : ref;
        if (!(fabs(deq - want) <= (1.0 / 16 + tol) * fabs(want) + scale / 512.0))
          snprintf(msg, sizeof msg, "fp8_out[%zu] (row %zu) dequantised %.9g, want %.9g (scale %.9g)", e, row, deq,
                   want, (double)scale);
      }
    }
  }
  if (!msg[0]) { /* everything else: poison */
    const struct {
      const char *name;
      char *p;
      size_t bytes;
    } content[] = {
        {"x", sg + L.x, c->blocks * all * es},
        {"residual", c->residual ? sg + L.res : NULL, all * es},
        {"out", c->out_mode == O_SEPARATE ? rg + L.out : NULL, all * es},
        {"residual_out", c->ro_mode == O_SEPARATE ? rg + L.ro : NULL, all * es},
        {"weight", rg + L.w, h * es},
        {"fp8_out", q, all},
        {"fp8_row_scales", (char *)sc, c->rows * sizeof(float)},
        {"static scale", rg + L.scale, sizeof(float)},
    };
    for (size_t b = 0; b < sizeof content / sizeof content[0]; b++)
      if (content[b].p) memset(content[b].p, TH_POISON, content[b].bytes);
    const struct {
      const char *name;
      const char *region;
      size_t at, elems, unit; /* the buffer; GUARD units either side are its guards */
    } spans[] = {
        {"x", sg, L.x, c->blocks * all, es},
        {"residual", sg, L.res, all, es},
        {"out", rg, L.out, all, es},
        {"residual_out", rg, L.ro, all, es},
        {"weight", rg, L.w, h, es},
        {"fp8_out", rg, L.q, all, 1},
        {"fp8_row_scales", rg, L.sc, c->rows, sizeof(float)},
        {"static scale", rg, L.scale, 1, sizeof(float)},
    };
    const struct {
      const char *name, *p;
      size_t bytes;
    } regions[] = {{"send", sg, L.send_end}, {"recv", rg, L.recv_end}};
    for (int g = 0; g < 2 && !msg[0]; g++)
      for (size_t i = 0; i < regions[g].bytes; i++) {
        if ((unsigned char)regions[g].p[i] == TH_POISON) continue;
        const char *near = "padding between the buffers";
        ssize_t rel = 0;
        for (size_t b = 0; b < sizeof spans / sizeof spans[0]; b++)
          if (spans[b].region == regions[g].p && i + GUARD * spans[b].unit >= spans[b].at &&
              i < spans[b].at + (spans[b].elems + GUARD) * spans[b].unit) {
            near = spans[b].name;
            rel = (ssize_t)i - (ssize_t)spans[b].at;
          }
        snprintf(msg, sizeof msg,
                 "byte %zu of the %s region written (%s, byte %zd from its start): must stay untouched (got 0x%02x)", i,
                 regions[g].name, near, rel, (unsigned char)regions[g].p[i]);
        break;
      }
  }
  if (!msg[0]) return 0;
  describe(R, c, index, what, sizeof what);
  fprintf(stderr, "rank %d: %s: %s\n", R->world_rank, what, msg);
  return 1;
}

static int verify(rank_t *R, const call_t *c, long index) {
  if (is_norm(c->kind)) return verify_norm(R, c, index);
  reference(R, c);
  int bad = verify_range(R, c, index, c->recv, c->recv_elems, R->h_want, "output");
  if (!bad && c->a_out_p)
    bad = verify_range(R, c, index, c->a_out_p, c->m * (size_t)symcoll_comm_nranks(R->comm[c->level]) * c->k,
                       R->h_want + R->slot, "gathered A");
  return bad;
}

/* ---- the stream of calls ---------------------------------------------------------------------- */

/* Each plain kind's draws (auto twice or more: the table's choice is the common case). */
static const symcoll_algo_t coll_algos[K_AG_MATMUL][6] = {
    [K_ALL_REDUCE] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_ONE_SHOT_DB,
                      SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_AUTO},
    [K_ALL_GATHER] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_PUSH, SYMCOLL_ALGO_LAMPORT,
                      SYMCOLL_ALGO_COPY_ENGINE, SYMCOLL_ALGO_AUTO},
    [K_REDUCE_SCATTER] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_AUTO,
                          SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT},
    [K_BROADCAST] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_COPY_ENGINE,
                     SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL},
    [K_REDUCE] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_AUTO,
                  SYMCOLL_ALGO_ONE_SHOT},
    [K_ALL_TO_ALL] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_PUSH, SYMCOLL_ALGO_LAMPORT,
                      SYMCOLL_ALGO_COPY_ENGINE, SYMCOLL_ALGO_AUTO},
};

/* Draws the next call from the shared generator; false when it does not fit (then it is
 * drawn again: every rank rejects the same draws). */
static bool draw(rank_t *R, call_t *c) {
  uint32_t *g = &R->shared;
  memset(c, 0, sizeof *c);
  c->level = (int)below(g, (uint32_t)R->levels);
  /* 16 plain, 2 GEMM, 3 norm: 2 all_reduce_rmsnorm, 1 reduce_scatter_rmsnorm (without the
   * GEMMs, the norms take their numbers: a stream without the norms draws what it drew before
   * they were added) */
  c->kind = (int)below(g, 16u + (R->gemm ? 2u : 0u) + (R->norm ? 3u : 0u));
  if (!R->gemm && c->kind >= 16) c->kind += 2;
  c->kind = c->kind < 4     ? K_ALL_REDUCE
            : c->kind < 7   ? K_ALL_GATHER
            : c->kind < 10  ? K_REDUCE_SCATTER
            : c->kind < 12  ? K_BROADCAST
            : c->kind < 14  ? K_REDUCE
            : c->kind < 16  ? K_ALL_TO_ALL
            : c->kind == 16 ? K_AG_MATMUL
            : c->kind == 17 ? K_MATMUL_RS
            : c->kind < 20  ? K_NORM
                            : K_NORM_RS;
  /* GEMM operations on the world only: the first launch of a GEMM shape waits for the GPU, and
   * on a GPU shared by groups a group beside this rank's could be waiting for it (README,
   * "Ranks that share a GPU"). The fused norms (kernels loaded at creation) run on any level. */
  if (c->kind == K_AG_MATMUL || c->kind == K_MATMUL_RS) c->level = 0;
  /* Groups differ in size: what is drawn, and whether it fits, depends on the world's. */
  const int n = symcoll_comm_nranks(R->comm[0]), gn = symcoll_comm_nranks(R->comm[c->level]);
  c->seed = th_rng_next(g);
  if (is_norm(c->kind)) {
    static const symcoll_dtype_t nm_dt[] = {SYMCOLL_FLOAT32, SYMCOLL_FLOAT16, SYMCOLL_BFLOAT16};
    /* every algorithm of the norm's row twice (settle_algo: auto where the communicator does
     * not run it), auto twice */
    static const symcoll_algo_t nm_algo[] = {
        SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_SEQUENTIAL,
        SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_SEQUENTIAL};
    static const size_t round_h[] = {1, 8, 64, 128, 256, 512, 1024, 2048, 4096};
    /* static scales (1/64: out x 64 saturates at 448; 0.3: an inexact reciprocal) and eps (64:
     * small outs, down to e4m3's subnormals) */
    static const float scales[] = {1.0f / 64, 0.125f, 0.3f, 1.0f, 4.0f};
    static const float epss[] = {1e-6f, 1e-5f, 0.25f, 64.0f};
    c->dt = nm_dt[below(g, 3)];
    c->algo = nm_algo[below(g, sizeof nm_algo / sizeof nm_algo[0])];
    c->blocks = 1;
    if (c->kind == K_NORM_RS) { /* its fused algorithm where the other draws a fused one */
      c->blocks = (size_t)gn;
      if (c->algo != SYMCOLL_ALGO_AUTO && c->algo != SYMCOLL_ALGO_SEQUENTIAL) c->algo = SYMCOLL_ALGO_PULL;
    }
    /* A workspace made small on purpose (SYMCOLL_WORKSPACE_BYTES) may not hold a row and its
     * results: oneshot and twoshot asked for are then refused (auto runs the chain); ask auto. */
    if (getenv("SYMCOLL_WORKSPACE_BYTES") && c->algo != SYMCOLL_ALGO_SEQUENTIAL) c->algo = SYMCOLL_ALGO_AUTO;
    const uint32_t rc = below(g, 64);
    /* 0 rows: nothing to do; now and then more rows than a GPU has SMs, of at least 33 packs
     * (the local pass's blocks of a thread per two lanes: cuda_coll.c's norm_threads) */
    const bool many = rc >= 61;
    c->rows = rc == 0 ? 0 : rc < 24 ? 1 + below(g, 4) : many ? 160 + below(g, 240) : 1 + below(g, 64);
    c->hidden = many ? 257 + below(g, 1044) : below(g, 2) ? round_h[below(g, 9)] : 1 + below(g, 2048);
    c->eps = epss[below(g, 4)];
    c->residual = below(g, 4) != 0;
    c->ro_mode = (int)below(g, 3);
    if (c->ro_mode == O_IN_PLACE && !c->residual) c->ro_mode = O_SEPARATE;
    const uint32_t f = below(g, 4);
    c->fp8 = f < 2 ? F_NONE : f == 2 ? F_STATIC : F_DYNAMIC;
    c->scale = scales[below(g, 5)];
    const uint32_t o = below(g, 4);
    c->out_mode = o < 2 ? O_SEPARATE : o == 2 ? O_IN_PLACE : c->fp8 != F_NONE ? O_NONE : O_SEPARATE;
    c->send_place = below(g, 3) == 0 ? P_SYMMETRIC : P_PLAIN;
    c->recv_place = below(g, 4) == 0 ? P_SYMMETRIC : P_PLAIN;
    /* fewer rows until the call fits max_bytes and its regions fit a slot (a row must) */
    const size_t es = esz(c->dt);
    for (;;) {
      const norm_layout_t L = norm_layout(c, NULL);
      if (c->blocks * c->rows * c->hidden * es <= max_bytes && L.send_end <= R->slot && L.recv_end <= R->slot)
        return true;
      if (c->rows <= 1) return false;
      c->rows /= 2;
    }
  }
  if (c->kind >= K_AG_MATMUL) {
    static const symcoll_dtype_t mm_dt[] = {SYMCOLL_FLOAT32, SYMCOLL_FLOAT16, SYMCOLL_BFLOAT16};
    static const symcoll_algo_t mm_algo[] = {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_OVERLAP, SYMCOLL_ALGO_SEQUENTIAL};
    static const size_t ms[] = {1, 7, 64, 128, 333};
    c->dt = mm_dt[below(g, 3)];
    c->algo = mm_algo[below(g, 3)];
    c->m = ms[below(g, 5)];
    if (c->kind == K_MATMUL_RS) c->m *= (size_t)gn;
    c->n = 1 + below(g, 4) * 40 + below(g, 9);
    c->k = 1 + below(g, 3) * 30 + below(g, 17);
    c->a_out = c->kind == K_AG_MATMUL && below(g, 2);
    c->send_place = below(g, 4) == 0 ? P_SYMMETRIC : P_PLAIN; /* all_gather_matmul: the shard's placement */
    if (c->kind == K_MATMUL_RS) c->send_place = P_PLAIN;
    c->recv_place = P_PLAIN;
    const size_t es = esz(c->dt), m = c->kind == K_MATMUL_RS ? c->m / (size_t)gn * (size_t)n : c->m;
    const size_t rows = c->kind == K_AG_MATMUL ? c->m * (size_t)n : m;
    const size_t in = ((m * c->k * es + 255) & ~(size_t)255) + c->k * c->n * es;
    const size_t out = (rows * c->n + 2 * GUARD) * es + 256 + (c->a_out ? rows * c->k * es : 0);
    return in + 2 * GUARD * es + MAX_OFF * es <= R->slot && out + 2 * GUARD * es + MAX_OFF * es <= R->slot;
  }
  c->dt = (symcoll_dtype_t)below(g, SYMCOLL_NUM_DTYPES);
  c->op = (symcoll_op_t)below(g, SYMCOLL_NUM_OPS);
  if (c->kind != K_ALL_REDUCE && c->kind != K_REDUCE_SCATTER && c->kind != K_REDUCE) c->op = SYMCOLL_SUM; /* no op */
  c->root = (int)below(g, (uint32_t)gn);
  const uint32_t cls = below(g, 20);
  const size_t es = esz(c->dt), cap = max_bytes / es;
  c->count = cls < 9    ? 1 + below(g, 64)
             : cls < 15 ? 1 + below(g, 4096)
             : cls < 19 ? 1 + below(g, 65536)
                        : 1 + below(g, (uint32_t)cap);
  if (c->count > cap) c->count = cap;
  c->algo = coll_algos[c->kind][below(g, 6)];
  c->send_place = below(g, 3) == 0 ? P_SYMMETRIC : P_PLAIN;
  const uint32_t rp = below(g, 4);
  c->recv_place = rp == 0 ? P_IN_PLACE : rp == 1 ? P_SYMMETRIC : P_PLAIN;
  /* In place means one buffer: it is where send is. */
  if (c->recv_place == P_IN_PLACE && c->kind == K_ALL_GATHER) c->send_place = P_PLAIN;
  c->null_unused = c->recv_place != P_IN_PLACE && below(g, 2);
  const size_t mult = c->kind == K_ALL_REDUCE || c->kind == K_BROADCAST || c->kind == K_REDUCE ? 1 : (size_t)n;
  return (c->count * mult + 2 * GUARD + MAX_OFF) * es <= R->slot;
}

/* Whether every rank of the call's communicator runs the drawn algorithm (the same answer
 * everywhere: the communicator's ranks share its tuning table and transport). */
static void settle_algo(rank_t *R, call_t *c) {
  if (symcoll_coll_algo_supported(R->comm[c->level], kind_coll[c->kind], c->algo) != SYMCOLL_OK)
    c->algo = SYMCOLL_ALGO_AUTO;
}

static void free_level(rank_t *R, int l) {
  if (!R->comm[l]) return;
  symcoll_comm_barrier(R->comm[l]); /* no peer still reads our memory */
  symcoll_mem_free(R->sym_send[l]);
  symcoll_mem_free(R->sym_recv[l]);
  if (l > 0) symcoll_comm_destroy(R->comm[l]);
  R->comm[l] = NULL;
}

static int setup_level(rank_t *R, int l) {
  symcoll_status_t s = symcoll_mem_alloc(R->comm[l], R->slot * BATCH, &R->sym_send[l]);
  if (s == SYMCOLL_OK) s = symcoll_mem_alloc(R->comm[l], R->slot * BATCH, &R->sym_recv[l]);
  if (s == SYMCOLL_OK) s = symcoll_comm_barrier(R->comm[l]); /* every rank's memory exists (thread mode) */
  if (s != SYMCOLL_OK) fprintf(stderr, "rank %d: level %d set-up: %s\n", R->world_rank, l, symcoll_status_string(s));
  return s != SYMCOLL_OK;
}

/* New groups: level 1 splits the world into 1 .. n groups by a random permutation, keys
 * reversing or keeping the order; level 2 splits each group in two where it can. */
static int resplit(rank_t *R) {
  for (int l = R->levels - 1; l >= 1; l--) free_level(R, l);
  R->levels = 1;
  const int n = symcoll_comm_nranks(R->comm[0]);
  if (!with_split || n < 2) return 0;
  uint32_t *g = &R->shared;
  int perm[SYMCOLL_MAX_RANKS];
  for (int r = 0; r < n; r++) perm[r] = r;
  for (int r = n - 1; r > 0; r--) {
    int j = (int)below(g, (uint32_t)r + 1), t = perm[r];
    perm[r] = perm[j], perm[j] = t;
  }
  const int groups = 1 + (int)below(g, (uint32_t)(n < 4 ? n : 4));
  const bool reverse = below(g, 2);
  const int me = R->world_rank, color = perm[me] % groups, key = reverse ? n - perm[me] : perm[me];
  const bool deeper = below(g, 2);
  symcoll_comm_t c;
  symcoll_status_t s = symcoll_comm_split(R->comm[0], color, key, &c);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: split: %s\n", me, symcoll_status_string(s));
    return 1;
  }
  R->comm[1] = c, R->group_tag[1] = 0x1000u * (uint32_t)(color + 1), R->levels = 2;
  if (setup_level(R, 1)) return 1;
  if (deeper) { /* every group, even of one rank, so that every rank has the same levels */
    const int gr = symcoll_comm_rank(c), color2 = gr % 2;
    s = symcoll_comm_split(c, color2, -gr, &R->comm[2]);
    if (s != SYMCOLL_OK) {
      fprintf(stderr, "rank %d: split of a group: %s\n", me, symcoll_status_string(s));
      return 1;
    }
    R->group_tag[2] = R->group_tag[1] ^ 0x100000u * (uint32_t)(color2 + 1), R->levels = 3;
    if (setup_level(R, 2)) return 1;
  }
  /* Every group is set up before any rank issues a call. A group's set-up (its split of the
   * level above, its memory) meets only that group's ranks, and its driver calls can wait for
   * the GPU to go idle: where ranks share a GPU, a rank of another group that had gone on to a
   * world call would wait in its kernel for this rank, and the GPU never idles (README: the
   * rule for ranks that share a GPU). */
  s = symcoll_comm_barrier(R->comm[0]);
  if (s != SYMCOLL_OK) fprintf(stderr, "rank %d: the meeting after new groups: %s\n", me, symcoll_status_string(s));
  return s != SYMCOLL_OK;
}

/* The calls of a batch, one line each (after a failure; the lines of ranks interleave). */
static void print_batch(rank_t *R, const call_t *batch, long index, int nb) {
  for (int i = 0; i < nb; i++) {
    char what[512];
    describe(R, &batch[i], index + i, what, sizeof what);
    fprintf(stderr, "rank %d:   %s\n", R->world_rank, what);
  }
}

/* A rank's longest stretch of one kind, and where it was. */
#define SLOW_S 1.0 /* said at the end of a rank's run when longer (timeouts in the tests: 3-10 s) */
typedef struct {
  double s;
  long at;
  bool regrouped;
} slow_t;
static void note_slow(slow_t *w, double s, long at, bool regrouped) {
  if (s > w->s) *w = (slow_t){s, at, regrouped};
}

static int stream_rank(symcoll_comm_t world, const th_buf_ops_t *ops, void *arg) {
  (void)arg;
  rank_t R = {.ops = ops, .world_rank = symcoll_comm_rank(world), .levels = 1};
  R.comm[0] = world;
  const int n = symcoll_comm_nranks(world);
  R.slot = (max_bytes * (size_t)n + 4096 + 255) & ~(size_t)255;
  R.shared = th_rng_start(seed0);
  R.own = th_rng_start(seed0 ^ 0x5bd1e995u * (uint32_t)(R.world_rank + 1));
  R.plain_send = ops->alloc(R.slot * BATCH);
  R.plain_recv = ops->alloc(R.slot * BATCH);
  R.h_in = malloc(R.slot), R.h_out = malloc(2 * R.slot), R.h_want = malloc(2 * R.slot);
  if (!R.plain_send || !R.plain_recv || !R.h_in || !R.h_out || !R.h_want || setup_level(&R, 0)) return 1;
  /* The GEMM operations where every rank has the library (CPU: CBLAS; GPU: cuBLASLt). */
  R.gemm = with_gemm &&
           symcoll_coll_algo_supported(world, SYMCOLL_COLL_ALL_GATHER_MATMUL, SYMCOLL_ALGO_SEQUENTIAL) == SYMCOLL_OK;
  R.norm = with_norm;
  call_t batch[BATCH];
  long index = 0;
  int failed = resplit(&R);
  /* Where this rank spent its time: its longest stretch on the host between two batches (new
   * groups, draws, inputs) and its longest wait for its stream. A peer that waited in vain for
   * this rank (TIMEOUT) while this rank, late, passed on the peer's old post reports nothing
   * of its own: this line says where it was held. */
  slow_t host_step = {0}, gpu_wait = {0};
  double t_end = th_now();
  while (!failed && index < calls) {
    bool regrouped = false;
    if (below(&R.shared, 16) == 0) {
      if (trace && R.world_rank == 0) printf("rank 0: new groups before call %ld\n", index);
      if ((failed = resplit(&R)) != 0) break;
      regrouped = true;
    }
    const int nb = 1 + (int)below(&R.shared, BATCH);
    for (int i = 0; i < nb; i++) {
      while (!draw(&R, &batch[i])) {
      }
      settle_algo(&R, &batch[i]);
      R.kinds[batch[i].kind]++;
      if (is_norm(batch[i].kind)) R.norm_algos[batch[i].algo]++;
      prepare(&R, &batch[i], i);
    }
    const double t_issue = th_now();
    note_slow(&host_step, t_issue - t_end, index, regrouped);
    /* Back to back: no wait, no barrier. */
    for (int i = 0; i < nb && !failed; i++) {
      if (trace && R.world_rank == 0) {
        char what[512];
        describe(&R, &batch[i], index + i, what, sizeof what);
        printf("rank 0: %s%s\n", what, i == 0 ? " (batch starts)" : "");
      }
      symcoll_status_t s = issue(&R, &batch[i]);
      if (s != SYMCOLL_OK) {
        char what[512];
        describe(&R, &batch[i], index + i, what, sizeof what);
        fprintf(stderr, "rank %d: %s returned %s; the batch so far:\n", R.world_rank, what, symcoll_status_string(s));
        print_batch(&R, batch, index, i + 1);
        failed = 1;
      }
    }
    ops->sync();
    note_slow(&gpu_wait, th_now() - t_issue, index, false);
    for (int l = 0; l < R.levels && !failed; l++) {
      symcoll_status_t s = symcoll_comm_check(R.comm[l]);
      if (s != SYMCOLL_OK) {
        fprintf(stderr, "rank %d: after calls %ld..%ld, symcoll_comm_check of level %d: %s; the batch:\n", R.world_rank,
                index, index + nb - 1, l, symcoll_status_string(s));
        print_batch(&R, batch, index, nb);
        failed = 1;
      }
    }
    for (int i = 0; i < nb && !failed; i++) R.failures += verify(&R, &batch[i], index + i);
    if (R.failures) failed = 1;
    index += nb;
    R.done = index;
    t_end = th_now();
  }
  if (host_step.s >= SLOW_S || gpu_wait.s >= SLOW_S)
    printf(
        "rank %d: slow: longest host step %.2f s (before call %ld%s), longest wait for its stream %.2f s (batch "
        "from call %ld)\n",
        R.world_rank, host_step.s, host_step.at, host_step.regrouped ? ", new groups in it" : "", gpu_wait.s,
        gpu_wait.at);
  if (!failed)
    for (int l = R.levels - 1; l >= 0; l--) free_level(&R, l);
  if (R.world_rank == 0 || failed) { /* the counts: of the calls drawn, the same on every rank */
    char counts[1024] = "";
    size_t at = 0;
    for (int k = 0; k < NUM_KINDS && at < sizeof counts; k++)
      at += (size_t)snprintf(counts + at, sizeof counts - at, "%s%s %ld", k ? ", " : "", kind_name(k), R.kinds[k]);
    const char *sep = " ("; /* the fused norms' by algorithm */
    for (int a = 0; a < SYMCOLL_NUM_ALGOS && at < sizeof counts; a++)
      if (R.norm_algos[a]) {
        at += (size_t)snprintf(counts + at, sizeof counts - at, "%s%s %ld", sep, symcoll_algo_name((symcoll_algo_t)a),
                               R.norm_algos[a]);
        sep = ", ";
      }
    if (at < sizeof counts && (R.kinds[K_NORM] || R.kinds[K_NORM_RS])) snprintf(counts + at, sizeof counts - at, ")");
    printf("rank %d: %ld calls%s; %s\n", R.world_rank, R.done, failed ? ", FAILED" : ", all right", counts);
  }
  ops->free(R.plain_send);
  ops->free(R.plain_recv);
  free(R.h_in), free(R.h_out), free(R.h_want);
  return failed ? 1 : 0;
}

static void test_stream(void **state) {
  (void)state;
  assert_int_equal(th_run(&launch, stream_rank, NULL), 0);
}

int main(int argc, char **argv) {
  setvbuf(stderr, NULL, _IOLBF, 0); /* whole lines: ranks in processes write the same stream */
  for (int i = 1; i < argc; i++) {
    if (th_launch_arg(&launch, argc, argv, &i)) continue;
    if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
      max_bytes = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--no-gemm"))
      with_gemm = false;
    else if (!strcmp(argv[i], "--no-norm"))
      with_norm = false;
    else if (!strcmp(argv[i], "--no-split"))
      with_split = false;
    else if (!strcmp(argv[i], "--trace"))
      trace = true; /* rank 0 names every call as it issues it */
    else {
      fprintf(stderr,
              "usage: test_stream --backend host|cuda --mode process|thread|env --ranks N [--calls K] "
              "[--max-bytes B] [--no-gemm] [--no-norm] [--no-split] [--trace]\n");
      return 2;
    }
  }
  th_set_mode(launch.mode);
  if (th_skip_without_gpu(launch.backend)) return TH_SKIP;
  seed0 = th_seed();
  if (max_bytes == 0) max_bytes = (size_t)(strcmp(launch.backend, "cuda") == 0 ? 4 : 1) << 20;
  printf("test_stream: seed %u (TH_SEED=%u replays it), %s, %s mode, %d ranks, %ld calls of up to %zu bytes\n", seed0,
         seed0, launch.backend, launch.mode, launch.nranks, calls, max_bytes);
  fflush(stdout);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stream)};
  return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
