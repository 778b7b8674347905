/*
 * GEMMs of GPU ranks through cuBLASLt, opened at run time (like NCCL) so that the library
 * loads where the toolkit's libcublasLt is missing (the GEMM operations are then
 * UNSUPPORTED). Row-major C = A @ B is cuBLASLt's column-major C^T = B^T A^T, so B is passed
 * as cuBLASLt's A. fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32). Per communicator: a
 * handle, a workspace allocated on first use outside capture, and a cache of the
 * descriptors and the heuristic's algorithm per shape (the heuristic costs tens of us).
 */
#define _GNU_SOURCE
#include <cublasLt.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"

#define LT_WORKSPACE ((size_t)32 << 20)
#define SCRATCH_START ((size_t)32 << 20) /* the GEMM operations' scratch pool, grown at creation */

static struct {
  __typeof__(cublasLtCreate) *Create;
  __typeof__(cublasLtDestroy) *Destroy;
  __typeof__(cublasLtMatmulDescCreate) *DescCreate;
  __typeof__(cublasLtMatmulDescDestroy) *DescDestroy;
  __typeof__(cublasLtMatrixLayoutCreate) *LayoutCreate;
  __typeof__(cublasLtMatrixLayoutDestroy) *LayoutDestroy;
  __typeof__(cublasLtMatmulPreferenceCreate) *PrefCreate;
  __typeof__(cublasLtMatmulPreferenceSetAttribute) *PrefSet;
  __typeof__(cublasLtMatmulPreferenceDestroy) *PrefDestroy;
  __typeof__(cublasLtMatmulAlgoGetHeuristic) *Heuristic;
  __typeof__(cublasLtMatmul) *Matmul;
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static bool lt_ok;

static void lt_open(void) {
  const char *user = symcoll__env_str("SYMCOLL_CUBLASLT_LIB", "");
  const char *names[] = {
      user,
      "libcublasLt.so.13",
      "libcublasLt.so.12",
      "libcublasLt.so",
#ifdef SYMCOLL_CUBLASLT_PATH
      SYMCOLL_CUBLASLT_PATH,
#endif
  };
  void *h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
    if (!names[i][0]) continue;
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h && i == 0) SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "SYMCOLL_CUBLASLT_LIB=%s: %s", user, dlerror());
    if (h) SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "GPU GEMMs: cuBLASLt from %s", names[i]);
  }
  if (!h) {
    SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "no libcublasLt found: the GEMM operations are unsupported");
    return;
  }
#define SYM(field, name) lt.field = (__typeof__(lt.field))dlsym(h, #name)
  SYM(Create, cublasLtCreate);
  SYM(Destroy, cublasLtDestroy);
  SYM(DescCreate, cublasLtMatmulDescCreate);
  SYM(DescDestroy, cublasLtMatmulDescDestroy);
  SYM(LayoutCreate, cublasLtMatrixLayoutCreate);
  SYM(LayoutDestroy, cublasLtMatrixLayoutDestroy);
  SYM(PrefCreate, cublasLtMatmulPreferenceCreate);
  SYM(PrefSet, cublasLtMatmulPreferenceSetAttribute);
  SYM(PrefDestroy, cublasLtMatmulPreferenceDestroy);
  SYM(Heuristic, cublasLtMatmulAlgoGetHeuristic);
  SYM(Matmul, cublasLtMatmul);
#undef SYM
  lt_ok = lt.Create && lt.Destroy && lt.DescCreate && lt.DescDestroy && lt.LayoutCreate && lt.LayoutDestroy &&
          lt.PrefCreate && lt.PrefSet && lt.PrefDestroy && lt.Heuristic && lt.Matmul;
  if (!lt_ok) SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "libcublasLt lacks a function symcoll calls: GEMMs unsupported");
}

/* A cached shape: descriptors and the algorithm the heuristic chose. */
typedef struct symcoll__lt_plan {
  size_t m, n, k, lda, ldb, ldc;
  uint32_t align_a, align_b, align_c; /* of the pointers: algorithms that need more are excluded */
  symcoll_dtype_t dtype;
  size_t ws;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  bool used;
} lt_plan_t;

#define LT_PLANS 32
#define LT_SEEN 256
/* A GEMM's shape, as every rank of the communicator sees it in the same call. */
typedef struct {
  size_t m, n, k, lda, ldb, ldc;
  symcoll_dtype_t dtype;
} lt_shape_t;
struct symcoll__lt_state {
  cublasLtHandle_t handle;
  void *ws;
  size_t ws_bytes;
  lt_plan_t plan[LT_PLANS];
  unsigned next;            /* round-robin replacement */
  lt_shape_t seen[LT_SEEN]; /* shapes launched once under a rendezvous (first_launch) */
  unsigned nseen;
};

static cudaDataType_t lt_type(symcoll_dtype_t dt) {
  return dt == SYMCOLL_BFLOAT16 ? CUDA_R_16BF : dt == SYMCOLL_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
}

bool symcoll__cuda_has_gemm(symcoll_comm_t comm) {
  const cuda_state_t *cs = comm->tp_state;
  return cs->lt != NULL;
}

/* At communicator creation (the device is current; collective): cuBLASLt's handle and
 * workspace, the copy-engine stream and events of the overlapped operations, and a memory
 * pool of the communicator's own for their scratch, which keeps what it grew to. Nothing of
 * this may happen on a call's path: an allocation or a stream's creation can wait for the
 * whole GPU to go idle, and with ranks sharing a GPU (thread mode, MPS) it never does while a
 * peer's kernel waits for this rank's next one (seen on the H200 as timeouts). Every rank
 * has the GEMM operations or none does. */
symcoll_status_t symcoll__cuda_gemm_init(symcoll_comm_t comm) {
  cuda_state_t *cs = comm->tp_state;
  const bool wanted = symcoll__env_int("SYMCOLL_GEMM") != 0;
  if (wanted) pthread_once(&lt_once, lt_open);
  symcoll__lt_state_t *st = wanted && lt_ok ? calloc(1, sizeof *st) : NULL;
  bool ok = st && lt.Create(&st->handle) == CUBLAS_STATUS_SUCCESS;
  if (ok && cudaMalloc(&st->ws, LT_WORKSPACE) == cudaSuccess)
    st->ws_bytes = LT_WORKSPACE;
  else if (st)
    cudaGetLastError(), st->ws = NULL;
  if (ok) ok = cudaStreamCreateWithFlags(&cs->ce, cudaStreamNonBlocking) == cudaSuccess;
  for (int i = 0; ok && i < SYMCOLL_CUDA_MM_EVENTS; i++)
    ok = cudaEventCreateWithFlags(&cs->ev[i], cudaEventDisableTiming) == cudaSuccess;
  if (ok) {
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = cudaMemLocationTypeDevice, .id = comm->device}};
    ok = cudaMemPoolCreate(&cs->pool, &props) == cudaSuccess;
    uint64_t keep = UINT64_MAX;
    ok = ok && cudaMemPoolSetAttribute(cs->pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess;
    /* Grown now to a first size, so that calls up to it map no memory on their path. */
    void *p = NULL;
    ok = ok && cudaMallocFromPoolAsync(&p, SCRATCH_START, cs->pool, cs->side) == cudaSuccess &&
         cudaFreeAsync(p, cs->side) == cudaSuccess && cudaStreamSynchronize(cs->side) == cudaSuccess;
  }
  int mine = ok, all[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = comm->oob->allgather(comm, &mine, all, sizeof mine);
  for (int r = 0; r < comm->nranks; r++) ok = ok && s == SYMCOLL_OK && all[r];
  if (!ok) {
    cudaGetLastError();
    if (wanted && lt_ok)
      SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT,
                   "rank %d: the GEMM operations are off (setting up cuBLASLt, its stream or "
                   "memory pool failed on some rank)",
                   comm->rank);
    if (st && st->handle) lt.Destroy(st->handle);
    if (st && st->ws) cudaFree(st->ws);
    free(st);
    st = NULL;
  }
  cs->lt = st;
  return s;
}

static void plan_release(lt_plan_t *p) {
  if (!p->used) return;
  lt.LayoutDestroy(p->la), lt.LayoutDestroy(p->lb), lt.LayoutDestroy(p->lc), lt.DescDestroy(p->desc);
  p->used = false;
}

void symcoll__cuda_gemm_fini(symcoll_comm_t comm) {
  cuda_state_t *cs = comm->tp_state;
  symcoll__lt_state_t *st = cs->lt;
  for (int i = 0; i < SYMCOLL_CUDA_MM_EVENTS; i++)
    if (cs->ev[i]) cudaEventDestroy(cs->ev[i]);
  if (cs->ce) cudaStreamDestroy(cs->ce);
  if (cs->pool) cudaMemPoolDestroy(cs->pool);
  if (!st) return;
  for (int i = 0; i < LT_PLANS; i++) plan_release(&st->plan[i]);
  if (st->ws) cudaFree(st->ws);
  lt.Destroy(st->handle);
  free(st);
  cs->lt = NULL;
}

/* The largest power of two up to 256 dividing the address: cuBLASLt assumes 256-byte aligned
 * matrices unless told, and a GEMM into a row block of C (a chunk) is often less aligned. */
static uint32_t align_of(const void *p) {
  const uintptr_t a = (uintptr_t)p | 256;
  return (uint32_t)(a & -a);
}

static symcoll_status_t plan_get(symcoll__lt_state_t *st, const symcoll__gemm_t *g, lt_plan_t **out) {
  const uint32_t aa = align_of(g->a), ab = align_of(g->b), ac = align_of(g->c);
  for (int i = 0; i < LT_PLANS; i++) {
    lt_plan_t *p = &st->plan[i];
    if (p->used && p->m == g->m && p->n == g->n && p->k == g->k && p->lda == g->lda && p->ldb == g->ldb &&
        p->ldc == g->ldc && p->dtype == g->dtype && p->ws == st->ws_bytes && p->align_a == aa && p->align_b == ab &&
        p->align_c == ac) {
      *out = p;
      return SYMCOLL_OK;
    }
  }
  lt_plan_t *p = &st->plan[st->next++ % LT_PLANS];
  plan_release(p);
  *p = (lt_plan_t){.m = g->m,
                   .n = g->n,
                   .k = g->k,
                   .lda = g->lda,
                   .ldb = g->ldb,
                   .ldc = g->ldc,
                   .dtype = g->dtype,
                   .ws = st->ws_bytes,
                   .align_a = aa,
                   .align_b = ab,
                   .align_c = ac};
  const cudaDataType_t t = lt_type(g->dtype);
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  bool ok = lt.DescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  /* Column-major view: cuBLASLt's A is our B (n x k, ld ldb), its B our A (k x m, ld lda). */
  ok = ok && lt.LayoutCreate(&p->la, t, g->n, g->k, (int64_t)g->ldb) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.LayoutCreate(&p->lb, t, g->k, g->m, (int64_t)g->lda) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.LayoutCreate(&p->lc, t, g->n, g->m, (int64_t)g->ldc) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.PrefCreate(&pref) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &st->ws_bytes, sizeof st->ws_bytes) ==
                 CUBLAS_STATUS_SUCCESS;
  /* cuBLASLt's A is our B, its B our A, C and D our C. */
  ok = ok && lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ab, sizeof ab) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &aa, sizeof aa) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac) == CUBLAS_STATUS_SUCCESS;
  ok = ok && lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac) == CUBLAS_STATUS_SUCCESS;
  ok = ok &&
       lt.Heuristic(st->handle, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS &&
       found > 0;
  if (pref) lt.PrefDestroy(pref);
  p->used = true;
  if (!ok) {
    plan_release(p);
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "cuBLASLt has no algorithm for %zu x %zu x %zu %s", g->m, g->n, g->k,
                 symcoll_dtype_name(g->dtype));
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  p->algo = res.algo;
  *out = p;
  return SYMCOLL_OK;
}

static symcoll_status_t launch(symcoll__lt_state_t *st, const symcoll__gemm_t *g) {
  lt_plan_t *p;
  SYMCOLL_CHECK(plan_get(st, g, &p));
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t r = lt.Matmul(st->handle, p->desc, &one, g->b, p->la, g->a, p->lb, &zero, g->c, p->lc, g->c, p->lc,
                               &p->algo, st->ws, st->ws_bytes, (cudaStream_t)g->stream);
  if (r != CUBLAS_STATUS_SUCCESS) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "cublasLtMatmul %zu x %zu x %zu %s failed: status %d", g->m, g->n, g->k,
                 symcoll_dtype_name(g->dtype), (int)r);
    return SYMCOLL_ERR_CUDA;
  }
  return SYMCOLL_OK;
}

/* The first launch of a shape on this communicator, between two rendezvous of its ranks with
 * their streams drained (XLA does the same around its first GEMMs): cuBLASLt sets up a
 * kernel at its first launch in the process (cuKernelSetAttribute), which takes a driver lock
 * and can wait for the kernels running on the GPU; where ranks share a GPU, a peer's kernel
 * waiting for this rank then never ends (seen on the H200 as timeouts). Every rank meets the
 * same shapes in the same calls, so every rank takes the rendezvous at the same call. Inside
 * a CUDA graph's capture there is none: make one call of each shape before capturing. */
static symcoll_status_t first_launch(symcoll_comm_t comm, symcoll__lt_state_t *st, const symcoll__gemm_t *g) {
  cudaStream_t s = (cudaStream_t)g->stream;
  char one = 1, all[SYMCOLL_MAX_RANKS];
  if (cudaStreamSynchronize(s) != cudaSuccess) return SYMCOLL_ERR_CUDA;
  /* A barrier of this call before the GEMM that gave up (a peer never came) ends the call
   * now, not after the rendezvous's own wait as well. */
  SYMCOLL_CHECK(symcoll__cuda_failed(comm));
  SYMCOLL_CHECK(comm->oob->allgather(comm, &one, all, 1));
  SYMCOLL_CHECK(launch(st, g));
  if (cudaStreamSynchronize(s) != cudaSuccess) return SYMCOLL_ERR_CUDA;
  SYMCOLL_CHECK(comm->oob->allgather(comm, &one, all, 1));
  st->seen[st->nseen++ % LT_SEEN] = (lt_shape_t){g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->dtype};
  return SYMCOLL_OK;
}

/* Enqueues one GEMM; the device is current. */
symcoll_status_t symcoll__cuda_gemm_enqueue(symcoll_comm_t comm, const symcoll__gemm_t *g) {
  cuda_state_t *cs = comm->tp_state;
  symcoll__lt_state_t *st = cs->lt;
  const unsigned nseen = st->nseen < LT_SEEN ? st->nseen : LT_SEEN;
  for (unsigned i = 0; i < nseen; i++) {
    const lt_shape_t *x = &st->seen[i];
    if (x->m == g->m && x->n == g->n && x->k == g->k && x->lda == g->lda && x->ldb == g->ldb && x->ldc == g->ldc &&
        x->dtype == g->dtype)
      return launch(st, g);
  }
  enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)g->stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
    return launch(st, g);
  return first_launch(comm, st, g);
}

symcoll_status_t symcoll__cuda_gemm(symcoll_comm_t comm, const symcoll__gemm_t *g) {
  dev_guard_t d;
  SYMCOLL_CHECK(dev_enter(comm, &d));
  symcoll_status_t s = symcoll__cuda_gemm_enqueue(comm, g);
  dev_leave(comm, &d);
  return s;
}

symcoll_status_t symcoll__cuda_scratch_alloc(symcoll_comm_t comm, size_t bytes, void *stream, void **p) {
  dev_guard_t d;
  SYMCOLL_CHECK(dev_enter(comm, &d));
  cuda_state_t *cs = comm->tp_state;
  cudaError_t e = cudaMallocFromPoolAsync(p, bytes ? bytes : 1, cs->pool, (cudaStream_t)stream);
  dev_leave(comm, &d);
  if (e != cudaSuccess) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "scratch of %zu bytes (cudaMallocFromPoolAsync): %s", bytes,
                 cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? SYMCOLL_ERR_NO_MEMORY : SYMCOLL_ERR_CUDA;
  }
  return SYMCOLL_OK;
}

void symcoll__cuda_scratch_free(symcoll_comm_t comm, void *p, void *stream) {
  dev_guard_t d;
  if (dev_enter(comm, &d) != SYMCOLL_OK) return;
  cudaFreeAsync(p, (cudaStream_t)stream);
  dev_leave(comm, &d);
}
