/*
 * The one kernel of the overlapped GEMM operations (cuda_matmul.c): matmul_reduce_scatter's
 * last step, which sums the partial products that every rank pushed into this rank's
 * staging, slot by slot in rank order, in the dtype's accumulation type (the rule of every
 * reduction here, so the result has the bits symcoll_reduce_scatter would give).
 */
#include "device_common.cuh"

namespace {

template <typename T>
__global__ void Matmul_ReduceSlots(const T *__restrict__ src, size_t slot_elems, int nslots, T *__restrict__ dst,
                                   size_t count) {
  using C = symcoll_cuda::Conv<T>;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
    typename C::Acc acc = C::load(src[i]);
    for (int s = 1; s < nslots; s++) acc = symcoll_cuda::combine<SYMCOLL_SUM>(acc, C::load(src[s * slot_elems + i]));
    dst[i] = C::store(acc);
  }
}

template <typename T>
const void *reduce_slots_fn() {
  return (const void *)Matmul_ReduceSlots<T>;
}

}  // namespace

extern "C" int symcoll__cuda_reduce_slots(const void *src, size_t slot_elems, int nslots, void *dst, size_t count,
                                          int dtype, void *stream) {
  const unsigned threads = 256,
                 blocks = (unsigned)((count + threads - 1) / threads < 1024 ? (count + threads - 1) / threads : 1024);
  switch (dtype) {
    case SYMCOLL_FLOAT16:
      Matmul_ReduceSlots<<<blocks, threads, 0, (cudaStream_t)stream>>>((const __half *)src, slot_elems, nslots,
                                                                       (__half *)dst, count);
      break;
    case SYMCOLL_BFLOAT16:
      Matmul_ReduceSlots<<<blocks, threads, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)src, slot_elems, nslots,
                                                                       (__nv_bfloat16 *)dst, count);
      break;
    default:
      Matmul_ReduceSlots<<<blocks, threads, 0, (cudaStream_t)stream>>>((const float *)src, slot_elems, nslots,
                                                                       (float *)dst, count);
  }
  return (int)cudaGetLastError();
}

/* For symcoll__cuda_preload: every kernel is loaded at creation (see launch.cu). */
extern "C" int symcoll__cuda_preload_matmul(void) {
  cudaFuncAttributes attr;
  const void *fns[] = {reduce_slots_fn<float>(), reduce_slots_fn<__half>(), reduce_slots_fn<__nv_bfloat16>()};
  for (const void *fn : fns) {
    cudaError_t e = cudaFuncGetAttributes(&attr, fn);
    if (e != cudaSuccess) return (int)e;
  }
  return (int)cudaSuccess;
}
