#!/bin/bash
# Final: lanes (TWO compile-time), headers after the first row, the table's fused lamport at 2-4 ranks up to 256 KiB.
# tests, streams, before/after (v0 = HEAD 7c973df), FlashInfer beside it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so; ln -sf libsymcoll.so.0 .carry/v0/libsymcoll.so
export LD_LIBRARY_PATH=/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r32; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
start_mps() { export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d; }
stop_mps() { echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
tn() { t0=$(date +%s); LD_LIBRARY_PATH=$G/lib:$LD_LIBRARY_PATH SYMCOLL_TIMEOUT_MS=10000 timeout 120 $G/bin/test_norm --backend cuda --mode $1 --ranks $2 > /tmp/t.log 2>&1
  note "test_norm $1 $2: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' /tmp/t.log | tr '\n' ' ' | cut -c1-150)"; cat /tmp/t.log >> $O/norm-tests.log; }
strm() { t0=$(date +%s); LD_LIBRARY_PATH=$G/lib:$LD_LIBRARY_PATH TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 120 $G/bin/test_stream --backend cuda --mode $1 --ranks $2 --calls 500 > /tmp/s.log 2>&1
  note "stream $1 $2 seed $3: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' /tmp/s.log | head -1 | cut -c1-80)"; cat /tmp/s.log >> $O/stream.log; }
nb() { # label mode ranks
  for turn in 1 2; do for v in v0 new; do lib=$G/lib; [ $v = v0 ] && lib=$PWD/.carry/v0
    LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH timeout 90 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $2 --ranks $3 \
      -d bf16 --shapes all --algo lamport,oneshot,sequential,auto -r 10 --csv /tmp/n.csv > /tmp/n.txt 2>&1
    rc=$?; [ $rc = 0 ] || { note "$1 $v turn $turn rc=$rc"; tail -3 /tmp/n.txt >> $O/summary.txt; }
    sed "s/^/$1,$turn,$v,/" /tmp/n.csv >> $O/norm.csv
  done; done; note "bench $1 done"; }
t0=$(date +%s); LD_LIBRARY_PATH=$G/lib:$LD_LIBRARY_PATH timeout 200 $G/bin/test_device_api > $O/device_api.log 2>&1
note "test_device_api: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
tn thread 1; tn thread 2; tn thread 3
strm thread 2 701; strm thread 8 702
nb thread1 thread 1; nb thread2 thread 2
start_mps
export SYMCOLL_LIB=$G/lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER
export PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
for t in 1 2; do for n in 2 4; do LD_LIBRARY_PATH=$G/lib:$LD_LIBRARY_PATH timeout 90 python3 -m torch.distributed.run --standalone --nproc-per-node $n bench/peers_flashinfer.py \
  --shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --sc-algos lamport,sequential --csv $O/fi-$n-$t.csv 2>&1 | grep -v "FABRIC\|rank [0-9]: creating\|MNNVL\|OMP_NUM\|^\*\*\*\|registered at\|fallthrough\|cuda.c:7" >> $O/fi.txt
  note "flashinfer $n turn $t: rc=$?"; done; done
unset PYTHONPATH
tn process 2; tn process 4; strm process 2 703; strm process 4 704; strm process 8 705
nb mps2 process 2; nb mps4 process 4
stop_mps
grep -E "^ +[0-9]|^#" $O/fi.txt | cut -c1-220
