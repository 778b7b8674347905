#!/bin/bash
# main's final GPU code (z62 = 56faff9) against f1a284d (the kernels before issue 27's rework) at one rank, in one call:
# the world-1 table, three turns alternating, default launches; one turn of main with SYMCOLL_PDL=1.
# Carry: .carry/{z62,basef}.tar.xz, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/z62.tar.xz -C /tmp/c && tar xJf .carry/basef.tar.xz -C /tmp/c
O=$OUT/r63; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
w1() { D=/tmp/c/$1; LD_LIBRARY_PATH=$D SYMCOLL_PDL=$3 timeout 60 $D/symcoll-bench --backend cuda --mode thread --ranks 1 -b 8 -e 32M -f 8 -d bf16 --algo oneshot,oneshot_db,twoshot,lamport,auto -r 20 -w 200 --csv $O/w1-$1-$2.csv > $O/w1-$1-$2.txt 2>&1; echo "w1 $1 $2 pdl $3 rc=$?" | tee -a $O/summary.txt; }
for t in a b c; do w1 base-f1a284d $t 0; w1 z62 $t 0; done
w1 z62 pdl 1
