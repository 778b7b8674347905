#!/bin/bash
# all_reduce_rmsnorm variants: v0 = HEAD; v1 = LAMPORT without the header exchange; v2 = one pack a thread (SYMCOLL_CUDA_NORM_ROW_PACKS 1).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 CUDA_MODULE_LOADING=EAGER
G=$PWD/.carry/gpu; mkdir -p .carry/v0; ln -sf $G/lib/libsymcoll.so.0 .carry/v0/libsymcoll.so.0
for v in v0 v1 v2; do ln -sf libsymcoll.so.0 .carry/$v/libsymcoll.so; done
O=$OUT/v30; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
start_mps() { export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d; }
stop_mps() { echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
nb() { # label mode ranks
  for turn in 1 2; do for v in v0 v1 v2; do
    LD_LIBRARY_PATH=$PWD/.carry/$v timeout 90 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 \
      -d bf16 --shapes all --algo lamport,oneshot,sequential,auto -r 10 --csv /tmp/n.csv > /tmp/n.txt 2>&1
    rc=$?; [ $rc = 0 ] || { note "$1 $v turn $turn rc=$rc"; tail -3 /tmp/n.txt >> $O/summary.txt; }
    sed "s/^/$1,$turn,$v,/" /tmp/n.csv >> $O/norm.csv
  done; done; note "$1 done"
}
nb thread1 thread 1
nb thread2 thread 2
start_mps
nb mps2 process 2
nb mps4 process 4
stop_mps
