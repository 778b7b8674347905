#!/bin/bash
# The table's groups for all_reduce_rmsnorm at 2-4 ranks end at inf (sequential above 256 KiB): auto against the forced columns.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 CUDA_MODULE_LOADING=EAGER
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
G=$PWD/.carry/gpu; export LD_LIBRARY_PATH=$G/lib:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r33; mkdir -p $O
for m in "thread 2" "process 4"; do
  [ "$m" = "process 4" ] && { export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d; }
  set -- $m
  SYMCOLL_DEBUG=INFO timeout 90 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $1 --ranks $2 -d bf16 --shapes all \
    --algo lamport,sequential,auto -r 10 --csv $O/norm-$1$2.csv > $O/norm-$1$2.txt 2>&1; echo "bench $1 $2 rc=$?"
  grep -v "INFO" $O/norm-$1$2.txt | tail -14
  grep "all_reduce_rmsnorm.*runs" $O/norm-$1$2.txt | sed 's/^.*rank 0: //' | sort | uniq -c | head -12
  TH_SEED=801 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $1 --ranks $2 --calls 500 2>&1 | grep -E "all right|wrong|fail" | head -2
done
echo quit | nvidia-cuda-mps-control
