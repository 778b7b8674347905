/*
 * Element-wise passes on a stream beside the collectives:
 *  - for the NCCL engine (nccl.c): NCCL refuses ncclAvg on fp8 ("invalid argument", NCCL
 *    2.28), so an fp8 AVG is widened to fp32, summed by NCCL in fp32, then divided once and
 *    rounded back here, as symcoll's own kernels do it (device_common.cuh: the sum in fp32, one
 *    IEEE division, one rounding with saturation);
 *  - a rank's input times its scale before a sum (the options' scale, NCCL's PreMulSum), the
 *    product of SYMCOLL_PROD, the scale read from the GPU when the kernel runs where it lives
 *    there;
 *  - a one-rank collective's copy of its input to its output (up to a few MiB: a kernel
 *    launch costs less than a copy engine's start, on the host and on the GPU).
 */
#include <string.h>

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

/* hbits: the host's scale, its bytes (one signature for every dtype: one launch path). */
template <typename T>
__global__ void Scale(T *dst, const T *src, size_t n, const T *dscale, uint64_t hbits) {
  using C = Conv<T>;
  T h;
  memcpy(&h, &hbits, sizeof h);
  const typename C::Acc s = C::load(dscale ? *dscale : h);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = C::store(combine<SYMCOLL_PROD>(C::load(src[i]), s));
}

/* n 16-byte units. */
__global__ void Copy(uint4 *dst, const uint4 *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
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

static const void *scale_kernel(symcoll_dtype_t dt) {
  return symcoll_cuda::with_dtype(dt, [&](auto *type) -> const void * {
    using T = typename std::remove_pointer<decltype(type)>::type;
    return (const void *)symcoll_cuda::Scale<T>;
  });
}

extern "C" int symcoll__cuda_scale(void *dst, const void *src, size_t n, symcoll_dtype_t dt, const void *scale,
                                   int on_device, void *stream) {
  if (n == 0) return (int)cudaSuccess;
  const void *dscale = on_device ? scale : nullptr;
  uint64_t hbits = 0;
  if (!on_device) memcpy(&hbits, scale, symcoll_dtype_size(dt));
  void *args[] = {&dst, &src, &n, &dscale, &hbits};
  return (int)cudaLaunchKernel(scale_kernel(dt), dim3(symcoll_cuda::grid_for(n)), dim3(symcoll_cuda::kThreads), args, 0,
                               (cudaStream_t)stream);
}

/* dst, src and bytes 16-byte aligned (symcoll__cuda_copy sends the others to the copy engine).
 * The launch's own status: an error left pending by other work is not taken for ours. */
extern "C" int symcoll__cuda_copy_kernel(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return (int)cudaSuccess;
  size_t n = bytes / 16;
  void *args[] = {&dst, &src, &n};
  return (int)cudaLaunchKernel((const void *)symcoll_cuda::Copy, dim3(symcoll_cuda::grid_for(n)),
                               dim3(symcoll_cuda::kThreads), args, 0, (cudaStream_t)stream);
}

extern "C" int symcoll__cuda_preload_convert(void) {
  cudaFuncAttributes attr;
  const void *fns[] = {(const void *)symcoll_cuda::Widen<fp8_e4m3>, (const void *)symcoll_cuda::Widen<fp8_e5m2>,
                       (const void *)symcoll_cuda::NarrowAvg<fp8_e4m3>, (const void *)symcoll_cuda::NarrowAvg<fp8_e5m2>,
                       (const void *)symcoll_cuda::Copy};
  for (const void *fn : fns) {
    cudaError_t e = cudaFuncGetAttributes(&attr, fn);
    if (e != cudaSuccess) return (int)e;
  }
  for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) {
    const cudaError_t e = cudaFuncGetAttributes(&attr, scale_kernel((symcoll_dtype_t)d));
    if (e != cudaSuccess) return (int)e;
  }
  return (int)cudaSuccess;
}
