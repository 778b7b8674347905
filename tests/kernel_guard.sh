#!/usr/bin/env bash
# Every kernel that cuda_coll.c may launch with programmatic dependent launch (SYMCOLL_PDL) must
# open with the guard that waits for the kernel before it (src/cuda/grid_dependency.cuh): the
# first statement after each __global__ signature in the collectives' and norms' files.
#   tests/kernel_guard.sh SRC_DIR
src=${1:?usage: kernel_guard.sh SRC_DIR}
fail=0
for f in "$src"/src/cuda/allreduce.cu "$src"/src/cuda/allgather.cu "$src"/src/cuda/reducescatter.cu \
  "$src"/src/cuda/broadcast.cu "$src"/src/cuda/rmsnorm.cu; do
  # The line after the one that opens each kernel's body.
  bad=$(awk '/__global__/ { k = 1; name = FNR } k && /\{$/ { getline nxt; k = 0;
    if (nxt !~ /^  const symcoll_cuda::GridDependency dependency;$/) print FILENAME ":" name }' "$f")
  kernels=$(grep -c "__global__" "$f")
  if [ -n "$bad" ] || [ "$kernels" -eq 0 ]; then
    echo "kernels without the programmatic-launch guard as their first statement: ${bad:-$f has no kernel}"
    fail=1
  else
    echo "$(basename "$f"): $kernels kernels, each opens with the guard"
  fi
done
exit $fail
