/*
 * Element conversions on a stream for the NCCL engine (nccl.c): NCCL refuses ncclAvg on fp8
 * ("invalid argument", NCCL 2.28), so an fp8 AVG is widened to fp32, summed by NCCL in fp32,
 * then divided once and rounded back here, as symcoll's own kernels do it (device_common.cuh:
 * the sum in fp32, one IEEE division, one rounding with saturation).
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void Widen(float *dst, const T *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = Conv<T>::load(src[i]);
}

template <typename T>
__global__ void NarrowAvg(T *dst, const float *sum, size_t n, int nranks) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = Conv<T>::store(finish<SYMCOLL_AVG>(sum[i], nranks));
}

unsigned grid_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1024 ? b : 1024);
}

template <typename T>
int widen(float *dst, const void *src, size_t n, cudaStream_t st) {
  Widen<T><<<grid_for(n), kThreads, 0, st>>>(dst, (const T *)src, n);
  return (int)cudaGetLastError();
}

template <typename T>
int narrow_avg(void *dst, const float *sum, size_t n, int nranks, cudaStream_t st) {
  NarrowAvg<T><<<grid_for(n), kThreads, 0, st>>>((T *)dst, sum, n, nranks);
  return (int)cudaGetLastError();
}

}  // namespace
}  // namespace symcoll_cuda

using symcoll_cuda::fp8_e4m3;
using symcoll_cuda::fp8_e5m2;

extern "C" int symcoll__cuda_fp8_widen(float *dst, const void *src, size_t n, symcoll_dtype_t dt, void *stream) {
  if (n == 0) return (int)cudaSuccess;
  switch (dt) {
    case SYMCOLL_FLOAT8_E4M3:
      return symcoll_cuda::widen<fp8_e4m3>(dst, src, n, (cudaStream_t)stream);
    case SYMCOLL_FLOAT8_E5M2:
      return symcoll_cuda::widen<fp8_e5m2>(dst, src, n, (cudaStream_t)stream);
    default:
      return (int)cudaErrorInvalidValue;
  }
}

extern "C" int symcoll__cuda_fp8_narrow_avg(void *dst, const float *sum, size_t n, int nranks, symcoll_dtype_t dt,
                                            void *stream) {
  if (n == 0) return (int)cudaSuccess;
  switch (dt) {
    case SYMCOLL_FLOAT8_E4M3:
      return symcoll_cuda::narrow_avg<fp8_e4m3>(dst, sum, n, nranks, (cudaStream_t)stream);
    case SYMCOLL_FLOAT8_E5M2:
      return symcoll_cuda::narrow_avg<fp8_e5m2>(dst, sum, n, nranks, (cudaStream_t)stream);
    default:
      return (int)cudaErrorInvalidValue;
  }
}

extern "C" int symcoll__cuda_preload_convert(void) {
  cudaFuncAttributes attr;
  const void *fns[] = {(const void *)symcoll_cuda::Widen<fp8_e4m3>, (const void *)symcoll_cuda::Widen<fp8_e5m2>,
                       (const void *)symcoll_cuda::NarrowAvg<fp8_e4m3>,
                       (const void *)symcoll_cuda::NarrowAvg<fp8_e5m2>};
  for (const void *fn : fns) {
    cudaError_t e = cudaFuncGetAttributes(&attr, fn);
    if (e != cudaSuccess) return (int)e;
  }
  return (int)cudaSuccess;
}
