#!/bin/bash
# main (721ff6b) checked on the GPU; the local pass of many rows: lB / lA / lAB against main at world 1 and 2 threads.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/gpu.tar.xz -C /tmp/c && tar xJf .carry/libs3.tar.xz -C /tmp/c
G=/tmp/c/gpu; MAIN=$G/lib
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r43; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in main) echo $MAIN;; *) echo /tmp/c/$1;; esac; }
tn() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $G/bin/test_norm --backend cuda --mode $2 --ranks $3 > $O/norm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH TH_SEED=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $2 --ranks $3 --calls 500 > $O/stream-$1-$2$3.log 2>&1; note "stream $1 $2 $3 seed $4 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1-$2$3.log | head -1 | cut -c1-100)"; }
nb() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo oneshot,auto,sequential -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
tn main thread 2; st main thread 8 1411
for turn in a b; do for v in main lB lA lAB; do nb $v thread 1 -$turn; nb $v thread 1 -fp8s$turn "--fp8 static"; done; done
tn lB thread 2; tn lAB thread 2
for v in main lB lAB; do nb $v thread 2 -a; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn main process 2; st main process 4 1412; st main process 8 1413
for tool in memcheck racecheck; do t0=$(date +%s)
  LD_LIBRARY_PATH=$MAIN:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $G/bin/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm main process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-200)"; done
echo quit | nvidia-cuda-mps-control
note done
