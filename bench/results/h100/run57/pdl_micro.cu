// Programmatic dependent launch: what it saves between back-to-back small kernels in a CUDA graph (H100).
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x)                                         \
  do {                                                \
    cudaError_t e_ = (x);                             \
    if (e_ != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                       \
    }                                                 \
  } while (0)
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
template <int MODE>  // 0 none, 1 wait+trigger at start, 2 wait at start, trigger at end
__global__ void norm1(const __nv_bfloat16 *x, const __nv_bfloat16 *r, __nv_bfloat16 *y, int h) {
  if (MODE) pdl_wait();
  if (MODE == 1) pdl_trigger();
  __shared__ float s[32];
  float acc = 0.f;
  float v[8];
  int i0 = threadIdx.x * 8;
  for (int e = 0; e < 8; e++) {
    v[e] = i0 + e < h ? __bfloat162float(x[i0 + e]) + __bfloat162float(r[i0 + e]) : 0.f;
    acc += v[e] * v[e];
  }
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
  __syncthreads();
  float t = threadIdx.x < blockDim.x / 32 ? s[threadIdx.x] : 0.f;
  for (int o = 16; o; o >>= 1) t += __shfl_xor_sync(~0u, t, o);
  float inv = rsqrtf(t / h + 1e-6f);
  for (int e = 0; e < 8; e++)
    if (i0 + e < h) y[i0 + e] = __float2bfloat16(v[e] * inv);
  if (MODE == 2) pdl_trigger();
}
template <int MODE>
__global__ void heavy(float *buf, int n, int iters) {  // a GEMM-like predecessor: every SM busy a few us
  if (MODE) pdl_wait();
  if (MODE == 1) pdl_trigger();
  float a = buf[blockIdx.x * blockDim.x + threadIdx.x];
  for (int k = 0; k < iters; k++) a = a * 1.0000001f + 0.5f;
  buf[blockIdx.x * blockDim.x + threadIdx.x] = a;
  if (MODE == 2) pdl_trigger();
}
template <typename K, typename... A>
static cudaError_t launch(K k, int blocks, int threads, bool pdl, cudaStream_t s, A... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(blocks);
  c.blockDim = dim3(threads);
  c.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at;
  c.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&c, k, args...);
}
int main() {
  const int h = 4096, calls = 20, reps = 200;
  __nv_bfloat16 *x, *r, *y;
  float *buf;
  CK(cudaMalloc(&x, h * 2));
  CK(cudaMalloc(&r, h * 2));
  CK(cudaMalloc(&y, h * 2));
  CK(cudaMalloc(&buf, 132 * 1024 * 4 * 4));
  CK(cudaMemset(x, 0, h * 2));
  CK(cudaMemset(r, 0, h * 2));
  CK(cudaMemset(buf, 0, 132 * 1024 * 16));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct V {
    const char *name;
    int mode;
    bool pdl;
    int heavy_mode;
    bool heavy_pdl;
    int with_heavy;
  };
  V vs[] = {{"norm x20, plain", 0, false, 0, false, 0},
            {"norm x20, pdl wait+trigger at start", 1, true, 0, false, 0},
            {"norm x20, pdl wait at start, trigger at end", 2, true, 0, false, 0},
            {"norm x20, attr only, no wait (kernel waits nothing: UNSAFE, floor)", 0, true, 0, false, 0},
            {"(heavy+norm) x20, plain", 0, false, 0, false, 1},
            {"(heavy+norm) x20, norm pdl, heavy triggers at start", 1, true, 1, true, 1},
            {"(heavy+norm) x20, norm pdl, heavy triggers at end", 1, true, 2, true, 1},
            {"(heavy+norm) x20, norm pdl, heavy never triggers", 1, true, 0, false, 1},
            {"heavy x20 alone", -1, false, 0, false, 1}};
  for (int turn = 0; turn < 3; turn++)
    for (auto &v : vs) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int c = 0; c < calls; c++) {
        if (v.with_heavy) {
          cudaError_t e = v.heavy_mode == 1   ? launch(heavy<1>, 132, 1024, v.heavy_pdl, s, buf, 0, 2000)
                          : v.heavy_mode == 2 ? launch(heavy<2>, 132, 1024, v.heavy_pdl, s, buf, 0, 2000)
                                              : launch(heavy<0>, 132, 1024, v.heavy_pdl, s, buf, 0, 2000);
          CK(e);
        }
        if (v.mode < 0) continue;
        cudaError_t e =
            v.mode == 1 ? launch(norm1<1>, 1, 512, v.pdl, s, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)r, y, h)
            : v.mode == 2
                ? launch(norm1<2>, 1, 512, v.pdl, s, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)r, y, h)
                : launch(norm1<0>, 1, 512, v.pdl, s, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)r, y, h);
        CK(e);
      }
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      for (int w = 0; w < 20; w++) CK(cudaGraphLaunch(ge, s));
      std::vector<float> t;
      for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.f / calls);
      }
      std::sort(t.begin(), t.end());
      printf("turn %d  %-70s median %.3f us a call (p10 %.3f p90 %.3f)\n", turn, v.name, t[reps / 2], t[reps / 10],
             t[reps * 9 / 10]);
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(g));
    }
  return 0;
}
