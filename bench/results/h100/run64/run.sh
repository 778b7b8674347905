#!/bin/bash
# all_reduce_rmsnorm's LAMPORT kernel with a row spread over a thread-block cluster (c64: this tree's library).
# Correctness first: test_norm at 2, 3, 4, 8 thread ranks and 2 MPS processes, streams, compute-sanitizer; then
# symcoll-bench's norm table, SYMCOLL_GPU_NORM_ROW_BLOCKS=0 (auto: clusters) against 1 (a block a row), alternating.
# Carry: .carry/c64.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/c64.tar.xz -C /tmp/c
D=/tmp/c/c64; export LD_LIBRARY_PATH=$D:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r64; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
tn() { t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout $4 $D/test_norm --backend cuda --mode $1 --ranks $2 $3 > $O/tnorm-$1$2$5.log 2>&1
  note "test_norm $1 $2 $3 $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $O/tnorm-$1$2$5.log | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st() { t0=$(date +%s); TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $O/stream-$1$2-$3.log 2>&1
  note "stream $1 $2 seed $3 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1$2-$3.log | head -1 | cut -c1-100)"; }
nb() { t0=$(date +%s); SYMCOLL_GPU_NORM_ROW_BLOCKS=$3 timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $1 --ranks $2 -d bf16 --shapes all --algo auto,lamport -r 10 --csv $O/norm-$1$2-rb$3-$4.csv > $O/norm-$1$2-rb$3-$4.txt 2>&1; note "norm $1 $2 row_blocks $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
tn thread 2 "" 90; tn thread 3 --quick 60; tn thread 4 --quick 60; tn thread 8 --quick 90
SYMCOLL_GPU_NORM_ROW_BLOCKS=1 tn thread 2 --quick 60 -rb1
st thread 2 1641; st thread 8 1642
for n in 2 4 8; do for t in a b; do nb thread $n 0 $t; nb thread $n 1 $t; done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn process 2 "" 90
st process 4 1643; st process 8 1644
for n in 2 4 8; do for t in a b; do nb process $n 0 $t; nb process $n 1 $t; done; done
san() { tool=$1; t0=$(date +%s)
  SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $D/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-220)"; }
san memcheck; san racecheck; san synccheck
echo quit | nvidia-cuda-mps-control
note done
