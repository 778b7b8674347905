#!/bin/bash
# The FP8 output as e4m3(out x (1 / scale)) (library rcp, the working tree after b8ae769) against main (fin = f2a0c03's
# GPU code, e4m3(out / scale) with the correction): each library with its own symcoll-bench (the chain's quantisation
# kernel follows the formula). Then rcp's checks: test_norm at 1, 2, 3 thread ranks and 2 MPS processes; test_stream
# with three seeds at 8 thread ranks, 4 MPS and 8 MPS processes. Carry: .carry/{fin,rcp}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for t in fin rcp; do tar xJf .carry/$t.tar.xz -C /tmp/c; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r54; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
dir() { case $1 in main) echo /tmp/c/fin;; *) echo /tmp/c/$1;; esac; }
nb() { D=$(dir $1); t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo auto -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
tn() { D=$(dir $1); t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_norm --backend cuda --mode $2 --ranks $3 > $O/tnorm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { D=$(dir $1); t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH TH_SEED=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_stream --backend cuda --mode $2 --ranks $3 --calls 800 > $O/stream-$1-$2$3-$4.log 2>&1
  note "stream $1 $2 $3 seed $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1-$2$3-$4.log | head -1 | cut -c1-100)"; }
for turn in a b c; do for v in main rcp; do nb $v thread 1 -fp8s$turn "--fp8 static"; done; done
for turn in a b; do for v in main rcp; do nb $v thread 1 -fp8r$turn "--fp8 rows"; done; done
for v in main rcp; do nb $v thread 1 -a; done
tn rcp thread 1; tn rcp thread 2
for s in 1541 1542 1543; do st rcp thread 8 $s; done
tn rcp thread 3
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for s in 1544 1545 1546; do st rcp process 4 $s; done
for s in 1547 1548 1549; do st rcp process 8 $s; done
tn rcp process 2
for v in main rcp; do nb $v process 2 -fp8s "--fp8 static"; done
echo quit | nvidia-cuda-mps-control
note done
