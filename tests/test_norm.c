/*
 * symcoll_all_reduce_rmsnorm and symcoll_reduce_scatter_rmsnorm on every rank of one launch:
 *   test_norm --backend host|cuda --mode process|thread --ranks N [--quick] [--max-hidden H]
 * fp32 / fp16 / bf16; every algorithm the communicator runs (auto, oneshot, twoshot, lamport,
 * sequential; the reduce-scatter form: auto, pull, sequential); rows from 1 to 4096 (per rank,
 * the reduce-scatter form) and hidden sizes from 64 to 16384, odd ones included;
 * residual given or not, residual_out separate, in place over residual or not asked for, out in
 * place over x, x in symmetric memory (zero-copy), FP8 outputs with a static scale (and its
 * copy, fp8_scale_out) and with per-row scales, and FP8 alone with either. Inputs are fresh
 * random values (a new seed per case, TH_SEED replays), different on every rank. References:
 * residual_out bit for bit against the chain symcoll.h defines (fp32 sum in rank order,
 * rounded; fp32 add, rounded); out against an fp64 RMSNorm of that residual within a stated
 * tolerance per dtype (the fp32 sum of squares and one rounding); FP8 bit for bit against the
 * quantisation of the out the call wrote (and its per-row scales), or, when out is not asked
 * for, dequantised against the fp64 reference. TH_SMALL=1 (the sanitizer runs) takes --quick.
 * Outputs are poisoned first and guard elements around them must stay untouched. On CPU ranks
 * also: bad arguments refused on every rank with nothing written, and ranks that disagree on
 * the call (MISMATCH on every rank, nothing written, then in step again). --contract-only: those
 * alone (across emulated nodes, where sums are per node first and so not in rank order's bits,
 * with SYMCOLL_CHECK=1, which the engines between nodes need to see a disagreement).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static th_launch_t launch = {"host", "process", 2, 0, 600};
static uint32_t base_seed;
static bool quick, contract_only;
static size_t max_hidden = 16384;

#define GUARD 16
#define MAX_ELEMS ((size_t)4096 * 64)
#define EPS 1e-6f

typedef struct {
  size_t rows, hidden;
} shape_t;
/* 5 x 6152: 16-bit rows of 769 packs, two a thread for some threads of the GPU's blocks and one
 * for others. 200 x 1304: more rows than a GPU has SMs, in lanes that fill pairs of warps (the
 * local pass's blocks of a thread per two lanes; fp32: three packs for some threads). */
static const shape_t shapes[] = {{1, 64},     {3, 100},   {8, 4096},  {5, 6152},  {33, 257},
                                 {128, 1024}, {2, 16384}, {4096, 64}, {200, 1304}};
static const symcoll_dtype_t dtypes[] = {SYMCOLL_FLOAT32, SYMCOLL_FLOAT16, SYMCOLL_BFLOAT16};
static const symcoll_algo_t algos[] = {SYMCOLL_ALGO_AUTO,    SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT,
                                       SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_PULL,     SYMCOLL_ALGO_SEQUENTIAL};
static const symcoll_coll_t colls[] = {SYMCOLL_COLL_ALL_REDUCE_RMSNORM, SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM};
enum {
  V_BASIC,           /* residual, residual_out and out, all separate */
  V_RES_IN_PLACE,    /* residual_out == residual */
  V_NO_RESIDUAL,     /* r = the sum */
  V_NO_RES_OUT,      /* residual_out not asked for */
  V_OUT_IN_PLACE,    /* out == x (the reduce-scatter form: this rank's block of x) */
  V_SYMMETRIC,       /* x in symmetric memory */
  V_FP8_STATIC,      /* out and fp8 with a static scale, fp8_out 4 bytes off an 8-byte boundary */
  V_FP8_DYNAMIC,     /* out and fp8 with per-row scales, residual_out in place, fp8_out at an odd address */
  V_FP8_ONLY,        /* fp8 with per-row scales, no out */
  V_FP8_STATIC_ONLY, /* fp8 with a static scale (and its copy), no out */
  NUM_VARIANTS
};
static const char *const variant_names[] = {
    "basic",      "residual_out in place",  "no residual", "no residual_out", "out in place", "x symmetric",
    "fp8 static", "fp8 per row + in place", "fp8 only",    "fp8 static only"};

/* A value in [-1, 1) from (seed, rank, i, stream). */
static double rnd(uint32_t seed, int rank, size_t i, int stream) {
  uint64_t z = ((uint64_t)seed << 32) ^ ((uint64_t)(rank + 1) << 48) ^ ((uint64_t)stream << 56) ^ (i + 1);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) / (double)(1ull << 52) - 1.0;
}

typedef struct {
  symcoll_comm_t comm;
  const th_buf_ops_t *ops;
  int rank, n, failures, calls, skipped;
  bool scatter;       /* the case is symcoll_reduce_scatter_rmsnorm's: x holds n blocks of rows rows */
  char *h1, *h2, *h3; /* host staging (MAX_ELEMS + guards floats each) */
  char *dx, *dres, *dw, *dout, *dro, *dq, *ds; /* device buffers */
  float *dscale;                               /* the static scale */
  char *dsym;                                  /* x in symmetric memory */
  double *r_ref, *out_ref;                     /* per case */
} ctx_t;

static size_t span_bytes(size_t elems, size_t es) {
  return (elems + 2 * GUARD) * es;
}

static void poison(ctx_t *c, char *dev, size_t bytes) {
  memset(c->h3, TH_POISON, bytes);
  c->ops->to_dev(dev, c->h3, bytes);
}

/* Elements first .. first + count - 1 of stream `which` for rank `rank`, rounded to dt, into dev
 * (and host[]). */
static void upload(ctx_t *c, char *dev, symcoll_dtype_t dt, size_t first, size_t count, int rank, int which,
                   double scale, double offset, uint32_t seed) {
  for (size_t i = 0; i < count; i++) exact_store(c->h1, dt, i, offset + scale * rnd(seed, rank, first + i, which));
  c->ops->to_dev(dev, c->h1, count * symcoll_dtype_size(dt));
}

/* The guards around `count` elements of es bytes at dev must still be poison; returns the
 * elements as host bytes in c->h3 (+ GUARD * es). */
static int fetch(ctx_t *c, const char *what, const char *name, const char *dev, size_t count, size_t es) {
  c->ops->to_host(c->h3, dev - GUARD * es, span_bytes(count, es));
  for (size_t i = 0; i < count + 2 * GUARD; i++) {
    if (i == GUARD) i += count;
    if (i >= count + 2 * GUARD) break;
    for (size_t b = 0; b < es; b++)
      if ((unsigned char)c->h3[i * es + b] != TH_POISON) {
        fprintf(stderr, "rank %d: %s: %s: guard element %zd written\n", c->rank, what, name, (ssize_t)i - GUARD);
        return 1;
      }
  }
  return 0;
}

static double tolerance(symcoll_dtype_t dt) {
  return dt == SYMCOLL_BFLOAT16 ? 1.1 / 128 : dt == SYMCOLL_FLOAT16 ? 1.1 / 1024 + 3e-5 : 3e-5;
}

/* The references: r as the library must round it, out in fp64 from r. The reduce-scatter form
 * gives this rank's block of the rows (elements first ..., of x and of the whole residual). */
static void reference(ctx_t *c, symcoll_dtype_t dt, shape_t sh, bool residual, uint32_t seed) {
  const size_t count = sh.rows * sh.hidden, first = c->scatter ? (size_t)c->rank * count : 0;
  for (size_t i = 0; i < count; i++) {
    float acc = 0;
    for (int r = 0; r < c->n; r++) {
      exact_store(c->h1, dt, 0, rnd(seed, r, first + i, 0));
      const float v = (float)exact_load(c->h1, dt, 0);
      acc = r == 0 ? v : acc + v;
    }
    exact_store(c->h1, dt, 0, acc);
    float t = (float)exact_load(c->h1, dt, 0);
    if (residual) {
      exact_store(c->h1, dt, 0, 4 * rnd(seed, 0, first + i, 1));
      t += (float)exact_load(c->h1, dt, 0);
    }
    exact_store(c->h1, dt, 0, t);
    c->r_ref[i] = exact_load(c->h1, dt, 0);
  }
  for (size_t row = 0; row < sh.rows; row++) {
    double ss = 0;
    for (size_t j = 0; j < sh.hidden; j++) ss += c->r_ref[row * sh.hidden + j] * c->r_ref[row * sh.hidden + j];
    const double inv = 1.0 / sqrt(ss / (double)sh.hidden + (double)EPS);
    for (size_t j = 0; j < sh.hidden; j++) {
      exact_store(c->h1, dt, 0, 1.0 + 0.5 * rnd(seed, 0, j, 2));
      c->out_ref[row * sh.hidden + j] = c->r_ref[row * sh.hidden + j] * inv * exact_load(c->h1, dt, 0);
    }
  }
}

static int finish(ctx_t *c, const char *what, symcoll_status_t s) {
  c->calls++;
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", c->rank, what, symcoll_status_string(s));
    return -1;
  }
  c->ops->sync();
  if (c->ops != &th_host_ops && (s = symcoll_comm_check(c->comm)) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: %s: the GPU work failed: %s\n", c->rank, what, symcoll_status_string(s));
    return -1;
  }
  return 0;
}

/* The outputs of one case against the references. */
static int check_case(ctx_t *c, const char *what, symcoll_dtype_t dt, shape_t sh, int v, const char *out_dev,
                      const char *ro_dev, const char *q_dev, const char *s_dev, bool dynamic, float static_scale) {
  const size_t count = sh.rows * sh.hidden, es = symcoll_dtype_size(dt);
  int f = 0;
  if (ro_dev) {
    f += v == V_RES_IN_PLACE || v == V_FP8_DYNAMIC ? (c->ops->to_host(c->h3 + GUARD * es, ro_dev, count * es), 0)
                                                   : fetch(c, what, "residual_out", ro_dev, count, es);
    for (size_t i = 0; i < count && !f; i++)
      if (exact_load(c->h3 + GUARD * es, dt, i) != c->r_ref[i]) {
        fprintf(stderr, "rank %d: %s: residual_out[%zu] = %.9g, want %.9g\n", c->rank, what, i,
                exact_load(c->h3 + GUARD * es, dt, i), c->r_ref[i]);
        f++;
      }
  }
  float *out_got = (float *)(void *)c->h2; /* out as written, for the fp8 checks */
  if (out_dev) {
    f += v == V_OUT_IN_PLACE ? (c->ops->to_host(c->h3 + GUARD * es, out_dev, count * es), 0)
                             : fetch(c, what, "out", out_dev, count, es);
    const double tol = tolerance(dt);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
      const double got = exact_load(c->h3 + GUARD * es, dt, i), want = c->out_ref[i];
      out_got[i] = (float)got;
      if (!(fabs(got - want) <= tol * fabs(want) + 1e-6) && bad++ == 0)
        fprintf(stderr, "rank %d: %s: out[%zu] (row %zu) = %.9g, want %.9g (tolerance %.2g relative)\n", c->rank, what,
                i, i / sh.hidden, got, want, tol);
    }
    f += bad != 0;
  }
  if (!q_dev) return f;
  f += fetch(c, what, "fp8_out", q_dev, count, 1);
  memcpy(c->h1, c->h3 + GUARD, count);
  float scales[4096]; /* the shapes tested have at most 4096 rows */
  const size_t nscales = sh.rows < 4096 ? sh.rows : 4096;
  if (dynamic) {
    f += fetch(c, what, "fp8_row_scales", s_dev, sh.rows, sizeof(float));
    memcpy(scales, c->h3 + GUARD * sizeof(float), nscales * sizeof(float));
  }
  size_t bad = 0;
  for (size_t row = 0; row < sh.rows; row++) {
    float scale = static_scale;
    if (dynamic && out_dev) {
      float amax = 0;
      for (size_t j = 0; j < sh.hidden; j++) amax = fmaxf(amax, fabsf(out_got[row * sh.hidden + j]));
      scale = fmaxf(amax / 448.0f, 1.0f / (448.0f * 512.0f));
      if (scale != scales[row] && bad++ == 0)
        fprintf(stderr, "rank %d: %s: row %zu's scale %.9g, want %.9g\n", c->rank, what, row, scales[row], scale);
    } else if (dynamic) {
      scale = scales[row];
    }
    for (size_t j = 0; j < sh.hidden; j++) {
      const size_t i = row * sh.hidden + j;
      const double deq = exact_load(c->h1, SYMCOLL_FLOAT8_E4M3, i) * scale;
      bool ok;
      if (out_dev) { /* bit for bit: the quantisation of out as written */
        exact_store(c->h3, SYMCOLL_FLOAT8_E4M3, 0, out_got[i] * (1.0f / scale));
        ok = (unsigned char)c->h3[0] == (unsigned char)c->h1[i];
      } else { /* e4m3 keeps 3 bits: half an ulp is 1/16 relative, plus out's own tolerance */
        ok = fabs(deq - c->out_ref[i]) <= (1.0 / 16 + tolerance(dt)) * fabs(c->out_ref[i]) + scale / 512;
      }
      if (!ok && bad++ == 0)
        fprintf(stderr, "rank %d: %s: fp8_out[%zu] dequantised %.9g, out %.9g\n", c->rank, what, i, deq,
                out_dev ? (double)out_got[i] : c->out_ref[i]);
    }
  }
  return f + (bad != 0);
}

static int one_case(ctx_t *c, symcoll_coll_t coll, symcoll_dtype_t dt, shape_t sh, symcoll_algo_t algo, int v,
                    uint32_t seed) {
  c->scatter = coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM;
  const size_t count = sh.rows * sh.hidden, es = symcoll_dtype_size(dt);
  const size_t blocks = c->scatter ? (size_t)c->n : 1, mine = c->scatter ? (size_t)c->rank * count : 0;
  char what[160];
  snprintf(what, sizeof what, "%s %s %zux%zu %s, %s (seed %u)", symcoll_coll_name(coll), symcoll_dtype_name(dt),
           sh.rows, sh.hidden, symcoll_algo_name(algo), variant_names[v], seed);
  const bool residual = v != V_NO_RESIDUAL, fp8 = v >= V_FP8_STATIC, dynamic = v == V_FP8_DYNAMIC || v == V_FP8_ONLY;
  char *x = v == V_SYMMETRIC ? c->dsym : c->dx + GUARD * es, *res = residual ? c->dres + GUARD * es : NULL;
  char *out = v == V_FP8_ONLY || v == V_FP8_STATIC_ONLY ? NULL
              : v == V_OUT_IN_PLACE                     ? x + mine * es
                                                        : c->dout + GUARD * es;
  char *ro = v == V_NO_RES_OUT ? NULL : v == V_RES_IN_PLACE || v == V_FP8_DYNAMIC ? res : c->dro + GUARD * es;
  /* fp8_out off the 16-byte packs' boundaries in two variants (element stores, or 4-byte ones) */
  const size_t q_off = v == V_FP8_STATIC ? 4 : v == V_FP8_DYNAMIC ? 3 : 0;
  char *q = fp8 ? c->dq + GUARD + q_off : NULL, *sc = dynamic ? c->ds + GUARD * sizeof(float) : NULL;
  poison(c, c->dout, span_bytes(count, es));
  poison(c, c->dro, span_bytes(count, es));
  poison(c, c->dq, span_bytes(count, 1) + q_off);
  poison(c, c->ds, span_bytes(sh.rows, sizeof(float)));
  upload(c, x, dt, 0, blocks * count, c->rank, 0, 1.0, 0.0, seed);
  if (res) upload(c, res, dt, mine, count, 0, 1, 4.0, 0.0, seed); /* every rank's rows of one residual, as in TP */
  upload(c, c->dw, dt, 0, sh.hidden, 0, 2, 0.5, 1.0, seed);
  const float static_scale = 0.0625f * (float)(1 + seed % 5);
  c->ops->to_dev(c->dscale, &static_scale, sizeof static_scale);
  reference(c, dt, sh, residual, seed);
  symcoll_norm_opts_t o;
  symcoll_norm_opts_init(&o);
  o.algo = algo;
  o.fp8_out = q;
  o.fp8_scale = fp8 && !dynamic ? c->dscale : NULL;
  o.fp8_row_scales = (float *)(void *)sc;
  /* the static scale's copy, where the per-row scales would go */
  o.fp8_scale_out = fp8 && !dynamic ? (float *)(void *)(c->ds + GUARD * sizeof(float)) : NULL;
  if (symcoll_comm_barrier(c->comm) != SYMCOLL_OK) return -1; /* every rank's inputs are in place */
  const symcoll_status_t s = c->scatter ? symcoll_reduce_scatter_rmsnorm(c->comm, x, res, c->dw, EPS, out, ro, sh.rows,
                                                                         sh.hidden, dt, &o, c->ops->stream())
                                        : symcoll_all_reduce_rmsnorm(c->comm, x, res, c->dw, EPS, out, ro, sh.rows,
                                                                     sh.hidden, dt, &o, c->ops->stream());
  if (finish(c, what, s) < 0) return -1;
  int f = check_case(c, what, dt, sh, v, out, ro, q, sc, dynamic, static_scale);
  if (o.fp8_scale_out) {
    float copy;
    f += fetch(c, what, "fp8_scale_out", (const char *)o.fp8_scale_out, 1, sizeof(float));
    memcpy(&copy, c->h3 + GUARD * sizeof(float), sizeof copy);
    if (copy != static_scale) {
      fprintf(stderr, "rank %d: %s: fp8_scale_out %.9g, want the scale %.9g\n", c->rank, what, copy, static_scale);
      f++;
    }
  }
  if (symcoll_comm_barrier(c->comm) != SYMCOLL_OK) return -1; /* peers are done with x */
  return f;
}

/* CPU ranks: refusals and calls out of step. Returns failures. */
static int contract_cases(ctx_t *c) {
  int f = 0;
  const symcoll_dtype_t dt = SYMCOLL_FLOAT32;
  const size_t es = 4, h = 64;
  char *x = c->dx + GUARD * es, *res = c->dres + GUARD * es, *out = c->dout + GUARD * es;
  poison(c, c->dout, span_bytes(2 * h, es));
  upload(c, x, dt, 0, 2 * h * (size_t)c->n, c->rank, 0, 1.0, 0.0, 1);
  upload(c, res, dt, 0, 2 * h, c->rank, 1, 1.0, 0.0, 1);
  upload(c, c->dw, dt, 0, h, 0, 2, 0.5, 1.0, 1);
  symcoll_norm_opts_t both, bad_size, pull, two_shot, copy_dynamic, copy_over, copy_odd, copy;
  symcoll_norm_opts_init(&pull);
  pull.algo = SYMCOLL_ALGO_PULL;
  symcoll_norm_opts_init(&two_shot);
  two_shot.algo = SYMCOLL_ALGO_TWO_SHOT;
  symcoll_norm_opts_init(&both);
  both.fp8_out = c->dq + GUARD, both.fp8_scale = c->dscale, both.fp8_row_scales = (float *)(void *)c->ds;
  symcoll_norm_opts_init(&bad_size);
  bad_size.struct_size--;
  symcoll_norm_opts_init(&copy_dynamic); /* the scale's copy asked for with per-row scales */
  copy_dynamic.fp8_out = both.fp8_out, copy_dynamic.fp8_row_scales = both.fp8_row_scales;
  copy_dynamic.fp8_scale_out = (float *)(void *)(c->ds + 4096 * sizeof(float));
  symcoll_norm_opts_init(&copy_over); /* the copy over the scale */
  copy_over.fp8_out = both.fp8_out, copy_over.fp8_scale = c->dscale, copy_over.fp8_scale_out = c->dscale;
  copy_odd = copy_over, copy_odd.fp8_scale_out = (float *)(void *)(c->ds + GUARD * sizeof(float) + 1); /* misaligned */
  copy = copy_over, copy.fp8_scale_out = (float *)(void *)(c->ds + GUARD * sizeof(float));
  poison(c, c->ds, span_bytes(1, sizeof(float)));
  symcoll_comm_t m = c->comm;
  struct {
    symcoll_status_t s;
    const char *what;
  } bad[] = {
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, SYMCOLL_INT32, NULL, NULL), "int32"},
      {symcoll_all_reduce_rmsnorm(m, x, res, NULL, EPS, out, NULL, 2, h, dt, NULL, NULL), "NULL weight"},
      {symcoll_all_reduce_rmsnorm(m, NULL, res, c->dw, EPS, out, NULL, 2, h, dt, NULL, NULL), "NULL x"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, NULL, NULL, 2, h, dt, NULL, NULL), "no output"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, 0, dt, NULL, NULL), "hidden 0"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, -1.0f, out, NULL, 2, h, dt, NULL, NULL), "eps < 0"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, NAN, out, NULL, 2, h, dt, NULL, NULL), "eps NaN"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &both, NULL), "two fp8 scales"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &copy_dynamic, NULL),
       "fp8_scale_out with per-row scales"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &copy_over, NULL),
       "fp8_scale_out over fp8_scale"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &copy_odd, NULL),
       "misaligned fp8_scale_out"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &bad_size, NULL), "struct_size"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, res, NULL, 2, h, dt, NULL, NULL), "out == residual"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, x + es, 2, h, dt, NULL, NULL), "residual_out in x"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out + 1, NULL, 2, h, dt, NULL, NULL), "misaligned out"},
      {symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &pull, NULL), "pull"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, SYMCOLL_INT8, NULL, NULL),
       "scatter int8"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, NULL, EPS, out, NULL, 2, h, dt, NULL, NULL), "scatter NULL weight"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, &two_shot, NULL), "scatter twoshot"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, x + es, NULL, 2, h, dt, NULL, NULL),
       "scatter out in x, not this rank's block"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, out, x + es, 2, h, dt, NULL, NULL),
       "scatter residual_out in x"},
      {symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, INFINITY, out, NULL, 2, h, dt, NULL, NULL), "scatter eps inf"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (bad[i].s != SYMCOLL_ERR_INVALID_ARGUMENT) {
      fprintf(stderr, "rank %d: bad argument (%s): %s\n", c->rank, bad[i].what, symcoll_status_string(bad[i].s));
      f++;
    }
  memset(c->h2, TH_POISON, 2 * h * es);
  f += fetch(c, "after refused calls", "out", out, 2 * h, es);
  if (memcmp(c->h3 + GUARD * es, c->h2, 2 * h * es) != 0) {
    fprintf(stderr, "rank %d: a refused call wrote out\n", c->rank);
    f++;
  }
  /* No rows: nothing to do, the scale's copy not written either. */
  const symcoll_status_t none = symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 0, h, dt, &copy, NULL);
  if (none != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: 0 rows: %s\n", c->rank, symcoll_status_string(none));
    f++;
  }
  f += fetch(c, "after refused calls and 0 rows", "fp8_scale_out", (const char *)copy.fp8_scale_out, 1, sizeof(float));
  if (memcmp(c->h3 + GUARD * sizeof(float), c->h2, sizeof(float)) != 0) {
    fprintf(stderr, "rank %d: a refused call or 0 rows wrote fp8_scale_out\n", c->rank);
    f++;
  }
  if (c->n < 2) return f;
  /* Ranks that disagree: rank 0 has no residual, or other rows; MISMATCH everywhere, nothing
   * written; then an agreed call works. */
  for (int k = 0; k < 3; k++) { /* the all-reduce form's residual, its rows, the reduce-scatter form's rows */
    const size_t rows = k >= 1 && c->rank == 0 ? 1 : 2;
    const symcoll_status_t s =
        k < 2 ? symcoll_all_reduce_rmsnorm(m, x, k == 0 && c->rank == 0 ? NULL : res, c->dw, EPS, out, NULL, rows, h,
                                           dt, NULL, NULL)
              : symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, out, NULL, rows, h, dt, NULL, NULL);
    if (s != SYMCOLL_ERR_MISMATCH) {
      fprintf(stderr, "rank %d: calls that differ (%s): %s\n", c->rank,
              k == 0   ? "residual"
              : k == 1 ? "rows"
                       : "reduce_scatter_rmsnorm's rows",
              symcoll_status_string(s));
      f++;
    }
  }
  f += fetch(c, "after mismatched calls", "out", out, 2 * h, es);
  if (memcmp(c->h3 + GUARD * es, c->h2, 2 * h * es) != 0) {
    fprintf(stderr, "rank %d: a mismatched call wrote out\n", c->rank);
    f++;
  }
  if (symcoll_all_reduce_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, NULL, NULL) != SYMCOLL_OK ||
      symcoll_reduce_scatter_rmsnorm(m, x, res, c->dw, EPS, out, NULL, 2, h, dt, NULL, NULL) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: the calls after mismatches failed\n", c->rank);
    f++;
  }
  return f;
}

static int run_cases(ctx_t *c) {
  int k = 0;
  for (size_t ci = 0; ci < sizeof colls / sizeof colls[0]; ci++)
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        if (shapes[si].hidden > max_hidden) continue;
        for (size_t ai = 0; ai < sizeof algos / sizeof algos[0]; ai++) {
          if (algos[ai] != SYMCOLL_ALGO_AUTO &&
              symcoll_coll_algo_supported(c->comm, colls[ci], algos[ai]) != SYMCOLL_OK) {
            c->skipped++;
            continue;
          }
          for (int v = 0; v < NUM_VARIANTS; v++, k++) {
            /* Quick: every variant on the small shapes, one in nine (a different one per
             * dtype and algorithm) elsewhere. */
            if (quick && shapes[si].rows * shapes[si].hidden > 4096 && (k % 9) != (int)(d + ai) % 9) continue;
            const uint32_t seed = base_seed + (uint32_t)k * 7919u;
            const int f = one_case(c, colls[ci], dtypes[d], shapes[si], algos[ai], v, seed);
            if (f < 0) return -1;
            c->failures += f;
            if (c->failures > 8) return 0;
          }
        }
      }
  return 0;
}

static int rank_main(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)arg;
  ctx_t c = {.comm = comm, .ops = ops, .rank = symcoll_comm_rank(comm), .n = symcoll_comm_nranks(comm)};
  /* x, its staging and its symmetric copy hold every rank's rows (the reduce-scatter form). */
  const size_t bytes = span_bytes(MAX_ELEMS, 4), x_bytes = span_bytes(MAX_ELEMS * (size_t)c.n, 4);
  c.h1 = malloc(x_bytes), c.h2 = malloc(bytes), c.h3 = malloc(bytes);
  c.r_ref = malloc(MAX_ELEMS * sizeof(double)), c.out_ref = malloc(MAX_ELEMS * sizeof(double));
  c.dx = ops->alloc(x_bytes), c.dres = ops->alloc(bytes), c.dw = ops->alloc(bytes), c.dout = ops->alloc(bytes);
  c.dro = ops->alloc(bytes), c.dq = ops->alloc(bytes), c.ds = ops->alloc(bytes);
  c.dscale = ops->alloc(sizeof(float));
  symcoll_mem_t mem = NULL;
  if (!c.h1 || !c.h2 || !c.h3 || !c.r_ref || !c.out_ref || !c.dx || !c.dres || !c.dw || !c.dout || !c.dro || !c.dq ||
      !c.ds || !c.dscale || symcoll_mem_alloc(comm, x_bytes, &mem) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: allocation failed\n", c.rank);
    return 1;
  }
  c.dsym = symcoll_mem_ptr(mem, c.rank);
  if (ops == &th_host_ops) c.failures = contract_cases(&c);
  if (c.failures == 0 && !contract_only && run_cases(&c) < 0) c.failures++;
  if (c.rank == 0)
    printf("rank 0: %d calls checked on %s, %d algorithm runs not on this communicator, %d failures\n", c.calls,
           ops->name, c.skipped, c.failures);
  symcoll_comm_barrier(comm);
  symcoll_mem_free(mem);
  ops->free(c.dx), ops->free(c.dres), ops->free(c.dw), ops->free(c.dout), ops->free(c.dro), ops->free(c.dq);
  ops->free(c.ds), ops->free(c.dscale);
  free(c.h1), free(c.h2), free(c.h3), free(c.r_ref), free(c.out_ref);
  return c.failures;
}

static void test_norm(void **state) {
  (void)state;
  assert_int_equal(th_run(&launch, rank_main, NULL), 0);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (th_launch_arg(&launch, argc, argv, &i)) continue;
    if (!strcmp(argv[i], "--quick"))
      quick = true;
    else if (!strcmp(argv[i], "--max-hidden") && i + 1 < argc)
      max_hidden = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--contract-only"))
      contract_only = true;
    else {
      fprintf(stderr,
              "usage: %s --backend host|cuda --mode process|thread --ranks N [--quick] [--max-hidden H] "
              "[--contract-only]\n",
              argv[0]);
      return 2;
    }
  }
  if (getenv("TH_SMALL")) quick = true;              /* sanitizer runs: the quick matrix */
  if (!strcmp(launch.mode, "thread")) th_cuda_env(); /* before anything starts CUDA */
  if (th_skip_without_gpu(launch.backend)) return TH_SKIP;
  th_set_mode(launch.mode);
  base_seed = th_seed();
  printf("seed %u (TH_SEED=%u replays)\n", base_seed, base_seed);
  char name[128];
  snprintf(name, sizeof name, "norm_%s_%s_%dranks", launch.backend, launch.mode, launch.nranks);
  const struct CMUnitTest tests[] = {{name, test_norm, NULL, NULL, NULL}};
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
