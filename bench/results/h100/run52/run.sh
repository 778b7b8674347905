#!/bin/bash
# Trimmed (run52b): branch fp8x (library fin, built from d3460f9 = f2a0c03's sources) against main (lean): the FP8 output at world 1 with
# the diagnostics v2 (no correction) and v3 (no conversion); one-rank copies in graphs and eager; checks and streams of
# fin (no FlashInfer). Carry: .carry/{lean,fin,v23}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c /tmp/f && for t in lean fin v23; do tar xJf .carry/$t.tar.xz -C /tmp/c; done
F=/tmp/c/fin
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r52; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in main) echo /tmp/c/lean;; *) echo /tmp/c/$1;; esac; }
nb() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $F/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo auto -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
ar() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $F/symcoll-bench --backend cuda --mode thread --ranks 1 -b 8 -e 4M -f 8 -d bf16 --algo auto -r 20 -w 200 $3 --csv $O/w1-$1-$2.csv > $O/w1-$1-$2.txt 2>&1; note "w1 all_reduce $1 $2 rc=$?"; }
tn() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $F/test_norm --backend cuda --mode $2 --ranks $3 > $O/tnorm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH TH_SEED=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $F/test_stream --backend cuda --mode $2 --ranks $3 --calls 500 > $O/stream-$1-$2$3.log 2>&1; note "stream $1 $2 $3 seed $4 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1-$2$3.log | head -1 | cut -c1-100)"; }
for turn in a b; do for v in main fin v2 v3; do nb $v thread 1 -fp8s$turn "--fp8 static"; done; done
tn fin thread 1; tn fin thread 2
for turn in 1; do for v in main fin; do ar $v g$turn; ar $v e$turn "-G 0"; done; done
for turn in a; do for v in main fin; do nb $v thread 1 -fp8r$turn "--fp8 rows"; nb $v thread 1 -$turn; done; done
st fin thread 8 1521
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn fin process 2; st fin process 4 1522; st fin process 8 1523
echo quit | nvidia-cuda-mps-control
note done
