/*
 * symcoll-bench --coll barrier: a GPU barrier's round latency, per grid (1, 4, 16, 64 blocks,
 * each meeting its twins on a slot of its own), for the collectives' posted-epoch barrier
 * against the device API's CAS barrier (barrier_kernels.cu). Each rep is one launch of `rounds`
 * barriers between device events, every rank starting together (a host barrier before); the
 * table gives the median over reps of the time per round. GPU ranks only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#ifdef SYMCOLL_BENCH_CUDA
#include <cuda_runtime_api.h>

int bench_barrier_preload(void);
int bench_barrier_launch(int kind, const symcoll_device_view_t *v, int blocks, int rounds, void *stream);

#define KINDS 2
#define ROUNDS 1000
static const char *const kind_names[KINDS] = {"epoch", "cas"};

/* The median time of a round (us) of `kind` on `blocks` blocks over `reps` launches. */
static double time_kind(bctx_t *c, const symcoll_device_view_t *v, int kind, int blocks, int reps, double *t) {
  cudaStream_t s = (cudaStream_t)c->stream;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  char what[64];
  snprintf(what, sizeof what, "barrier %s on %d blocks", kind_names[kind], blocks);
  for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
    bench_barrier(c);
    cudaEventRecord(e0, s);
    const int e = bench_barrier_launch(kind, v, blocks, r < 0 ? 10 : ROUNDS, s);
    cudaEventRecord(e1, s);
    const cudaError_t done = cudaEventSynchronize(e1);
    if (e != cudaSuccess || done != cudaSuccess)
      bench_fail(c, what, cudaGetErrorString(e != cudaSuccess ? (cudaError_t)e : done));
    if (symcoll_comm_check(c->comm) != SYMCOLL_OK) bench_fail(c, what, bench_status(symcoll_comm_check(c->comm)));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 0) t[r] = 1e3 * ms / ROUNDS;
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
  return t[reps / 2];
}

int bench_barrier_rank(bctx_t *c, const bench_mm_opts_t *o) {
  if (!c->gpu) {
    if (c->rank == 0) printf("# barrier: GPU ranks only\n");
    return 0;
  }
  symcoll_mem_t mem = NULL;
  symcoll_device_view_t v;
  symcoll_status_t s = symcoll_mem_alloc(c->comm, 4096, &mem);
  if (s == SYMCOLL_OK) s = symcoll_mem_device_view(mem, &v);
  if (s != SYMCOLL_OK) bench_fail(c, "barrier: a symmetric allocation", bench_status(s));
  if (bench_barrier_preload() != cudaSuccess) bench_fail(c, "barrier", "loading the kernels failed");
  /* Every rank loads before any launches: in thread mode a lazy load waits for the GPU to go idle,
   * which a peer's spinning barrier never lets happen. */
  bench_barrier(c);
  FILE *csv = c->rank == 0 && o->csv ? fopen(o->csv, "w") : NULL;
  if (c->rank == 0) {
    printf("# barrier round latency, %d ranks (%s), %s\n# us per round: median of %d launches of %d rounds\n",
           c->nranks, o->mode, o->machine, o->reps, ROUNDS);
    printf("# epoch: the collectives' posted-epoch barrier; cas: the device API's CAS barrier (the one before)\n");
    printf("%6s %9s %9s %9s\n", "blocks", "epoch", "cas", "epoch/cas");
    if (csv) fprintf(csv, "coll,nranks,mode,blocks,epoch_us,cas_us\n");
  }
  const int grids[] = {1, 4, 16, 64};
  double *t = malloc(sizeof(double) * (size_t)o->reps);
  for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
    if (2 * (uint32_t)grids[g] > v.pad_slots) break;
    double us[KINDS];
    for (int k = 0; k < KINDS; k++) us[k] = time_kind(c, &v, k, grids[g], o->reps, t);
    if (c->rank == 0) {
      printf("%6d %9.3f %9.3f %9.3f\n", grids[g], us[0], us[1], us[0] / us[1]);
      if (csv) fprintf(csv, "barrier,%d,%s,%d,%.4f,%.4f\n", c->nranks, o->mode, grids[g], us[0], us[1]);
    }
  }
  free(t);
  if (csv) fclose(csv);
  bench_barrier(c);
  symcoll_mem_free(mem);
  return 0;
}
#else
int bench_barrier_rank(bctx_t *c, const bench_mm_opts_t *o) {
  (void)o;
  if (c->rank == 0) printf("# barrier: GPU ranks only (built without CUDA)\n");
  return 0;
}
#endif
