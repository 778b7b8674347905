#!/bin/bash
# run 41's comparisons again on the same machine: norm and all_reduce at 2 MPS (main, xraw, xk, xk2) three turns; FlashInfer twice.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/c /tmp/f; [ -d /tmp/c/gpu ] || tar xJf .carry/gpu.tar.xz -C /tmp/c; [ -d /tmp/c/xk2 ] || tar xJf .carry/libs.tar.xz -C /tmp/c; [ -d /tmp/f/.fi ] || tar xJf .carry/fi.tar.xz -C /tmp/f
G=/tmp/c/gpu; XR=/tmp/c/xraw; XK=/tmp/c/xk; XK2=/tmp/c/xk2; MAIN=$G/lib
for L in $XR $XK $XK2; do ln -sf libsymcoll.so.0 $L/libsymcoll.so; cp $G/lib/_symcoll_torch_ops.so $L/; done
O=$OUT/r42; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in xraw) echo $XR;; xk) echo $XK;; xk2) echo $XK2;; main) echo $MAIN;; esac; }
nb() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo lamport,oneshot,auto,sequential -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1; note "bench norm $1 $2 $3 $4 rc=$?"; }
ab() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce --backend cuda --mode $2 --ranks $3 -d bf16 -b 1K -e 1M -f 4 --algo lamport,oneshot,twoshot,auto -r 10 --csv $O/ar-$1-$2$3$4.csv > $O/ar-$1-$2$3$4.txt 2>&1; note "bench all_reduce $1 $2 $3 $4 rc=$?"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for turn in c d e; do for v in xk2 main xraw xk; do nb $v process 2 -$turn; ab $v process 2 -$turn; done; done
export SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
fip() { SYMCOLL_LIB=$(libof $1)/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes $3 --csv $O/fi-$1-$2$4.csv > $O/fi-$1-$2$4.log 2>&1
  note "peers_flashinfer $1 $2 $4 rc=$?"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2$4.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
S6=1x4096,8x4096,32x4096,1x8192,8x8192,32x8192
fip main 2 $S6 b; fip xk2 2 $S6 b; fip main 2 $S6 c; fip xk2 2 $S6 c
echo quit | nvidia-cuda-mps-control
note done
