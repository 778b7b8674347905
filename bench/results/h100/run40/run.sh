#!/bin/bash
# FP8 FIT instances + WATCH (x before the state, headers beside the first polls) + one barrier a row (FIT: onebar)
# + the first row's residual and weight ahead (new: early). Correctness on new and onebar, sanitizers, then
# old (03fe301) / onebar / new side by side, twice.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
mkdir -p /tmp/c /tmp/f && tar xJf .carry/gpu.tar.xz -C /tmp/c && tar xJf .carry/libs.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
G=/tmp/c/gpu; OLD=/tmp/c/base-03fe301; WAT=/tmp/c/onebar; NEW=$G/lib
TRC=/tmp/c/trace
for L in $OLD $WAT $TRC; do ln -sf libsymcoll.so.0 $L/libsymcoll.so; cp $G/lib/_symcoll_torch_ops.so $L/; done
export LD_LIBRARY_PATH=$NEW:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r40; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in old) echo $OLD;; onebar) echo $WAT;; trace) echo $TRC;; new) echo $NEW;; esac; }
t0=$(date +%s); timeout 60 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api new: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
tn() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $G/bin/test_norm --backend cuda --mode $2 --ranks $3 > $O/norm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $1 --ranks $2 --calls 500 > $O/stream-$1$2.log 2>&1; note "stream new $1 $2 seed $3 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1$2.log | head -1 | cut -c1-90)"; }
tn new thread 2; tn new thread 3; tn onebar thread 2
st thread 2 1301; st thread 8 1302
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn new process 4; tn onebar process 4
st process 2 1303; st process 4 1304; st process 8 1305
# benchmarks: bf16 norm (no fp8) at 1-2048 rows; fp8 static and rows at world 1 and 2 MPS
nb() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 100 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo lamport,oneshot,auto,sequential -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
ab() { t0=$(date +%s); LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce --backend cuda --mode $2 --ranks $3 -d bf16 -b 1K -e 1M -f 4 --algo lamport,oneshot,twoshot,auto -r 10 --csv $O/ar-$1-$2$3$4.csv > $O/ar-$1-$2$3$4.txt 2>&1
  note "bench all_reduce $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
for turn in a b; do for v in old onebar new; do nb $v process 2 -$turn; done; done
for v in old new; do nb $v process 2 -fp8s "--fp8 static"; nb $v process 2 -fp8r "--fp8 rows"; ab $v process 2; done
if [ -d /tmp/f/.fi/site ]; then
  export SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
  fip() { t0=$(date +%s); SYMCOLL_LIB=$(libof $1)/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes $3 --csv $O/fi-$1-$2.csv > $O/fi-$1-$2.log 2>&1
    note "peers_flashinfer $1 $2 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
  S6=1x4096,8x4096,32x4096,1x8192,8x8192,32x8192
  fip new 2 $S6; fip old 2 $S6; fip new 4 1x4096,8x4096,32x4096; fip new 8 1x4096,8x4096
fi
# the phase trace (clock64 by thread 0 of block 0, every 200th call) of new's fused LAMPORT kernel, 2 MPS
for sh in 1,4096 32,4096 1,8192; do LD_LIBRARY_PATH=$TRC:$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode process --ranks 2 -d bf16 --shapes $sh --algo lamport -r 40 > $O/trace-$sh.txt 2>&1; done
note "trace rc=$?: $(grep -h TRACE $O/trace-*.txt | wc -l) lines"
for tool in memcheck racecheck synccheck; do t0=$(date +%s)
  SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $G/bin/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm new process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-200)"; done
echo quit | nvidia-cuda-mps-control; sleep 1
for turn in a b; do for v in old onebar new; do nb $v thread 2 -$turn; done; done
for turn in a b; do for v in old new; do nb $v thread 1 -$turn; nb $v thread 1 -fp8s$turn "--fp8 static"; nb $v thread 1 -fp8r$turn "--fp8 rows"; done; done
ab old thread 2; ab new thread 2
nb8() { t0=$(date +%s); for sh in 1,4096 8,4096 32,4096 1,8192 8,8192; do LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 40 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode thread --ranks 8 -d bf16 --shapes $sh --algo lamport,oneshot,auto,sequential -r 10 --csv $O/norm-$1-thread8-$sh.csv > $O/norm-$1-thread8-$sh.txt 2>&1; done
  note "bench norm $1 thread 8 rc=$? in $(( $(date +%s) - t0 )) s"; }
for v in old new; do nb8 $v; done
