/*
 * The kernels' one entry for the host: which kernel a launch runs, the launch itself (but
 * all_reduce_rmsnorm's, whose kernels take two arguments: rmsnorm.cu), loading every kernel up
 * front, and the two tiny kernels of set-up and the copy engine (the reachability probe, the
 * copy engine's barrier).
 */
#include "device_common.cuh"

namespace {

__global__ void ProbePeers(const symcoll__cuda_args_t a, uint32_t value) {
  int p = threadIdx.x;
  if (p < a.nranks) __stcg(a.pad[p] + (size_t)(SYMCOLL_CUDA_SLOTS - 1) * SYMCOLL_MAX_RANKS + a.rank, value);
}

/* One block: every rank's copy-engine call meets here with its signature. */
__global__ void CopyEngine_Barrier(const symcoll__cuda_args_t a) {
  if (!symcoll_cuda::epoch_barrier(a.pad, SYMCOLL_CUDA_CE_SLOT, a.rank, a.nranks, a.sig, a.timeout_ns, a.error))
    symcoll_cuda::publish_error(a);
}

}  // namespace

extern "C" const void *symcoll__cuda_kernel(const symcoll__cuda_launch_t *l) {
  switch (l->coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      return symcoll__cuda_allreduce_kernel(l);
    case SYMCOLL_COLL_ALL_GATHER:
    case SYMCOLL_COLL_ALL_TO_ALL: /* the all-gather kernels, block q of send to rank q */
      return symcoll__cuda_allgather_kernel(l);
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return symcoll__cuda_reducescatter_kernel(l);
    case SYMCOLL_COLL_BROADCAST:
      return symcoll__cuda_broadcast_kernel(l);
    case SYMCOLL_COLL_REDUCE: /* all_reduce's one-shot kernel, where only a.root writes */
      return l->algo == SYMCOLL_ALGO_ONE_SHOT ? symcoll__cuda_allreduce_kernel(l) : nullptr;
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM: /* launched by symcoll__cuda_rmsnorm_launch (two arguments) */
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
      return symcoll__cuda_rmsnorm_kernel(l);
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_NUM_COLL_KINDS:
      return nullptr; /* no kernel of this file's kind: the launch fails */
  }
  return nullptr;
}

extern "C" int symcoll__cuda_launch_fn(const void *fn, const symcoll__cuda_launch_t *l, void **args, void *stream) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3((unsigned)l->blocks);
  c.blockDim = dim3((unsigned)l->threads);
  c.stream = (cudaStream_t)stream;
  cudaLaunchAttribute attr[2] = {};
  unsigned n = 0;
  if (l->pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (l->cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = (unsigned)l->cluster;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  c.attrs = attr;
  c.numAttrs = n;
  return (int)cudaLaunchKernelExC(&c, fn, args);
}

extern "C" int symcoll__cuda_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a, void *stream) {
  const bool norm = l->coll == SYMCOLL_COLL_ALL_REDUCE_RMSNORM || l->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM;
  const void *fn = norm ? nullptr : symcoll__cuda_kernel(l); /* two arguments */
  if (!fn) return (int)cudaErrorInvalidDeviceFunction;
  void *args[] = {(void *)a};
  return symcoll__cuda_launch_fn(fn, l, args, stream);
}

extern "C" int symcoll__cuda_kernels_ptx_version(void) {
  symcoll__cuda_launch_t l = {};
  l.coll = SYMCOLL_COLL_ALL_REDUCE, l.algo = SYMCOLL_ALGO_ONE_SHOT, l.dtype = SYMCOLL_FLOAT32, l.op = SYMCOLL_SUM;
  cudaFuncAttributes attr;
  const void *fn = symcoll__cuda_kernel(&l);
  return fn && cudaFuncGetAttributes(&attr, fn) == cudaSuccess ? attr.ptxVersion : 0;
}

/* Loads every kernel now. With lazy loading (the default) the first launch of a kernel can
 * wait for the device to go idle, which never happens while a peer's kernel spins waiting
 * for ours: a deadlock until the timeout. */
extern "C" int symcoll__cuda_preload(void) {
  cudaFuncAttributes attr;
  for (int coll = 0; coll < SYMCOLL_NUM_COLL_KINDS; coll++)
    for (int algo = SYMCOLL_ALGO_ONE_SHOT; algo < SYMCOLL_NUM_ALGOS; algo++)
      for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++)
        for (int op = 0; op < SYMCOLL_NUM_OPS; op++)
          /* vec, early, each_peer, two_lanes; fit 0-2; fit_fp8 0-2; cluster */
          for (int variant = 0; variant < 288; variant++) {
            symcoll__cuda_launch_t l = {}; /* by name: a field added later is not misplaced */
            l.coll = (symcoll_coll_t)coll, l.algo = (symcoll_algo_t)algo, l.dtype = (symcoll_dtype_t)dt;
            l.op = (symcoll_op_t)op, l.vec = variant & 1, l.early = variant >> 1 & 1, l.each_peer = variant >> 2 & 1;
            l.two_lanes = variant >> 3 & 1, l.fit = (variant >> 4) % 3, l.fit_fp8 = (variant >> 4) / 3 % 3;
            l.cluster = variant / 144 ? 2 : 0;
            const void *fn = symcoll__cuda_kernel(&l);
            if (!fn) continue;
            cudaError_t e = cudaFuncGetAttributes(&attr, fn);
            if (e != cudaSuccess) return (int)e;
          }
  cudaError_t e = cudaFuncGetAttributes(&attr, ProbePeers);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, CopyEngine_Barrier);
  if (e == cudaSuccess) e = (cudaError_t)symcoll__cuda_preload_matmul();
  return e != cudaSuccess ? (int)e : symcoll__cuda_preload_convert();
}

extern "C" int symcoll__cuda_probe(uint32_t *const *pads, int nranks, int rank, uint32_t value, void *stream) {
  symcoll__cuda_args_t a = {};
  for (int r = 0; r < nranks; r++) a.pad[r] = pads[r];
  a.nranks = nranks;
  a.rank = rank;
  ProbePeers<<<1, 64, 0, (cudaStream_t)stream>>>(a, value);
  return (int)cudaGetLastError();
}

extern "C" int symcoll__cuda_ce_barrier(const symcoll__cuda_args_t *a, void *stream) {
  CopyEngine_Barrier<<<1, 32 * ((a->nranks + 31) / 32), 0, (cudaStream_t)stream>>>(*a);
  return (int)cudaGetLastError();
}
