#!/bin/bash
# c68: all_reduce_rmsnorm's local pass with a thread-block cluster a row (one rank; the chain's pass).
# World-1 norm table auto (clusters) against SYMCOLL_GPU_NORM_ROW_BLOCKS=1 (the previous kernel), turns alternating;
# test_norm, sanitizers, streams (one rank with and without PDL; MPS 4 with PDL: the lamport clusters with PDL).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/c68.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
D=/tmp/c/c68; export LD_LIBRARY_PATH=$D:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r68; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
tn() { t0=$(date +%s); SYMCOLL_PDL=$5 SYMCOLL_GPU_NORM_ROW_BLOCKS=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 120 $D/test_norm --backend cuda --mode $1 --ranks $2 $3 > $O/tnorm-$1$2-rb$4-pdl$5.log 2>&1
  note "test_norm $1 $2 $3 row_blocks $4 pdl $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $O/tnorm-$1$2-rb$4-pdl$5.log | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st() { t0=$(date +%s); SYMCOLL_PDL=$4 TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $O/stream-$1$2-$3.log 2>&1
  note "stream $1 $2 seed $3 pdl $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1$2-$3.log | head -1 | cut -c1-100)"; }
nb() { t0=$(date +%s); f=norm-$1$2-$3-rb$4-$5; SYMCOLL_GPU_NORM_ROW_BLOCKS=$4 timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $1 --ranks $2 -d bf16 --shapes all $6 -r 20 --csv $O/$f.csv > $O/$f.txt 2>&1; note "norm $1 $2 $3 row_blocks $4 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do
  for rb in 0 1; do nb thread 1 plain $rb $t; done
  for rb in 1 0; do nb thread 1 fp8s $rb $t "--fp8 static"; done
  for rb in 0 1; do nb thread 1 fp8r $rb $t "--fp8 rows"; done
done
tn thread 1 "" 0 0; tn thread 1 --quick 2 0; tn thread 1 "" 0 1; tn thread 2 --quick 0 0
san() { t0=$(date +%s); SYMCOLL_TIMEOUT_MS=30000 timeout 150 compute-sanitizer --tool $1 --error-exitcode 9 $D/test_norm --backend cuda --mode thread --ranks 1 --quick > $O/san-$1.log 2>&1
  note "compute-sanitizer $1 test_norm thread 1 --quick rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|calls checked' $O/san-$1.log | head -2 | tr '\n' ' ' | cut -c1-200)"; }
san memcheck; san racecheck; san synccheck
st thread 1 1681 0; st thread 1 1682 1; st thread 2 1683 0
for t in c; do for rb in 0 1; do nb thread 2 plain $rb $t; done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 4 1684 1; st process 8 1685 1
tn process 2 --quick 0 1
fip() { t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout $3 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport --csv $O/fi-$2-$1.csv > $O/fi-$2-$1.log 2>&1
  note "peers_flashinfer $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip b 8 100
echo quit | nvidia-cuda-mps-control
note done
