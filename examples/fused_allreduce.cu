/*
 * A user kernel that fuses its own computation with an all-reduce through the device API:
 * each rank scales its input into its symmetric buffer, meets the other ranks at a
 * block-wise barrier, sums every rank's buffer and writes the result, then meets them again
 * so the buffer can be reused. No pointer table and no extra launch: the view is passed by
 * value.   build/bin/symcoll-example-fused --ranks 4   (thread mode, ranks spread over GPUs)
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <symcoll.h>
#include <symcoll_device.cuh>

__global__ void scale_and_allreduce(symcoll_device_view_t v, const float *in, float *out, size_t n, float scale) {
  float *mine = static_cast<float *>(v.buf[v.rank]);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = first; i < n; i += stride) mine[i] = in[i] * scale; /* the fused compute */
  if (!symcoll_dev_barrier_block(v, /*slot=*/blockIdx.x)) return;     /* timed out: give up */
  for (size_t i = first; i < n; i += stride) {
    float acc = 0;
    for (int r = 0; r < v.nranks; r++) acc += __ldcg(static_cast<const float *>(v.buf[r]) + i);
    out[i] = acc;
  }
  symcoll_dev_barrier_block(v, /*slot=*/blockIdx.x); /* peers are done reading `mine` */
}

static int run_rank(symcoll_comm_t comm, size_t n, int *ok) {
  const int rank = symcoll_comm_rank(comm), nranks = symcoll_comm_nranks(comm);
  cudaSetDevice(symcoll_comm_device(comm));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  /* Plain CUDA allocations before the collective one: they can block while a peer's kernel
   * spins, and peers may start spinning as soon as symcoll_mem_alloc returns. */
  float *in, *out;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  symcoll_mem_t mem;
  if (symcoll_mem_alloc(comm, n * sizeof(float), &mem) != SYMCOLL_OK) return 1;
  symcoll_device_view_t view;
  symcoll_mem_device_view(mem, &view);
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) h[i] = (float)(rank + 1) * (float)(i % 5);
  /* Copies on the same stream as the kernel: a pageable cudaMemcpy on the legacy stream
   * may return before its data lands, and a non-blocking stream would not wait for it. */
  cudaMemcpyAsync(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream);
  int blocks = (int)((n + 255) / 256);
  if (blocks > 8) blocks = 8; /* small enough to be co-resident with every other rank */
  scale_and_allreduce<<<blocks, 256, 0, stream>>>(view, in, out, n, 2.0f);
  cudaMemcpyAsync(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  const float sum_ranks = (float)nranks * (float)(nranks + 1);
  *ok = symcoll_comm_check(comm) == SYMCOLL_OK && cudaGetLastError() == cudaSuccess;
  for (size_t i = 0; i < n && *ok; i++) *ok = h[i] == sum_ranks * (float)(i % 5);
  cudaFree(in);
  cudaFree(out);
  symcoll_mem_free(mem);
  cudaStreamDestroy(stream);
  return 0;
}

int main(int argc, char **argv) {
  int nranks = 2;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--ranks")) nranks = atoi(argv[i + 1]);
  /* Ranks that share a GPU in one process each need their own hardware queue (see
   * symcoll_comm_create_all in symcoll.h); set before CUDA starts. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    printf("no GPU: nothing to run\n");
    return 77;
  }
  /* Load the kernel now: a lazy first launch could wait for a GPU busy with spinning peers. */
  for (int d = 0; d < ngpu; d++) {
    cudaSetDevice(d);
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, scale_and_allreduce);
  }
  std::vector<int> devices(nranks);
  for (int r = 0; r < nranks; r++) devices[r] = r % ngpu;
  std::vector<symcoll_comm_t> comms(nranks);
  symcoll_status_t s = symcoll_comm_create_all(nranks, devices.data(), comms.data());
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "symcoll_comm_create_all: %s\n", symcoll_status_string(s));
    return 1;
  }
  std::vector<int> ok(nranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; r++) threads.emplace_back(run_rank, comms[r], (size_t)100000, &ok[r]);
  int all = 1;
  for (int r = 0; r < nranks; r++) {
    threads[r].join();
    all &= ok[r];
    symcoll_comm_destroy(comms[r]);
  }
  printf("fused scale+all-reduce across %d ranks on %d GPU(s): %s\n", nranks, ngpu, all ? "correct" : "WRONG");
  return all ? 0 : 1;
}
