#!/bin/bash
# main (1c320a4) on the GPU: its own tests, streams and sanitizers; world 1 against 03fe301 (6c3cce3
# timed alone); xraw (first LAMPORT vector loaded raw before the state) against main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
mkdir -p /tmp/c /tmp/f && tar xJf .carry/gpu.tar.xz -C /tmp/c && tar xJf .carry/libs.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
G=/tmp/c/gpu; OLD=/tmp/c/base-03fe301; XR=/tmp/c/xraw; XK=/tmp/c/xk; XK2=/tmp/c/xk2; MAIN=$G/lib
for L in $OLD $XR $XK $XK2; do ln -sf libsymcoll.so.0 $L/libsymcoll.so; cp $G/lib/_symcoll_torch_ops.so $L/; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r41; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in old) echo $OLD;; xraw) echo $XR;; xk) echo $XK;; xk2) echo $XK2;; main) echo $MAIN;; esac; }
t0=$(date +%s); LD_LIBRARY_PATH=$MAIN:$LD_LIBRARY_PATH timeout 60 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api main: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
tn() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $G/bin/test_norm --backend cuda --mode $2 --ranks $3 > $O/norm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH TH_SEED=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $2 --ranks $3 --calls 500 > $O/stream-$1-$2$3.log 2>&1; note "stream $1 $2 $3 seed $4 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1-$2$3.log | head -1 | cut -c1-100)"; }
tn main thread 2; tn xk2 thread 2
st main thread 2 1401; st main thread 8 1402; st xk2 thread 8 1406
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn main process 4; tn xk2 process 2
st main process 2 1403; st main process 4 1404; st main process 8 1405; st xk2 process 4 1407
nb() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 100 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo lamport,oneshot,auto,sequential -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
ab() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce --backend cuda --mode $2 --ranks $3 -d bf16 -b 1K -e 1M -f 4 --algo lamport,oneshot,twoshot,auto -r 10 --csv $O/ar-$1-$2$3$4.csv > $O/ar-$1-$2$3$4.txt 2>&1
  note "bench all_reduce $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
for turn in a b; do for v in main xraw xk xk2; do nb $v process 2 -$turn; ab $v process 2 -$turn; done; done
for v in main xk2; do nb $v process 2 -fp8s "--fp8 static"; done
if [ -d /tmp/f/.fi/site ]; then
  export SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
  fip() { t0=$(date +%s); SYMCOLL_LIB=$(libof $1)/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes $3 --csv $O/fi-$1-$2.csv > $O/fi-$1-$2.log 2>&1
    note "peers_flashinfer $1 $2 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
  S6=1x4096,8x4096,32x4096,1x8192,8x8192,32x8192
  fip xk2 2 $S6; fip main 2 $S6
fi
for tool in memcheck racecheck synccheck; do t0=$(date +%s)
  LD_LIBRARY_PATH=$MAIN:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $G/bin/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm main process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-200)"; done
echo quit | nvidia-cuda-mps-control; sleep 1
for turn in a b; do for v in main xraw xk xk2; do nb $v thread 2 -$turn; ab $v thread 2 -$turn; done; done
for turn in a b; do for v in old main; do nb $v thread 1 -$turn; nb $v thread 1 -fp8s$turn "--fp8 static"; nb $v thread 1 -fp8r$turn "--fp8 rows"; done; done
note done
