#!/bin/bash
# main at 06d0616 (GPU code as at 910ebaf): streams at 1, 2, 8 thread ranks and 4 MPS processes; test_coll at one rank;
# test_norm at 2 MPS; compute-sanitizer on test_norm and test_coll at 2 MPS processes; a PDL micro-benchmark.
# Carry: .carry/m56.tar.xz, .debs, .scratch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in .debs/*.deb; do dpkg -x $d /tmp/cmocka; done
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/m56.tar.xz -C /tmp/c
export LD_LIBRARY_PATH=/tmp/c/m56:/tmp/cmocka/usr/lib/x86_64-linux-gnu
D=/tmp/c/m56; O=$OUT/r57; mkdir -p $O; T0=$(date +%s)
note() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/summary.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
st() { t0=$(date +%s); TH_SEED=$3 SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_stream --backend cuda --mode $1 --ranks $2 --calls 800 > $O/stream-$1$2-$3.log 2>&1
  note "stream $1 $2 seed $3 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'all right|wrong|fail' $O/stream-$1$2-$3.log | head -1 | cut -c1-100)"; }
for s in 1561 1562 1563; do st thread 1 $s; done
st thread 2 1564; st thread 8 1565
t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 120 $D/test_coll --coll all --backend cuda --mode thread --ranks 1 > $O/coll-1.log 2>&1
note "test_coll all 1 rank rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked' $O/coll-1.log | head -1)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d
st process 4 1566
t0=$(date +%s); SYMCOLL_TIMEOUT_MS=10000 timeout 90 $D/test_norm --backend cuda --mode process --ranks 2 > $O/tnorm-process2.log 2>&1
note "test_norm process 2 rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'calls checked|PASSED|FAILED' $O/tnorm-process2.log | tr '\n' ' ' | cut -c1-160)"

san() { tool=$1; shift; name=$1; shift; t0=$(date +%s)
  SYMCOLL_TIMEOUT_MS=30000 TH_SMALL=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all "$@" > $O/san-$name-$tool.log 2>&1
  note "compute-sanitizer $tool $name: rc=$? in $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked' $O/san-$name-$tool.log | sort | uniq -c | tr '\n' ' ' | cut -c1-220)"; }
for tool in memcheck racecheck synccheck; do san $tool norm-process2 $D/test_norm --backend cuda --mode process --ranks 2; done
for tool in racecheck synccheck; do san $tool coll-process2 $D/test_coll --coll all --backend cuda --mode process --ranks 2; done
echo quit | nvidia-cuda-mps-control
t0=$(date +%s); timeout 60 .scratch/pdl_micro > $O/pdl-micro.txt 2>&1; note "pdl micro rc=$? in $(( $(date +%s) - t0 )) s"
note done
