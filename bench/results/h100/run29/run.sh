set -u; export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so; L=$OUT/fi29.txt
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-} SYMCOLL_LIB=$G/lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1
export PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws CUDA_MODULE_LOADING=EAGER
python3 -c 'from typing_extensions import get_annotations; import packaging.version, pynvml, cuda.bindings.driver' >>$L 2>&1 ||
  { echo "# with .fi/fallback" >>$L; export PYTHONPATH=$PYTHONPATH:$PWD/.fi/fallback; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
R() { local n=$1 p=$2 t=$3 s=$4 t0=$(date +%s); shift 4; echo "=== N=$n MPS thread % $p ($t): $*" >>$L
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout $s python3 -m torch.distributed.run --standalone --nproc-per-node $n \
    bench/peers_flashinfer.py --csv $OUT/fi29-$n-$t.csv "$@" 2>&1 | grep -v "FABRIC\|rank [0-9]: creating\|MNNVL\|OMP_NUM\|^\*\*\*\|registered at\|fallthrough" >>$L
  echo "=== N=$n ($t): rc=$? in $(( $(date +%s) - t0 )) s" >>$L; }
SM="--shapes 1x4096,8x4096,32x4096,1x8192,8x8192 --sc-algos lamport,oneshot,sequential"
R 2 100 full 90 $SM
R 4 100 full 90 $SM
R 4 100 full-fp32acc 90 $SM --fi-fp32-acc
R 2 50 part 150 --shapes all --sc-algos lamport,oneshot
R 4 25 part 150 --shapes all --sc-algos lamport,oneshot
echo quit | nvidia-cuda-mps-control
grep -v "^W[0-9]\|cuda.c:732" $L | cut -c1-250 | tail -100
