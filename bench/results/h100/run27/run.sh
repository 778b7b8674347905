#!/bin/bash
# Issue 27's single points over 3% against f1a284d (runs 20-22, two turns each), again with five
# alternating turns: f1a284d's bench and library (build-base/build) against this tree's.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
G=$PWD/.carry/gpu; BB=$PWD/build-base/build
O=$OUT/r27; mkdir -p $O
T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
start_mps() { export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d; }
stop_mps() { echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
cmp() { # label turns args...
  local label=$1 turns=$2; shift 2
  for turn in $(seq $turns); do for which in base new; do
    if [ $which = base ]; then b=$BB/bin/symcoll-bench; lib=$BB/lib; else b=$G/bin/symcoll-bench; lib=$G/lib; fi
    LD_LIBRARY_PATH=$lib timeout 60 $b "$@" -d bf16 -r 20 --csv /tmp/cmp.csv > /tmp/cmp.txt 2>&1
    rc=$?; [ $rc = 0 ] || note "compare $label turn $turn $which: rc=$rc"
    sed "s/^/$label,$turn,$which,/" /tmp/cmp.csv >> $O/compare.csv
  done; done
  note "compare $label: done"
}
T=5
cmp "ar-thread1-64B" $T --backend cuda --mode thread --ranks 1 --algo twoshot,lamport,auto -b 64 -e 64
cmp "ar-thread4-2MiB" $T --backend cuda --mode thread --ranks 4 --algo twoshot,auto -b 2M -e 2M
cmp "ar-thread2-32KiB" $T --backend cuda --mode thread --ranks 2 --algo oneshot_db,auto -b 32K -e 32K
cmp "ar-thread2-2MiB+2B" $T --backend cuda --mode thread --ranks 2 --algo lamport,auto -b 2097154 -e 2097154
cmp "ar-thread8-8B" $T --backend cuda --mode thread --ranks 8 --algo twoshot,auto -b 8 -e 8
cmp "ag-thread2-8194B" $T --coll all_gather --backend cuda --mode thread --ranks 2 --algo pull,auto -b 8194 -e 8194
cmp "ag-thread2-8KiB" $T --coll all_gather --backend cuda --mode thread --ranks 2 --algo pull,auto -b 8K -e 8K
cmp "ag-thread1-512KiB" $T --coll all_gather --backend cuda --mode thread --ranks 1 --algo pull,auto -b 512K -e 512K
start_mps
cmp "ar-mps4-2MiB" $T --backend cuda --mode process --ranks 4 --algo twoshot,auto -b 2M -e 2M
stop_mps
cd $OUT && cp r27/summary.txt summary-r27.txt
