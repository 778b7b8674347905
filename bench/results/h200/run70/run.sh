#!/bin/bash
# c70 (main + round_widen) against c69 (main, 7fd6f68) at one rank, turns alternating; the stream that timed out in
# run 68 (4 MPS processes, SYMCOLL_PDL=1, seed 1684) again on c68 (the local-pass clusters), c69 and c70; c70's
# correctness; FlashInfer's second turn at 8 MPS processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && for c in c68 c69 c70; do tar xJf .carry/$c.tar.xz -C /tmp/c; done && tar xJf .carry/fi.tar.xz -C /tmp/f
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r70; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
# nb LIB MODE RANKS KIND TURN [bench args]
nb() { t0=$(date +%s); f=norm-$1-$2$3-$4-$5; LD_LIBRARY_PATH=/tmp/c/$1:$LD_LIBRARY_PATH timeout 60 /tmp/c/$1/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all $6 -r 20 --csv $O/$f.csv > $O/$f.txt 2>&1; note "norm $1 $2 $3 $4 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do
  nb c69 thread 1 plain $t; nb c70 thread 1 plain $t
  nb c70 thread 1 fp8s $t "--fp8 static"; nb c69 thread 1 fp8s $t "--fp8 static"
  nb c69 thread 1 fp8r $t "--fp8 rows"; nb c70 thread 1 fp8r $t "--fp8 rows"
done
nb c69 thread 2 fp8s a "--fp8 static"; nb c70 thread 2 fp8s a "--fp8 static"
tn() { t0=$(date +%s); f=$O/tnorm-$1-$2$3.log; LD_LIBRARY_PATH=/tmp/c/$1:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 /tmp/c/$1/test_norm --backend cuda --mode $2 --ranks $3 $4 > $f 2>&1
  note "test_norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $f | head -3 | tr '\n' ' ' | cut -c1-200)"; }
tn c70 thread 1 ""; tn c70 thread 2 --quick
# st LIB MODE RANKS SEED PDL ROW_BLOCKS TAG
st() { t0=$(date +%s); f=$O/stream-$1-$2$3-$4-pdl$5-rb$6$7.log; LD_LIBRARY_PATH=/tmp/c/$1:$LD_LIBRARY_PATH SYMCOLL_GPU_NORM_ROW_BLOCKS=$6 SYMCOLL_PDL=$5 TH_SEED=$4 SYMCOLL_TIMEOUT_MS=5000 timeout 60 /tmp/c/$1/test_stream --backend cuda --mode $2 --ranks $3 --calls 800 > $f 2>&1
  note "stream $1 $2 $3 seed $4 pdl $5 row_blocks $6 $7 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|FAILED;|gave up' $f | head -2 | cut -c1-110 | tr '\n' ' ')"; }
st c70 thread 1 1701 0 0; st c70 thread 4 1702 0 0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st c69 process 4 1684 1 0 a
st c68 process 4 1684 1 0 a
st c70 process 4 1684 1 0 a
st c69 process 4 1692 1 0
st c69 process 4 1684 1 1 a
st c70 process 4 1693 1 0
st c70 process 8 1694 0 0
tn c70 process 2 --quick
fip() { t0=$(date +%s); D=/tmp/c/$1; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout 100 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport --csv $O/fi-$1-$2-$3.csv > $O/fi-$1-$2-$3.log 2>&1
  note "peers_flashinfer $1 $2 $3 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2-$3.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip c70 8 c
st c68 process 4 1684 1 0 b
st c69 process 4 1684 1 0 b
echo quit | nvidia-cuda-mps-control
note done
