/*
 * Programmatic dependent launch on the device side: the guard every kernel launched with
 * programmatic stream serialization opens first (SYMCOLL_PDL; symcoll-bench's own kernels
 * follow the same setting).
 */
#ifndef SYMCOLL_CUDA_GRID_DEPENDENCY_CUH
#define SYMCOLL_CUDA_GRID_DEPENDENCY_CUH

namespace symcoll_cuda {

/* The first statement of every collective and norm kernel, `const GridDependency dependency;`
 * (SYMCOLL_PDL: cuda_coll.c launches them with programmatic stream serialization, so that a
 * kernel may be scheduled while the one before it on the stream still runs). Construction
 * waits until that kernel has finished and its memory is visible (griddepcontrol.wait): the
 * inputs, the per-block state and the pads' counts of our previous call are all its to write,
 * so nothing is read before. Destruction, at every return, lets the stream's next kernel be
 * scheduled (griddepcontrol.launch_dependents): by then this block waits for no peer, so the
 * next kernel's blocks, which may then take SMs while they wait for this grid to finish, never
 * stand in the way of a twin block of a rank sharing the GPU. Both are no-ops in a kernel
 * launched without the attribute, and before sm_90. */
struct GridDependency {
  __device__ __forceinline__ GridDependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  __device__ __forceinline__ ~GridDependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  }
  GridDependency(const GridDependency &) = delete;
  GridDependency &operator=(const GridDependency &) = delete;
};

}  // namespace symcoll_cuda

#endif
