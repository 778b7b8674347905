// fp8 conversion epilogue micro-test: per-element IEEE division vs reciprocal + one correction
#include <cuda_fp8.h>
#include <cstdio>
#include <vector>
#include <algorithm>
__device__ __forceinline__ float div_mk(float a, float b, float y) {
  float q = __fmul_rn(a, y);
  float r = __fmaf_rn(-q, b, a);
  return __fmaf_rn(r, y, q);
}
template <int V>
__global__ void k(const float *in, unsigned char *out, const float *sp, int reps) {
  float s = *sp, y = __frcp_rn(s);
  float f[16];
  for (int e = 0; e < 16; e++) f[e] = in[threadIdx.x * 16 + e];
  unsigned acc = 0;
  for (int r = 0; r < reps; r++) {
#pragma unroll
    for (int e = 0; e < 16; e++) {
      float q = V == 0 ? __fdiv_rn(f[e], s) : V == 1 ? div_mk(f[e], s, y) : f[e] * s;
      unsigned char c = (unsigned char)__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
      acc += c;
      f[e] += 1e-7f * c;
    }
  }
  out[threadIdx.x] = (unsigned char)acc;
}
int main() {
  const int n = 256 * 16;
  float *in, *sp;
  unsigned char *out;
  cudaMalloc(&in, n * 4);
  cudaMalloc(&out, 256);
  cudaMalloc(&sp, 4);
  float s = 1.0f / 64;
  cudaMemcpy(sp, &s, 4, cudaMemcpyHostToDevice);
  for (int pat = 0; pat < 3; pat++) {
    std::vector<float> h(n);
    for (int i = 0; i < n; i++)
      h[i] = pat == 0 ? 0.5f + (i % 97) / 32.0f : pat == 1 ? (i % 2 ? 0.0f : 1.5f) : (i % 3 - 1) * 0.25f;
    cudaMemcpy(in, h.data(), n * 4, cudaMemcpyHostToDevice);
    for (int reps : {1, 64}) {
      for (int v = 0; v < 3; v++) {
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        std::vector<float> t;
        for (int rep = 0; rep < 21; rep++) {
          cudaEventRecord(a);
          for (int i = 0; i < 200; i++) {
            if (v == 0)
              k<0><<<1, 256>>>(in, out, sp, reps);
            else if (v == 1)
              k<1><<<1, 256>>>(in, out, sp, reps);
            else
              k<2><<<1, 256>>>(in, out, sp, reps);
          }
          cudaEventRecord(b);
          cudaEventSynchronize(b);
          float ms;
          cudaEventElapsedTime(&ms, a, b);
          t.push_back(ms * 1e3f / 200);
        }
        std::sort(t.begin(), t.end());
        printf("pattern %d (%s) reps %2d %-10s %8.3f us a launch\n", pat,
               pat == 0   ? "normal"
               : pat == 1 ? "half zeros"
                          : "-0.25,0,0.25",
               reps,
               v == 0   ? "fdiv_rn"
               : v == 1 ? "rcp+fma"
                        : "mul",
               t[10]);
      }
    }
  }
  // bits: rcp+fma against division over many values and scales (host-side check is separate)
  return 0;
}
