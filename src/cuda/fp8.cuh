/*
 * The e4m3 conversion of the fused norms' FP8 output (rmsnorm.cu) and of symcoll-bench's
 * separate quantisation kernel (tools/bench/quant_kernels.cu): e4m3(v / scale), rounded to
 * nearest even, saturating to +-448, the formula symcoll.h gives.
 */
#ifndef SYMCOLL_CUDA_FP8_CUH
#define SYMCOLL_CUDA_FP8_CUH

#include <cuda_fp8.h>

namespace symcoll_cuda {

/* v / scale correctly rounded, from rcp = 1 / scale correctly rounded: q = v x rcp is within an
 * ulp, the residual v - q x scale is exact in an fma, and one correction rounds it (Markstein);
 * zeros (their sign), infinities and NaN keep q. The quotient can differ from v / scale by an
 * ulp only far below e4m3's smallest step or past its range (0 or saturated alike): the fp8
 * bytes are those of v / scale (4e8 pairs, subnormals, zeros and infinities among them,
 * checked against the host's division). An IEEE division an element costs more, and takes a
 * slow path for some operands. */
__device__ __forceinline__ float e4m3_quotient(float v, float scale, float rcp) {
  const float q = __fmul_rn(v, rcp);
  return isfinite(q) && q != 0.0f ? __fmaf_rn(__fmaf_rn(-q, scale, v), rcp, q) : q;
}
__device__ __forceinline__ unsigned char to_e4m3(float v, float scale, float rcp) {
  return (unsigned char)__nv_cvt_float_to_fp8(e4m3_quotient(v, scale, rcp), __NV_SATFINITE, __NV_E4M3);
}
/* Two elements in one conversion (cvt.rn.satfinite.e4m3x2.f32 on sm_89 and later): lo's byte,
 * then hi's. */
__device__ __forceinline__ unsigned short to_e4m3x2(float lo, float hi, float scale, float rcp) {
  return __nv_cvt_float2_to_fp8x2(make_float2(e4m3_quotient(lo, scale, rcp), e4m3_quotient(hi, scale, rcp)),
                                  __NV_SATFINITE, __NV_E4M3);
}

}  // namespace symcoll_cuda

#endif
