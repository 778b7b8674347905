/*
 * all_reduce_rmsnorm on GPU ranks (symcoll.h): the residual add, the RMSNorm and the fp8
 * quantisation of each row, by one block per row (rows in a grid-stride loop), in fp32, with the
 * arithmetic of the CPU path (src/host/host_rmsnorm.c) but the sum of squares of a row taken
 * as a block reduction (per-thread partial sums, then a fixed butterfly): the same bits on
 * every rank and in both kernels below, since the block size is a function of hidden alone
 * (cuda_coll.c), but not the CPU path's order of that one sum.
 *
 * RmsNorm_Local: the local pass (algorithm SEQUENTIAL, and one rank): x already holds the sum
 *   over ranks. Core runs the all-reduce before it (src/core/norm.c).
 * RmsNorm_OneShot: the fused call (ONE_SHOT), on the protocol of AllReduce_OneShot
 *   (allreduce.cu): each block stages the rows it owns into this rank's workspace (or peers
 *   read x where it lies: zero-copy), meets its twin blocks at a barrier with the call's
 *   signature, reduces each of its rows from every rank's copy in rank order in fp32 and
 *   rounds it to the dtype (the bits of symcoll_all_reduce), runs the epilogue, and meets its
 *   twins again before the workspace is staged over. Rows that do not fit the workspace go in
 *   rounds of whole rows inside the one kernel; a row larger than the workspace is refused by
 *   the host (UNSUPPORTED).
 * Per row: pass 1 computes r (and writes residual_out) and the sum of squares; pass 2 computes
 * out (and, with a static scale, the fp8 output; with dynamic scales the row's amax); pass 3
 * (dynamic scales only) writes the scale and the fp8 output. Every element is read and
 * written by one thread, so out == x and residual_out == residual are safe: a later pass reads
 * r back from residual_out where there is one, and out back from out; otherwise it recomputes
 * them from x (and residual), which only that same thread may have overwritten, after it read
 * them.
 * Not yet done: TWO_SHOT and LAMPORT (has_algo says no); 16-byte vector loads (the kernels
 * load element by element, coalesced); keeping a row in registers or shared memory instead of
 * the second and third passes over memory.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

constexpr float kFp8Max = 448.0f;

/* The op over the block of one float per thread (blockDim.x a multiple of 32): a butterfly in
 * each warp, then warp 0 over the warps' results in warp order; every thread gets the result.
 * red: 33 floats of shared memory. */
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float *red, Op op) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? red[lane] : 0.0f; /* 0: the identity of both uses (sums of squares, amax) */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) red[32] = v;
  }
  __syncthreads();
  return red[32];
}

struct Add {
  __device__ float operator()(float x, float y) const { return __fadd_rn(x, y); }
};
struct Max {
  __device__ float operator()(float x, float y) const { return fmaxf(x, y); }
};

__device__ __forceinline__ unsigned char to_e4m3(float v, float scale) {
  return (unsigned char)__nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3);
}

/* One row's epilogue. sum_at(i): element i of the row's sum over ranks, rounded to T. */
template <typename T, typename Sum>
__device__ __forceinline__ void norm_row(const symcoll__cuda_norm_t &n, size_t row, Sum sum_at, float *red) {
  using C = Conv<T>;
  const size_t h = n.hidden, off = row * h;
  const T *res = n.residual ? reinterpret_cast<const T *>(n.residual) + off : nullptr;
  const T *w = reinterpret_cast<const T *>(n.weight);
  T *res_out = n.residual_out ? reinterpret_cast<T *>(n.residual_out) + off : nullptr;
  T *out = n.out ? reinterpret_cast<T *>(n.out) + off : nullptr;
  unsigned char *fp8 = n.fp8_out ? n.fp8_out + off : nullptr;
  /* r = s + residual rounded to T (no residual: s); read back from residual_out once written. */
  auto r_at = [&](size_t i) -> T { return res ? C::store(C::load(sum_at(i)) + C::load(res[i])) : sum_at(i); };
  float ss = 0.0f;
  for (size_t i = threadIdx.x; i < h; i += blockDim.x) {
    const T r = r_at(i);
    if (res_out) res_out[i] = r;
    const float f = C::load(r);
    ss = __fadd_rn(ss, __fmul_rn(f, f)); /* not fused: as the CPU's (-ffp-contract=off) */
  }
  const float sumsq = block_reduce(ss, red, Add{});
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sumsq, (float)h), n.eps)));
  auto out_at = [&](size_t i) -> T {
    const T r = res_out ? res_out[i] : r_at(i);
    return C::store(__fmul_rn(__fmul_rn(C::load(r), inv), C::load(w[i])));
  };
  const bool dynamic = fp8 && n.fp8_row_scales;
  const float fixed = fp8 && !dynamic ? *n.fp8_scale : 1.0f;
  float amax = 0.0f;
  for (size_t i = threadIdx.x; i < h; i += blockDim.x) {
    const T o = out_at(i);
    if (out) out[i] = o;
    if (dynamic)
      amax = fmaxf(amax, fabsf(C::load(o)));
    else if (fp8)
      fp8[i] = to_e4m3(C::load(o), fixed);
  }
  if (!dynamic) return;
  amax = block_reduce(amax, red, Max{});
  const float scale = fmaxf(__fdiv_rn(amax, kFp8Max), 1.0f / (kFp8Max * 512.0f));
  if (threadIdx.x == 0) n.fp8_row_scales[row] = scale;
  for (size_t i = threadIdx.x; i < h; i += blockDim.x) fp8[i] = to_e4m3(C::load(out ? out[i] : out_at(i)), scale);
}

template <typename T>
__global__ void __launch_bounds__(1024) RmsNorm_Local(const symcoll__cuda_norm_t n) {
  __shared__ float red[33];
  /* The chain's all-reduce, before this on the stream, gave up: its output is not a sum. */
  __shared__ uint32_t gave_up; /* one read for the block: every thread takes the same branch */
  if (threadIdx.x == 0) gave_up = n.error ? *(volatile const uint32_t *)n.error : 0u;
  __syncthreads();
  if (gave_up) return;
  const T *x = reinterpret_cast<const T *>(n.x);
  for (size_t row = blockIdx.x; row < n.rows; row += gridDim.x) {
    const T *s = x + row * n.hidden;
    norm_row<T>(
        n, row, [&](size_t i) { return s[i]; }, red);
  }
}

/* Block b of every rank owns rows b, b + grid, ... of each round, stages them, and reads them
 * from every rank after the barrier that block b of every rank meets: the rule of every kernel
 * here (a block reads only what its twins staged). */
template <typename T>
__global__ void __launch_bounds__(1024) RmsNorm_OneShot(const symcoll__cuda_args_t a, const symcoll__cuda_norm_t n) {
  __shared__ float red[33];
  const size_t rb = n.hidden * sizeof(T);
  const size_t round = a.zero_copy ? n.rows : n.rows_per_round;
  for (size_t base = 0; base < n.rows; base += round) {
    const size_t cnt = n.rows - base < round ? n.rows - base : round;
    if (!a.zero_copy)
      for (size_t j = blockIdx.x; j < cnt; j += gridDim.x)
        symcoll_impl::block_copy(a.ws[a.rank] + j * rb, n.x + (base + j) * rb, rb);
    BARRIER(a);
    for (size_t j = blockIdx.x; j < cnt; j += gridDim.x) {
      /* Rank r's copy of row base + j: its staging, or its input (zero-copy). */
      auto src = [&](int r) -> const char * { return (a.zero_copy ? a.src[r] + base * rb : a.ws[r]) + j * rb; };
      norm_row<T>(
          n, base + j, [&](size_t i) { return reduce_at<T, SYMCOLL_SUM, ONE>(src, a.nranks, i).e[0]; }, red);
    }
    /* Peers are done reading this block's rows of our workspace (or of our input). */
    BARRIER(a);
  }
}

template <typename T>
const void *pick(symcoll_algo_t algo) {
  switch (algo) {
    case SYMCOLL_ALGO_SEQUENTIAL:
      return (const void *)RmsNorm_Local<T>;
    case SYMCOLL_ALGO_ONE_SHOT:
      return (const void *)RmsNorm_OneShot<T>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_rmsnorm_kernel(const symcoll__cuda_launch_t *l) {
  switch (l->dtype) {
    case SYMCOLL_FLOAT32:
      return symcoll_cuda::pick<float>(l->algo);
    case SYMCOLL_FLOAT16:
      return symcoll_cuda::pick<__half>(l->algo);
    case SYMCOLL_BFLOAT16:
      return symcoll_cuda::pick<__nv_bfloat16>(l->algo);
    default:
      return nullptr; /* the norm takes fp32, fp16 and bf16 only */
  }
}

extern "C" int symcoll__cuda_rmsnorm_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a,
                                            const symcoll__cuda_norm_t *n, void *stream) {
  const void *fn = symcoll__cuda_rmsnorm_kernel(l);
  if (!fn) return (int)cudaErrorInvalidDeviceFunction;
  void *one[] = {(void *)n}, *two[] = {(void *)a, (void *)n};
  return (int)cudaLaunchKernel(fn, dim3((unsigned)l->blocks), dim3((unsigned)l->threads),
                               l->algo == SYMCOLL_ALGO_SEQUENTIAL ? one : two, 0, (cudaStream_t)stream);
}
