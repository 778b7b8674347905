/* GEMMs of CPU ranks through CBLAS (OpenBLAS), opened at run time so that the library loads
 * and every collective works where no BLAS is installed (the GEMM operations then return
 * UNSUPPORTED). fp16 / bf16 matrices are widened to fp32, multiplied by cblas_sgemm (fp32
 * accumulation) and rounded back to nearest even. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static sgemm_fn blas_sgemm;

static void blas_open(void) {
  const char *user = symcoll__env_str("SYMCOLL_BLAS_LIB", "");
  const char *names[] = {user, "libopenblas.so.0", "libcblas.so.3", "libblas.so.3", "libopenblas.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !blas_sgemm; i++) {
    if (!names[i][0]) continue;
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      if (i == 0) SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_BLAS_LIB=%s: %s", user, dlerror());
      continue;
    }
    blas_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    if (blas_sgemm)
      SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "CPU GEMMs: cblas_sgemm from %s", names[i]);
    else
      dlclose(h);
  }
  if (!blas_sgemm) SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "no CBLAS found: the GEMM operations are unsupported");
}

bool symcoll__host_has_gemm(symcoll_comm_t comm) {
  (void)comm;
  pthread_once(&blas_once, blas_open);
  return blas_sgemm != NULL;
}

/* A grow-only fp32 buffer of the communicator's (index i of hs->f32). */
static float *f32_buf(host_state_t *hs, int i, size_t elems) {
  if (hs->f32_elems[i] < elems) {
    float *p = realloc(hs->f32[i], elems * sizeof(float));
    if (!p) return NULL;
    hs->f32[i] = p, hs->f32_elems[i] = elems;
  }
  return hs->f32[i];
}

static void widen(float *dst, const void *src, size_t rows, size_t cols, size_t ld, symcoll_dtype_t dt) {
  for (size_t r = 0; r < rows; r++) {
    const uint16_t *s = (const uint16_t *)src + r * ld;
    float *d = dst + r * cols;
    if (dt == SYMCOLL_BFLOAT16)
      for (size_t j = 0; j < cols; j++) d[j] = symcoll__bf16_to_f32(s[j]);
    else
      for (size_t j = 0; j < cols; j++) d[j] = symcoll__f16_to_f32(s[j]);
  }
}

static void narrow(void *dst, const float *src, size_t rows, size_t cols, size_t ld, symcoll_dtype_t dt) {
  for (size_t r = 0; r < rows; r++) {
    uint16_t *d = (uint16_t *)dst + r * ld;
    const float *s = src + r * cols;
    if (dt == SYMCOLL_BFLOAT16)
      for (size_t j = 0; j < cols; j++) d[j] = symcoll__f32_to_bf16(s[j]);
    else
      for (size_t j = 0; j < cols; j++) d[j] = symcoll__f32_to_f16(s[j]);
  }
}

/* B as sgemm reads it: b itself for fp32, else widened into buffer 0 (once per operation). */
const float *symcoll__host_gemm_b(host_state_t *hs, const void *b, size_t k, size_t n, size_t ldb, symcoll_dtype_t dt) {
  if (dt == SYMCOLL_FLOAT32) return b;
  float *w = f32_buf(hs, 0, k * n);
  if (w) widen(w, b, k, n, ldb, dt);
  return w;
}

symcoll_status_t symcoll__host_gemm_rows(host_state_t *hs, const void *a, size_t lda, const float *b32, void *c,
                                         size_t ldc, size_t m, size_t n, size_t k, symcoll_dtype_t dt) {
  if (!b32) return SYMCOLL_ERR_NO_MEMORY;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldc > INT32_MAX) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "GEMM of %zu x %zu x %zu: CBLAS takes dimensions below 2^31", m, n, k);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  if (dt == SYMCOLL_FLOAT32) {
    blas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b32, (int)n,
               0.0f, c, (int)ldc);
    return SYMCOLL_OK;
  }
  float *a32 = f32_buf(hs, 1, m * k), *c32 = f32_buf(hs, 2, m * n);
  if (!a32 || !c32) return SYMCOLL_ERR_NO_MEMORY;
  widen(a32, a, m, k, lda, dt);
  blas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a32, (int)k, b32, (int)n,
             0.0f, c32, (int)n);
  narrow(c, c32, m, n, ldc, dt);
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__host_gemm(symcoll_comm_t comm, const symcoll__gemm_t *g) {
  host_state_t *hs = comm->tp_state;
  const float *b32 = symcoll__host_gemm_b(hs, g->b, g->k, g->n, g->ldb, g->dtype);
  return symcoll__host_gemm_rows(hs, g->a, g->lda, b32, g->c, g->ldc, g->m, g->n, g->k, g->dtype);
}

symcoll_status_t symcoll__host_scratch_alloc(symcoll_comm_t comm, size_t bytes, void *stream, void **p) {
  (void)comm, (void)stream;
  *p = malloc(bytes ? bytes : 1);
  if (!*p) SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "scratch of %zu bytes: out of memory", bytes);
  return *p ? SYMCOLL_OK : SYMCOLL_ERR_NO_MEMORY;
}

void symcoll__host_scratch_free(symcoll_comm_t comm, void *p, void *stream) {
  (void)comm, (void)stream;
  free(p);
}
