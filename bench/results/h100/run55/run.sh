#!/bin/bash
# One rank's forced two-shot pushes at every size (w1p: the working tree after e88b3d0's docs) against main (fin:
# f2a0c03's GPU code, whose all_reduce is main's): all_reduce at one rank, every algorithm, 8 B to 32 MiB, three
# turns; then w1p's test_coll at 1 and 2 thread ranks. Carry: .carry/{fin,w1p}.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for t in fin w1p; do tar xJf .carry/$t.tar.xz -C /tmp/c; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r55; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
dir() { case $1 in main) echo /tmp/c/fin;; *) echo /tmp/c/$1;; esac; }
w1() { D=$(dir $1); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 90 $D/symcoll-bench --backend cuda --mode thread --ranks 1 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200 --csv $O/w1-$1-$2.csv > $O/w1-$1-$2.txt 2>&1; note "w1 $1 $2 rc=$?"; }
tc() { D=$(dir $1); t0=$(date +%s); LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 200 $D/test_coll --coll $2 --backend cuda --mode thread --ranks $3 > $O/coll-$1-$2-$3.log 2>&1
  note "test_coll $1 $2 $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/coll-$1-$2-$3.log | tr '\n' ' ' | cut -c1-160)"; }
for turn in a b c; do for v in main w1p; do w1 $v $turn; done; done
tc w1p all_reduce 1; tc w1p all 1; tc w1p all_reduce 2
note done
