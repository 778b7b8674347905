#!/bin/bash
# (1) a micro-benchmark of what a row shared by a thread-block cluster costs (.scratch/cl_micro.cu); (2) FlashInfer's fused
# op beside symcoll's at 8, 4 and 2 MPS processes with SYMCOLL_GPU_NORM_ROW_BLOCKS=0 (clusters) and 1, alternating.
# Carry: .carry/{c65,fi}.tar.xz, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/c65.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
D=/tmp/c/c64; O=$OUT/r65; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
timeout 60 $D/cl_micro > $O/cl-micro.txt 2>&1; note "cl_micro rc=$?"; cat $O/cl-micro.txt | tee -a $O/summary.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
fip() { t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_GPU_NORM_ROW_BLOCKS=$2 SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout $4 python3 -m torch.distributed.run --standalone --nproc-per-node $3 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport --csv $O/fi-$3-rb$2-$1.csv > $O/fi-$3-rb$2-$1.log 2>&1
  note "peers_flashinfer $3 row_blocks $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$3-rb$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip a 0 8 130; fip a 1 8 130; fip a 0 4 80; fip a 1 4 80; fip a 0 2 60; fip a 1 2 60; fip b 0 8 130; fip b 1 8 130
echo quit | nvidia-cuda-mps-control
note done
