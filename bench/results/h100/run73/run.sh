#!/bin/bash
# c69 (main) / c71 (error word read first, stored in go(); no word and no barrier at one rank) / c72 (c71's kernel, the word
# at one rank too: the barrier) / c73 (barrier always in go(), no word at one rank): world-1 tables out and fp8 static,
# 2 thread ranks; alternating turns.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && for L in c69 c71 c72 c73; do tar xJf .carry/$L.tar.xz -C /tmp/c; done
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r73; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
nb() { t0=$(date +%s); D=/tmp/c/$1; f=norm-$1-$2$3-$4-$5; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 60 $D/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 -d bf16 --shapes all $6 -r 20 --csv $O/$f.csv > $O/$f.txt 2>&1; note "norm $1 $2 $3 $4 $5 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in a b; do
  for L in c69 c71 c72 c73; do nb $L thread 1 plain $t; done
  for L in c73 c72 c71 c69; do nb $L thread 1 fp8s $t "--fp8 static"; done
done
for t in a b; do for L in c69 c71 c72 c73; do nb $L thread 2 plain $t; done; done
D=/tmp/c/c73; f=$O/tnorm-c73.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 120 $D/test_norm --backend cuda --mode thread --ranks 1 > $f 2>&1
note "test_norm c73 thread 1 rc=$?: $(grep -E 'calls checked|FAILED' $f | head -2 | tr '\n' ' ' | cut -c1-200)"
f=$O/tnorm-c73-2.log; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 120 $D/test_norm --backend cuda --mode thread --ranks 2 --quick > $f 2>&1
note "test_norm c73 thread 2 --quick rc=$?: $(grep -E 'calls checked|FAILED' $f | head -2 | tr '\n' ' ' | cut -c1-200)"
note done
