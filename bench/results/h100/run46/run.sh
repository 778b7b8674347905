#!/bin/bash
# The fused LAMPORT kernel split over clusters (branch split): correctness, then against main and unsplit.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/gpu.tar.xz -C /tmp/c && tar xJf .carry/split.tar.xz -C /tmp/c
G=/tmp/c/gpu; MAIN=$G/lib
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r46; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
libof() { case $1 in main) echo $MAIN;; split*) echo /tmp/c/split;; esac; }
spl() { case $1 in split[1248]) echo ${1#split};; *) echo 0;; esac; }
tn() { t0=$(date +%s); SYMCOLL_GPU_NORM_SPLIT=$(spl $1) LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $G/bin/test_norm --backend cuda --mode $2 --ranks $3 > $O/norm-$1-$2$3.log 2>&1
  note "test_norm $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1-$2$3.log | tr '\n' ' ' | cut -c1-160)"; }
st() { SYMCOLL_GPU_NORM_SPLIT=$(spl $1) LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH TH_SEED=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $2 --ranks $3 --calls 500 > $O/stream-$1-$2$3.log 2>&1; note "stream $1 $2 $3 seed $4 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1-$2$3.log | head -1 | cut -c1-100)"; }
nb() { t0=$(date +%s); SYMCOLL_GPU_NORM_SPLIT=$(spl $1) LD_LIBRARY_PATH=$(libof $1):$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all --algo lamport,auto -r 10 $5 --csv $O/norm-$1-$2$3$4.csv > $O/norm-$1-$2$3$4.txt 2>&1
  note "bench norm $1 $2 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
tn split thread 2; tn split2 thread 3; tn split4 thread 2
st split thread 8 1461
for turn in a b; do for v in main split1 split split2 split4; do nb $v thread 2 -$turn; done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn split process 2
st split process 4 1462
for turn in a b; do for v in main split1 split split2 split4; do nb $v process 2 -$turn; done; done
nb main process 4 -a; nb split process 4 -a; nb split4 process 4 -a
mkdir -p /tmp/f && tar xJf .carry/fi.tar.xz -C /tmp/f
if [ -d /tmp/f/.fi/site ]; then
  fip() { t0=$(date +%s); SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
    SYMCOLL_GPU_NORM_SPLIT=$(spl $1) SYMCOLL_LIB=$(libof $1)/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node $2 bench/peers_flashinfer.py --shapes $3 --sc-algos lamport --csv $O/fi-$1-$2$4.csv > $O/fi-$1-$2$4.log 2>&1
    note "peers_flashinfer $1 $2 $4 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$1-$2$4.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
  S6=1x4096,8x4096,32x4096,1x8192,8x8192,32x8192
  fip main 2 $S6 a; fip split 2 $S6 a; fip split4 2 $S6 a; fip main 2 $S6 b; fip split 2 $S6 b
fi
for tool in racecheck memcheck; do t0=$(date +%s)
  LD_LIBRARY_PATH=/tmp/c/split:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $G/bin/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm split process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-200)"; done
echo quit | nvidia-cuda-mps-control
note done
