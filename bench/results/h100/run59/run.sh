#!/bin/bash
# Branch pdl (p59: run 58's library plus the chain's quantisation kernel launched with PDL where SYMCOLL_PDL says so)
# against main (m56): p59 with SYMCOLL_PDL=0 against main (the guards cost nothing without PDL), PDL 0 against 1 at 4 and
# 8 thread ranks and 2 and 4 MPS processes, the FP8 chain with PDL on both sides, FlashInfer beside symcoll at 2 MPS
# processes (two more turns each way), compute-sanitizer with PDL. Carry: .carry/{p59,m56,fi}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c /tmp/f; mkdir -p /tmp/c /tmp/f && for t in p59 m56; do tar xJf .carry/$t.tar.xz -C /tmp/c; done && tar xJf .carry/fi.tar.xz -C /tmp/f
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r59; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
# $1 lib, $2 pdl, $3 mode, $4 ranks, $5 top size, $6 turn
ar() { D=/tmp/c/$1; t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$2 timeout 60 $D/symcoll-bench --backend cuda --mode $3 --ranks $4 -b 8 -e $5 -f 8 -d bf16 --algo oneshot,twoshot,lamport,auto -r 20 -w 200 --csv $O/ar-$1-pdl$2-$3$4-$6.csv > $O/ar-$1-pdl$2-$3$4-$6.txt 2>&1; note "ar $1 pdl $2 $3 $4 $6 rc=$? in $(( $(date +%s) - t0 )) s"; }
nb() { D=/tmp/c/$1; t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$2 timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $3 --ranks $4 -d bf16 --shapes all --algo auto -r 10 $6 --csv $O/norm-$1-pdl$2-$3$4-$5.csv > $O/norm-$1-pdl$2-$3$4-$5.txt 2>&1; note "norm $1 pdl $2 $3 $4 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do ar m56 0 thread 1 1M $t; ar p59 0 thread 1 1M $t; done
for t in a b; do nb m56 0 thread 1 $t; nb p59 0 thread 1 $t; done
for t in a b; do nb p59 0 thread 1 fp8$t "--fp8 static"; nb p59 1 thread 1 fp8$t "--fp8 static"; done
for n in 4 8; do ar p59 0 thread $n 4M a; ar p59 1 thread $n 4M a; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for n in 2 4; do ar p59 0 process $n 4M a; ar p59 1 process $n 4M a; done
D=/tmp/c/p59
fip() { t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$2 SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=/tmp/f/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
  SYMCOLL_LIB=$D/libsymcoll.so timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --sc-algos lamport $3 --csv $O/fi-2-pdl$2-$1.csv > $O/fi-2-pdl$2-$1.log 2>&1
  note "peers_flashinfer 2 pdl $2 $1 rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^ +[0-9]|rows hidden|rror" $O/fi-2-pdl$2-$1.log | grep -v NOT_PERMITTED | head -8 | tee -a $O/summary.txt; }
fip b 1 --fi-pdl; fip b 0 ""; fip c 1 --fi-pdl; fip c 0 ""
san() { tool=$1; t0=$(date +%s)
  LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=1 SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all $D/test_norm --backend cuda --mode process --ranks 2 > $O/san-$tool.log 2>&1
  note "compute-sanitizer $tool test_norm pdl process 2 --quick: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-220)"; }
san memcheck; san synccheck
t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=1 TH_SEED=1591 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode process --ranks 4 --calls 800 > $O/stream-process4-1591.log 2>&1
note "stream pdl process 4 seed 1591 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-process4-1591.log | head -1 | cut -c1-100)"
echo quit | nvidia-cuda-mps-control
t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=1 TH_SEED=1592 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode thread --ranks 4 --calls 800 > $O/stream-thread4-1592.log 2>&1
note "stream pdl thread 4 seed 1592 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-thread4-1592.log | head -1 | cut -c1-100)"
note done
