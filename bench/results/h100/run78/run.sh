#!/bin/bash
# Run 77's libraries again: more turns at 2 and 4 thread ranks (c76 vs c80) and a third at one rank with f1a284d.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/c; mkdir -p /tmp/c && for L in c76 c80 basef; do tar xJf .carry/$L.tar.xz -C /tmp/c; done
cp /tmp/c/c76/symcoll-bench /tmp/c/c80/
O=$OUT/r78; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
ar() { t0=$(date +%s); D=/tmp/c/$1; f=ar-$1-$2-$3; LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH timeout 90 $D/symcoll-bench --backend cuda --mode thread --ranks $2 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200 --csv $O/$f.csv > $O/$f.txt 2>&1; note "all_reduce $1 ranks $2 turn $3 rc=$? in $(( $(date +%s) - t0 )) s"; }
for t in b c d; do ar c80 2 $t; ar c76 2 $t; done
for t in a b; do ar c76 4 $t; ar c80 4 $t; done
ar c76 1 c; ar basef 1 c; ar c80 1 c; ar basef 1 d; ar c80 1 d; ar c76 1 d
ar c80 8 a; ar c76 8 a
note done
