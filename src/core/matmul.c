/* The collectives fused with a GEMM (symcoll.h): argument checks, the choice between OVERLAP
 * (the transport's matmul entry) and SEQUENTIAL (run here from the transport's collective and
 * GEMM entries), and the one-rank case (a GEMM). */
#include <stdint.h>
#include <string.h>

#include "internal.h"

void symcoll_matmul_opts_init(symcoll_matmul_opts_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* a * b * c * es without overflow, or 0 (refused by the caller). */
static size_t bytes_of(size_t a, size_t b, size_t es) {
  if (b && a > SIZE_MAX / 4 / b / es) return 0;
  return a * b * es;
}

static symcoll_status_t gemm(symcoll_comm_t comm, const void *a, const void *b, void *c, size_t m, size_t n, size_t k,
                             symcoll_dtype_t dtype, void *stream) {
  const symcoll__gemm_t g = {
      .a = a, .b = b, .c = c, .m = m, .n = n, .k = k, .lda = k, .ldb = n, .ldc = n, .dtype = dtype, .stream = stream};
  return comm->tp->gemm(comm, &g);
}

/* SEQUENTIAL: the collective alone, then one GEMM (all_gather_matmul); one GEMM, then the
 * collective (matmul_reduce_scatter). Scratch lives for the call only. */
static symcoll_status_t sequential(symcoll_comm_t comm, const symcoll__matmul_args_t *m) {
  const int n = comm->nranks;
  const size_t es = symcoll_dtype_size(m->dtype), rows = m->m_shard * (size_t)n;
  void *tmp = NULL;
  symcoll_status_t s;
  symcoll__coll_args_t c = {.dtype = m->dtype, .op = SYMCOLL_SUM, .stream = m->stream, .sig = m->sig};
  if (m->coll == SYMCOLL_COLL_ALL_GATHER_MATMUL) {
    void *g = m->a_out;
    if (!g) {
      SYMCOLL_CHECK(comm->tp->scratch_alloc(comm, rows * m->k * es, m->stream, &tmp));
      g = tmp;
    }
    c.coll = SYMCOLL_COLL_ALL_GATHER, c.send = m->a, c.recv = g, c.count = m->m_shard * m->k;
    s = symcoll__coll_inner(comm, &c);
    if (s == SYMCOLL_OK) s = gemm(comm, g, m->b, m->c, rows, m->n, m->k, m->dtype, m->stream);
  } else {
    SYMCOLL_CHECK(comm->tp->scratch_alloc(comm, rows * m->n * es, m->stream, &tmp));
    s = gemm(comm, m->a, m->b, tmp, rows, m->n, m->k, m->dtype, m->stream);
    c.coll = SYMCOLL_COLL_REDUCE_SCATTER, c.send = tmp, c.recv = m->c, c.count = m->m_shard * m->n;
    if (s == SYMCOLL_OK) s = symcoll__coll_inner(comm, &c);
  }
  if (tmp) comm->tp->scratch_free(comm, tmp, m->stream);
  return s;
}

/* Long: the argument checks in the order NCCL-style refusals must come (every rank refuses the
 * same bad call before touching anything), then the choice and the dispatch. */
static symcoll_status_t run_matmul(symcoll_comm_t comm, symcoll_coll_t coll, const void *a, const void *b, void *c,
                                   size_t m, size_t n, size_t k, symcoll_dtype_t dtype,
                                   const symcoll_matmul_opts_t *opts, void *stream) {
  const char *name = symcoll_coll_name(coll);
  if (!comm) SYMCOLL_REFUSE("%s: comm is NULL", name);
  if (dtype != SYMCOLL_FLOAT32 && dtype != SYMCOLL_FLOAT16 && dtype != SYMCOLL_BFLOAT16)
    SYMCOLL_REFUSE("%s: dtype %s (%d): the GEMM takes fp32, fp16 or bf16", name, symcoll_dtype_name(dtype), (int)dtype);
  if (opts && opts->struct_size != sizeof *opts)
    SYMCOLL_REFUSE("%s: options struct_size %zu (expected %zu; call symcoll_matmul_opts_init)", name, opts->struct_size,
                   sizeof *opts);
  const symcoll_algo_t forced = opts ? opts->algo : SYMCOLL_ALGO_AUTO;
  if (forced != SYMCOLL_ALGO_AUTO && !symcoll__algo_of(coll, forced))
    SYMCOLL_REFUSE("%s: algorithm %s (%d) is not overlap or sequential", name, symcoll_algo_name(forced), (int)forced);
  void *a_out = opts ? opts->a_out : NULL;
  if (a_out && coll != SYMCOLL_COLL_ALL_GATHER_MATMUL) SYMCOLL_REFUSE("%s: options a_out must be NULL", name);
  const int nr = comm->nranks, me = comm->rank;
  if (coll == SYMCOLL_COLL_MATMUL_REDUCE_SCATTER && m % (size_t)nr != 0)
    SYMCOLL_REFUSE("%s: m = %zu is not a multiple of the %d ranks", name, m, nr);
  if (m == 0 || n == 0) return SYMCOLL_OK;
  if (k == 0) SYMCOLL_REFUSE("%s: k is 0", name);
  const size_t es = symcoll_dtype_size(dtype);
  const size_t m_shard = coll == SYMCOLL_COLL_ALL_GATHER_MATMUL ? m : m / (size_t)nr, rows = m_shard * (size_t)nr;
  const size_t a_bytes = bytes_of(coll == SYMCOLL_COLL_ALL_GATHER_MATMUL ? m_shard : rows, k, es),
               b_bytes = bytes_of(k, n, es), c_bytes = bytes_of(rows, n, es), g_bytes = bytes_of(rows, k, es);
  if (!a_bytes || !b_bytes || !c_bytes || !g_bytes) SYMCOLL_REFUSE("%s: %zu x %zu x %zu is too large", name, m, n, k);
  if (!a) SYMCOLL_REFUSE("%s: a is NULL", name);
  if (!b) SYMCOLL_REFUSE("%s: b is NULL", name);
  if (!c) SYMCOLL_REFUSE("%s: c is NULL", name);
  if (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)a_out) % es)
    SYMCOLL_REFUSE("%s: a %p, b %p, c %p or a_out %p is not aligned to the %zu-byte %s element", name, a, b, c, a_out,
                   es, symcoll_dtype_name(dtype));
  const size_t my_c = coll == SYMCOLL_COLL_ALL_GATHER_MATMUL ? c_bytes : c_bytes / (size_t)nr;
  if (symcoll__overlap(c, my_c, a, a_bytes) || symcoll__overlap(c, my_c, b, b_bytes))
    SYMCOLL_REFUSE("%s: c overlaps a or b", name);
  if (a_out) {
    if (symcoll__overlap(a_out, g_bytes, c, my_c) || symcoll__overlap(a_out, g_bytes, b, b_bytes))
      SYMCOLL_REFUSE("%s: a_out overlaps c or b", name);
    if (symcoll__overlap(a_out, g_bytes, a, a_bytes) && (const char *)a != (const char *)a_out + (size_t)me * a_bytes)
      SYMCOLL_REFUSE("%s: a_shard overlaps a_out without being rank %d's block of it (a_out + %zu bytes)", name, me,
                     (size_t)me * a_bytes);
  }
  if (comm->device == SYMCOLL_DEVICE_HOST && stream != NULL)
    SYMCOLL_REFUSE("%s: a CPU communicator takes no stream (got %p)", name, stream);
  if (symcoll_coll_algo_supported(comm, coll, SYMCOLL_ALGO_SEQUENTIAL) != SYMCOLL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: no GEMM library on this %s communicator (%s)", name, comm->tp->name,
                 comm->device == SYMCOLL_DEVICE_HOST ? "CBLAS: libopenblas.so.0, libcblas.so.3 or SYMCOLL_BLAS_LIB"
                                                     : "libcublasLt.so or SYMCOLL_CUBLASLT_LIB");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  SYMCOLL_CHECK(symcoll__comm_status(comm));

  symcoll__matmul_args_t x = {.coll = coll,
                              .a = a,
                              .b = b,
                              .c = c,
                              .a_out = a_out,
                              .m_shard = m_shard,
                              .n = n,
                              .k = k,
                              .dtype = dtype,
                              .stream = stream};
  /* The table's shape class: the bytes the collective moves (the gathered A; the product). */
  const size_t count = m_shard * (coll == SYMCOLL_COLL_ALL_GATHER_MATMUL ? k : n);
  const char *why = "table";
  if (forced != SYMCOLL_ALGO_AUTO)
    x.algo = forced, why = "options";
  else
    x.algo = symcoll__coll_auto(comm, coll, count, dtype),
    why = comm->forced_algo[coll] != SYMCOLL_ALGO_AUTO ? "SYMCOLL_ALGO" : "table";
  if (x.algo == SYMCOLL_ALGO_OVERLAP && !comm->tp->matmul) x.algo = SYMCOLL_ALGO_SEQUENTIAL;
  x.sig = symcoll__call_signature(coll, m_shard, n, k, dtype, SYMCOLL_SUM, x.algo);
  if (coll == SYMCOLL_COLL_ALL_GATHER_MATMUL) x.a_mem = symcoll__mem_find(comm, a, a_bytes, &x.a_off);
  comm->coll_seq++;
  if (x.algo != comm->last_algo[coll]) {
    comm->last_algo[coll] = x.algo;
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d: %s %zu x %zu x %zu (%s) runs %s (from the %s)", me, name, rows, n, k,
                 symcoll_dtype_name(dtype), symcoll_algo_name(x.algo), why);
  }
  SYMCOLL_TRACE(SYMCOLL_SUBSYS_COLL, "rank %d: %s #%llu m_shard %zu n %zu k %zu %s: %s (%s)%s%s", me, name,
                (unsigned long long)comm->coll_seq, m_shard, n, k, symcoll_dtype_name(dtype), symcoll_algo_name(x.algo),
                why, x.a_mem ? ", shard symmetric" : "", a_out ? ", gathered A out" : "");
  symcoll__fault_point(me, "coll");
  if (nr == 1) { /* nothing moves: a GEMM (and the copy into a_out) */
    if (a_out && a_out != a) SYMCOLL_CHECK(comm->tp->copy(comm, a_out, a, a_bytes, stream));
    return gemm(comm, a, b, c, rows, n, k, dtype, stream);
  }
  symcoll_status_t s = x.algo == SYMCOLL_ALGO_OVERLAP ? comm->tp->matmul(comm, &x) : sequential(comm, &x);
  return s;
}

symcoll_status_t symcoll_all_gather_matmul(symcoll_comm_t comm, const void *a_shard, const void *b, void *c,
                                           size_t m_shard, size_t n, size_t k, symcoll_dtype_t dtype,
                                           const symcoll_matmul_opts_t *opts, void *stream) {
  return run_matmul(comm, SYMCOLL_COLL_ALL_GATHER_MATMUL, a_shard, b, c, m_shard, n, k, dtype, opts, stream);
}

symcoll_status_t symcoll_matmul_reduce_scatter(symcoll_comm_t comm, const void *a, const void *b, void *c_shard,
                                               size_t m, size_t n, size_t k, symcoll_dtype_t dtype,
                                               const symcoll_matmul_opts_t *opts, void *stream) {
  return run_matmul(comm, SYMCOLL_COLL_MATMUL_REDUCE_SCATTER, a, b, c_shard, m, n, k, dtype, opts, stream);
}
