#!/usr/bin/env bash
# Every kernel that cuda_coll.c may launch with programmatic dependent launch (SYMCOLL_PDL) must
# open with the guard that waits for the kernel before it (src/cuda/grid_dependency.cuh): the
# first statement after each __global__ signature of every file in src/cuda but those whose
# kernels are launched plainly (launch.cu's probe and copy-engine barrier, convert.cu,
# matmul.cu), so that a new file of kernels is checked from the start.
#   tests/kernel_guard.sh SRC_DIR
src=${1:?usage: kernel_guard.sh SRC_DIR}
fail=0
for f in "$src"/src/cuda/*.cu; do
  case $(basename "$f") in launch.cu | convert.cu | matmul.cu) continue ;; esac
  # The line after the one that opens each kernel's body.
  bad=$(awk '/__global__/ { k = 1; name = FNR } k && /\{$/ { getline nxt; k = 0;
    if (nxt !~ /^  const symcoll_cuda::GridDependency dependency;$/) print FILENAME ":" name }' "$f")
  kernels=$(grep -c "__global__" "$f")
  if [ "$kernels" -eq 0 ]; then
    continue
  elif [ -n "$bad" ]; then
    echo "kernels without the programmatic-launch guard as their first statement: $bad"
    fail=1
  else
    echo "$(basename "$f"): $kernels kernels, each opens with the guard"
  fi
done
exit $fail
