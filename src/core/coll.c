/* The collective entry points: argument checks, algorithm choice, call signature, dispatch to
 * the transport. One path for every collective; what differs is in coll_info below. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void symcoll_coll_opts_init(symcoll_coll_opts_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* SYMCOLL_ALGO: "name[,name...]" (each applies to every collective that has it) or
 * "coll:name" / "coll=name" for one collective. */
void symcoll__algo_from_env(symcoll_comm_t comm) {
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++) comm->forced_algo[c] = SYMCOLL_ALGO_AUTO;
  const char *v = symcoll__env_str("SYMCOLL_ALGO", "auto");
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int only = -1;
    char *name = tok, *sep = strpbrk(tok, ":=");
    if (sep) {
      *sep = 0;
      name = sep + 1;
      for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
        if (!strcmp(tok, symcoll_coll_name((symcoll_coll_t)c))) only = c;
      if (only < 0) {
        char names[256] = "";
        for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
          snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", c ? ", " : "",
                   symcoll_coll_name((symcoll_coll_t)c));
        symcoll__env_warn("SYMCOLL_ALGO", "SYMCOLL_ALGO=%s: '%s' is none of %s; that part is ignored", v, tok, names);
        continue;
      }
    }
    int algo = -1;
    for (int a = 0; a < SYMCOLL_NUM_ALGOS; a++)
      if (!strcmp(name, symcoll_algo_name((symcoll_algo_t)a))) algo = a;
    bool used = false;
    for (int c = 0; algo >= 0 && c < SYMCOLL_NUM_COLL_KINDS; c++)
      if ((only < 0 || only == c) &&
          (algo == SYMCOLL_ALGO_AUTO || symcoll__algo_of((symcoll_coll_t)c, (symcoll_algo_t)algo))) {
        comm->forced_algo[c] = (symcoll_algo_t)algo;
        used = true;
      }
    if (!used) {
      char help[1024] = "", list[256];
      for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
        snprintf(help + strlen(help), sizeof help - strlen(help), "%s%s: %s", c ? "; " : "",
                 symcoll_coll_name((symcoll_coll_t)c), symcoll__algo_list((symcoll_coll_t)c, list, sizeof list));
      symcoll__env_warn("SYMCOLL_ALGO", "SYMCOLL_ALGO=%s: '%s' is no algorithm of %s; that part is ignored (%s)", v,
                        name, only < 0 ? "any collective" : symcoll_coll_name((symcoll_coll_t)only), help);
    }
  }
}

/* ---- checks ------------------------------------------------------------------------------ */

/* What a call's options say beyond the algorithm and the grid. */
typedef struct {
  size_t round;
  const void *scale;
  bool scale_on_device;
} opt_view_t;

/* Options of 0.1 end before round_bytes, of 0.2-0.5 before scale: still accepted. */
static symcoll_status_t check_opts(symcoll_coll_t coll, const symcoll_coll_opts_t *opts, opt_view_t *v) {
  *v = (opt_view_t){0};
  if (!opts) return SYMCOLL_OK;
  const char *name = symcoll_coll_name(coll);
  const bool has_scale = opts->struct_size == sizeof *opts;
  const bool has_round = has_scale || opts->struct_size == offsetof(symcoll_coll_opts_t, scale);
  if (!has_round && opts->struct_size != offsetof(symcoll_coll_opts_t, round_bytes))
    SYMCOLL_REFUSE("%s: options struct_size %zu (expected %zu; call symcoll_coll_opts_init)", name, opts->struct_size,
                   sizeof *opts);
  if ((unsigned)opts->algo >= SYMCOLL_NUM_ALGOS) SYMCOLL_REFUSE("%s: unknown algorithm %d", name, (int)opts->algo);
  if (opts->blocks < 0) SYMCOLL_REFUSE("%s: options blocks %d < 0", name, opts->blocks);
  if (opts->threads < 0 || opts->threads > 1024 || (opts->threads & 31) != 0)
    SYMCOLL_REFUSE("%s: options threads %d (0, or a multiple of 32 up to 1024)", name, opts->threads);
  if (has_round && opts->round_bytes % 256 != 0)
    SYMCOLL_REFUSE("%s: options round_bytes %zu (a multiple of 256)", name, opts->round_bytes);
  if (has_scale && opts->scale_on_device && !opts->scale)
    SYMCOLL_REFUSE("%s: options scale_on_device without a scale", name);
  v->round = has_round ? opts->round_bytes : 0;
  v->scale = has_scale ? opts->scale : NULL;
  v->scale_on_device = has_scale && opts->scale_on_device;
  return SYMCOLL_OK;
}

/* ---- the signature of a call --------------------------------------------------------------- */

/* A rooted collective's root rides in the GEMM operations' `n` slot (they have no root). */
static uint32_t call_signature(const symcoll__coll_args_t *a) {
  return symcoll__call_signature(a->coll, a->count, (size_t)a->root, 0, a->dtype, a->op, a->algo);
}

symcoll_status_t symcoll__agree(symcoll_comm_t comm, const void *mine, void *all, size_t bytes, int *differs) {
  SYMCOLL_CHECK(comm->oob->allgather(comm, mine, all, bytes));
  *differs = -1;
  for (int r = 0; r < comm->nranks && *differs < 0; r++)
    if (memcmp((const char *)all + (size_t)r * bytes, mine, bytes) != 0) *differs = r;
  return SYMCOLL_OK;
}

/* SYMCOLL_CHECK=1: every rank compares the call's arguments with every peer's. */
static symcoll_status_t check_agreement(symcoll_comm_t comm, const symcoll__coll_args_t *a) {
  /* The launch shape too: ranks whose grids or rounds differ would wait at different slots. */
  uint64_t mine[9] = {a->count,          (uint64_t)a->dtype,  (uint64_t)a->op,
                      (uint64_t)a->algo, (uint64_t)a->blocks, (uint64_t)a->threads,
                      a->round_bytes,    (uint64_t)a->coll,   (uint64_t)a->root};
  uint64_t all[SYMCOLL_MAX_RANKS][9];
  int r;
  SYMCOLL_CHECK(symcoll__agree(comm, mine, all, sizeof mine, &r));
  if (r >= 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "call %llu: rank %d is in %s count %llu %s %s %s root %llu, rank %d in %s count %llu %s %s %s "
                 "root %llu",
                 (unsigned long long)comm->coll_seq, comm->rank, symcoll_coll_name(a->coll),
                 (unsigned long long)mine[0], symcoll_dtype_name(a->dtype), symcoll_op_name(a->op),
                 symcoll_algo_name(a->algo), (unsigned long long)mine[8], r,
                 symcoll_coll_name((symcoll_coll_t)all[r][7]), (unsigned long long)all[r][0],
                 symcoll_dtype_name((symcoll_dtype_t)all[r][1]), symcoll_op_name((symcoll_op_t)all[r][2]),
                 symcoll_algo_name((symcoll_algo_t)all[r][3]), (unsigned long long)all[r][8]);
    if (!memcmp(all[r], mine, 4 * sizeof mine[0]))
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                   "... and launch shapes differ: rank %d blocks %llu threads %llu round %llu, rank %d %llu %llu %llu",
                   comm->rank, (unsigned long long)mine[4], (unsigned long long)mine[5], (unsigned long long)mine[6], r,
                   (unsigned long long)all[r][4], (unsigned long long)all[r][5], (unsigned long long)all[r][6]);
    return SYMCOLL_ERR_MISMATCH;
  }
  return SYMCOLL_OK;
}

/* ---- what every call of a collective derives from its arguments ---------------------------- */

/* NCCL's in-place rules, by the row's kind. */
static bool in_place_of(const symcoll__coll_desc_t *d, const void *send, const void *recv, size_t block, int rank) {
  const char *s = send, *r = recv;
  switch (d->in_place) {
    case SYMCOLL__IN_PLACE_SAME:
      return s == r;
    case SYMCOLL__IN_PLACE_SEND_IN_RECV:
      return s == r + (size_t)rank * block;
    case SYMCOLL__IN_PLACE_RECV_IN_SEND:
      return r == s + (size_t)rank * block;
  }
  return false;
}

/* Zero-copy: peers read our input where it lies. Not in place when recv is written where
 * send lies (the reductions: writing the result would race with peers' reads); all_gather in
 * place: peers read our block of recv, which we do not write; rooted ones in place (only the
 * root is ever in place: the others' unused buffer is NULL): broadcast's root writes nothing
 * in place, and reduce's root is the only reader of every input, its own included. A
 * symmetric receive buffer is found too where the row says a transport uses it (peers may
 * write into it; all_reduce's two-shot also reads its input there in place). */
static void place_symmetric(symcoll_comm_t comm, const symcoll__coll_desc_t *d, symcoll__coll_args_t *a,
                            bool in_place) {
  const size_t block = a->count * symcoll__esize(a->dtype), n = (size_t)comm->nranks;
  if (!in_place || d->in_place == SYMCOLL__IN_PLACE_SEND_IN_RECV || d->root != SYMCOLL__ROOT_NONE)
    a->send_mem = symcoll__mem_find(comm, a->send, block * (d->send_all ? n : 1), &a->send_off);
  if (d->finds_recv && a->recv)
    a->recv_mem = symcoll__mem_find(comm, a->recv, block * (d->recv_all ? n : 1), &a->recv_off);
}

const symcoll__tune_entry_t *symcoll__coll_entry(symcoll_comm_t comm, symcoll_coll_t coll, size_t count,
                                                 symcoll_dtype_t dtype) {
  const size_t bytes = symcoll__coll_bytes(coll, count, symcoll__esize(dtype), comm->nranks);
  return &comm->tune[coll][dtype].bucket[symcoll__tune_bucket(bytes)];
}

symcoll_algo_t symcoll__coll_auto(symcoll_comm_t comm, symcoll_coll_t coll, size_t count, symcoll_dtype_t dtype) {
  return comm->forced_algo[coll] != SYMCOLL_ALGO_AUTO ? comm->forced_algo[coll]
                                                      : symcoll__coll_entry(comm, coll, count, dtype)->algo;
}

/* ---- the one path ---------------------------------------------------------------------------- */

/* An algorithm this communicator does not run, asked for (options, SYMCOLL_ALGO) or from a
 * table: UNSUPPORTED, and why. */
static symcoll_status_t refuse_algo(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo, const char *why) {
  SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: %s (from the %s) is not available on this communicator%s",
               symcoll_coll_name(coll), symcoll_algo_name(algo), why,
               !symcoll__algo_of(coll, algo)      ? ": it is not an algorithm of this collective"
               : algo == SYMCOLL_ALGO_NCCL        ? " (it holds no NCCL communicator: see SYMCOLL_NCCL)"
               : algo == SYMCOLL_ALGO_COPY_ENGINE ? " (CPU ranks have no copy engine)"
               : algo == SYMCOLL_ALGO_HIERARCHICAL || algo == SYMCOLL_ALGO_ENGINE
                   ? " (it spans one node: see symcoll_comm_create_job)"
               : comm->hier ? " (it spans nodes: hierarchical or engine)"
                            : "");
  return SYMCOLL_ERR_UNSUPPORTED;
}

/* Where a call's buffers lie: bit 0 the input in symmetric memory (read in place by peers),
 * bit 1 the output. */
static uint8_t placement(const symcoll__coll_args_t *a) {
  return (uint8_t)((a->send_mem ? 1 : 0) | (a->recv_mem ? 2 : 0));
}

/* INFO names each change of a collective's algorithm or of where its buffers lie (staged or
 * zero-copy); TRACE every call. */
static void note_call(symcoll_comm_t comm, const symcoll__coll_desc_t *d, const symcoll__coll_args_t *a, size_t bytes,
                      bool in_place, const char *why) {
  const int me = comm->rank;
  const char *name = symcoll_coll_name(a->coll);
  const uint8_t place = placement(a);
  if (a->algo != comm->last_algo[a->coll] || place != comm->last_place[a->coll]) {
    comm->last_algo[a->coll] = a->algo;
    comm->last_place[a->coll] = place;
    static const char *const where[4] = {"neither buffer in symmetric memory", "input in symmetric memory",
                                         "output in symmetric memory", "input and output in symmetric memory"};
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d: %s of %zu bytes (%s) runs %s (from the %s), %s", me, name, bytes,
                 symcoll_dtype_name(a->dtype), symcoll_algo_name(a->algo), why, where[place]);
  }
  SYMCOLL_TRACE(SYMCOLL_SUBSYS_COLL, "rank %d: %s #%llu count %zu %s %s%s%s: %s (%s)%s%s", me, name,
                (unsigned long long)comm->coll_seq, a->count, symcoll_dtype_name(a->dtype),
                d->takes_op ? symcoll_op_name(a->op) : "", d->root ? (me == a->root ? " (root)" : " (not root)") : "",
                in_place ? " in place" : "", symcoll_algo_name(a->algo), why, a->send_mem ? ", input symmetric" : "",
                a->recv_mem ? ", output symmetric" : "");
}

static symcoll_status_t run_coll(symcoll_comm_t comm, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream,
                                 const symcoll_coll_opts_t *opts);

/* A sum of inputs each multiplied first by its own rank's scale (NCCL's PreMulSum): this
 * rank's input times its scale into scratch of the call's lifetime (stream-ordered on GPUs, so
 * a CUDA graph captures it), then the plain sum from there, out of place. */
static symcoll_status_t scaled_sum(symcoll_comm_t comm, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                   size_t send_bytes, symcoll_dtype_t dtype, int root, void *stream,
                                   const symcoll_coll_opts_t *opts, const opt_view_t *ov) {
  void *tmp = NULL;
  SYMCOLL_CHECK(comm->tp->scratch_alloc(comm, send_bytes, stream, &tmp));
  symcoll_status_t s = comm->tp->scale(comm, tmp, send, send_bytes / symcoll__esize(dtype), dtype, ov->scale,
                                       ov->scale_on_device, stream);
  if (s == SYMCOLL_OK) {
    symcoll_coll_opts_t plain = *opts;
    plain.scale = NULL;
    plain.scale_on_device = 0;
    s = run_coll(comm, coll, tmp, recv, count, dtype, SYMCOLL_SUM, root, stream, &plain);
  }
  comm->tp->scratch_free(comm, tmp, stream);
  return s;
}

static symcoll_status_t run_coll(symcoll_comm_t comm, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                 symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream,
                                 const symcoll_coll_opts_t *opts) {
  const char *name = symcoll_coll_name(coll);
  const symcoll__coll_desc_t *d = symcoll__coll_desc(coll);
  if (!comm) SYMCOLL_REFUSE("%s: comm is NULL", name);
  if ((unsigned)dtype >= SYMCOLL_NUM_DTYPES)
    SYMCOLL_REFUSE("%s: unknown dtype %d (0..%d)", name, (int)dtype, SYMCOLL_NUM_DTYPES - 1);
  if ((unsigned)op >= SYMCOLL_NUM_OPS) SYMCOLL_REFUSE("%s: unknown op %d (0..%d)", name, (int)op, SYMCOLL_NUM_OPS - 1);
  const int n = comm->nranks, me = comm->rank;
  if (d->root != SYMCOLL__ROOT_NONE && (root < 0 || root >= n))
    SYMCOLL_REFUSE("%s: root %d is not a rank of this communicator (0..%d)", name, root, n - 1);
  if (d->root == SYMCOLL__ROOT_NONE) root = 0;
  opt_view_t ov;
  SYMCOLL_CHECK(check_opts(coll, opts, &ov));
  if (ov.scale) {
    if (!d->takes_op || op != SYMCOLL_SUM)
      SYMCOLL_REFUSE("%s: a scale (options) multiplies inputs before a sum: op %s%s", name,
                     d->takes_op ? symcoll_op_name(op) : "none",
                     d->takes_op ? "" : " (the collective does not reduce)");
    if (ov.scale_on_device && comm->device == SYMCOLL_DEVICE_HOST)
      SYMCOLL_REFUSE("%s: scale_on_device on a CPU communicator", name);
    if (!comm->tp->scale || !comm->tp->scratch_alloc) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: the %s transport cannot scale inputs", name, comm->tp->name);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
  }
  if (count == 0) return SYMCOLL_OK;
  const size_t es = symcoll__esize(dtype);
  const size_t mult = d->moves_all ? (size_t)n : 1;
  if (count > SIZE_MAX / es / mult / 2)
    SYMCOLL_REFUSE("%s: count %zu of %zu-byte elements (x %zu ranks) is too large", name, count, es, mult);
  /* A rooted collective's root-only buffer is not looked at elsewhere (NULL there is fine). */
  const bool uses_send = d->root != SYMCOLL__ROOT_SENDS || me == root;
  const bool uses_recv = d->root != SYMCOLL__ROOT_RECEIVES || me == root;
  if (!uses_send) send = NULL;
  if (!uses_recv) recv = NULL;
  if (uses_send && !send) SYMCOLL_REFUSE("%s: send is NULL%s", name, d->root ? " on the root" : "");
  if (uses_recv && !recv) SYMCOLL_REFUSE("%s: recv is NULL%s", name, d->root ? " on the root" : "");
  const size_t block = count * es; /* one rank's part */
  if (((uintptr_t)send | (uintptr_t)recv) % es != 0)
    SYMCOLL_REFUSE("%s: send %p or recv %p is not aligned to the %zu-byte %s element", name, send, recv, es,
                   symcoll_dtype_name(dtype));
  const bool in_place = uses_send && uses_recv && in_place_of(d, send, recv, block, me);
  const size_t send_bytes = block * (d->send_all ? (size_t)n : 1), recv_bytes = block * (d->recv_all ? (size_t)n : 1);
  if (uses_send && uses_recv && !in_place && symcoll__overlap(send, send_bytes, recv, recv_bytes)) {
    switch (d->in_place) {
      case SYMCOLL__IN_PLACE_SAME:
        SYMCOLL_REFUSE("%s: send and recv overlap without being equal", name);
      case SYMCOLL__IN_PLACE_SEND_IN_RECV:
        SYMCOLL_REFUSE("%s: send overlaps recv without being rank %d's block of it (recv + %zu bytes)", name, me,
                       (size_t)me * block);
      case SYMCOLL__IN_PLACE_RECV_IN_SEND:
        SYMCOLL_REFUSE("%s: recv overlaps send without being rank %d's block of it (send + %zu bytes)", name, me,
                       (size_t)me * block);
    }
  }
  if (comm->device == SYMCOLL_DEVICE_HOST && stream != NULL)
    SYMCOLL_REFUSE("%s: a CPU communicator takes no stream (got %p)", name, stream);
  if (!d->takes_op) op = SYMCOLL_SUM; /* not used: keep signatures equal */
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  if (ov.scale) return scaled_sum(comm, coll, send, recv, count, send_bytes, dtype, root, stream, opts, &ov);

  symcoll__coll_args_t a = {.coll = coll,
                            .send = send,
                            .recv = recv,
                            .count = count,
                            .dtype = dtype,
                            .op = op,
                            .root = root,
                            .stream = stream};
  const symcoll__tune_entry_t *t = symcoll__coll_entry(comm, coll, count, dtype);
  const char *why = "table";
  bool table = false; /* the algorithm is the table's pick, not asked for */
  if (opts && opts->algo != SYMCOLL_ALGO_AUTO)
    a.algo = opts->algo, why = "options";
  else if (comm->forced_algo[coll] != SYMCOLL_ALGO_AUTO)
    a.algo = comm->forced_algo[coll], why = "SYMCOLL_ALGO";
  else
    a.algo = t->algo, table = true;
  /* One rank: the result is the input. Auto copies it (in place there is nothing to do), as
   * NCCL does; a forced algorithm still runs its protocol, so that the benchmark can time it. */
  if (n == 1 && (!opts || opts->algo == SYMCOLL_ALGO_AUTO) && comm->forced_algo[coll] == SYMCOLL_ALGO_AUTO) {
    comm->coll_seq++;
    SYMCOLL_TRACE(SYMCOLL_SUBSYS_COLL, "rank 0: %s #%llu count %zu %s: one rank, %s", name,
                  (unsigned long long)comm->coll_seq, count, symcoll_dtype_name(dtype),
                  in_place ? "in place: nothing" : "a copy");
    return in_place ? SYMCOLL_OK : comm->tp->copy(comm, recv, send, block, stream);
  }
  if (symcoll_coll_algo_supported(comm, coll, a.algo) != SYMCOLL_OK) return refuse_algo(comm, coll, a.algo, why);
  a.blocks = opts && opts->blocks ? opts->blocks : t->blocks;
  a.threads = opts && opts->threads ? opts->threads : t->threads;
  a.round_bytes = ov.round ? ov.round : t->round_bytes;
  place_symmetric(comm, d, &a, in_place);
  /* A table's one-shot double-buffered copies its input into the workspace first; a symmetric
   * input of at least zc_one_shot_bytes is read in place by one-shot instead, the copy costing
   * more than the trailing barrier one-shot adds (docs/gpu-tuning-model.md). Every rank alike:
   * the placement and the size agree across ranks, or the call is a MISMATCH in any case. */
  if (table && a.algo == SYMCOLL_ALGO_ONE_SHOT_DB && a.send_mem && comm->zc_one_shot_bytes &&
      block >= comm->zc_one_shot_bytes && symcoll_coll_algo_supported(comm, coll, SYMCOLL_ALGO_ONE_SHOT) == SYMCOLL_OK)
    a.algo = SYMCOLL_ALGO_ONE_SHOT, why = "table, symmetric input";
  a.sig = call_signature(&a);
  if (comm->check_args) SYMCOLL_CHECK(check_agreement(comm, &a));
  comm->coll_seq++;
  if (a.algo != comm->last_algo[coll] || placement(&a) != comm->last_place[coll] ||
      symcoll__log_level >= SYMCOLL_LOG_TRACE)
    note_call(comm, d, &a, block * mult, in_place, why);
  symcoll__fault_point(me, "coll");
  return comm->tp->coll(comm, &a);
}

symcoll_status_t symcoll__coll_inner(symcoll_comm_t comm, symcoll__coll_args_t *a) {
  const int n = comm->nranks;
  const size_t es = symcoll__esize(a->dtype), block = a->count * es;
  if (n == 1) return a->send == a->recv ? SYMCOLL_OK : comm->tp->copy(comm, a->recv, a->send, block, a->stream);
  const symcoll__coll_desc_t *d = symcoll__coll_desc(a->coll);
  const symcoll__tune_entry_t *t = symcoll__coll_entry(comm, a->coll, a->count, a->dtype);
  a->algo = symcoll__coll_auto(comm, a->coll, a->count, a->dtype);
  if (symcoll_coll_algo_supported(comm, a->coll, a->algo) != SYMCOLL_OK) a->algo = d->fallback;
  a->blocks = t->blocks, a->threads = t->threads, a->round_bytes = t->round_bytes;
  place_symmetric(comm, d, a, in_place_of(d, a->send, a->recv, block, comm->rank));
  /* The outer call's identity and this step's: ranks in other calls never pair up with it. */
  uint32_t s = a->sig ^ call_signature(a);
  a->sig = s ? s : 1;
  return comm->tp->coll(comm, a);
}

/* ---- public entry points ----------------------------------------------------------------------- */

symcoll_status_t symcoll_all_reduce_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                       symcoll_dtype_t dtype, symcoll_op_t op, void *stream,
                                       const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_ALL_REDUCE, send, recv, count, dtype, op, 0, stream, opts);
}
symcoll_status_t symcoll_all_reduce(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                    symcoll_dtype_t dtype, symcoll_op_t op, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_ALL_REDUCE, send, recv, count, dtype, op, 0, stream, NULL);
}
symcoll_status_t symcoll_all_gather_ex(symcoll_comm_t comm, const void *send, void *recv, size_t sendcount,
                                       symcoll_dtype_t dtype, void *stream, const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_ALL_GATHER, send, recv, sendcount, dtype, SYMCOLL_SUM, 0, stream, opts);
}
symcoll_status_t symcoll_all_gather(symcoll_comm_t comm, const void *send, void *recv, size_t sendcount,
                                    symcoll_dtype_t dtype, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_ALL_GATHER, send, recv, sendcount, dtype, SYMCOLL_SUM, 0, stream, NULL);
}
symcoll_status_t symcoll_reduce_scatter_ex(symcoll_comm_t comm, const void *send, void *recv, size_t recvcount,
                                           symcoll_dtype_t dtype, symcoll_op_t op, void *stream,
                                           const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_REDUCE_SCATTER, send, recv, recvcount, dtype, op, 0, stream, opts);
}
symcoll_status_t symcoll_reduce_scatter(symcoll_comm_t comm, const void *send, void *recv, size_t recvcount,
                                        symcoll_dtype_t dtype, symcoll_op_t op, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_REDUCE_SCATTER, send, recv, recvcount, dtype, op, 0, stream, NULL);
}

symcoll_status_t symcoll_broadcast_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                      symcoll_dtype_t dtype, int root, void *stream, const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_BROADCAST, send, recv, count, dtype, SYMCOLL_SUM, root, stream, opts);
}
symcoll_status_t symcoll_broadcast(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                   symcoll_dtype_t dtype, int root, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_BROADCAST, send, recv, count, dtype, SYMCOLL_SUM, root, stream, NULL);
}
symcoll_status_t symcoll_reduce_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                   symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream,
                                   const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_REDUCE, send, recv, count, dtype, op, root, stream, opts);
}
symcoll_status_t symcoll_reduce(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dtype,
                                symcoll_op_t op, int root, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_REDUCE, send, recv, count, dtype, op, root, stream, NULL);
}
symcoll_status_t symcoll_all_to_all_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                       symcoll_dtype_t dtype, void *stream, const symcoll_coll_opts_t *opts) {
  return run_coll(comm, SYMCOLL_COLL_ALL_TO_ALL, send, recv, count, dtype, SYMCOLL_SUM, 0, stream, opts);
}
symcoll_status_t symcoll_all_to_all(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                    symcoll_dtype_t dtype, void *stream) {
  return run_coll(comm, SYMCOLL_COLL_ALL_TO_ALL, send, recv, count, dtype, SYMCOLL_SUM, 0, stream, NULL);
}

symcoll_status_t symcoll_coll_algo_supported(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo) {
  if (!comm || (unsigned)coll >= SYMCOLL_NUM_COLL_KINDS || (unsigned)algo >= SYMCOLL_NUM_ALGOS)
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (algo == SYMCOLL_ALGO_AUTO) return SYMCOLL_OK;
  if (!symcoll__algo_of(coll, algo)) return SYMCOLL_ERR_UNSUPPORTED;
  const symcoll__coll_desc_t *d = symcoll__coll_desc(coll);
  /* The GEMM operations run every algorithm wherever the transport has a GEMM library. */
  if (d->gemm) return comm->tp->gemm && comm->tp->has_gemm(comm) ? SYMCOLL_OK : SYMCOLL_ERR_UNSUPPORTED;
  /* The fused norms: SEQUENTIAL is a plain all_reduce (reduce_scatter) and the local pass,
   * whatever spans. */
  if (d->fused && algo == SYMCOLL_ALGO_SEQUENTIAL) return SYMCOLL_OK;
  /* Communicators spanning nodes run only their own two; others never run those. */
  const bool across = algo == SYMCOLL_ALGO_HIERARCHICAL || algo == SYMCOLL_ALGO_ENGINE;
  if (across != (comm->hier != NULL)) return SYMCOLL_ERR_UNSUPPORTED;
  return comm->tp->has_algo(comm, coll, algo) ? SYMCOLL_OK : SYMCOLL_ERR_UNSUPPORTED;
}

symcoll_status_t symcoll_algo_supported(symcoll_comm_t comm, symcoll_algo_t algo) {
  return symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_REDUCE, algo);
}

symcoll_status_t symcoll_coll_algo(symcoll_comm_t comm, symcoll_coll_t coll, size_t count, symcoll_dtype_t dtype,
                                   symcoll_algo_t *algo_p) {
  if (!comm || !algo_p || (unsigned)coll >= SYMCOLL_NUM_COLL_KINDS || (unsigned)dtype >= SYMCOLL_NUM_DTYPES)
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  const size_t es = symcoll__esize(dtype);
  if (count > SIZE_MAX / es / (size_t)comm->nranks) return SYMCOLL_ERR_INVALID_ARGUMENT;
  *algo_p = symcoll__coll_auto(comm, coll, count, dtype);
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_all_reduce_algo(symcoll_comm_t comm, size_t count, symcoll_dtype_t dtype,
                                         symcoll_algo_t *algo_p) {
  return symcoll_coll_algo(comm, SYMCOLL_COLL_ALL_REDUCE, count, dtype, algo_p);
}
