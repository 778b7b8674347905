/* All-reduce + residual add + RMSNorm on CPU ranks (symcoll.h): the local pass over a sum,
 * one-shot (every rank reduces every row, then normalises it) and two-shot (each rank reduces
 * and normalises its share of the rows into its workspace, then every rank copies the others'
 * results), in chunks of whole rows that fit a workspace half, one epoch per chunk; and the
 * reduce-scatter form's pull (each rank reduces and normalises its own block of rows, read from
 * every rank's x as reduce_scatter's pull reads it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "host_internal.h"

#define FP8_MAX 448.0f

/* ---- one row ------------------------------------------------------------------------------ */

/* Which of a call's results go out with non-temporal stores (below: results past the caches). */
typedef struct {
  bool res, out, fp8; /* residual_out, out, fp8_out */
} streamed_t;

/* A call's row work: the loops (the reduce loops' build in use, row_loops.h), looked up once a
 * call, the weight as floats and a row of floats of scratch; and which results the call
 * streams, through `bounce` (a block of them: STREAM_BLOCK elements of the dtype). */
typedef struct {
  const symcoll__reduce_table_t *t;
  const symcoll__row_loops_t *rows; /* the call's dtype */
  const float *w32;
  float *r32;
  size_t rb; /* bytes a row of the dtype */
  streamed_t streamed;
  char *bounce;
} row_work_t;

/* Where one row's results go. */
typedef struct {
  void *res_out, *out;
  uint8_t *fp8;
  float *scale_out;
} row_dst_t;

/* ---- results past the caches ---------------------------------------------------------------
 *
 * A call that writes more results than the core's own cache could keep beside its inputs
 * (SYMCOLL_HOST_STREAM_BYTES, by default twice the L2) writes them with non-temporal stores (x86;
 * memcpy elsewhere): the row loops run over blocks of STREAM_BLOCK elements of the row, each
 * block's results go to `bounce` (in L1) and from there to their place, so that the stores go
 * out while the next block's loads come in, with no read of the destination's lines first and
 * no eviction of inputs still to be read. The loops work element by element, so the blocks
 * give the row's bits. Results that lie over an input of the call (out over x, residual_out
 * over residual: read just before, in cache) are written as usual, so the chain's pass over
 * the all-reduce's sum in out keeps its stores there; and two-shot's records, which peers read
 * next, stay in cache. 2 ranks of a 2-vCPU Xeon: fp32 one-shot 0.66-0.78x from 128 x 4096,
 * bf16 and fp16 0.77-0.96x from 4 MiB; a whole row through the bounce, then its stores, gained
 * nothing (bench/results/host/stream). Two-shot's copies out of the records stream from twice
 * that: bf16 0.88-1.00x at 4-64 MiB of results, 1.04-1.18x at 2 MiB (2 ranks, 2-vCPU AMD EPYC). */
#define STREAM_BLOCK 1024

/* dst <- n bytes of src: 16-byte non-temporal stores (x86-64) from dst's first aligned byte,
 * the ends copied. The caller fences once after its last (stream_fence). Elsewhere memcpy. */
static void stream_copy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
  char *d = dst;
  const char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 16; n -= 16, d += 16, s += 16)
    _mm_stream_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
  memcpy(d, s, n);
#else
  memcpy(dst, src, n);
#endif
}

/* Streamed stores are in memory, in order with every store after this (a flag peers poll, the
 * caller's next use of the results on another thread). */
static void stream_fence(void) {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

/* dst <- n bytes of src: streamed (stream_copy) or plain. */
static void put(bool stream, void *dst, const void *src, size_t n) {
  if (stream)
    stream_copy(dst, src, n);
  else
    memcpy(dst, src, n);
}

/* Whether [p, p + n) and [q, q + m) share a byte. */
static bool overlap(const void *p, size_t n, const void *q, size_t m) {
  const uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
  return p && q && a < b + m && b < a + n;
}

/* r32 <- the sum of n rows (+ res), rounded; res_out <- it (rows->sum), streamed if the call
 * streams residual_out. */
static void sum_row(const row_work_t *wk, const void *const *srcs, int n, const void *res, void *res_out, size_t h) {
  if (!res_out || !wk->streamed.res) {
    wk->rows->sum(wk->r32, srcs, n, res, res_out, h);
    return;
  }
  const size_t es = wk->rb / h;
  const void *s[SYMCOLL_MAX_RANKS];
  for (size_t b = 0; b < h; b += STREAM_BLOCK) {
    const size_t m = h - b < STREAM_BLOCK ? h - b : STREAM_BLOCK;
    for (int k = 0; k < n; k++) s[k] = (const char *)srcs[k] + b * es;
    wk->rows->sum(wk->r32 + b, s, n, res ? (const char *)res + b * es : NULL, wk->bounce, m);
    stream_copy((char *)res_out + b * es, wk->bounce, m * es);
  }
}

/* r32 <- r32 x inv x w rounded; out <- it (rows->scale_round), streamed if the call streams out. */
static void scale_row(const row_work_t *wk, float inv, void *out, size_t h) {
  if (!out || !wk->streamed.out) {
    wk->rows->scale_round(wk->r32, inv, wk->w32, out, h);
    return;
  }
  const size_t es = wk->rb / h;
  for (size_t b = 0; b < h; b += STREAM_BLOCK) {
    const size_t m = h - b < STREAM_BLOCK ? h - b : STREAM_BLOCK;
    wk->rows->scale_round(wk->r32 + b, inv, wk->w32 + b, wk->bounce, m);
    stream_copy((char *)out + b * es, wk->bounce, m * es);
  }
}

/* q <- e4m3(r32 x rcp), streamed if the call streams fp8_out. */
static void fp8_row(const row_work_t *wk, float rcp, uint8_t *q, size_t h) {
  if (!wk->streamed.fp8) {
    wk->t->to_e4m3(q, wk->r32, rcp, h);
    return;
  }
  for (size_t b = 0; b < h; b += STREAM_BLOCK) {
    const size_t m = h - b < STREAM_BLOCK ? h - b : STREAM_BLOCK;
    wk->t->to_e4m3((uint8_t *)wk->bounce, wk->r32 + b, rcp, m);
    stream_copy(q + b, wk->bounce, m);
  }
}

/* From r32 = r (rounded, as the next layer reads it): the norm, out and the fp8 output. */
static void norm_tail(const symcoll__norm_args_t *a, const row_work_t *wk, row_dst_t d) {
  const size_t h = a->hidden;
  float *r32 = wk->r32;
  const float inv = 1.0f / sqrtf(wk->t->sum_squares(r32, h) / (float)h + a->eps);
  scale_row(wk, inv, d.out, h); /* r32 now holds out as rounded */
  if (!d.fp8) return;
  const float scale = d.scale_out ? fmaxf(wk->t->abs_max(r32, h) / FP8_MAX, 1.0f / (FP8_MAX * 512.0f)) : *a->fp8_scale;
  if (d.scale_out) *d.scale_out = scale;
  fp8_row(wk, 1.0f / scale, d.fp8, h); /* symcoll.h: out x (1 / scale) */
}

/* SEQUENTIAL's row. s: the row's sum over ranks (dtype); res: the residual row or NULL. */
static void norm_row(const symcoll__norm_args_t *a, const row_work_t *wk, const void *s, const void *res, row_dst_t d) {
  const size_t h = a->hidden;
  if (res) { /* r = s + res rounded, as the next layer reads it (s, already rounded, stays as it is) */
    sum_row(wk, &s, 1, res, d.res_out, h);
  } else {
    wk->rows->load(wk->r32, s, h);
    if (d.res_out) put(wk->streamed.res, d.res_out, s, wk->rb); /* its bits, NaNs' included */
  }
  norm_tail(a, wk, d);
}

/* The fused row: srcs are the ranks' rows in rank order; the sum, the add and the roundings
 * in one pass, the same bits as the all-reduce followed by norm_row. */
static void fused_row(const symcoll__norm_args_t *a, const row_work_t *wk, const void *const *srcs, int n,
                      const void *res, row_dst_t d) {
  sum_row(wk, srcs, n, res, d.res_out, a->hidden);
  norm_tail(a, wk, d);
}

/* Which of the call's results go out streamed (above) where it writes `from` bytes of results or
 * more; whether any do. x_rows as row_work's. */
static bool streams(const symcoll__norm_args_t *a, size_t x_rows, size_t from, streamed_t *st) {
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  const size_t results = a->rows * ((a->residual_out ? rb : 0) + (a->out ? rb : 0) + (a->fp8_out ? h : 0));
  const bool stream = x_rows > 0 && results >= from;
  st->res = stream && !overlap(a->residual_out, a->rows * rb, a->residual, a->rows * rb);
  st->out = stream && !overlap(a->out, a->rows * rb, a->x, x_rows * rb);
  st->fp8 = stream;
  return stream;
}

/* The call's row work: its loops, and in scratch the weight as floats, then a row as floats,
 * then the bounce block (64-byte aligned). x_rows: the rows x holds (reduce_scatter_rmsnorm's
 * pull: every rank's block); 0 where the rows' results go to records peers read next (two-shot),
 * which stay in this core's cache. */
static symcoll_status_t row_work(host_state_t *hs, const symcoll__norm_args_t *a, size_t x_rows, row_work_t *wk) {
  const size_t h = a->hidden, rb = h * symcoll_dtype_size(a->dtype);
  const bool stream = streams(a, x_rows, hs->stream_bytes, &wk->streamed);
  wk->rb = rb;
  const size_t need = 2 * h + (stream ? STREAM_BLOCK + 16 : 0); /* the bounce block, aligned */
  if (hs->norm_elems < need) {
    float *p = realloc(hs->norm_f32, need * sizeof(float));
    if (!p) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce_rmsnorm: %zu bytes of scratch: out of memory", need * sizeof *p);
      return SYMCOLL_ERR_NO_MEMORY;
    }
    hs->norm_f32 = p, hs->norm_elems = need;
  }
  wk->t = symcoll__host_reduce_table();
  wk->rows = &wk->t->rows[a->dtype];
  wk->w32 = hs->norm_f32, wk->r32 = hs->norm_f32 + h;
  wk->bounce = (char *)(((uintptr_t)(hs->norm_f32 + 2 * h) + 63) & ~(uintptr_t)63);
  wk->rows->load(hs->norm_f32, a->weight, h);
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
  row_work_t wk;
  SYMCOLL_CHECK(row_work(hs, a, a->rows, &wk));
  const size_t rb = wk.rb;
  for (size_t row = 0; row < a->rows; row++)
    norm_row(a, &wk, (const char *)a->x + row * rb, residual_row(a, row), dst_of(a, row));
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
  row_work_t wk;
  SYMCOLL_CHECK(row_work(hs, a, a->rows, &wk));
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
        fused_row(a, &wk, srcs, n, residual_row(a, lo + r), dst_of(a, lo + r));
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
  row_work_t wk;
  SYMCOLL_CHECK(row_work(hs, a, 0, &wk)); /* results into records: not streamed */
  streamed_t gather;                      /* the copies out of the records */
  const bool stream_gather = streams(a, a->rows, 2 * hs->stream_bytes, &gather);
  const symcoll__coll_args_t rec = call_record(a);
  const void *srcs[SYMCOLL_MAX_RANKS];
  host_pad_t *pad = hs->pad[me];
  for (size_t lo = 0; lo < a->rows; lo += per_chunk) {
    const size_t rows = host_min(a->rows - lo, per_chunk);
    const char *x = (const char *)a->x + lo * rb;
    const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, &rec, lo == 0, NULL, 0);
    const size_t results = ep.half_off + records_at(rows, rb); /* records, after the staged rows */
    size_t my_lo, my_n;
    share(rows, n, me, &my_lo, &my_n);
    /* Peers read the rows they own; this rank reads its own share from x: stage the others. */
    memcpy(hs->data[me] + ep.half_off, x, my_lo * rb);
    memcpy(hs->data[me] + ep.half_off + (my_lo + my_n) * rb, x + (my_lo + my_n) * rb, (rows - my_lo - my_n) * rb);
    symcoll__host_publish(&pad->ready, (ep.e << EPOCH_SHIFT) | 1);
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
    for (size_t r = my_lo; r < my_lo + my_n; r++) {
      for (int p = 0; p < n; p++) srcs[p] = hs->data[p] + ep.half_off + r * rb;
      srcs[me] = x + r * rb;
      fused_row(a, &wk, srcs, n, residual_row(a, lo + r),
                record_dst(&rc, hs->data[me] + results + (r - my_lo) * rc.bytes));
    }
    symcoll__host_publish(&pad->reduced, (ep.e << EPOCH_SHIFT) | 1);
    SYMCOLL_CHECK(symcoll__host_wait_all(comm, hs, offsetof(host_pad_t, reduced), (ep.e << EPOCH_SHIFT) | 1));
    for (int q = 0; q < n; q++) {
      size_t q_lo, q_n;
      share(rows, n, q, &q_lo, &q_n);
      for (size_t r = q_lo; r < q_lo + q_n; r++) {
        const row_dst_t from = record_dst(&rc, hs->data[q] + results + (r - q_lo) * rc.bytes), to = dst_of(a, lo + r);
        if (to.res_out) put(gather.res, to.res_out, from.res_out, rb);
        if (to.out) put(gather.out, to.out, from.out, rb);
        if (to.fp8) put(gather.fp8, to.fp8, from.fp8, h);
        if (to.scale_out) *to.scale_out = *from.scale_out;
      }
    }
    if (stream_gather) stream_fence();
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
  row_work_t wk;
  SYMCOLL_CHECK(row_work(hs, a, (size_t)n * a->rows, &wk));
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
        fused_row(a, &wk, srcs, n, residual_row(a, lo + r), dst_of(a, lo + r));
      }
    }
    SYMCOLL_CHECK(symcoll__host_epoch_end(comm, hs, &ep, a->x_mem != NULL));
  }
  return SYMCOLL_OK;
}

static symcoll_status_t run_algo(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
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

symcoll_status_t symcoll__host_rmsnorm(symcoll_comm_t comm, host_state_t *hs, const symcoll__norm_args_t *a) {
  const symcoll_status_t s = run_algo(comm, hs, a);
  stream_fence();
  if (s == SYMCOLL_OK && a->fp8_scale_out) *a->fp8_scale_out = *a->fp8_scale;
  return s;
}
