# World 1: the one-rank copy by a kernel (HEAD) against the copy engine (var-memcpy), one build otherwise.
G=$PWD/.carry/gpu; V=$PWD/.carry/var-memcpy; cp $G/lib/_symcoll_torch_ops.so $V/; ln -sf libsymcoll.so.0 $V/libsymcoll.so
O=$OUT/copy; mkdir -p $O
for turn in 1 2 3; do for w in kernel memcpy; do
  lib=$G/lib; [ $w = memcpy ] && lib=$V
  for c in all_reduce all_gather; do
    LD_LIBRARY_PATH=$lib timeout 60 $G/bin/symcoll-bench --backend cuda --mode thread --ranks 1 --coll $c --algo auto -b 64 -e 4M -f 4 -d bf16 -r 20 --csv /tmp/c.csv > /dev/null 2>&1
    sed "s/^/$c,$turn,$w,/" /tmp/c.csv >> $O/bench.csv
  done
  LD_LIBRARY_PATH=$lib PYTHONPATH=$PWD/python SYMCOLL_LIB=$lib/libsymcoll.so SYMCOLL_TORCH_OPS=compiled timeout 120 \
    python3 bench/peers_torch.py --coll all_reduce -b 8K -e 2M -f 4 -r 20 --csv /tmp/p.csv > /tmp/p.txt 2>&1
  echo "peers $turn $w rc=$?" >> $O/summary.txt; sed "s/^/$turn,$w,/" /tmp/p.csv >> $O/peers.csv; cat /tmp/p.txt >> $O/peers.txt
done; done
