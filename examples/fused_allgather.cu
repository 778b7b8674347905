/*
 * A user kernel that fuses its own computation with an all-gather through the device API's
 * block copies and value signals: each rank computes its shard, stores it into every peer's
 * symmetric buffer (symcoll_dev_put_block), tells each peer with the call's number
 * (symcoll_dev_signal_value), waits for every peer's shard (symcoll_dev_wait_value), and then
 * consumes the gathered vector (here: a sum over the shards). A second slot says "done
 * reading", so the next launch may overwrite a peer's buffer only once that peer has read it:
 * values count up from launch to launch, nothing is reset.
 *   build/bin/symcoll-example-fused-gather --ranks 4   (thread mode, ranks spread over GPUs)
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <symcoll.h>
#include <symcoll_device.cuh>

enum : uint32_t { SLOT_READY = 0, SLOT_READ = 1 }; /* value-signal slots of the allocation's pad */

/* One block: shards of n floats; `epoch` counts launches from 1. */
__global__ void shard_gather_sum(symcoll_device_view_t v, const float *in, float *out, size_t n, float scale,
                                 uint32_t epoch) {
  const size_t bytes = n * sizeof(float);
  float *gathered = static_cast<float *>(v.buf[v.rank]);
  /* Our shard: computed into our own slot of the gathered vector first. */
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) gathered[(size_t)v.rank * n + i] = in[i] * scale;
  __syncthreads();
  for (int k = 1; k < v.nranks; k++) {
    const int peer = (v.rank + k) % v.nranks;
    /* The peer has read the previous launch's data out of its buffer. */
    if (threadIdx.x == 0 && epoch > 1 && !symcoll_dev_wait_value(v, SLOT_READ, peer, epoch - 1)) return;
    __syncthreads();
    symcoll_dev_put_block(v, peer, (size_t)v.rank * bytes, gathered + (size_t)v.rank * n, bytes);
    __syncthreads();
    if (threadIdx.x == 0) symcoll_dev_signal_value(v, SLOT_READY, peer, epoch);
  }
  if (threadIdx.x == 0)
    for (int k = 1; k < v.nranks; k++)
      if (!symcoll_dev_wait_value(v, SLOT_READY, (v.rank + k) % v.nranks, epoch)) return;
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) { /* the consumer of the gathered vector */
    float acc = 0;
    for (int r = 0; r < v.nranks; r++) acc += __ldcg(gathered + (size_t)r * n + i);
    out[i] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 1; k < v.nranks; k++) symcoll_dev_signal_value(v, SLOT_READ, (v.rank + k) % v.nranks, epoch);
}

static void run_rank(symcoll_comm_t comm, size_t n, int launches, int *ok) {
  const int rank = symcoll_comm_rank(comm), nranks = symcoll_comm_nranks(comm);
  cudaSetDevice(symcoll_comm_device(comm));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  float *in, *out, *h;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  /* Pinned host memory: a pageable copy may wait for the whole device to go idle, which it
   * does not while a peer's kernel waits for this rank's next launch (ranks sharing a GPU). */
  cudaMallocHost(&h, n * sizeof(float));
  *ok = 0;
  symcoll_mem_t mem;
  if (symcoll_mem_alloc(comm, (size_t)nranks * n * sizeof(float), &mem) != SYMCOLL_OK) return;
  symcoll_device_view_t view;
  symcoll_mem_device_view(mem, &view);
  for (size_t i = 0; i < n; i++) h[i] = (float)(rank + 1) * (float)(i % 7);
  cudaMemcpyAsync(in, h, n * sizeof(float), cudaMemcpyHostToDevice, stream);
  bool good = true;
  for (int e = 1; e <= launches && good; e++) {
    const float scale = (float)e;
    shard_gather_sum<<<1, 256, 0, stream>>>(view, in, out, n, scale, (uint32_t)e);
    cudaMemcpyAsync(h, out, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    const float sum_ranks = (float)nranks * (float)(nranks + 1) / 2 * scale;
    for (size_t i = 0; i < n && good; i++) good = h[i] == sum_ranks * (float)(i % 7);
  }
  *ok = good && symcoll_comm_check(comm) == SYMCOLL_OK && cudaGetLastError() == cudaSuccess;
  symcoll_comm_barrier(comm); /* every peer is done with our buffer */
  cudaFree(in);
  cudaFree(out);
  cudaFreeHost(h);
  symcoll_mem_free(mem);
  cudaStreamDestroy(stream);
}

int main(int argc, char **argv) {
  int nranks = 2;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--ranks")) nranks = atoi(argv[i + 1]);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* ranks sharing a GPU: a queue each */
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    printf("no GPU: nothing to run\n");
    return 77;
  }
  for (int d = 0; d < ngpu; d++) { /* load the kernel before ranks spin on each other */
    cudaSetDevice(d);
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, shard_gather_sum);
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
  for (int r = 0; r < nranks; r++) threads.emplace_back(run_rank, comms[r], (size_t)10000, 5, &ok[r]);
  int all = 1;
  for (int r = 0; r < nranks; r++) {
    threads[r].join();
    all &= ok[r];
    symcoll_comm_destroy(comms[r]);
  }
  printf("fused shard + all-gather + sum across %d ranks on %d GPU(s), 5 launches: %s\n", nranks, ngpu,
         all ? "correct" : "WRONG");
  return all ? 0 : 1;
}
