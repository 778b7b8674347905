#!/bin/bash
# main as of the fp8x merge (library fin = f2a0c03's GPU code): test_norm at 3 thread ranks, then FlashInfer's fused
# all-reduce + RMSNorm against symcoll's op from PyTorch at 8 and 4 MPS processes (EMULATION: one GPU).
# Carry: .carry/{gpu,fin,fi}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c /tmp/f && for t in gpu fin; do tar xJf .carry/$t.tar.xz -C /tmp/c; done; tar xJf .carry/fi.tar.xz -C /tmp/f
cp /tmp/c/gpu/lib/_symcoll_torch_ops.so /tmp/c/fin/
F=/tmp/c/fin
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r53; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
t0=$(date +%s); LD_LIBRARY_PATH=$F:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 60 $F/test_norm --backend cuda --mode thread --ranks 3 > $O/tnorm-fin-thread3.log 2>&1
note "test_norm fin thread 3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-fin-thread3.log | tr '\n' ' ' | cut -c1-160)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
fip() { t0=$(date +%s); SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$F/libsymcoll.so timeout $4 python3 -m torch.distributed.run --standalone --nproc-per-node $1 bench/peers_flashinfer.py --shapes $2 --sc-algos lamport --csv $O/fi-$1$3.csv > $O/fi-$1$3.log 2>&1
  note "peers_flashinfer $1 $3 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1$3.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
S6=1x4096,8x4096,32x4096,1x8192,8x8192,32x8192
fip 8 $S6 a 110; fip 4 $S6 a 70
echo quit | nvidia-cuda-mps-control
note done
