/*
 * The e4m3 conversion of the fused norms' FP8 output (rmsnorm.cu) and of symcoll-bench's
 * separate quantisation kernel (tools/bench/quant_kernels.cu): e4m3(v x rcp), rcp = 1 / scale
 * rounded to fp32 once, rounded to nearest even, saturating to +-448: the formula symcoll.h
 * gives, which is vLLM's and TensorRT-LLM's (their quantisation multiplies by the inverted scale).
 */
#ifndef SYMCOLL_CUDA_FP8_CUH
#define SYMCOLL_CUDA_FP8_CUH

#include <cuda_fp8.h>

namespace symcoll_cuda {

/* The product is rounded on its own (no fma with what computed v), as the host rounds it. */
__device__ __forceinline__ unsigned char to_e4m3(float v, float rcp) {
  return (unsigned char)__nv_cvt_float_to_fp8(__fmul_rn(v, rcp), __NV_SATFINITE, __NV_E4M3);
}
/* Two elements in one conversion (cvt.rn.satfinite.e4m3x2.f32 on sm_89 and later): lo's byte,
 * then hi's. */
__device__ __forceinline__ unsigned short to_e4m3x2(float lo, float hi, float rcp) {
  return __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(lo, rcp), __fmul_rn(hi, rcp)), __NV_SATFINITE, __NV_E4M3);
}

}  // namespace symcoll_cuda

#endif
