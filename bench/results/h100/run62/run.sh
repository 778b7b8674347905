#!/bin/bash
# Branch pdlfix (z62: SYMCOLL_PDL also asks that the kernels were compiled for compute_90 or later): PDL is on where
# asked (the INFO line), one rank's all_reduce with PDL 0 and 1, a stream at 2 thread ranks with it. Carry: .carry/z62.tar.xz.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf .carry/z62.tar.xz -C /tmp/c
D=/tmp/c/z62; export LD_LIBRARY_PATH=$D; O=$OUT/r62; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
for p in 1 0 1; do SYMCOLL_PDL=$p SYMCOLL_DEBUG=INFO SYMCOLL_DEBUG_SUBSYS=INIT timeout 60 $D/symcoll-bench --backend cuda --mode thread --ranks 1 -b 8 -e 256K -f 8 -d bf16 --algo oneshot,twoshot,auto -r 20 -w 200 --csv $O/w1-pdl$p.csv > $O/w1-pdl$p.txt 2>&1
  echo "pdl $p rc=$?: $(grep -m1 -o 'cuda transport.*' $O/w1-pdl$p.txt)" | tee -a $O/summary.txt; done
SYMCOLL_PDL=1 TH_SEED=1621 SYMCOLL_TIMEOUT_MS=10000 timeout 60 $D/test_stream --backend cuda --mode thread --ranks 2 --calls 800 > $O/stream.log 2>&1
echo "stream pdl thread 2 seed 1621 rc=$?: $(grep -E 'all right|wrong|fail' $O/stream.log | head -1 | cut -c1-90)" | tee -a $O/summary.txt
paste -d' ' <(cut -d, -f1,6,7,8 $O/w1-pdl0.csv) <(cut -d, -f6,7,8 $O/w1-pdl1.csv) | tee -a $O/summary.txt
