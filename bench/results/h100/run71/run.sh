#!/bin/bash
# Main's GPU library (c69 = 7fd6f68; later commits change tools and the CPU table only): FlashInfer's comparison
# at 8 MPS processes (two turns) and at 4 and 2; streams with SYMCOLL_PDL=1 at 4 and 8 MPS processes and 8 thread
# ranks (lamport's clusters with PDL); one rank; test_norm with PDL at 4 MPS processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/c69.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r71; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
st() { t0=$(date +%s); f=$O/stream-$1-$2$3-$4-pdl$5.log; LD_LIBRARY_PATH=/tmp/c/$1:$LD_LIBRARY_PATH SYMCOLL_PDL=$5 TH_SEED=$4 SYMCOLL_TIMEOUT_MS=5000 timeout 60 /tmp/c/$1/test_stream --backend cuda --mode $2 --ranks $3 --calls 800 > $f 2>&1
  note "stream $1 $2 $3 seed $4 pdl $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|FAILED;|gave up' $f | head -2 | cut -c1-110 | tr '\n' ' ')"; }
tn() { t0=$(date +%s); f=$O/tnorm-$1-$2$3-pdl$5.log; LD_LIBRARY_PATH=/tmp/c/$1:$LD_LIBRARY_PATH SYMCOLL_PDL=$5 SYMCOLL_TIMEOUT_MS=10000 timeout 90 /tmp/c/$1/test_norm --backend cuda --mode $2 --ranks $3 $4 > $f 2>&1
  note "test_norm $1 $2 $3 $4 pdl $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $f | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st c69 thread 1 1711 0
st c69 thread 8 1712 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st c69 process 4 1713 1
st c69 process 4 1714 1
st c69 process 8 1715 1
tn c69 process 4 --quick 1
fip() { t0=$(date +%s); D=/tmp/c/$1; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout 100 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport --csv $O/fi-$1-$2-$3.csv > $O/fi-$1-$2-$3.log 2>&1
  note "peers_flashinfer $1 $2 $3 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2-$3.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip c69 8 a; fip c69 8 b
echo quit | nvidia-cuda-mps-control
note done
