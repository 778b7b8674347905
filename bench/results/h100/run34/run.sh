#!/bin/bash
# Final tree: a first row whose wait gave up writes nothing (LAMPORT norm); peers_flashinfer imports peers_torch's timing.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so; export LD_LIBRARY_PATH=$G/lib:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r34; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
t0=$(date +%s); timeout 100 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
for m in "thread 2" "thread 4"; do set -- $m; t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 100 $G/bin/test_norm --backend cuda --mode $1 --ranks $2 > /tmp/t.log 2>&1
  note "test_norm $1 $2: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' /tmp/t.log | tr '\n' ' ' | cut -c1-150)"; done
TH_SEED=901 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode thread --ranks 2 --calls 500 2>&1 | grep -E "all right|wrong|fail" | head -1 | cut -c1-60 | sed 's/^/stream thread 2 seed 901: /' | tee -a $O/summary.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
TH_SEED=902 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode process --ranks 4 --calls 500 2>&1 | grep -E "all right|wrong|fail" | head -1 | cut -c1-60 | sed 's/^/stream MPS 4 seed 902: /' | tee -a $O/summary.txt
export SYMCOLL_LIB=$G/lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
timeout 80 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py --shapes 1x4096,32x4096,1x8192 --csv $O/fi-2.csv 2>&1 | grep -E "^ +[0-9]|rows hidden|Error|error" | tee -a $O/summary.txt
echo quit | nvidia-cuda-mps-control
