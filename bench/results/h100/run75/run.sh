#!/bin/bash
# c75 (main + FP8 static reciprocal after the reduction, amax by REDUX) against c74 (main's GPU code):
# world-1 norm tables (fp8 static, fp8 rows) in alternating turns, 2 thread ranks with fp8 rows; test_norm, streams.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/c74.tar.xz -C /tmp/c && tar xJf .carry/c75.tar.xz -C /tmp/c
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r75; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
nb() { t0=$(date +%s); D=/tmp/c/$1; f=norm-$1-$2$3-$4-$5; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all $6 -r 20 --csv $O/$f.csv > $O/$f.txt 2>&1; note "norm $1 $2 $3 $4 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do
  for L in c74 c75; do nb $L thread 1 fp8s $t "--fp8 static"; done
  for L in c75 c74; do nb $L thread 1 fp8r $t "--fp8 rows"; done
done
for L in c74 c75; do nb $L thread 2 fp8r a "--fp8 rows"; done
D=/tmp/c/c75
tn() { t0=$(date +%s); f=$O/tnorm-$1$2-pdl$4.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$4 SYMCOLL_TIMEOUT_MS=10000 timeout 120 $D/test_norm --backend cuda --mode $1 --ranks $2 $3 > $f 2>&1
  note "test_norm c75 $1 $2 $3 pdl $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $f | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st() { t0=$(date +%s); f=$O/stream-$1$2-$3-pdl$4.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$4 TH_SEED=$3 SYMCOLL_TIMEOUT_MS=5000 timeout 60 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $f 2>&1
  note "stream c75 $1 $2 seed $3 pdl $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|FAILED;|gave up' $f | head -2 | cut -c1-110 | tr '\n' ' ')"; }
san() { t0=$(date +%s); f=$O/san-$1-$2.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=30000 timeout 150 compute-sanitizer --tool $1 --error-exitcode 9 $D/test_norm --backend cuda --mode thread --ranks $2 --quick > $f 2>&1
  note "compute-sanitizer $1 test_norm c75 thread $2 --quick rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|calls checked' $f | head -2 | tr '\n' ' ' | cut -c1-200)"; }
tn thread 1 "" 0; tn thread 8 --quick 1
st thread 8 1741 0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 4 1742 1; tn process 4 --quick 1
echo quit | nvidia-cuda-mps-control
note done
