/* symcoll-bench --coll barrier (coll_barrier.c): `rounds` barriers back to back in one launch,
 * each block of every rank on a slot of its own, for the two barriers the GPU kernels have had:
 *   epoch  the collectives' posted-epoch barrier (src/cuda/device_common.cuh epoch_barrier): a
 *          release store of {epoch, value} into each peer's pad, then acquire loads of its own
 *   cas    the device API's block barrier (symcoll_dev_barrier_block), the collectives' barrier
 *          before the epochs: a returning CAS on the peer's pad (put), then a CAS loop on its own
 * Both on a symmetric allocation's pads: epoch on slots from 0, cas on slots from half of
 * pad_slots (its slots must be at rest; the epochs count up). */
#include <cuda_runtime.h>

#include "device_common.cuh"
#include "symcoll_device.cuh"

namespace {

__global__ void Barrier_Epoch(const symcoll_device_view_t v, int rounds) {
  for (int i = 0; i < rounds; i++)
    if (!symcoll_cuda::epoch_barrier(v.pad, blockIdx.x, v.rank, v.nranks, 1u, v.timeout_ns, v.error)) return;
}

__global__ void Barrier_Cas(const symcoll_device_view_t v, int rounds) {
  for (int i = 0; i < rounds; i++)
    if (!symcoll_dev_barrier_block(v, v.pad_slots / 2 + blockIdx.x)) return;
}

const void *kernel(int kind) {
  return kind == 0 ? (const void *)Barrier_Epoch : (const void *)Barrier_Cas;
}

}  // namespace

/* Loads both kernels (before ranks wait on each other: a lazily loaded kernel's first launch
 * can wait for the GPU to go idle); returns a cudaError_t. */
extern "C" int bench_barrier_preload(void) {
  cudaFuncAttributes at;
  cudaError_t e = cudaFuncGetAttributes(&at, kernel(0));
  return (int)(e == cudaSuccess ? cudaFuncGetAttributes(&at, kernel(1)) : e);
}

/* kind 0: epoch, 1: cas; blocks <= pad_slots / 2, 128 threads (>= nranks). Returns a cudaError_t. */
extern "C" int bench_barrier_launch(int kind, const symcoll_device_view_t *v, int blocks, int rounds, void *stream) {
  void *args[] = {(void *)v, &rounds};
  return (int)cudaLaunchKernel(kernel(kind), dim3((unsigned)blocks), dim3(128), args, 0, (cudaStream_t)stream);
}
