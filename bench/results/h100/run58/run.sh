#!/bin/bash
# Branch pdl (p58: SYMCOLL_PDL, programmatic dependent launch of the collectives' and norms' kernels): its checks with
# SYMCOLL_PDL=1 (random call streams at 1, 2, 8 thread ranks and 4, 8 MPS processes; test_norm; test_coll), then
# SYMCOLL_PDL=0 against 1 in the same library, alternating (all_reduce and all_reduce_rmsnorm at world 1 and 2 thread
# ranks), and FlashInfer's fused op beside symcoll's, both with and both without PDL, at 2 MPS processes.
# Carry: .carry/{p58,fi}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && tar xJf .carry/p58.tar.xz -C /tmp/c && tar xJf .carry/fi.tar.xz -C /tmp/f
export LD_LIBRARY_PATH=/tmp/c/p58:/tmp/cmocka/usr/lib/x86_64-linux-gnu
D=/tmp/c/p58; O=$OUT/r58; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
st() { t0=$(date +%s); SYMCOLL_PDL=1 TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $O/stream-$1$2-$3.log 2>&1
  note "stream pdl $1 $2 seed $3 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1$2-$3.log | head -1 | cut -c1-100)"; }
st thread 1 1581; st thread 2 1582; st thread 8 1583
t0=$(date +%s); SYMCOLL_PDL=1 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_norm --backend cuda --mode thread --ranks 2 > $O/tnorm-thread2.log 2>&1
note "test_norm pdl thread 2 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-thread2.log | tr '\n' ' ' | cut -c1-160)"
t0=$(date +%s); SYMCOLL_PDL=1 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_coll --coll all --backend cuda --mode thread --ranks 1 > $O/coll-1.log 2>&1
note "test_coll pdl all 1 rank rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked' $O/coll-1.log | head -1)"
t0=$(date +%s); TH_SMALL=1 SYMCOLL_PDL=1 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_coll --coll all --backend cuda --mode thread --ranks 2 > $O/coll-2.log 2>&1
note "test_coll pdl all 2 ranks small rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked' $O/coll-2.log | head -1)"
# benches: PDL 0 / 1 alternating
ar() { t0=$(date +%s); SYMCOLL_PDL=$1 timeout 60 $D/symcoll-bench --backend cuda --mode thread --ranks $2 -b 8 -e $3 -f 8 -d bf16 --algo $4 -r 20 -w 200 --csv $O/ar-$2-pdl$1-$5.csv > $O/ar-$2-pdl$1-$5.txt 2>&1; note "ar ranks $2 pdl $1 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
nb() { t0=$(date +%s); SYMCOLL_PDL=$1 timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode thread --ranks $2 -d bf16 --shapes all --algo auto -r 10 $4 --csv $O/norm-$2-pdl$1-$3.csv > $O/norm-$2-pdl$1-$3.txt 2>&1; note "norm ranks $2 pdl $1 $3 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do ar 0 1 1M oneshot,twoshot,lamport,auto $t; ar 1 1 1M oneshot,twoshot,lamport,auto $t; done
for t in a b; do nb 0 1 $t; nb 1 1 $t; done
nb 0 1 fp8 "--fp8 static"; nb 1 1 fp8 "--fp8 static"
for t in a b; do ar 0 2 4M oneshot,twoshot,lamport,auto $t; ar 1 2 4M oneshot,twoshot,lamport,auto $t; done
nb 0 2 a; nb 1 2 a
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 4 1584; st process 8 1585
t0=$(date +%s); SYMCOLL_PDL=1 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_norm --backend cuda --mode process --ranks 2 > $O/tnorm-process2.log 2>&1
note "test_norm pdl process 2 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-process2.log | tr '\n' ' ' | cut -c1-160)"
fip() { t0=$(date +%s); SYMCOLL_PDL=$2 SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --sc-algos lamport $3 --csv $O/fi-2-pdl$2-$1.csv > $O/fi-2-pdl$2-$1.log 2>&1
  note "peers_flashinfer 2 pdl $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-2-pdl$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip a 1 --fi-pdl; fip a 0 ""
echo quit | nvidia-cuda-mps-control
note done
