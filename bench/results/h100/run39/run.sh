#!/bin/bash
# FIT norm kernels (1 or 2 packs a thread) + spin_one_copy for LAMPORT data polls (barriers keep spin): correctness, sanitizers, then new against 67c4c08 side by side.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
mkdir -p /tmp/base && tar xJf .carry/base.tar.xz -C /tmp/base
G=$PWD/.carry/gpu; OLD=/tmp/base/base-67c4c08; NEW=$G/lib
ln -sf libsymcoll.so.0 $OLD/libsymcoll.so; cp $G/lib/_symcoll_torch_ops.so $OLD/ 2>/dev/null
export LD_LIBRARY_PATH=$NEW:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r39; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
t0=$(date +%s); timeout 60 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
tn() { t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 90 $G/bin/test_norm --backend cuda --mode $1 --ranks $2 > $O/norm-$1$2.log 2>&1
  note "test_norm $1 $2: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1$2.log | tr '\n' ' ' | cut -c1-160)"; }
st() { TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $1 --ranks $2 --calls 500 > $O/stream-$1$2.log 2>&1; note "stream $1 $2 seed $3 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1$2.log | head -1 | cut -c1-90)"; }
tn thread 2
st thread 2 1201; st thread 8 1202
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
tn process 4
st process 2 1203; st process 4 1204; st process 8 1205
nb() { t0=$(date +%s); LD_LIBRARY_PATH=$2:$LD_LIBRARY_PATH timeout 100 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $3 --ranks $4 -d bf16 --shapes all --algo lamport,oneshot,auto,sequential -r 10 --csv $O/norm-$1-$3$4.csv > $O/norm-$1-$3$4.txt 2>&1
  note "bench norm $1 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
ab() { t0=$(date +%s); LD_LIBRARY_PATH=$2:$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce --backend cuda --mode $3 --ranks $4 -d bf16 -b 1K -e 1M -f 4 --algo lamport,oneshot,twoshot,auto -r 10 --csv $O/ar-$1-$3$4.csv > $O/ar-$1-$3$4.txt 2>&1
  note "bench all_reduce $1 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib process 2; ab $v $lib process 2; done
if [ -d .fi/site ]; then
  export SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
  t0=$(date +%s); SYMCOLL_LIB=$NEW/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096,1x8192,8x8192,32x8192 --csv $O/fi-new-2.csv > $O/fi-new-2.log 2>&1
  note "peers_flashinfer new 2 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-new-2.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt
  t0=$(date +%s); SYMCOLL_LIB=$NEW/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 4 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096 --csv $O/fi-new-4.csv > $O/fi-new-4.log 2>&1
  note "peers_flashinfer new 4 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-new-4.log | grep -v NOT_PERMITTED | head -6 | tee -a $O/summary.txt
fi
echo quit | nvidia-cuda-mps-control; sleep 1
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib thread 2; ab $v $lib thread 2; done
for v in new old; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib thread 1; done
nb8() { t0=$(date +%s); for sh in 1,4096 8,4096 32,4096 1,8192 8,8192; do LD_LIBRARY_PATH=$2:$LD_LIBRARY_PATH timeout 40 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode thread --ranks 8 -d bf16 --shapes $sh --algo lamport,oneshot,auto,sequential -r 10 --csv $O/norm-$1-thread8-$sh.csv > $O/norm-$1-thread8-$sh.txt 2>&1; done
  note "bench norm $1 thread 8 rc=$? in $(( $(date +%s) - t0 )) s"; }
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb8 $v $lib; done
nvidia-cuda-mps-control -d
for tool in racecheck synccheck; do t0=$(date +%s)
  SYMCOLL_TIMEOUT_MS=20000 TH_SMALL=1 timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $G/bin/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-200)"; done

echo quit | nvidia-cuda-mps-control
cd $OUT && tar czf r39.tgz r39 && rm -rf r39
