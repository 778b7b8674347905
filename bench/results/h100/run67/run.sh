#!/bin/bash
# c67: the branch's final library (clusters wherever a row fits two packs a thread; lamport for 8 ranks up to 64 KiB).
# test_norm, streams (thread and MPS, no host barriers), the norm table auto against SYMCOLL_GPU_NORM_ROW_BLOCKS=1 at 8
# ranks, FlashInfer beside it at 8 MPS processes. Carry: .carry/{c67,fi}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/c67.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
D=/tmp/c/c67; export LD_LIBRARY_PATH=$D:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r67; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
tn() { t0=$(date +%s); SYMCOLL_GPU_NORM_ROW_BLOCKS=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_norm --backend cuda --mode $1 --ranks $2 $3 > $O/tnorm-$1$2-rb$4.log 2>&1
  note "test_norm $1 $2 $3 row_blocks $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $O/tnorm-$1$2-rb$4.log | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st() { t0=$(date +%s); TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $O/stream-$1$2-$3.log 2>&1
  note "stream $1 $2 seed $3 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1$2-$3.log | head -1 | cut -c1-100)"; }
nb() { t0=$(date +%s); SYMCOLL_GPU_NORM_ROW_BLOCKS=$3 timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $1 --ranks $2 -d bf16 --shapes all --algo lamport -r 10 --csv $O/norm-$1$2-rb$3-$4.csv > $O/norm-$1$2-rb$3-$4.txt 2>&1; note "norm $1 $2 row_blocks $3 $4 rc=$? in $(( $(date +%s) - t0 )) s"; }
tn thread 8 --quick 0; tn thread 3 --quick 2
st thread 8 1672
nb thread 8 0 a; nb thread 8 1 a
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 8 1674; st process 4 1673
nb process 8 0 a; nb process 8 1 a
fip() { t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_GPU_NORM_ROW_BLOCKS=$2 SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout $4 python3 -m torch.distributed.run --standalone --nproc-per-node $3 bench/peers_flashinfer.py --shapes 1x4096,8x4096,1x8192,8x8192 --sc-algos lamport --csv $O/fi-$3-rb$2-$1.csv > $O/fi-$3-rb$2-$1.log 2>&1
  note "peers_flashinfer $3 row_blocks $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-$3-rb$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip a 0 8 100
echo quit | nvidia-cuda-mps-control
note done
