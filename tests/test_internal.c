/*
 * Internals, through the static library: every build of the CPU reduce loops this machine
 * can run (scalar, baseline, AVX2, AVX-512) must give the same bits for every dtype and op, on
 * random bit patterns (NaNs, infinities, subnormals, values that round) and odd lengths, and
 * the fused norm's row loops of every build must compute their contract element by element; the
 * fp8 conversions round as CUDA's software path does; environment knobs parse strictly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/internal.h"
#include "host/reduce.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Random bits, with a share of ordinary small values so that sums round in interesting ways. */
static void random_fill(uint8_t *p, size_t bytes, symcoll_dtype_t dt) {
  for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
  if (dt == SYMCOLL_FLOAT32)
    for (size_t i = 0; i < bytes / 4; i += 2) {
      float f = (float)((int64_t)(rnd() % 2000001) - 1000000) / 1024.0f;
      memcpy(p + 4 * i, &f, 4);
    }
}

static void test_reduce_builds_agree(void **state) {
  (void)state;
  const symcoll__reduce_table_t *tables[8];
  const int nt = symcoll__host_reduce_tables(tables, 8);
  printf("reduce builds on this CPU:");
  for (int t = 0; t < nt; t++) printf(" %s", tables[t]->name);
  printf("\n");
  assert_true(nt >= 2); /* at least the baseline and the scalar one */
  static const size_t lengths[] = {1, 3, 15, 16, 17, 63, 64, 65, 127, 1000, 4099};
  const size_t maxn = 4099, maxb = maxn * 8;
  uint8_t *src[4], *out[8];
  for (int s = 0; s < 4; s++) src[s] = malloc(maxb);
  for (int t = 0; t < nt; t++) out[t] = malloc(maxb + 64);
  long checked = 0;
  for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++) {
    const size_t es = symcoll_dtype_size((symcoll_dtype_t)dt);
    for (int op = 0; op < SYMCOLL_NUM_OPS; op++)
      for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int nsrc = 1; nsrc <= 4; nsrc++) {
          const size_t n = lengths[li];
          for (int s = 0; s < nsrc; s++) random_fill(src[s], n * es, (symcoll_dtype_t)dt);
          for (int t = 0; t < nt; t++) {
            memset(out[t], 0x5a, maxb + 64);
            tables[t]->fn[dt][op](out[t], (const void *const *)src, nsrc, n);
          }
          for (int t = 1; t < nt; t++) {
            if (memcmp(out[0], out[t], n * es) != 0) {
              size_t i = 0;
              while (!memcmp(out[0] + i * es, out[t] + i * es, es)) i++;
              fail_msg("%s %s, %d sources, %zu elements: %s and %s differ first at element %zu",
                       symcoll_dtype_name((symcoll_dtype_t)dt), symcoll_op_name((symcoll_op_t)op), nsrc, n,
                       tables[0]->name, tables[t]->name, i);
            }
            if (out[t][n * es] != 0x5a) /* nothing past the end */
              fail_msg("%s %s, %d sources, %zu elements: %s wrote past the end",
                       symcoll_dtype_name((symcoll_dtype_t)dt), symcoll_op_name((symcoll_op_t)op), nsrc, n,
                       tables[t]->name);
          }
          checked++;
        }
  }
  /* In place: dst is the first source. */
  for (int t = 0; t < nt; t++) {
    float a[37], b[37];
    for (int i = 0; i < 37; i++) a[i] = (float)i, b[i] = 1.0f;
    const void *srcs[2] = {a, b};
    tables[t]->fn[SYMCOLL_FLOAT32][SYMCOLL_SUM](a, srcs, 2, 37);
    for (int i = 0; i < 37; i++) assert_true(a[i] == (float)i + 1.0f);
  }
  printf("%ld cases, every build gave the same bits\n", checked);
  for (int s = 0; s < 4; s++) free(src[s]);
  for (int t = 0; t < nt; t++) free(out[t]);
}

/* The norm's row loops (row_loops.h) of every build against an element-by-element reference
 * written from their contract, on random bits (NaNs, infinities, subnormals) and odd lengths:
 * the sum of ns rows in fp32, rounded to the dtype, + the residual, rounded (and stored); then
 * r * inv * w rounded (and stored); the load. Bit for bit, NaNs included, but where an add met
 * two NaNs: which one it returns is the one thing the contract leaves open (there any NaN will
 * do). Every buffer is the row's exact size (ASan sees a read past its end), and the stores are
 * checked for writes past it. */
static float to_f(const void *p, size_t i, symcoll_dtype_t dt) {
  if (dt == SYMCOLL_FLOAT32) return ((const float *)p)[i];
  const uint16_t h = ((const uint16_t *)p)[i];
  return dt == SYMCOLL_FLOAT16 ? symcoll__f16_to_f32(h) : symcoll__bf16_to_f32(h);
}
static void put(void *p, size_t i, float v, symcoll_dtype_t dt) { /* v rounded to the dtype, stored */
  if (dt == SYMCOLL_FLOAT32)
    ((float *)p)[i] = v;
  else
    ((uint16_t *)p)[i] = dt == SYMCOLL_FLOAT16 ? symcoll__f32_to_f16(v) : symcoll__f32_to_bf16(v);
}
static float through(float v, symcoll_dtype_t dt) { /* v rounded to the dtype and back */
  uint32_t t;
  put(&t, 0, v, dt);
  return to_f(&t, 0, dt);
}
static void same_float(float want, float got, bool two_nans, const char *what, const char *build, size_t i) {
  if (two_nans && isnan(want) && isnan(got)) return;
  if (symcoll__f32_bits(want) != symcoll__f32_bits(got))
    fail_msg("%s, %s: element %zu is %a (%#x), the contract says %a (%#x)", what, build, i, (double)got,
             symcoll__f32_bits(got), (double)want, symcoll__f32_bits(want));
}
static void same_elem(const void *want, const void *got, size_t i, symcoll_dtype_t dt, bool two_nans, const char *what,
                      const char *build) {
  const size_t es = symcoll_dtype_size(dt);
  if (memcmp((const char *)want + i * es, (const char *)got + i * es, es) != 0 &&
      !(two_nans && isnan(to_f(want, i, dt)) && isnan(to_f(got, i, dt))))
    fail_msg("%s, %s: stored element %zu differs from the contract's", what, build, i);
}
/* One case's buffers, each its exact size; out (a stored row) with 64 guard bytes. */
typedef struct {
  uint8_t *src[4], *res, *out[8], *want_out;
  float *r[8], *want, *w, *r0;
  bool *two; /* an add of the element met two NaNs */
} row_case_t;

static void row_case(const symcoll__reduce_table_t *const *tables, int nt, symcoll_dtype_t dt, size_t n, int ns,
                     bool has_res, bool has_out) {
  const size_t es = symcoll_dtype_size(dt), rb = n * es, fb = n * sizeof(float);
  row_case_t c;
  for (int k = 0; k < ns; k++) random_fill(c.src[k] = malloc(rb), rb, dt);
  random_fill(c.res = malloc(rb), rb, dt);
  c.want_out = malloc(rb), c.want = malloc(fb), c.w = malloc(fb), c.r0 = malloc(fb), c.two = calloc(n, 1);
  for (int t = 0; t < nt; t++) c.out[t] = malloc(rb + 64), c.r[t] = malloc(fb);
  char what[96];
  for (size_t i = 0; i < n; i++) {
    float acc = to_f(c.src[0], i, dt);
    for (int k = 1; k < ns; k++) {
      const float x = to_f(c.src[k], i, dt);
      c.two[i] |= isnan(acc) && isnan(x);
      acc += x;
    }
    if (has_res) {
      const float x = to_f(c.res, i, dt);
      c.two[i] |= isnan(acc) && isnan(x);
      acc = through(acc, dt) + x;
    }
    put(c.want_out, i, acc, dt);
    c.want[i] = through(acc, dt);
  }
  snprintf(what, sizeof what, "%s sum of %d rows of %zu%s%s", symcoll_dtype_name(dt), ns, n,
           has_res ? ", residual" : "", has_out ? ", stored" : "");
  for (int t = 0; t < nt; t++) {
    memset(c.out[t], 0x5a, rb + 64);
    tables[t]->rows[dt].sum(c.r[t], (const void *const *)c.src, ns, has_res ? c.res : NULL, has_out ? c.out[t] : NULL,
                            n);
    for (size_t i = 0; i < n; i++) {
      same_float(c.want[i], c.r[t][i], c.two[i], what, tables[t]->name, i);
      if (has_out) same_elem(c.want_out, c.out[t], i, dt, c.two[i], what, tables[t]->name);
    }
    if (c.out[t][has_out ? rb : 0] != 0x5a) fail_msg("%s, %s: wrote past the end", what, tables[t]->name);
  }
  /* then the scale, from the sum above: r * inv * w rounded */
  const float inv = (float)(rnd() % 1000 + 1) / 256.0f;
  for (size_t i = 0; i < n; i++) c.w[i] = (float)((int)(rnd() % 2001) - 1000) / 512.0f;
  memcpy(c.r0, c.want, fb);
  for (size_t i = 0; i < n; i++) {
    put(c.want_out, i, c.r0[i] * inv * c.w[i], dt);
    c.want[i] = through(c.r0[i] * inv * c.w[i], dt);
  }
  snprintf(what, sizeof what, "%s scale of %zu%s", symcoll_dtype_name(dt), n, has_out ? ", stored" : "");
  for (int t = 0; t < nt; t++) {
    memcpy(c.r[t], c.r0, fb);
    memset(c.out[t], 0x5a, rb + 64);
    tables[t]->rows[dt].scale_round(c.r[t], inv, c.w, has_out ? c.out[t] : NULL, n);
    for (size_t i = 0; i < n; i++) {
      same_float(c.want[i], c.r[t][i], c.two[i], what, tables[t]->name, i);
      if (has_out) same_elem(c.want_out, c.out[t], i, dt, c.two[i], what, tables[t]->name);
    }
    if (c.out[t][has_out ? rb : 0] != 0x5a) fail_msg("%s, %s: wrote past the end", what, tables[t]->name);
  }
  /* the load: every element widened exactly (NaNs quiet, as the conversions make them) */
  snprintf(what, sizeof what, "%s load of %zu", symcoll_dtype_name(dt), n);
  for (int t = 0; t < nt; t++) {
    tables[t]->rows[dt].load(c.r[t], c.src[0], n);
    for (size_t i = 0; i < n; i++) same_float(to_f(c.src[0], i, dt), c.r[t][i], false, what, tables[t]->name, i);
  }
  for (int k = 0; k < ns; k++) free(c.src[k]);
  for (int t = 0; t < nt; t++) free(c.out[t]), free(c.r[t]);
  free(c.res), free(c.want_out), free(c.want), free(c.w), free(c.r0), free(c.two);
}

/* The sum of squares (32 lanes in index order, then a fixed tree), the largest magnitude and
 * the e4m3 products by a reciprocal scale, of finite values of many magnitudes, so that the order of the additions
 * shows in the bits. */
static void row_stats_case(const symcoll__reduce_table_t *const *tables, int nt, size_t n) {
  float *v = malloc(n * sizeof(float)), lane[32] = {0}, tr[8], amax = 0.0f;
  uint8_t *q = malloc(n);
  for (size_t i = 0; i < n; i++) v[i] = ldexpf((float)((int)(rnd() % 2000001) - 1000000), -(int)(rnd() % 24) - 10);
  for (size_t i = 0; i < n; i++) {
    const float sq = v[i] * v[i]; /* rounded on its own, as the loops do (no fused multiply-add) */
    lane[i % 32] += sq;
    amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
  }
  for (int l = 0; l < 8; l++) tr[l] = (lane[l] + lane[l + 8]) + (lane[l + 16] + lane[l + 24]);
  const float ss = ((tr[0] + tr[1]) + (tr[2] + tr[3])) + ((tr[4] + tr[5]) + (tr[6] + tr[7]));
  const float scale = amax / 448.0f + 1e-6f;
  for (int t = 0; t < nt; t++) {
    same_float(ss, tables[t]->sum_squares(v, n), false, "sum of squares", tables[t]->name, n);
    same_float(amax, tables[t]->abs_max(v, n), false, "largest magnitude", tables[t]->name, n);
    tables[t]->to_e4m3(q, v, 1.0f / scale, n);
    for (size_t i = 0; i < n; i++)
      if (q[i] != symcoll__f32_to_fp8(v[i] * (1.0f / scale), 0))
        fail_msg("e4m3 of %zu, %s: element %zu", n, tables[t]->name, i);
  }
  free(v), free(q);
}

static void test_row_loops_agree(void **state) {
  (void)state;
  const symcoll__reduce_table_t *tables[8];
  const int nt = symcoll__host_reduce_tables(tables, 8);
  static const size_t lengths[] = {1, 3, 15, 16, 17, 31, 33, 64, 255, 256, 257, 1000, 4099};
  static const symcoll_dtype_t dts[] = {SYMCOLL_FLOAT32, SYMCOLL_FLOAT16, SYMCOLL_BFLOAT16};
  long checked = 0;
  for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
    for (size_t di = 0; di < 3; di++)
      for (int ns = 1; ns <= 4; ns++)
        for (int with = 0; with < 4; with++, checked++) /* bit 0: a residual; bit 1: stored */
          row_case(tables, nt, dts[di], lengths[li], ns, with & 1, with & 2);
    row_stats_case(tables, nt, lengths[li]);
  }
  printf("%ld row cases, every build as the contract\n", checked);
}

static void test_half_conversions(void **state) {
  (void)state;
  /* fp16 -> fp32 -> fp16 is the identity for every non-NaN half, through the reduce loops
   * (max of one source). */
  const symcoll__reduce_table_t *tables[8];
  const int nt = symcoll__host_reduce_tables(tables, 8);
  uint16_t all[65536], back[65536];
  for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  for (int t = 0; t < nt; t++) {
    const void *srcs[1] = {all};
    tables[t]->fn[SYMCOLL_FLOAT16][SYMCOLL_MAX](back, srcs, 1, 65536);
    for (int i = 0; i < 65536; i++) {
      const bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
      if (!nan && back[i] != all[i]) fail_msg("%s: half %#06x comes back as %#06x", tables[t]->name, i, back[i]);
      if (nan && ((back[i] & 0x7e00) != 0x7e00))
        fail_msg("%s: NaN %#06x comes back as %#06x", tables[t]->name, i, back[i]);
    }
    tables[t]->fn[SYMCOLL_BFLOAT16][SYMCOLL_MAX](back, srcs, 1, 65536);
    for (int i = 0; i < 65536; i++) {
      const bool nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
      if (!nan && back[i] != all[i]) fail_msg("%s: bf16 %#06x comes back as %#06x", tables[t]->name, i, back[i]);
    }
  }
}

/* fp8: every byte widens and narrows back to itself (NaN to NaN); fp32 values round to the
 * nearest, ties to even, saturating at the largest finite value. */
static void test_fp8_conversions(void **state) {
  (void)state;
  for (int e5 = 0; e5 < 2; e5++) {
    for (int b = 0; b < 256; b++) {
      float f = symcoll__fp8_to_f32((uint8_t)b, e5);
      if (isnan(f)) continue;
      if (isinf(f)) {
        assert_int_equal(symcoll__f32_to_fp8(f, e5), (uint8_t)((b & 0x80) | 0x7b)); /* saturates */
        continue;
      }
      if (symcoll__f32_to_fp8(f, e5) != (uint8_t)b)
        fail_msg("%s byte %#04x -> %g -> %#04x", e5 ? "e5m2" : "e4m3", b, (double)f, symcoll__f32_to_fp8(f, e5));
    }
    /* halfway between 1.0 and the next value rounds to even (1.0); above it, up */
    const float ulp1 = e5 ? 0.25f : 0.125f;
    assert_int_equal(symcoll__f32_to_fp8(1.0f + ulp1 / 2, e5), symcoll__f32_to_fp8(1.0f, e5));
    assert_int_equal(symcoll__f32_to_fp8(1.0f + ulp1 * 0.51f, e5), symcoll__f32_to_fp8(1.0f + ulp1, e5));
    assert_int_equal(symcoll__f32_to_fp8(1e9f, e5), e5 ? 0x7b : 0x7e);
    assert_int_equal(symcoll__f32_to_fp8(-1e9f, e5), e5 ? 0xfb : 0xfe);
  }
  assert_true(symcoll__fp8_to_f32(0x7e, 0) == 448.0f);
  assert_true(symcoll__fp8_to_f32(0x7b, 1) == 57344.0f);
}

/* AVG's float division on GPUs (src/cuda/device_common.cuh div_by_count, IEEE single
 * operations, here the host's): the bits of acc / n for every acc (random bits: zeros,
 * subnormals, infinities, NaN) and every count of ranks. */
static float avg_as_gpu(float acc, float n) {
  const float rcp = 1.0f / n, q = acc * rcp, m = fabsf(q);
  if (m >= 0x1p-96f && m <= 0x1p+96f) return fmaf(fmaf(-q, n, acc), rcp, q);
  return acc == 0.0f ? q : acc / n;
}
static void test_avg_quotient(void **state) {
  (void)state;
  long differ = 0;
  for (long i = 0; i < 4000000; i++) {
    uint32_t u = (uint32_t)rnd();
    if (i % 3 == 0) u = (u & 0x807fffffu) | (uint32_t)(100 + rnd() % 56) << 23; /* ordinary values */
    float acc, n = (float)(1 + i % 64);
    memcpy(&acc, &u, sizeof acc);
    if (i % 1000 == 1) acc = i % 2000 == 1 ? 0.0f : -0.0f;
    const float got = avg_as_gpu(acc, n), want = acc / n;
    if (memcmp(&got, &want, sizeof got) != 0 && !(isnan(got) && isnan(want)) && differ++ < 5)
      print_error("%a / %g: %a against %a\n", (double)acc, (double)n, (double)got, (double)want);
  }
  assert_int_equal(differ, 0);
}

/* Environment knobs: units, ranges, malformed values. */
static void test_env_parsing(void **state) {
  (void)state;
  static const struct {
    const char *value;
    long long want;
  } timeouts[] = {
      {"2500", 2500}, {"10s", 10000}, {"500ms", 500}, {"2min", 120000},          {"1e3", 30000},
      {"abc", 30000}, {"0", 30000},   {"-5", 30000},  {"99999999999", 86400000}, {"10 s", 30000},
      {"", 30000},
  };
  for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
    setenv("SYMCOLL_TIMEOUT_MS", timeouts[i].value, 1);
    long long got = symcoll__env_int("SYMCOLL_TIMEOUT_MS");
    if (got != timeouts[i].want)
      fail_msg("SYMCOLL_TIMEOUT_MS=%s: took %lld, want %lld", timeouts[i].value, got, timeouts[i].want);
  }
  unsetenv("SYMCOLL_TIMEOUT_MS");
  setenv("SYMCOLL_WORKSPACE_BYTES", "8M", 1);
  assert_int_equal(symcoll__env_int("SYMCOLL_WORKSPACE_BYTES"), 8 << 20);
  setenv("SYMCOLL_WORKSPACE_BYTES", "64KiB", 1);
  assert_int_equal(symcoll__env_int("SYMCOLL_WORKSPACE_BYTES"), 64 << 10);
  setenv("SYMCOLL_WORKSPACE_BYTES", "lots", 1);
  assert_int_equal(symcoll__env_int("SYMCOLL_WORKSPACE_BYTES"), 0);
  unsetenv("SYMCOLL_WORKSPACE_BYTES");
  setenv("SYMCOLL_CHECK", "yes", 1);
  assert_int_equal(symcoll__env_int("SYMCOLL_CHECK"), 1);
  setenv("SYMCOLL_CHECK", "maybe", 1);
  assert_int_equal(symcoll__env_int("SYMCOLL_CHECK"), 0);
  unsetenv("SYMCOLL_CHECK");
  setenv("SYMCOLL_DEBUG", "LOUD", 1);
  assert_int_equal(symcoll__env_choice("SYMCOLL_DEBUG"), SYMCOLL_LOG_WARN);
  setenv("SYMCOLL_DEBUG", "trace", 1);
  assert_int_equal(symcoll__env_choice("SYMCOLL_DEBUG"), SYMCOLL_LOG_TRACE);
  unsetenv("SYMCOLL_DEBUG");
  setenv("SYMCOLL_HOST_SIMD", "foo", 1);
  assert_int_equal(symcoll__env_choice("SYMCOLL_HOST_SIMD"), 0); /* auto */
  unsetenv("SYMCOLL_HOST_SIMD");
  setenv("SYMCOLL_DEBUG_SUBSYS", "COLL,bogus,TUNE", 1);
  assert_int_equal(symcoll__env_list("SYMCOLL_DEBUG_SUBSYS", SYMCOLL_SUBSYS_ALL),
                   SYMCOLL_SUBSYS_COLL | SYMCOLL_SUBSYS_TUNE);
  unsetenv("SYMCOLL_DEBUG_SUBSYS");
}

/* Every collective has a row that agrees with itself and with the public lists. */
static void test_coll_table(void **state) {
  (void)state;
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++) {
    const symcoll_coll_t coll = (symcoll_coll_t)c;
    const symcoll__coll_desc_t *d = symcoll__coll_desc(coll);
    assert_non_null(d);
    assert_string_not_equal(symcoll_coll_name(coll), "unknown");
    assert_int_equal(symcoll_coll_is_fused(coll), d->fused);
    assert_true(d->algos != 0);
    assert_false(d->algos & SYMCOLL__ALGO_BIT(SYMCOLL_ALGO_AUTO));
    assert_true(d->algos < SYMCOLL__ALGO_BIT(SYMCOLL_NUM_ALGOS));
    assert_true(symcoll__algo_of(coll, d->fallback));
    assert_true(d->busbw_factor >= 1);
    if (!d->fused) /* a buffer of every rank's blocks is what the size class counts */
      assert_int_equal(d->moves_all, d->send_all || d->recv_all);
    /* A root's buffer is one block, used in place when it is the other one (NCCL's rules). */
    if (d->root != SYMCOLL__ROOT_NONE) {
      assert_false(d->send_all || d->recv_all || d->fused);
      assert_int_equal(d->in_place, SYMCOLL__IN_PLACE_SAME);
    }
    if (d->busbw_whole) assert_true(d->root != SYMCOLL__ROOT_NONE); /* nccl-tests: broadcast, reduce */
  }
  assert_null(symcoll__coll_desc(SYMCOLL_NUM_COLL_KINDS));
  assert_int_equal(symcoll_coll_is_fused(SYMCOLL_NUM_COLL_KINDS), -1);
  assert_string_equal(symcoll_coll_name(SYMCOLL_NUM_COLL_KINDS), "unknown");
  for (int a = 0; a < SYMCOLL_NUM_ALGOS; a++) {
    assert_string_not_equal(symcoll_algo_name((symcoll_algo_t)a), "unknown");
    assert_string_not_equal(symcoll_algo_help((symcoll_algo_t)a), "unknown");
  }
  assert_string_equal(symcoll_algo_name(SYMCOLL_NUM_ALGOS), "unknown");
  char buf[128];
  assert_string_equal(symcoll__algo_list(SYMCOLL_COLL_REDUCE_SCATTER, buf, sizeof buf),
                      "lamport, nccl, pull, hierarchical, engine");
}

/* Only a communicator's most specific rows apply (tune.c), and a size past a group's last row
 * takes that row: so every group of the built-in table (collective, device and class, rank
 * count; a dtype's rows go with the group's) must reach inf, or a rank count's small-size row
 * would run at every size. */
static void test_builtin_table_groups(void **state) {
  (void)state;
  char *text = strdup(symcoll__tune_builtin());
  assert_non_null(text);
  static char groups[256][256];
  bool ends[256] = {false};
  int ng = 0;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char f[6][32];
    const int n = sscanf(line, "%31s %31s %31s %31s %31s %31s", f[0], f[1], f[2], f[3], f[4], f[5]);
    if (n < 5 || f[0][0] == '#') continue;
    const bool no_coll = !strncmp(f[0], "host", 4) || !strncmp(f[0], "cuda", 4); /* all_reduce's rows */
    const int o = no_coll ? -1 : 0;
    char key[256];
    snprintf(key, sizeof key, "%.31s %.31s %.31s", no_coll ? "all_reduce" : f[0], f[o + 1], f[o + 2]);
    int g = 0;
    while (g < ng && strcmp(groups[g], key) != 0) g++;
    if (g == ng) {
      assert_true(ng < 256);
      memcpy(groups[ng++], key, sizeof key);
    }
    if (!strcmp(f[o + 4], "inf")) ends[g] = true;
  }
  for (int g = 0; g < ng; g++) {
    if (!ends[g]) fprintf(stderr, "built-in table: the rows of \"%s\" stop short of inf\n", groups[g]);
    assert_true(ends[g]);
  }
  assert_true(ng > 10);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_builds_agree), cmocka_unit_test(test_row_loops_agree),
      cmocka_unit_test(test_half_conversions),    cmocka_unit_test(test_fp8_conversions),
      cmocka_unit_test(test_avg_quotient),        cmocka_unit_test(test_env_parsing),
      cmocka_unit_test(test_coll_table),          cmocka_unit_test(test_builtin_table_groups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
