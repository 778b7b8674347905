#!/bin/bash
# c80 (main + epoch_barrier's one-rank return) against c76 (main) and f1a284d (the kernels before issue 27's rework):
# world-1 all_reduce tables, three turns alternating; 2 and 4 thread ranks; the barrier micro-benchmark; c80's tests.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for L in c76 c80 basef; do tar xJf .carry/$L.tar.xz -C /tmp/c; done
cp /tmp/c/c76/symcoll-bench /tmp/c/c76/test_norm /tmp/c/c76/test_stream /tmp/c/c80/
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r77; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
ar() { t0=$(date +%s); D=/tmp/c/$1; f=ar-$1-$2-$3; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 90 $D/symcoll-bench --backend cuda --mode thread --ranks $2 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200 --csv $O/$f.csv > $O/$f.txt 2>&1; note "all_reduce $1 ranks $2 turn $3 rc=$? in $(( $(date +%s) - t0 )) s"; }
br() { t0=$(date +%s); D=/tmp/c/$1; f=barrier-$1-$2-$3; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 60 $D/symcoll-bench --coll barrier --backend cuda --mode thread --ranks $2 --csv $O/$f.csv > $O/$f.txt 2>&1; note "barrier $1 ranks $2 turn $3 rc=$? in $(( $(date +%s) - t0 )) s"; }
ar basef 1 a; ar c76 1 a; ar c80 1 a
ar c80 1 b; ar basef 1 b; ar c76 1 b
ar c76 2 a; ar c80 2 a
for n in 1 2; do br c76 $n a; br c80 $n a; done
D=/tmp/c/c80
tc() { t0=$(date +%s); f=$O/tcoll-c80-$1$2.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 150 $D/test_coll --coll all $3 --backend cuda --mode $1 --ranks $2 > $f 2>&1
  note "test_coll c80 $1 $2 $3 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $f | head -2 | tr '\n' ' ' | cut -c1-160)"; }
st() { t0=$(date +%s); f=$O/stream-c80-$1$2-$3-pdl$4.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$4 TH_SEED=$3 SYMCOLL_TIMEOUT_MS=5000 timeout 60 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $f 2>&1
  note "stream c80 $1 $2 seed $3 pdl $4 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|FAILED;|gave up' $f | head -2 | cut -c1-110 | tr '\n' ' ')"; }
tc thread 1 --quick; tc thread 2 --quick
st thread 1 1771 0; st thread 2 1773 0; st thread 3 1774 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 4 1776 0
echo quit | nvidia-cuda-mps-control
note done
