#!/usr/bin/env bash
# A rank killed on one node ends every rank of the job with an error within timeout + 1 s:
# 2 nodes x 2 CPU ranks in network namespaces (netns.sh), rank 1 SIGKILLs itself at its 10th
# all_reduce; its node-local peer must see PEER_LOST, the other node's ranks an error from
# the engine's bounded wait. mpirun keeps the job going after the death (--enable-recovery),
# so that the survivors can say what they saw; in that mode Open MPI 4's mpirun itself does
# not end once every process has (it waits for the lost one's recovery), so it is stopped
# after a bound, and what is checked is the ranks' own output and that none is left running.
set -uo pipefail
job=$1
here=$(dirname "$0")
export SYMCOLL_TIMEOUT_MS=${SYMCOLL_TIMEOUT_MS:-3000}
wall=$(( SYMCOLL_TIMEOUT_MS / 1000 + 15 ))
out=$(NETNS_WALL_S=$wall "$here/netns.sh" 2 2 --enable-recovery -- "$job" --kill 1 --at 10 2>&1)
rc=$?
[ $rc -eq 77 ] && { echo "$out"; exit 77; }
echo "$out" | grep -E "^rank [0-9]+: " || true
limit=$(awk -v t="$SYMCOLL_TIMEOUT_MS" 'BEGIN { print t / 1000 + 1 }')
fail=0
for r in 0 2 3; do
  line=$(echo "$out" | grep -E "^rank $r: call [0-9]+: SYMCOLL_ERR_" | head -1)
  if [ -z "$line" ]; then echo "FAIL: rank $r reported no error"; fail=1; continue; fi
  s=$(echo "$line" | sed -E 's/.* after ([0-9.]+) s$/\1/')
  awk -v s="$s" -v l="$limit" 'BEGIN { exit !(s <= l) }' || { echo "FAIL: rank $r took $s s (limit $limit s)"; fail=1; }
done
if pgrep -f -- "$job --kill" >/dev/null; then echo "FAIL: ranks still running after $wall s"; pkill -9 -f -- "$job --kill"; fail=1; fi
[ $fail -eq 0 ] && echo "every survivor ended with an error within $limit s"
exit $fail
