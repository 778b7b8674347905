/* All-reduce + residual add + RMSNorm on CPU ranks (symcoll.h): the local pass over a sum,
 * one-shot (every rank reduces every row, then normalises it) and two-shot (each rank reduces
 * and normalises its share of the rows into its workspace, then every rank copies the others'
 * results), in chunks of whole rows that fit a workspace half, one epoch per chunk; and the
 * reduce-scatter form's pull (each rank reduces and normalises its own block of rows, read from
 * every rank's x as reduce_scatter's pull reads it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"

#define FP8_MAX 448.0f

/* ---- one row ------------------------------------------------------------------------------ */

/* Element loops per dtype, branch-free inside so that the compiler vectorises them (this file
 * builds at -O3): load (dtype to fp32), add (fp32 += dtype), and round (fp32 to dtype, stored
 * where dst is given, and kept as the rounded fp32 value). */
static inline float f32_id(float v) {
  return v;
}
/* Each loop built for AVX-512, AVX2 and the baseline, the widest this CPU runs picked at load
 * time (GCC's function multi-versioning), as the reduce loops are (reduce.h). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_CLONES
#endif
/* The fused row loop's block: its steps meet each element while the block is in L1. */
#define ROW_BLK 256
#define ROW_LOOPS(SUF, T, TO_F, FROM_F)                                                                                \
  ROW_CLONES static void load_##SUF(float *d, const void *s, size_t n) {                                               \
    const T *p = s;                                                                                                    \
    for (size_t i = 0; i < n; i++) d[i] = TO_F(p[i]);                                                                  \
  }                                                                                                                    \
  ROW_CLONES static void add_##SUF(float *d, const void *s, size_t n) {                                                \
    const T *p = s;                                                                                                    \
    for (size_t i = 0; i < n; i++) d[i] += TO_F(p[i]);                                                                 \
  }                                                                                                                    \
  ROW_CLONES static void round_##SUF(float *v, void *dst, size_t n) {                                                  \
    T *q = dst;                                                                                                        \
    if (q)                                                                                                             \
      for (size_t i = 0; i < n; i++) {                                                                                 \
        const T h = FROM_F(v[i]);                                                                                      \
        q[i] = h, v[i] = TO_F(h);                                                                                      \
      }                                                                                                                \
    else                                                                                                               \
      for (size_t i = 0; i < n; i++) v[i] = TO_F(FROM_F(v[i]));                                                        \
  }                                                                                                                    \
  ROW_CLONES static void sum_##SUF(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h) { \
    for (size_t b = 0; b < h; b += ROW_BLK) {                                                                          \
      const size_t m = h - b < ROW_BLK ? h - b : ROW_BLK;                                                              \
      float *acc = r + b;                                                                                              \
      const T *p0 = (const T *)s[0] + b, *q = res ? (const T *)res + b : NULL;                                         \
      T *o = res_out ? (T *)res_out + b : NULL;                                                                        \
      for (size_t i = 0; i < m; i++) acc[i] = TO_F(p0[i]);                                                             \
      for (int k = 1; k < ns; k++) {                                                                                   \
        const T *pk = (const T *)s[k] + b;                                                                             \
        for (size_t i = 0; i < m; i++) acc[i] += TO_F(pk[i]);                                                          \
      }                                                                                                                \
      if (q)                                                                                                           \
        for (size_t i = 0; i < m; i++) acc[i] = TO_F(FROM_F(acc[i])) + TO_F(q[i]);                                     \
      if (o)                                                                                                           \
        for (size_t i = 0; i < m; i++) {                                                                               \
          const T t = FROM_F(acc[i]);                                                                                  \
          o[i] = t, acc[i] = TO_F(t);                                                                                  \
        }                                                                                                              \
      else                                                                                                             \
        for (size_t i = 0; i < m; i++) acc[i] = TO_F(FROM_F(acc[i]));                                                  \
    }                                                                                                                  \
  }                                                                                                                    \
  ROW_CLONES static void scale_round_##SUF(float *r, float inv, const float *w, void *dst, size_t n) {                 \
    T *q = dst;                                                                                                        \
    if (q)                                                                                                             \
      for (size_t i = 0; i < n; i++) {                                                                                 \
        const T h = FROM_F(r[i] * inv * w[i]);                                                                         \
        q[i] = h, r[i] = TO_F(h);                                                                                      \
      }                                                                                                                \
    else                                                                                                               \
      for (size_t i = 0; i < n; i++) r[i] = TO_F(FROM_F(r[i] * inv * w[i]));                                           \
  }
ROW_LOOPS(f32, float, f32_id, f32_id)
ROW_LOOPS(bf16, uint16_t, symcoll__bf16_to_f32, symcoll__f32_to_bf16)

/* fp16's loops convert through the reduce loops' conversions (F16C where the CPU has it; the
 * element ones above are software, 4x slower), a block at a time. No sum: fused_row sums fp16
 * rows with the reduce loops. */
static void load_f16(float *d, const void *s, size_t n) {
  symcoll__host_reduce_table()->f16_to_f32(d, s, n);
}
ROW_CLONES static void add_f16(float *d, const void *s, size_t n) {
  const symcoll__reduce_table_t *t = symcoll__host_reduce_table();
  float x[ROW_BLK];
  for (size_t b = 0; b < n; b += ROW_BLK) {
    const size_t m = n - b < ROW_BLK ? n - b : ROW_BLK;
    t->f16_to_f32(x, (const uint16_t *)s + b, m);
    for (size_t i = 0; i < m; i++) d[b + i] += x[i];
  }
}
static void round_f16(float *v, void *dst, size_t n) {
  const symcoll__reduce_table_t *t = symcoll__host_reduce_table();
  uint16_t h[ROW_BLK];
  for (size_t b = 0; b < n; b += ROW_BLK) {
    const size_t m = n - b < ROW_BLK ? n - b : ROW_BLK;
    uint16_t *q = dst ? (uint16_t *)dst + b : h;
    t->f32_to_f16(q, v + b, m);
    t->f16_to_f32(v + b, q, m);
  }
}
ROW_CLONES static void scale_round_f16(float *r, float inv, const float *w, void *dst, size_t n) {
  for (size_t i = 0; i < n; i++) r[i] = r[i] * inv * w[i];
  round_f16(r, dst, n);
}

typedef struct {
  void (*load)(float *d, const void *s, size_t n);
  void (*add)(float *d, const void *s, size_t n);
  void (*round)(float *v, void *dst, size_t n);
  /* r = the sum of ns rows in fp32, rank order, rounded to the dtype (the all-reduce's
   * result), + res (if given) rounded, stored to res_out (if given): one pass, in blocks */
  void (*sum)(float *r, const void *const *s, int ns, const void *res, void *res_out, size_t h);
  /* r = r * inv * w rounded to the dtype, stored to dst (if given) */
  void (*scale_round)(float *r, float inv, const float *w, void *dst, size_t n);
} row_loops_t;

static row_loops_t loops_of(symcoll_dtype_t dt) {
  if (dt == SYMCOLL_BFLOAT16) return (row_loops_t){load_bf16, add_bf16, round_bf16, sum_bf16, scale_round_bf16};
  if (dt == SYMCOLL_FLOAT16) return (row_loops_t){load_f16, add_f16, round_f16, NULL, scale_round_f16};
  return (row_loops_t){load_f32, add_f32, round_f32, sum_f32, scale_round_f32};
}

static void load_row(float *dst, const void *src, size_t n, symcoll_dtype_t dt) {
  loops_of(dt).load(dst, src, n);
}

/* The row's sum of squares: eight lanes, each in index order, then summed in a fixed tree (the
 * same bits whatever the vector width). */
ROW_CLONES static float sum_squares(const float *r, size_t h) {
  typedef float v8f __attribute__((vector_size(32)));
  v8f acc = {0};
  const size_t whole = h & ~(size_t)7;
  for (size_t i = 0; i < whole; i += 8) {
    v8f v;
    memcpy(&v, r + i, sizeof v);
    acc += v * v;
  }
  float lane[8];
  memcpy(lane, &acc, sizeof lane);
  for (size_t l = 0; whole + l < h; l++) lane[l] += r[whole + l] * r[whole + l];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* The row's largest magnitude (NaNs skipped, as fmaxf does; max is exact in any order, so the
 * vectorised loop gives the same value). */
ROW_CLONES static float abs_max(const float *r, size_t h) {
  float m = 0.0f;
  for (size_t i = 0; i < h; i++) {
    const float a = fabsf(r[i]);
    m = a > m ? a : m;
  }
  return m;
}

ROW_CLONES static void to_e4m3(uint8_t *q, const float *r, float scale, size_t h) {
  for (size_t i = 0; i < h; i++) q[i] = symcoll__f32_to_fp8(r[i] / scale, 0);
}

/* Where one row's results go. */
typedef struct {
  void *res_out, *out;
  uint8_t *fp8;
  float *scale_out;
} row_dst_t;

/* From r32 = r (rounded, as the next layer reads it): the norm, out and the fp8 output. */
static void norm_tail(const symcoll__norm_args_t *a, const row_loops_t *L, const float *w32, float *r32, row_dst_t d) {
  const size_t h = a->hidden;
  const float inv = 1.0f / sqrtf(sum_squares(r32, h) / (float)h + a->eps);
  L->scale_round(r32, inv, w32, d.out, h); /* r32 now holds out as rounded */
  if (!d.fp8) return;
  const float scale = d.scale_out ? fmaxf(abs_max(r32, h) / FP8_MAX, 1.0f / (FP8_MAX * 512.0f)) : *a->fp8_scale;
  if (d.scale_out) *d.scale_out = scale;
  to_e4m3(d.fp8, r32, scale, h);
}

/* SEQUENTIAL's row. s: the row's sum over ranks (dtype); res: the residual row or NULL; w32:
 * the weight as floats; r32: hidden floats of scratch. */
static void norm_row(const symcoll__norm_args_t *a, const void *s, const void *res, const float *w32, float *r32,
                     row_dst_t d) {
  const size_t h = a->hidden;
  const row_loops_t L = loops_of(a->dtype);
  L.load(r32, s, h);
  if (res) {
    L.add(r32, res, h);
    L.round(r32, d.res_out, h); /* r rounded, as the next layer reads it */
  } else if (d.res_out) {
    memcpy(d.res_out, s, h * symcoll_dtype_size(a->dtype));
  }
  norm_tail(a, &L, w32, r32, d);
}

/* The fused row: srcs are the ranks' rows in rank order; the sum, the add and the roundings
 * in one pass, the same bits as the all-reduce followed by norm_row. fp16 rows are summed by
 * the all-reduce's own loops instead (F16C where the CPU has it), into r32's second half, then
 * norm_row: one pass with software conversions cost more (1 row of 4096 at 2 ranks: 29.9 us
 * fused against 21.2 for the chain). */
static void fused_row(const symcoll__norm_args_t *a, const void *const *srcs, int n, const void *res, const float *w32,
                      float *r32, row_dst_t d) {
  if (a->dtype == SYMCOLL_FLOAT16) {
    void *sum = r32 + a->hidden;
    symcoll__host_reduce_fn(a->dtype, SYMCOLL_SUM)(sum, srcs, n, a->hidden);
    norm_row(a, sum, res, w32, r32, d);
    return;
  }
  const row_loops_t L = loops_of(a->dtype);
  L.sum(r32, srcs, n, res, d.res_out, a->hidden);
  norm_tail(a, &L, w32, r32, d);
}

/* The call's scratch: the weight as floats, then a row as floats and room for another. */
static symcoll_status_t scratch(host_state_t *hs, const symcoll__norm_args_t *a, float **w32, float **r32) {
  const size_t h = a->hidden, need = 3 * h;
  if (hs->norm_elems < need) {
    float *p = realloc(hs->norm_f32, need * sizeof(float));
    if (!p) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce_rmsnorm: %zu bytes of scratch: out of memory", need * sizeof *p);
      return SYMCOLL_ERR_NO_MEMORY;
    }
    hs->norm_f32 = p, hs->norm_elems = need;
  }
  *w32 = hs->norm_f32, *r32 = *w32 + h;
  load_row(*w32, a->weight, h, a->dtype);
  return SYMCOLL_OK;
}

static row_dst_t dst_of(const symcoll__norm_args_t *a, size_t row) {
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  return (row_dst_t){.res_out = a->residual_out ? (char *)a->residual_out + row * rb : NULL,
                     .out = a->out ? (char *)a->out + row * rb : NULL,
                     .fp8 = a->fp8_out ? (uint8_t *)a->fp8_out + row * h : NULL,
                     .scale_out = a->fp8_row_scales ? a->fp8_row_scales + row : NULL};
}

static const void *residual_row(const symcoll__norm_args_t *a, size_t row) {
  return a->residual ? (const char *)a->residual + row * a->hidden * symcoll_dtype_size(a->dtype) : NULL;
}

/* SEQUENTIAL: x holds the sum. */
static symcoll_status_t local_pass(host_state_t *hs, const symcoll__norm_args_t *a) {
  float *w32, *r32;
  SYMCOLL_CHECK(scratch(hs, a, &w32, &r32));
  const size_t rb = a->hidden * symcoll_dtype_size(a->dtype);
  for (size_t row = 0; row < a->rows; row++)
    norm_row(a, (const char *)a->x + row * rb, residual_row(a, row), w32, r32, dst_of(a, row));
  return SYMCOLL_OK;
}

/* ---- across ranks ------------------------------------------------------------------------- */

/* The epoch record of the call (host_internal.h): peers compare sig at the first wait. */
static symcoll__coll_args_t call_record(const symcoll__norm_args_t *a) {
  return (symcoll__coll_args_t){
      .coll = a->coll, .count = a->rows, .dtype = a->dtype, .op = SYMCOLL_SUM, .algo = a->algo, .sig = a->sig};
}

static symcoll_status_t one_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
  const int me = comm->rank, n = comm->nranks;
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  const size_t per_chunk = hs->half / rb, per_sub = hs->sub_bytes / rb ? hs->sub_bytes / rb : 1;
  float *w32, *r32;
  SYMCOLL_CHECK(scratch(hs, a, &w32, &r32));
  const symcoll__coll_args_t rec = call_record(a);
  const char *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t lo = 0; lo < a->rows; lo += per_chunk) {
    const size_t rows = host_min(a->rows - lo, per_chunk);
    const char *x = (const char *)a->x + lo * rb;
    const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, &rec, lo == 0, a->x_mem, a->x_off + lo * rb);
    char *mine = hs->data[me] + ep.half_off;
    for (size_t k = 0, r0 = 0; r0 < rows; k++, r0 += per_sub) {
      const size_t cnt = host_min(rows - r0, per_sub);
      if (!a->x_mem) memcpy(mine + r0 * rb, x + r0 * rb, cnt * rb);
      symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
      SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
      if (k == 0) {
        for (int p = 0; p < n; p++)
          if (p != me && !(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, rows * rb)))
            return SYMCOLL_ERR_MISMATCH;
        base[me] = x;
      }
      for (size_t r = r0; r < r0 + cnt; r++) {
        for (int p = 0; p < n; p++) srcs[p] = base[p] + r * rb;
        fused_row(a, srcs, n, residual_row(a, lo + r), w32, r32, dst_of(a, lo + r));
      }
    }
    SYMCOLL_CHECK(symcoll__host_epoch_end(comm, hs, &ep, a->x_mem != NULL));
  }
  return SYMCOLL_OK;
}

/* Two-shot's results of one row in the owner's workspace: what the call asks for, in order. */
typedef struct {
  size_t res_out, out, fp8, scale, bytes; /* offsets; (size_t)-1: not asked for */
} record_t;

static record_t record_of(const symcoll__norm_args_t *a) {
  const size_t none = (size_t)-1, rb = a->hidden * symcoll_dtype_size(a->dtype);
  record_t r = {none, none, none, none, 0};
  if (a->residual_out) r.res_out = r.bytes, r.bytes += rb;
  if (a->out) r.out = r.bytes, r.bytes += rb;
  if (a->fp8_out) r.fp8 = r.bytes, r.bytes += a->hidden;
  r.bytes = (r.bytes + 3) & ~(size_t)3; /* the scale's alignment (odd rows of fp8 or 16-bit floats) */
  if (a->fp8_row_scales) r.scale = r.bytes, r.bytes += sizeof(float);
  r.bytes = (r.bytes + 63) & ~(size_t)63;
  return r;
}

static row_dst_t record_dst(const record_t *rc, char *at) {
  const size_t none = (size_t)-1;
  return (row_dst_t){.res_out = rc->res_out != none ? at + rc->res_out : NULL,
                     .out = rc->out != none ? at + rc->out : NULL,
                     .fp8 = rc->fp8 != none ? (uint8_t *)at + rc->fp8 : NULL,
                     .scale_out = rc->scale != none ? (float *)(void *)(at + rc->scale) : NULL};
}

/* Where the records start in a half, after `rows` staged rows of rb bytes: 64-byte aligned. */
static size_t records_at(size_t rows, size_t rb) {
  return (rows * rb + 63) & ~(size_t)63;
}

/* Rank p's share of `rows` rows: rows / n each, the first rows % n ranks one more. */
static void share(size_t rows, int n, int p, size_t *lo, size_t *cnt) {
  const size_t b = rows / (size_t)n, extra = rows % (size_t)n, up = (size_t)p;
  *lo = up * b + (up < extra ? up : extra);
  *cnt = b + (up < extra ? 1 : 0);
}

static symcoll_status_t two_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
  const int me = comm->rank, n = comm->nranks;
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  const record_t rc = record_of(a);
  /* Chunk rows R: R staged rows, then (from a 64-byte boundary) ceil(R / n) records, fit a half. */
  size_t per_chunk = hs->half / (rb + rc.bytes / (size_t)n + 1);
  while (per_chunk > 0 && records_at(per_chunk, rb) + (per_chunk + (size_t)n - 1) / (size_t)n * rc.bytes > hs->half)
    per_chunk--;
  if (per_chunk == 0) { /* the same on every rank, before anything moves: core runs SEQUENTIAL */
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL,
                 "all_reduce_rmsnorm: a row of %zu bytes and its results do not fit a %zu-byte "
                 "workspace half (SYMCOLL_WORKSPACE_BYTES)",
                 rb, hs->half);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  float *w32, *r32;
  SYMCOLL_CHECK(scratch(hs, a, &w32, &r32));
  const symcoll__coll_args_t rec = call_record(a);
  const void *srcs[SYMCOLL_MAX_RANKS];
  host_pad_t *pad = hs->pad[me];
  for (size_t lo = 0; lo < a->rows; lo += per_chunk) {
    const size_t rows = host_min(a->rows - lo, per_chunk);
    const char *x = (const char *)a->x + lo * rb;
    const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, &rec, lo == 0, NULL, 0);
    const size_t results = ep.half_off + records_at(rows, rb); /* records, after the staged rows */
    memcpy(hs->data[me] + ep.half_off, x, rows * rb);
    symcoll__host_publish(&pad->ready, (ep.e << EPOCH_SHIFT) | 1);
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
    size_t my_lo, my_n;
    share(rows, n, me, &my_lo, &my_n);
    for (size_t r = my_lo; r < my_lo + my_n; r++) {
      for (int p = 0; p < n; p++) srcs[p] = hs->data[p] + ep.half_off + r * rb;
      srcs[me] = x + r * rb;
      fused_row(a, srcs, n, residual_row(a, lo + r), w32, r32,
                record_dst(&rc, hs->data[me] + results + (r - my_lo) * rc.bytes));
    }
    symcoll__host_publish(&pad->reduced, (ep.e << EPOCH_SHIFT) | 1);
    SYMCOLL_CHECK(symcoll__host_wait_all(comm, hs, offsetof(host_pad_t, reduced), (ep.e << EPOCH_SHIFT) | 1));
    for (int q = 0; q < n; q++) {
      size_t q_lo, q_n;
      share(rows, n, q, &q_lo, &q_n);
      for (size_t r = q_lo; r < q_lo + q_n; r++) {
        const row_dst_t from = record_dst(&rc, hs->data[q] + results + (r - q_lo) * rc.bytes), to = dst_of(a, lo + r);
        if (to.res_out) memcpy(to.res_out, from.res_out, rb);
        if (to.out) memcpy(to.out, from.out, rb);
        if (to.fp8) memcpy(to.fp8, from.fp8, h);
        if (to.scale_out) *to.scale_out = *from.scale_out;
      }
    }
    SYMCOLL_CHECK(symcoll__host_epoch_end(comm, hs, &ep, false));
  }
  return SYMCOLL_OK;
}

/* reduce_scatter_rmsnorm (PULL): x holds n blocks of a->rows rows; this rank reduces block me
 * from every rank, a chunk of `per` rows of every block an epoch (a chunk of every block fills a
 * half), staged at q x per rows in the half unless x is symmetric (then peers read whole blocks
 * of a->rows rows where x lies), as reduce_scatter's pull. Peers never read block me of x, so
 * out may lie there (in place). */
static symcoll_status_t scatter_pull(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
  const int me = comm->rank, n = comm->nranks;
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  const size_t per = hs->half / rb / (size_t)n,
               per_sub = hs->sub_bytes / rb / (size_t)n ? hs->sub_bytes / rb / (size_t)n : 1;
  if (per == 0) { /* the same on every rank, before anything moves: core runs SEQUENTIAL */
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL,
                 "reduce_scatter_rmsnorm: %d rows of %zu bytes exceed the %zu-byte workspace half "
                 "(SYMCOLL_WORKSPACE_BYTES)",
                 n, rb, hs->half);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  float *w32, *r32;
  SYMCOLL_CHECK(scratch(hs, a, &w32, &r32));
  const symcoll__coll_args_t rec = call_record(a);
  const char *x = a->x, *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t lo = 0; lo < a->rows; lo += per) {
    const size_t rows = host_min(a->rows - lo, per);
    const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, &rec, lo == 0, a->x_mem, a->x_off + lo * rb);
    char *mine = hs->data[me] + ep.half_off;
    for (size_t k = 0, r0 = 0; r0 < rows; k++, r0 += per_sub) {
      const size_t cnt = host_min(rows - r0, per_sub);
      if (!a->x_mem)
        for (int q = 0; q < n; q++)
          if (q != me) memcpy(mine + ((size_t)q * per + r0) * rb, x + ((size_t)q * a->rows + lo + r0) * rb, cnt * rb);
      symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
      SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
      if (k == 0)
        for (int p = 0; p < n; p++)
          if (p != me) { /* where block me's chunk starts in p's staging (q x per) or input (q x rows) */
            const size_t stride = hs->pad[p]->src_mem[ep.e & 1] < 0 ? per : a->rows;
            if (!(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, ((size_t)(n - 1) * stride + rows) * rb)))
              return SYMCOLL_ERR_MISMATCH;
            base[p] += (size_t)me * stride * rb;
          }
      base[me] = x + ((size_t)me * a->rows + lo) * rb;
      for (size_t r = r0; r < r0 + cnt; r++) {
        for (int p = 0; p < n; p++) srcs[p] = base[p] + r * rb;
        fused_row(a, srcs, n, residual_row(a, lo + r), w32, r32, dst_of(a, lo + r));
      }
    }
    SYMCOLL_CHECK(symcoll__host_epoch_end(comm, hs, &ep, a->x_mem != NULL));
  }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__host_rmsnorm(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
  const size_t rb = a->hidden * symcoll_dtype_size(a->dtype);
  if (a->algo == SYMCOLL_ALGO_SEQUENTIAL) return local_pass(hs, a);
  if (a->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM) {
    if (a->algo != SYMCOLL_ALGO_PULL) return SYMCOLL_NO_ENTRY("the CPU transport's reduce_scatter_rmsnorm", a->coll);
    return scatter_pull(comm, hs, a);
  }
  if (a->algo == SYMCOLL_ALGO_TWO_SHOT) return two_shot(comm, hs, a);
  if (a->algo != SYMCOLL_ALGO_ONE_SHOT && a->algo != SYMCOLL_ALGO_LAMPORT) /* LAMPORT: the one-shot on CPU ranks */
    return SYMCOLL_NO_ENTRY("the CPU transport's all_reduce_rmsnorm", SYMCOLL_COLL_ALL_REDUCE_RMSNORM);
  if (rb > hs->half) { /* as two-shot's */
    SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL,
                 "all_reduce_rmsnorm: a row of %zu bytes exceeds the %zu-byte workspace half (SYMCOLL_WORKSPACE_BYTES)",
                 rb, hs->half);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  return one_shot(comm, hs, a);
}
