/* symcoll-bench --coll all_reduce_rmsnorm --fp8 (coll_rmsnorm.c): the unfused chain's separate
 * quantisation kernel, out (fp32 / fp16 / bf16) to FP8 e4m3 with a static scale or a scale per
 * row, by the formula symcoll.h gives for the fused call (so the results compare bit for bit):
 *   scale = max(max|out| / 448, 1 / (448 * 512)) over the row (dynamic), or *static_scale
 *   q     = e4m3(out x rcp), rcp = 1 / scale rounded to fp32, nearest even, saturating to +-448
 * A block per row: the row's amax (dynamic), then its elements, 16 bytes of out a thread at a
 * time where the row allows it. Launched as the library launches its kernels: with programmatic
 * dependent launch where SYMCOLL_PDL says so, so that the chain and the fused call pay the same
 * for their launches. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "fp8.cuh" /* the library's e4m3(v x rcp), so that the chain pays what the fused call does */
#include "grid_dependency.cuh"

namespace {

constexpr int kThreads = 256;
constexpr float kFp8Max = 448.0f;

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

__device__ float block_max(float v) {
  __shared__ float red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? red[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0) red[0] = v;
  __syncthreads();
  return red[0];
}

template <int N>
struct __align__(N) Bytes {
  unsigned char b[N];
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    Quant_Fp8(const T *out, unsigned char *q, const float *static_scale, float *row_scales, size_t hidden) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int V = 16 / sizeof(T); /* elements in 16 bytes */
  const T *o = out + blockIdx.x * hidden;
  unsigned char *d = q + blockIdx.x * hidden;
  const bool packed =
      hidden % V == 0 && reinterpret_cast<uintptr_t>(o) % 16 == 0 && reinterpret_cast<uintptr_t>(d) % V == 0;
  float scale;
  if (row_scales) {
    float amax = 0.0f;
    if (packed)
      for (size_t p = threadIdx.x; p < hidden / V; p += kThreads) {
        T v[V];
        *reinterpret_cast<uint4 *>(v) = reinterpret_cast<const uint4 *>(o)[p];
#pragma unroll
        for (int e = 0; e < V; e++) amax = fmaxf(amax, fabsf(to_f(v[e])));
      }
    else
      for (size_t i = threadIdx.x; i < hidden; i += kThreads) amax = fmaxf(amax, fabsf(to_f(o[i])));
    amax = block_max(amax);
    scale = fmaxf(__fdiv_rn(amax, kFp8Max), 1.0f / (kFp8Max * 512.0f));
    if (threadIdx.x == 0) row_scales[blockIdx.x] = scale;
  } else {
    scale = *static_scale;
  }
  const float rcp = __frcp_rn(scale);
  if (packed)
    for (size_t p = threadIdx.x; p < hidden / V; p += kThreads) {
      T v[V];
      Bytes<V> b;
      *reinterpret_cast<uint4 *>(v) = reinterpret_cast<const uint4 *>(o)[p];
#pragma unroll
      for (int e = 0; e < V; e += 2) {
        const unsigned short two = symcoll_cuda::to_e4m3x2(to_f(v[e]), to_f(v[e + 1]), rcp);
        b.b[e] = (unsigned char)two, b.b[e + 1] = (unsigned char)(two >> 8);
      }
      reinterpret_cast<Bytes<V> *>(d)[p] = b; /* one store of V bytes */
    }
  else
    for (size_t i = threadIdx.x; i < hidden; i += kThreads) d[i] = symcoll_cuda::to_e4m3(to_f(o[i]), rcp);
}

template <typename T>
cudaError_t launch(bool pdl, cudaStream_t s, size_t rows, const void *out, unsigned char *d, const float *static_scale,
                   float *row_scales, size_t hidden) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3((unsigned)rows);
  c.blockDim = dim3(kThreads);
  c.stream = s;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = attr;
  c.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&c, Quant_Fp8<T>, (const T *)out, d, static_scale, row_scales, hidden);
}

}  // namespace

/* dtype_size: 4 (fp32), 2 with bf16 true (bf16) or false (fp16). Exactly one of static_scale
 * (device memory) and row_scales. pdl: launched with programmatic stream serialization.
 * Enqueued on stream; returns a cudaError_t. */
extern "C" int bench_quant_fp8(const void *out, void *q, const float *static_scale, float *row_scales, size_t rows,
                               size_t hidden, int dtype_size, int bf16, int pdl, void *stream) {
  if (rows == 0) return (int)cudaSuccess;
  const cudaStream_t s = (cudaStream_t)stream;
  unsigned char *d = (unsigned char *)q;
  if (dtype_size == 4) return (int)launch<float>(pdl, s, rows, out, d, static_scale, row_scales, hidden);
  if (bf16) return (int)launch<__nv_bfloat16>(pdl, s, rows, out, d, static_scale, row_scales, hidden);
  return (int)launch<__half>(pdl, s, rows, out, d, static_scale, row_scales, hidden);
}
