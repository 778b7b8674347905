#!/bin/bash
# LEAN norm kernels + one-copy spin (new) against 67c4c08 (old), side by side, bf16.
# Prediction (written before the run): if a cold SM fetching the kernel's code is what the trace's slow passes were, the local pass at world 1, 1-32 x 4096: 0.75-0.85x of old; the fused LAMPORT at 2 MPS, 1-32 x 4096: 0.85-0.92x; all_reduce LAMPORT at small sizes 0.95-1.0x. If not: all within 2%.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
mkdir -p /tmp/base && tar xJf .carry/base.tar.xz -C /tmp/base
G=$PWD/.carry/gpu; OLD=/tmp/base/base-67c4c08; NEW=$G/lib
ln -sf libsymcoll.so.0 $OLD/libsymcoll.so; cp $G/lib/_symcoll_torch_ops.so $OLD/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r38; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $O/summary.txt
nb() { # label lib mode ranks turn
  t0=$(date +%s); LD_LIBRARY_PATH=$2:$LD_LIBRARY_PATH timeout 100 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $3 --ranks $4 -d bf16 --shapes all --algo lamport,oneshot,auto,sequential -r 10 --csv $O/norm-$1-$3$4-t$5.csv > $O/norm-$1-$3$4-t$5.txt 2>&1
  note "norm $1 $3 $4 turn $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
ab() { # label lib mode ranks
  t0=$(date +%s); LD_LIBRARY_PATH=$2:$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce --backend cuda --mode $3 --ranks $4 -d bf16 -b 1K -e 1M -f 4 --algo lamport,oneshot,twoshot,auto -r 10 --csv $O/ar-$1-$3$4.csv > $O/ar-$1-$3$4.txt 2>&1
  note "all_reduce $1 $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib thread 1 1; done
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib thread 2 1; done
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; ab $v $lib thread 2; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for t in 1 2; do for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib process 2 $t; done; done
for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW; ab $v $lib process 2; done
for v in new old; do lib=$OLD; [ $v = new ] && lib=$NEW; nb $v $lib process 4 1; done
if [ -d .fi/site ]; then
  export SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
  for v in new old; do lib=$OLD; [ $v = new ] && lib=$NEW
    t0=$(date +%s); SYMCOLL_LIB=$lib/libsymcoll.so LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --csv $O/fi-$v-2.csv > $O/fi-$v-2.log 2>&1
    note "peers_flashinfer $v 2 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$v-2.log | head -8 | tee -a $O/summary.txt; done
fi
echo quit | nvidia-cuda-mps-control
cd $OUT && tar czf r38.tgz r38 && rm -rf r38
