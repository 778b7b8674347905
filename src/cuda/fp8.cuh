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
__device__ __forceinline__ unsigned char to_e4m3(float v, float scale, float rcp) {
  const float q = __fmul_rn(v, rcp);
  const float d = isfinite(q) && q != 0.0f ? __fmaf_rn(__fmaf_rn(-q, scale, v), rcp, q) : q;
  return (unsigned char)__nv_cvt_float_to_fp8(d, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace symcoll_cuda

#endif
