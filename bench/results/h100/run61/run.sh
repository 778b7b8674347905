#!/bin/bash
# Branch w1zc (z61: at one rank the forced ONE_SHOT and TWO_SHOT all_reduce read the input where it lies and TWO_SHOT
# stores into the output, nothing staged) against main (m56's GPU code for all_reduce): one-rank table, alternating,
# two turns; test_coll at 1 rank (every collective) and 2 ranks (small counts); streams at one rank.
# Carry: .carry/{z61,m56}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for t in z61 m56; do tar xJf .carry/$t.tar.xz -C /tmp/c; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r61; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
w1() { D=/tmp/c/$1; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 90 $D/symcoll-bench --backend cuda --mode thread --ranks 1 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200 --csv $O/w1-$1-$2.csv > $O/w1-$1-$2.txt 2>&1; note "w1 $1 $2 rc=$?"; }
for t in a b; do w1 m56 $t; w1 z61 $t; done
D=/tmp/c/z61
t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_coll --coll all --backend cuda --mode thread --ranks 1 > $O/coll-1.log 2>&1
note "test_coll all 1 rank rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked' $O/coll-1.log | head -1)"
t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH TH_SMALL=1 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_coll --coll all --backend cuda --mode thread --ranks 2 > $O/coll-2.log 2>&1
note "test_coll all 2 ranks small rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked' $O/coll-2.log | head -1)"
for s in 1611 1612; do t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH TH_SEED=$s SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_stream --backend cuda --mode thread --ranks 1 --calls 800 > $O/stream-thread1-$s.log 2>&1
  note "stream thread 1 seed $s rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-thread1-$s.log | head -1 | cut -c1-100)"; done
note done
