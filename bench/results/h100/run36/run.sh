#!/bin/bash
# 78134d5's test (wide mismatch) and 2f28af1's peers scripts on the GPU; a clock64 trace of the fused LAMPORT norm against all_reduce's LAMPORT.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so; export LD_LIBRARY_PATH=$G/lib:/tmp/cmocka/usr/lib/x86_64-linux-gnu
mkdir -p /tmp/tr && tar xJf .carry/trace.tar.xz -C /tmp/tr && ln -sf libsymcoll.so.0 /tmp/tr/trace/libsymcoll.so
O=$OUT/r36; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
t0=$(date +%s); timeout 100 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
for s in 1,4096 32,4096; do
  LD_LIBRARY_PATH=/tmp/tr/trace:$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode thread --ranks 2 -d bf16 --shapes $s --algo lamport,sequential -r 10 > $O/trace-thread2-$s.log 2>&1
  note "trace thread 2 $s rc=$?"; done
TH_SEED=1001 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode thread --ranks 2 --calls 500 2>&1 | grep -E "all right|wrong|fail" | head -1 | cut -c1-60 | sed 's/^/stream thread 2 seed 1001: /' | tee -a $O/summary.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
for s in 1,4096 32,4096; do
  LD_LIBRARY_PATH=/tmp/tr/trace:$LD_LIBRARY_PATH timeout 60 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode process --ranks 2 -d bf16 --shapes $s --algo lamport,sequential -r 10 > $O/trace-mps2-$s.log 2>&1
  note "trace mps 2 $s rc=$?"; done
TH_SEED=1002 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode process --ranks 4 --calls 500 2>&1 | grep -E "all right|wrong|fail" | head -1 | cut -c1-60 | sed 's/^/stream MPS 4 seed 1002: /' | tee -a $O/summary.txt
export SYMCOLL_LIB=$G/lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
timeout 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096 --csv $O/fi-2.csv > $O/fi-2.log 2>&1; note "peers_flashinfer 2 rc=$?"
grep -E "^ +[0-9]|rows hidden|Error|error" $O/fi-2.log | head -20 | tee -a $O/summary.txt
timeout 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_torch.py -b 8K -e 64K -r 5 > $O/pt-ar.log 2>&1; note "peers_torch all_reduce rc=$?"; grep -E "^ +[0-9]|size" $O/pt-ar.log | head -8 | tee -a $O/summary.txt
echo quit | nvidia-cuda-mps-control
