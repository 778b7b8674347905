/* The CUDA runtime's errors at the border of every CUDA file: log the call, file and line once
 * (a WARN), return or jump with a symcoll status (out of memory: NO_MEMORY; else CUDA). */
#ifndef SYMCOLL_CUDA_CHECK_H
#define SYMCOLL_CUDA_CHECK_H
#include <cuda_runtime_api.h>

#include "../core/internal.h"

static inline symcoll_status_t symcoll__cuda_status(cudaError_t e) {
  return e == cudaSuccess ? SYMCOLL_OK : e == cudaErrorMemoryAllocation ? SYMCOLL_ERR_NO_MEMORY : SYMCOLL_ERR_CUDA;
}

/* Returns the status from the enclosing function when `call` fails. */
#define CUDA_TRY(call)                                                                  \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      SYMCOLL_WARN(SYMCOLL_SUBSYS_ALL, "%s failed: %s", #call, cudaGetErrorString(e_)); \
      return symcoll__cuda_status(e_);                                                  \
    }                                                                                   \
  } while (0)

/* Sets `status` and jumps to `label` when `call` fails. */
#define CUDA_GOTO(call, status, label)                                                  \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      SYMCOLL_WARN(SYMCOLL_SUBSYS_ALL, "%s failed: %s", #call, cudaGetErrorString(e_)); \
      (status) = symcoll__cuda_status(e_);                                              \
      goto label;                                                                       \
    }                                                                                   \
  } while (0)
#endif
