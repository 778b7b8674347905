#!/usr/bin/env bash
# symcoll-bench ends when a rank dies. A 4-rank CPU run in the middle of a long timing loop
# has one rank SIGKILLed; every other rank must end within the communicator's timeout + 1 s,
# the run's exit code must be non-zero, stderr must name the failed call and its status, and
# no result row may be printed (the only size never finished). Then a second run has its
# launcher SIGKILLed (as a timeout or a job manager would): its ranks must end within 1 s.
#   bench_kill.sh path/to/symcoll-bench
set -u
bench=$1
timeout_ms=3000
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
# start_run: a run in the background (run=its pid) and its 4 ranks (ranks=their pids, in rank order).
start_run() {
  SYMCOLL_TIMEOUT_MS=$timeout_ms "$bench" --backend host --mode process --ranks 4 --no-bind \
    -b 64K -e 64K -n 100000000 -w 0 -r 1 >"$out" 2>"$err" &
  run=$!
  ranks=""
  for _ in $(seq 100); do # the ranks are the run's children, forked in rank order
    ranks=$(cat /proc/$run/task/*/children 2>/dev/null)
    [ "$(echo $ranks | wc -w)" -eq 4 ] && break
    sleep 0.05
  done
  [ "$(echo $ranks | wc -w)" -eq 4 ] || { echo "FAIL: the run did not start 4 ranks"; kill -9 $run; exit 1; }
  sleep 1.5 # into the timing loop
}
# running PID: the process exists and has not ended (a zombie has).
running() { [ -r /proc/$1/stat ] && [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != Z ]; }
start_run
victim=$(echo $ranks | awk '{print $3}')
t0=$(date +%s%N)
kill -9 "$victim"
# Bounded ourselves: the survivors get timeout + 1 s, and then some slack for this script.
for _ in $(seq 100); do kill -0 $run 2>/dev/null || break; sleep 0.05; done
if kill -0 $run 2>/dev/null; then
  echo "FAIL: the run is still going 5 s after rank 2 was killed"; cat "$err"; kill -9 $run $ranks; exit 1
fi
wait $run
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
fail=0
echo "run ended ${ms} ms after the kill, exit code $rc"
[ "$ms" -le $((timeout_ms + 1000)) ] || { echo "FAIL: later than timeout + 1 s"; fail=1; }
[ "$rc" -ne 0 ] || { echo "FAIL: exit code 0"; fail=1; }
grep -q "ending the run" "$err" || { echo "FAIL: no rank said which call failed"; fail=1; }
grep -qE "PEER_LOST|TIMEOUT" "$err" || { echo "FAIL: no status named"; fail=1; }
rows=$(grep -cvE '^#|^ +bytes' "$out")
[ "$rows" -eq 0 ] || { echo "FAIL: $rows result row(s) printed"; cat "$out"; fail=1; }
for r in $ranks; do running "$r" && { echo "FAIL: rank pid $r still running"; fail=1; }; done
sed 's/^/  stderr: /' "$err" | head -8

start_run
kill -9 $run
wait $run 2>/dev/null
left=$ranks
for _ in $(seq 20); do
  left=$(for r in $ranks; do running "$r" && echo "$r"; done)
  [ -z "$left" ] && break
  sleep 0.05
done
if [ -n "$left" ]; then
  echo "FAIL: rank pid(s) $(echo $left) still running 1 s after their launcher was killed"; kill -9 $left; fail=1
else
  echo "every rank ended after its launcher was killed"
fi
exit $fail
