/* symcoll_all_reduce_rmsnorm (symcoll.h): argument checks, the algorithm, the call's
 * signature; SEQUENTIAL (the all-reduce, then the transport's local pass) and the one-rank case
 * run here, ONE_SHOT and TWO_SHOT in the transport's norm entry. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define NAME "all_reduce_rmsnorm"

void symcoll_norm_opts_init(symcoll_norm_opts_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* Which buffers a call has, as one number: ranks that differ in it compute different things
 * (two-shot: one rank's rows for all), so it is part of the signature. */
static size_t buffer_set(const symcoll__norm_args_t *a) {
  return (a->residual ? 1u : 0u) | (a->residual_out ? 2u : 0u) | (a->out ? 4u : 0u) | (a->fp8_out ? 8u : 0u) |
         (a->fp8_scale ? 16u : 0u) | (a->fp8_row_scales ? 32u : 0u);
}

/* The call's signature: its shape, dtype, algorithm, buffer set and eps. */
static uint32_t signature(const symcoll__norm_args_t *a) {
  uint32_t eps_bits;
  memcpy(&eps_bits, &a->eps, sizeof eps_bits);
  return symcoll__call_signature(SYMCOLL_COLL_ALL_REDUCE_RMSNORM, a->rows, a->hidden,
                                 buffer_set(a) | (size_t)eps_bits << 8, a->dtype, SYMCOLL_SUM, a->algo);
}

/* INFO names each change of algorithm; TRACE every call. */
static void note_call(symcoll_comm_t comm, const symcoll__norm_args_t *a, const char *why) {
  const symcoll_coll_t coll = SYMCOLL_COLL_ALL_REDUCE_RMSNORM;
  if (a->algo != comm->last_algo[coll]) {
    comm->last_algo[coll] = a->algo;
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d: " NAME " %zu x %zu (%s) runs %s (from the %s)%s", comm->rank, a->rows,
                 a->hidden, symcoll_dtype_name(a->dtype), symcoll_algo_name(a->algo), why,
                 a->x_mem ? ", input symmetric" : "");
  }
  SYMCOLL_TRACE(
      SYMCOLL_SUBSYS_COLL, "rank %d: " NAME " #%llu %zu x %zu %s: %s (%s)%s%s%s%s", comm->rank,
      (unsigned long long)comm->coll_seq, a->rows, a->hidden, symcoll_dtype_name(a->dtype), symcoll_algo_name(a->algo),
      why, a->residual ? ", residual" : "", a->residual_out ? ", residual out" : "",
      a->fp8_out ? (a->fp8_scale ? ", fp8 static" : ", fp8 per row") : "", a->x_mem ? ", input symmetric" : "");
}

/* The buffers of a call, for the overlap rule: out may be x, residual_out may be residual. */
typedef struct {
  const void *p;
  size_t bytes;
  const char *name;
} buf_t;

static symcoll_status_t check_overlaps(const symcoll__norm_args_t *a, size_t es) {
  const size_t all = a->rows * a->hidden;
  const buf_t b[] = {{a->x, all * es, "x"},
                     {a->residual, all * es, "residual"},
                     {a->weight, a->hidden * es, "weight"},
                     {a->out, all * es, "out"},
                     {a->residual_out, all * es, "residual_out"},
                     {a->fp8_out, all, "fp8_out"},
                     {a->fp8_scale, sizeof(float), "fp8_scale"},
                     {a->fp8_row_scales, a->rows * sizeof(float), "fp8_row_scales"}};
  const int nb = (int)(sizeof b / sizeof b[0]);
  for (int i = 0; i < nb; i++)
    for (int j = i + 1; j < nb; j++) {
      if (!b[i].p || !b[j].p || !symcoll__overlap(b[i].p, b[i].bytes, b[j].p, b[j].bytes)) continue;
      if (b[i].p == b[j].p && ((i == 0 && j == 3) || (i == 1 && j == 4))) continue; /* in place */
      SYMCOLL_REFUSE(NAME ": %s and %s overlap (only out == x and residual_out == residual are allowed)", b[i].name,
                     b[j].name);
    }
  return SYMCOLL_OK;
}

static symcoll_status_t check_args(symcoll_comm_t comm, const symcoll__norm_args_t *a, const symcoll_norm_opts_t *o) {
  if (a->dtype != SYMCOLL_FLOAT32 && a->dtype != SYMCOLL_FLOAT16 && a->dtype != SYMCOLL_BFLOAT16)
    SYMCOLL_REFUSE(NAME ": dtype %s (%d): fp32, fp16 or bf16", symcoll_dtype_name(a->dtype), (int)a->dtype);
  if (o && o->struct_size != sizeof *o)
    SYMCOLL_REFUSE(NAME ": options struct_size %zu (expected %zu; call symcoll_norm_opts_init)", o->struct_size,
                   sizeof *o);
  if (o && o->algo != SYMCOLL_ALGO_AUTO && !symcoll__algo_of(SYMCOLL_COLL_ALL_REDUCE_RMSNORM, o->algo)) {
    char list[128];
    SYMCOLL_REFUSE(NAME ": algorithm %s (%d) is not one of %s", symcoll_algo_name(o->algo), (int)o->algo,
                   symcoll__algo_list(SYMCOLL_COLL_ALL_REDUCE_RMSNORM, list, sizeof list));
  }
  if (!(a->eps >= 0.0f) || isinf(a->eps)) SYMCOLL_REFUSE(NAME ": eps %g (finite and >= 0)", (double)a->eps);
  if (a->fp8_out && !a->fp8_scale == !a->fp8_row_scales)
    SYMCOLL_REFUSE(NAME ": fp8_out takes exactly one of fp8_scale (static) and fp8_row_scales (dynamic)");
  if (!a->fp8_out && (a->fp8_scale || a->fp8_row_scales))
    SYMCOLL_REFUSE(NAME ": fp8_scale or fp8_row_scales without fp8_out");
  if (a->rows == 0) return SYMCOLL_OK;
  if (a->hidden == 0) SYMCOLL_REFUSE(NAME ": hidden is 0");
  const size_t es = symcoll_dtype_size(a->dtype);
  if (a->hidden > SIZE_MAX / 8 / a->rows / es) SYMCOLL_REFUSE(NAME ": %zu rows x %zu is too large", a->rows, a->hidden);
  if (!a->x) SYMCOLL_REFUSE(NAME ": x is NULL");
  if (!a->weight) SYMCOLL_REFUSE(NAME ": weight is NULL");
  if (!a->out && !a->fp8_out) SYMCOLL_REFUSE(NAME ": out is NULL and no fp8_out is given");
  if (((uintptr_t)a->x | (uintptr_t)a->residual | (uintptr_t)a->weight | (uintptr_t)a->out |
       (uintptr_t)a->residual_out) %
      es)
    SYMCOLL_REFUSE(NAME ": x, residual, weight, out or residual_out is not aligned to the %zu-byte %s element", es,
                   symcoll_dtype_name(a->dtype));
  if (((uintptr_t)a->fp8_scale | (uintptr_t)a->fp8_row_scales) % sizeof(float))
    SYMCOLL_REFUSE(NAME ": fp8_scale or fp8_row_scales is not aligned to a float");
  SYMCOLL_CHECK(check_overlaps(a, es));
  if (comm->device == SYMCOLL_DEVICE_HOST && a->stream != NULL)
    SYMCOLL_REFUSE(NAME ": a CPU communicator takes no stream (got %p)", a->stream);
  if (!comm->tp->norm) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, NAME ": the %s transport has no norm pass", comm->tp->name);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  return SYMCOLL_OK;
}

/* The add + norm pass over x as the sum, no peer involved. */
static symcoll_status_t local_pass(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  symcoll__norm_args_t l = *a;
  l.algo = SYMCOLL_ALGO_SEQUENTIAL;
  return comm->tp->norm(comm, &l);
}

/* SEQUENTIAL: symcoll's all-reduce of x into out (scratch when only fp8 is asked for), then
 * the local pass over the sum (in place over out). */
static symcoll_status_t sequential(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  const size_t bytes = a->rows * a->hidden * symcoll_dtype_size(a->dtype);
  void *sum = a->out, *tmp = NULL;
  if (!sum) {
    if (!comm->tp->scratch_alloc) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, NAME ": fp8 output alone needs scratch, which %s has not", comm->tp->name);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
    SYMCOLL_CHECK(comm->tp->scratch_alloc(comm, bytes, a->stream, &tmp));
    sum = tmp;
  }
  symcoll__coll_args_t c = {.coll = SYMCOLL_COLL_ALL_REDUCE,
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

symcoll_status_t symcoll_all_reduce_rmsnorm(symcoll_comm_t comm, const void *x, const void *residual,
                                            const void *weight, float eps, void *out, void *residual_out, size_t rows,
                                            size_t hidden, symcoll_dtype_t dtype, const symcoll_norm_opts_t *opts,
                                            void *stream) {
  if (!comm) SYMCOLL_REFUSE(NAME ": comm is NULL");
  const bool has_opts = opts && opts->struct_size == sizeof *opts;
  symcoll__norm_args_t a = {.x = x,
                            .residual = residual,
                            .weight = weight,
                            .out = out,
                            .residual_out = residual_out,
                            .fp8_out = has_opts ? opts->fp8_out : NULL,
                            .fp8_scale = has_opts ? opts->fp8_scale : NULL,
                            .fp8_row_scales = has_opts ? opts->fp8_row_scales : NULL,
                            .eps = eps,
                            .rows = rows,
                            .hidden = hidden,
                            .dtype = dtype,
                            .stream = stream};
  SYMCOLL_CHECK(check_args(comm, &a, opts));
  if (rows == 0) return SYMCOLL_OK;
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  const symcoll_coll_t coll = SYMCOLL_COLL_ALL_REDUCE_RMSNORM;
  const size_t count = rows * hidden, es = symcoll_dtype_size(dtype);
  const char *why = "table";
  if (has_opts && opts->algo != SYMCOLL_ALGO_AUTO)
    a.algo = opts->algo, why = "options";
  else if (comm->forced_algo[coll] != SYMCOLL_ALGO_AUTO)
    a.algo = comm->forced_algo[coll], why = "SYMCOLL_ALGO";
  else
    a.algo = symcoll__coll_auto(comm, coll, count, dtype);
  /* The table is by bytes; two-shot shares out whole rows, so with fewer rows than ranks some
   * ranks would have none and the rest do one-shot's work after an extra step (CPU ranks, 1 row
   * of 512-8192: one-shot 20-25% faster, bench/results/host/rmsnorm). */
  const bool asked = strcmp(why, "table") != 0;
  if (!asked && a.algo == SYMCOLL_ALGO_TWO_SHOT && rows < (size_t)comm->nranks)
    a.algo = SYMCOLL_ALGO_ONE_SHOT, why = "table, fewer rows than ranks";
  if (symcoll_coll_algo_supported(comm, coll, a.algo) != SYMCOLL_OK) {
    if (asked) { /* refused, as the plain collectives do */
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, NAME ": %s (from the %s) is not available on this communicator",
                   symcoll_algo_name(a.algo), why);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
    a.algo = SYMCOLL_ALGO_SEQUENTIAL; /* a table row for another machine: the chain runs anywhere */
  }
  a.sig = signature(&a);
  /* Zero-copy: peers read x where it lies, unless this rank writes out over it. */
  if (out != x) a.x_mem = symcoll__mem_find(comm, x, count * es, &a.x_off);
  comm->coll_seq++;
  note_call(comm, &a, why);
  symcoll__fault_point(comm->rank, "coll");
  if (comm->nranks == 1) return local_pass(comm, &a);
  if (a.algo == SYMCOLL_ALGO_SEQUENTIAL) return sequential(comm, &a);
  const symcoll_status_t s = comm->tp->norm(comm, &a);
  /* UNSUPPORTED from the transport: a row (and its results) larger than its workspace, decided
   * on every rank alike before anything moved. A table's choice then runs the chain; an asked-for
   * algorithm is refused. */
  if (s != SYMCOLL_ERR_UNSUPPORTED) return s;
  if (asked) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 NAME
                 ": %s (from the %s) cannot take rows of %zu bytes on this communicator "
                 "(SYMCOLL_WORKSPACE_BYTES)",
                 symcoll_algo_name(a.algo), why, hidden * es);
    return s;
  }
  a.algo = SYMCOLL_ALGO_SEQUENTIAL;
  a.sig = signature(&a);
  return sequential(comm, &a);
}
