#!/bin/bash
# c76 = main (1251ed3) with test_norm's {200, 1304} shape and test_stream's many-row calls;
# c77-c79: the local pass's TWO kernel with PRE (natural registers, 3 blocks an SM, 4 blocks an SM).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for L in c76 c77 c78 c79; do tar xJf .carry/$L.tar.xz -C /tmp/c; done
for L in c77 c78 c79; do cp /tmp/c/c76/symcoll-bench /tmp/c/c76/test_norm /tmp/c/c76/test_stream /tmp/c/$L/; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r76; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
nb() { t0=$(date +%s); D=/tmp/c/$1; f=norm-$1-$2$3-$4-$5; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d $7 --shapes all $6 -r 20 --csv $O/$f.csv > $O/$f.txt 2>&1; note "norm $1 $2 $3 $4 $5 $7 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do
  for L in c76 c77 c78 c79; do nb $L thread 1 plain $t "" bf16; done
  for L in c79 c78 c77 c76; do nb $L thread 1 fp8s $t "--fp8 static" bf16; done
  for L in c76 c78 c79 c77; do nb $L thread 1 fp8r $t "--fp8 rows" bf16; done
done
for L in c76 c77 c78 c79; do nb $L thread 1 fp32 a "" fp32; done
tn() { t0=$(date +%s); D=/tmp/c/$1; f=$O/tnorm-$1-$2$3-pdl$5.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$5 SYMCOLL_TIMEOUT_MS=10000 timeout 150 $D/test_norm --backend cuda --mode $2 --ranks $3 $4 > $f 2>&1
  note "test_norm $1 $2 $3 $4 pdl $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|FAILED|wrong|differ' $f | head -3 | tr '\n' ' ' | cut -c1-200)"; }
st() { t0=$(date +%s); D=/tmp/c/$1; f=$O/stream-$1-$2$3-$4-pdl$5.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_PDL=$5 TH_SEED=$4 SYMCOLL_TIMEOUT_MS=5000 timeout 60 $D/test_stream --backend cuda --mode $2 --ranks $3 --calls 800 > $f 2>&1
  note "stream $1 $2 $3 seed $4 pdl $5 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|FAILED;|gave up' $f | head -2 | cut -c1-110 | tr '\n' ' ')"; }
tn c76 thread 1 "" 0; tn c78 thread 1 "" 0; tn c79 thread 1 "" 0; tn c77 thread 1 --quick 0; tn c78 thread 2 --quick 1
st c76 thread 4 1754 0; st c76 thread 8 1755 1; st c78 thread 2 1756 0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st c76 process 8 1751 0; st c76 process 4 1752 0; st c76 process 4 1753 1; tn c76 process 4 --quick 0
echo quit | nvidia-cuda-mps-control
note done
