#!/bin/bash
# The LAMPORT norm over a thread-block cluster a row (DEFER: pass 1 writes nothing, the row's reduction agrees on ok), x loaded before the state, the header read with the data.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so
mkdir -p /tmp/nl && tar xJf .carry/new.tar.xz -C /tmp/nl && ln -sf libsymcoll.so.0 /tmp/nl/new/libsymcoll.so
NEW=/tmp/nl/new; OLD=$G/lib
export LD_LIBRARY_PATH=$NEW:/tmp/cmocka/usr/lib/x86_64-linux-gnu
O=$OUT/r37; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
t0=$(date +%s); timeout 100 $G/bin/test_device_api > $O/device_api.log 2>&1; note "test_device_api: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'PASSED|FAILED' $O/device_api.log | tr '\n' ' ')"
for m in "thread 2" "thread 3"; do set -- $m; t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 100 $G/bin/test_norm --backend cuda --mode $1 --ranks $2 > $O/norm-$1$2.log 2>&1
  note "test_norm $1 $2: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-$1$2.log | tr '\n' ' ' | cut -c1-150)"; done
st() { TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $G/bin/test_stream --backend cuda --mode $1 --ranks $2 --calls 500 > $O/stream-$1$2.log 2>&1; note "stream $1 $2 seed $3 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream-$1$2.log | head -1 | cut -c1-70)"; }
st thread 2 1101; st thread 8 1102
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 100 $G/bin/test_norm --backend cuda --mode process --ranks 4 > $O/norm-process4.log 2>&1
note "test_norm process 4: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/norm-process4.log | tr '\n' ' ' | cut -c1-150)"
st process 2 1103; st process 4 1104; st process 8 1105
for t in 1 2; do for m in "thread 2" "process 2" "process 4"; do set -- $m; for v in old new; do lib=$OLD; [ $v = new ] && lib=$NEW
  LD_LIBRARY_PATH=$lib:/tmp/cmocka/usr/lib/x86_64-linux-gnu timeout 90 $G/bin/symcoll-bench --coll all_reduce_rmsnorm --backend cuda --mode $1 --ranks $2 -d bf16 --shapes all --algo lamport,auto,sequential -r 10 --csv $O/norm-$v-$1$2-t$t.csv > $O/norm-$v-$1$2-t$t.txt 2>&1
  note "bench $v $1 $2 turn $t rc=$?"; done; done; done
export SYMCOLL_LIB=$NEW/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1 CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
for n in 2 4; do timeout 90 python3 -m torch.distributed.run --standalone --nproc-per-node $n bench/peers_flashinfer.py --shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --csv $O/fi-$n.csv > $O/fi-$n.log 2>&1; note "peers_flashinfer $n rc=$?"
grep -E "^ +[0-9]|rows hidden" $O/fi-$n.log | head -8 | tee -a $O/summary.txt; done
echo quit | nvidia-cuda-mps-control
