/* symcoll_all_reduce_rmsnorm and symcoll_reduce_scatter_rmsnorm (symcoll.h): argument checks,
 * the algorithm, the call's signature; SEQUENTIAL (the all-reduce or reduce-scatter, then the
 * transport's local pass) and the one-rank case run here, the fused algorithms in the
 * transport's norm entry. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

void symcoll_norm_opts_init(symcoll_norm_opts_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* Which buffers a call has, as one number: ranks that differ in it compute different things
 * (two-shot: one rank's rows for all), so it is part of the signature. fp8_scale_out is not:
 * each rank writes its own from its own scale. */
static size_t buffer_set(const symcoll__norm_args_t *a) {
  return (a->residual ? 1u : 0u) | (a->residual_out ? 2u : 0u) | (a->out ? 4u : 0u) | (a->fp8_out ? 8u : 0u) |
         (a->fp8_scale ? 16u : 0u) | (a->fp8_row_scales ? 32u : 0u);
}

/* The call's signature: its shape, dtype, algorithm, buffer set and eps, and from_table: a
 * transport may decline a table's choice that it runs when asked for, so ranks that differ
 * there (one asked, one from the table) could part ways: they MISMATCH instead. */
static uint32_t signature(const symcoll__norm_args_t *a) {
  uint32_t eps_bits;
  memcpy(&eps_bits, &a->eps, sizeof eps_bits);
  const size_t extra = buffer_set(a) | (size_t)eps_bits << 8 | (size_t)a->from_table << 40;
  return symcoll__call_signature(a->coll, a->rows, a->hidden, extra, a->dtype, SYMCOLL_SUM, a->algo);
}

/* INFO names each change of algorithm; TRACE every call. */
static void note_call(symcoll_comm_t comm, const symcoll__norm_args_t *a, const char *why) {
  const symcoll_coll_t coll = a->coll;
  if (a->algo != comm->last_algo[coll]) {
    comm->last_algo[coll] = a->algo;
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d: %s %zu x %zu (%s) runs %s (from the %s)%s", comm->rank,
                 symcoll_coll_name(coll), a->rows, a->hidden, symcoll_dtype_name(a->dtype), symcoll_algo_name(a->algo),
                 why, a->x_mem ? ", input symmetric" : "");
  }
  SYMCOLL_TRACE(
      SYMCOLL_SUBSYS_COLL, "rank %d: %s #%llu %zu x %zu %s: %s (%s)%s%s%s%s", comm->rank, symcoll_coll_name(coll),
      (unsigned long long)comm->coll_seq, a->rows, a->hidden, symcoll_dtype_name(a->dtype), symcoll_algo_name(a->algo),
      why, a->residual ? ", residual" : "", a->residual_out ? ", residual out" : "",
      a->fp8_out ? (a->fp8_scale ? ", fp8 static" : ", fp8 per row") : "", a->x_mem ? ", input symmetric" : "");
}

/* reduce_scatter_rmsnorm's x holds every rank's rows; all_reduce_rmsnorm's this call's rows. */
static size_t x_rows(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  return a->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM ? a->rows * (size_t)comm->nranks : a->rows;
}

/* Where out lies when the call is in place: x, or this rank's block of it (reduce-scatter). */
static const void *in_place_out(symcoll_comm_t comm, const symcoll__norm_args_t *a, size_t es) {
  return a->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM
             ? (const char *)a->x + (size_t)comm->rank * a->rows * a->hidden * es
             : a->x;
}

/* The buffers of a call, for the overlap rule: out may be x (reduce_scatter_rmsnorm: this
 * rank's block of x), residual_out may be residual. */
typedef struct {
  const void *p;
  size_t bytes;
  const char *name;
} buf_t;

static symcoll_status_t check_overlaps(symcoll_comm_t comm, const symcoll__norm_args_t *a, size_t es) {
  const char *name = symcoll_coll_name(a->coll);
  const size_t all = a->rows * a->hidden;
  const buf_t b[] = {{a->x, x_rows(comm, a) * a->hidden * es, "x"},
                     {a->residual, all * es, "residual"},
                     {a->weight, a->hidden * es, "weight"},
                     {a->out, all * es, "out"},
                     {a->residual_out, all * es, "residual_out"},
                     {a->fp8_out, all, "fp8_out"},
                     {a->fp8_scale, sizeof(float), "fp8_scale"},
                     {a->fp8_row_scales, a->rows * sizeof(float), "fp8_row_scales"},
                     {a->fp8_scale_out, sizeof(float), "fp8_scale_out"}};
  const int nb = (int)(sizeof b / sizeof b[0]);
  for (int i = 0; i < nb; i++)
    for (int j = i + 1; j < nb; j++) {
      if (!b[i].p || !b[j].p || !symcoll__overlap(b[i].p, b[i].bytes, b[j].p, b[j].bytes)) continue;
      if (i == 1 && j == 4 && b[i].p == b[j].p) continue;                    /* residual_out == residual */
      if (i == 0 && j == 3 && a->out == in_place_out(comm, a, es)) continue; /* out over x */
      SYMCOLL_REFUSE("%s: %s and %s overlap (only %s and residual_out == residual are allowed)", name, b[i].name,
                     b[j].name,
                     a->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM ? "out == x + rank x rows x hidden" : "out == x");
    }
  return SYMCOLL_OK;
}

static symcoll_status_t check_args(symcoll_comm_t comm, const symcoll__norm_args_t *a, const symcoll_norm_opts_t *o) {
  const char *name = symcoll_coll_name(a->coll);
  if (a->dtype != SYMCOLL_FLOAT32 && a->dtype != SYMCOLL_FLOAT16 && a->dtype != SYMCOLL_BFLOAT16)
    SYMCOLL_REFUSE("%s: dtype %s (%d): fp32, fp16 or bf16", name, symcoll_dtype_name(a->dtype), (int)a->dtype);
  if (o && o->struct_size != sizeof *o)
    SYMCOLL_REFUSE("%s: options struct_size %zu (expected %zu; call symcoll_norm_opts_init)", name, o->struct_size,
                   sizeof *o);
  if (o && o->algo != SYMCOLL_ALGO_AUTO && !symcoll__algo_of(a->coll, o->algo)) {
    char list[128];
    SYMCOLL_REFUSE("%s: algorithm %s (%d) is not one of %s", name, symcoll_algo_name(o->algo), (int)o->algo,
                   symcoll__algo_list(a->coll, list, sizeof list));
  }
  if (!(a->eps >= 0.0f) || isinf(a->eps)) SYMCOLL_REFUSE("%s: eps %g (finite and >= 0)", name, (double)a->eps);
  if (a->fp8_out && !a->fp8_scale == !a->fp8_row_scales)
    SYMCOLL_REFUSE("%s: fp8_out takes exactly one of fp8_scale (static) and fp8_row_scales (dynamic)", name);
  if (!a->fp8_out && (a->fp8_scale || a->fp8_row_scales))
    SYMCOLL_REFUSE("%s: fp8_scale or fp8_row_scales without fp8_out", name);
  if (a->fp8_scale_out && !a->fp8_scale)
    SYMCOLL_REFUSE("%s: fp8_scale_out without fp8_scale (it copies the static scale)", name);
  if (a->rows == 0) return SYMCOLL_OK;
  if (a->hidden == 0) SYMCOLL_REFUSE("%s: hidden is 0", name);
  const size_t es = symcoll_dtype_size(a->dtype);
  if (a->hidden > SIZE_MAX / 8 / a->rows / es / (size_t)comm->nranks)
    SYMCOLL_REFUSE("%s: %zu rows x %zu is too large", name, a->rows, a->hidden);
  if (!a->x) SYMCOLL_REFUSE("%s: x is NULL", name);
  if (!a->weight) SYMCOLL_REFUSE("%s: weight is NULL", name);
  if (!a->out && !a->fp8_out) SYMCOLL_REFUSE("%s: out is NULL and no fp8_out is given", name);
  if (((uintptr_t)a->x | (uintptr_t)a->residual | (uintptr_t)a->weight | (uintptr_t)a->out |
       (uintptr_t)a->residual_out) %
      es)
    SYMCOLL_REFUSE("%s: x, residual, weight, out or residual_out is not aligned to the %zu-byte %s element", name, es,
                   symcoll_dtype_name(a->dtype));
  if (((uintptr_t)a->fp8_scale | (uintptr_t)a->fp8_row_scales | (uintptr_t)a->fp8_scale_out) % sizeof(float))
    SYMCOLL_REFUSE("%s: fp8_scale, fp8_row_scales or fp8_scale_out is not aligned to a float", name);
  SYMCOLL_CHECK(check_overlaps(comm, a, es));
  if (comm->device == SYMCOLL_DEVICE_HOST && a->stream != NULL)
    SYMCOLL_REFUSE("%s: a CPU communicator takes no stream (got %p)", name, a->stream);
  if (!comm->tp->norm) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: the %s transport has no norm pass", name, comm->tp->name);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  return SYMCOLL_OK;
}

/* SYMCOLL_CHECK=1: every rank compares the call's signature (shape, dtype, algorithm, buffer
 * set, eps) with every peer's before anything moves. Without it the kernels and epochs compare
 * it where they meet; an engine between nodes (MPI, NCCL) carries none, so across nodes a
 * disagreement beyond the all-reduce's own arguments (a residual on one rank only, another eps)
 * is caught only here. */
static symcoll_status_t check_agreement(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  const uint64_t mine[4] = {a->sig, a->rows, a->hidden, (uint64_t)a->coll};
  uint64_t all[SYMCOLL_MAX_RANKS][4];
  int r;
  SYMCOLL_CHECK(symcoll__agree(comm, mine, all, sizeof mine, &r));
  if (r < 0) return SYMCOLL_OK;
  SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
               "call %llu: rank %d is in %s %zu x %zu (signature %08x), rank %d in %s %llu x %llu (signature %08llx): "
               "nothing written",
               (unsigned long long)comm->coll_seq + 1, comm->rank, symcoll_coll_name(a->coll), a->rows, a->hidden,
               a->sig, r, symcoll_coll_name((symcoll_coll_t)all[r][3]), (unsigned long long)all[r][1],
               (unsigned long long)all[r][2], (unsigned long long)all[r][0]);
  return SYMCOLL_ERR_MISMATCH;
}

/* The add + norm pass over x as the sum, no peer involved. */
static symcoll_status_t local_pass(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  symcoll__norm_args_t l = *a;
  l.algo = SYMCOLL_ALGO_SEQUENTIAL;
  return comm->tp->norm(comm, &l);
}

/* SEQUENTIAL: symcoll's all-reduce (reduce-scatter) of x into out (scratch when only fp8 is
 * asked for), then the local pass over the sum (in place over out). */
static symcoll_status_t sequential(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  const size_t bytes = a->rows * a->hidden * symcoll_dtype_size(a->dtype);
  void *sum = a->out, *tmp = NULL;
  if (!sum) {
    if (!comm->tp->scratch_alloc) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: fp8 output alone needs scratch, which %s has not",
                   symcoll_coll_name(a->coll), comm->tp->name);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
    SYMCOLL_CHECK(comm->tp->scratch_alloc(comm, bytes, a->stream, &tmp));
    sum = tmp;
  }
  symcoll__coll_args_t c = {
      .coll = a->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM ? SYMCOLL_COLL_REDUCE_SCATTER : SYMCOLL_COLL_ALL_REDUCE,
      .send = a->x,
      .recv = sum,
      .count = a->rows * a->hidden,
      .dtype = a->dtype,
      .op = SYMCOLL_SUM,
      .stream = a->stream,
      .sig = a->sig};
  symcoll_status_t s = symcoll__coll_inner(comm, &c);
  if (s == SYMCOLL_OK) {
    symcoll__norm_args_t l = *a;
    l.x = sum, l.x_mem = NULL;
    s = local_pass(comm, &l);
  }
  if (tmp) comm->tp->scratch_free(comm, tmp, a->stream);
  return s;
}

/* Both entry points, `coll` telling which. */
static symcoll_status_t run_norm(symcoll_comm_t comm, symcoll_coll_t coll, const void *x, const void *residual,
                                 const void *weight, float eps, void *out, void *residual_out, size_t rows,
                                 size_t hidden, symcoll_dtype_t dtype, const symcoll_norm_opts_t *opts, void *stream) {
  if (!comm) SYMCOLL_REFUSE("%s: comm is NULL", symcoll_coll_name(coll));
  const bool has_opts = opts && opts->struct_size == sizeof *opts;
  symcoll__norm_args_t a = {.coll = coll,
                            .x = x,
                            .residual = residual,
                            .weight = weight,
                            .out = out,
                            .residual_out = residual_out,
                            .fp8_out = has_opts ? opts->fp8_out : NULL,
                            .fp8_scale = has_opts ? opts->fp8_scale : NULL,
                            .fp8_row_scales = has_opts ? opts->fp8_row_scales : NULL,
                            .fp8_scale_out = has_opts ? opts->fp8_scale_out : NULL,
                            .eps = eps,
                            .rows = rows,
                            .hidden = hidden,
                            .dtype = dtype,
                            .stream = stream};
  SYMCOLL_CHECK(check_args(comm, &a, opts));
  if (a.rows == 0) return SYMCOLL_OK;
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  const size_t count = a.rows * a.hidden, es = symcoll_dtype_size(a.dtype);
  const char *why = "table";
  if (has_opts && opts->algo != SYMCOLL_ALGO_AUTO)
    a.algo = opts->algo, why = "options";
  else if (comm->forced_algo[coll] != SYMCOLL_ALGO_AUTO)
    a.algo = comm->forced_algo[coll], why = "SYMCOLL_ALGO";
  else
    a.algo = symcoll__coll_auto(comm, coll, count, a.dtype);
  /* The table is by bytes; two-shot shares out whole rows, so with fewer rows than ranks some
   * ranks would have none and the rest do one-shot's work after an extra step (CPU ranks, 1 row
   * of 512-8192: one-shot 20-25% faster, bench/results/host/rmsnorm). */
  const bool asked = strcmp(why, "table") != 0;
  if (!asked && a.algo == SYMCOLL_ALGO_TWO_SHOT && a.rows < (size_t)comm->nranks)
    a.algo = SYMCOLL_ALGO_ONE_SHOT, why = "table, fewer rows than ranks";
  a.from_table = !asked;
  if (symcoll_coll_algo_supported(comm, coll, a.algo) != SYMCOLL_OK) {
    if (asked) { /* refused, as the plain collectives do */
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: %s (from the %s) is not available on this communicator",
                   symcoll_coll_name(coll), symcoll_algo_name(a.algo), why);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
    a.algo = SYMCOLL_ALGO_SEQUENTIAL; /* a table row for another machine: the chain runs anywhere */
  }
  a.sig = signature(&a);
  if (comm->check_args && comm->nranks > 1) SYMCOLL_CHECK(check_agreement(comm, &a));
  /* Zero-copy: peers read x where it lies, unless this rank writes out over what they read
   * (all_reduce_rmsnorm in place; reduce_scatter_rmsnorm's out lies in the block only this
   * rank reads). */
  if (a.out != a.x || coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM)
    a.x_mem = symcoll__mem_find(comm, a.x, x_rows(comm, &a) * a.hidden * es, &a.x_off);
  comm->coll_seq++;
  symcoll__fault_point(comm->rank, "coll");
  if (comm->nranks == 1 || a.algo == SYMCOLL_ALGO_SEQUENTIAL) {
    note_call(comm, &a, why);
    return comm->nranks == 1 ? local_pass(comm, &a) : sequential(comm, &a);
  }
  const symcoll_status_t s = comm->tp->norm(comm, &a);
  /* UNSUPPORTED from the transport: a row (and its results) larger than its workspace, or a
   * table's choice the transport declines for this shape, decided on every rank alike before
   * anything moved. A table's choice then runs the chain; an asked-for algorithm is refused.
   * The call is noted once its algorithm is settled. */
  if (s != SYMCOLL_ERR_UNSUPPORTED) {
    note_call(comm, &a, why);
    return s;
  }
  if (asked) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "%s: %s (from the %s) cannot take rows of %zu bytes on this communicator "
                 "(SYMCOLL_WORKSPACE_BYTES)",
                 symcoll_coll_name(coll), symcoll_algo_name(a.algo), why, a.hidden * es);
    return s;
  }
  a.algo = SYMCOLL_ALGO_SEQUENTIAL;
  a.sig = signature(&a);
  note_call(comm, &a, "table, the transport's chain for this shape");
  return sequential(comm, &a);
}

symcoll_status_t symcoll_all_reduce_rmsnorm(symcoll_comm_t comm, const void *x, const void *residual,
                                            const void *weight, float eps, void *out, void *residual_out, size_t rows,
                                            size_t hidden, symcoll_dtype_t dtype, const symcoll_norm_opts_t *opts,
                                            void *stream) {
  return run_norm(comm, SYMCOLL_COLL_ALL_REDUCE_RMSNORM, x, residual, weight, eps, out, residual_out, rows, hidden,
                  dtype, opts, stream);
}

symcoll_status_t symcoll_reduce_scatter_rmsnorm(symcoll_comm_t comm, const void *x, const void *residual,
                                                const void *weight, float eps, void *out, void *residual_out,
                                                size_t rows, size_t hidden, symcoll_dtype_t dtype,
                                                const symcoll_norm_opts_t *opts, void *stream) {
  return run_norm(comm, SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM, x, residual, weight, eps, out, residual_out, rows, hidden,
                  dtype, opts, stream);
}
