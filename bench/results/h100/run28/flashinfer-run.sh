set -u; export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
G=$PWD/.carry/gpu; ln -sf libsymcoll.so.0 $G/lib/libsymcoll.so; L=$OUT/fi.txt
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-} SYMCOLL_LIB=$G/lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled PEERS_ONE_GPU=1
export PYTHONPATH=$PWD/.fi/site:$PWD/python FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -c 'from typing_extensions import get_annotations; import packaging.version, pynvml, cuda.bindings.driver' >>$L 2>&1 ||
  { echo "# with .fi/fallback" >>$L; export PYTHONPATH=$PYTHONPATH:$PWD/.fi/fallback; }
python3 -c 'import torch, tvm_ffi, flashinfer; from flashinfer.comm.trtllm_ar import get_trtllm_comm_module as g; print(torch.__version__, "tvm_ffi", tvm_ffi.__version__, "flashinfer", flashinfer.__version__, g())' >>$L 2>&1
echo "module check rc=$?" >>$L
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
R() { local n=$1 p=$2 t=$3 s=$4 t0=$(date +%s); shift 4; echo "=== N=$n MPS thread % $p ($t): $*" >>$L
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout $s python3 -m torch.distributed.run --standalone --nproc-per-node $n \
    bench/peers_flashinfer.py --csv $OUT/fi-$n-$t.csv "$@" >>$L 2>&1
  echo "=== N=$n ($t): rc=$? in $(( $(date +%s) - t0 )) s" >>$L; }
R 1 100 one 60 --shapes 1x4096,2048x8192
R 2 50 part 140 --shapes all
R 4 25 part 140 --shapes all
R 2 100 full 80 --shapes 1x4096,8x4096,1x8192,8x8192
R 4 100 full 80 --shapes 1x4096,8x4096,1x8192,8x8192
echo quit | nvidia-cuda-mps-control
grep -v "registered at\|fallthrough\|^W[0-9]" $L | cut -c1-220 | tail -90
