#!/bin/bash
# all_reduce against f1a284d's own bench and library: one rank (every algorithm), 2 MPS Lamport at 2 MiB + 2 B.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/gpu.tar.xz -C /tmp/c && tar xJf .carry/basef.tar.xz -C /tmp/c
G=/tmp/c/gpu; B=/tmp/c/base-f1a284d
O=$OUT/r44; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
run() { local which=$1 tag=$2; shift 2
  if [ $which = base ]; then LD_LIBRARY_PATH=$B timeout 60 $B/symcoll-bench "$@" --csv $O/$tag-base.csv > $O/$tag-base.txt 2>&1
  else LD_LIBRARY_PATH=$G/lib timeout 60 $G/bin/symcoll-bench "$@" --csv $O/$tag-main.csv > $O/$tag-main.txt 2>&1; fi
  note "$tag $which rc=$?"; }
for turn in 1 2 3; do for w in base main; do
  run $w w1-$turn --backend cuda --mode thread --ranks 1 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for turn in 1 2; do for w in base main; do
  run $w mps2-$turn --backend cuda --mode process --ranks 2 -b 2097154 -e 2097154 -d bf16 --algo lamport,auto -r 20
done; done
echo quit | nvidia-cuda-mps-control
note done
