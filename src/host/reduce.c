/* The run-time choice among the builds of the reduce loops. */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

/* ---- choice --------------------------------------------------------------------------------- */

#if defined(__x86_64__)
/* From CPUID, as not every compiler's __builtin_cpu_supports knows them: F16C (leaf 1, ECX bit
 * 29), AVX-512 BF16 (leaf 7 subleaf 1, EAX bit 5). */
static int cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
static int cpu_has_avx512bf16(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

static int cpu_runs(const symcoll__reduce_table_t *t) {
#if defined(__x86_64__)
  if (t == &symcoll__reduce_avx512 || t == &symcoll__reduce_avx512bf16)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && cpu_has_f16c() &&
           (t == &symcoll__reduce_avx512 || cpu_has_avx512bf16());
  if (t == &symcoll__reduce_avx2) return __builtin_cpu_supports("avx2") && cpu_has_f16c();
#endif
  (void)t;
  return 1;
}

/* Widest first. */
static const symcoll__reduce_table_t *const all_tables[] = {
#if defined(__x86_64__)
    &symcoll__reduce_avx512bf16, &symcoll__reduce_avx512, &symcoll__reduce_avx2,
#endif
    &symcoll__reduce_baseline,   &symcoll__reduce_scalar,
};
#define NTABLES (sizeof all_tables / sizeof all_tables[0])

int symcoll__host_reduce_tables(const symcoll__reduce_table_t **tables, int max) {
  int n = 0;
  for (size_t i = 0; i < NTABLES && n < max; i++)
    if (cpu_runs(all_tables[i])) tables[n++] = all_tables[i];
  return n;
}

static const symcoll__reduce_table_t *chosen;

static void choose_once(void) {
  (void)symcoll__env_choice("SYMCOLL_HOST_SIMD"); /* a value not among the choices gets its WARN */
  const char *want = symcoll__env_str("SYMCOLL_HOST_SIMD", "auto");
  for (size_t i = 0; i < NTABLES && !chosen; i++) {
    const symcoll__reduce_table_t *t = all_tables[i];
    if (strcmp(want, "auto") != 0 && strcmp(want, t->name) != 0) continue;
    if (cpu_runs(t))
      chosen = t;
    else
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_HOST_SIMD=%s: this CPU cannot run those loops", want);
  }
  if (!chosen) {
    /* An unknown name (warned above): the widest. */
    symcoll__host_reduce_tables(&chosen, 1);
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "CPU reduce loops: %s", chosen->name);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

symcoll__reduce_fn symcoll__host_reduce_fn(symcoll_dtype_t dtype, symcoll_op_t op) {
  pthread_once(&once, choose_once);
  return chosen->fn[dtype][op];
}

const symcoll__reduce_table_t *symcoll__host_reduce_table(void) {
  pthread_once(&once, choose_once);
  return chosen;
}

const char *symcoll__host_simd_name(void) {
  pthread_once(&once, choose_once);
  return chosen->name;
}
