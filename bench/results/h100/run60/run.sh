#!/bin/bash
# Branch pdl (p59's library): FlashInfer's fused all-reduce + RMSNorm beside symcoll's op at 8 and 4 MPS processes
# (EMULATION: one GPU), both launched with programmatic dependent launch and neither, alternating.
# Carry: .carry/{p59,fi}.tar.xz, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/p59.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
D=/tmp/c/p59; O=$OUT/r60; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
fip() { t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$2 SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout $5 python3 -m torch.distributed.run --standalone --nproc-per-node $3 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport $4 --csv $O/fi-$3-pdl$2-$1.csv > $O/fi-$3-pdl$2-$1.log 2>&1
  note "peers_flashinfer $3 pdl $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$3-pdl$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip a 1 8 --fi-pdl 130; fip a 0 8 "" 130; fip a 1 4 --fi-pdl 80; fip a 0 4 "" 80; fip b 1 8 --fi-pdl 130; fip b 0 8 "" 130
echo quit | nvidia-cuda-mps-control
note done
