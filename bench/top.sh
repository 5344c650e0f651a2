#!/usr/bin/env bash
# bench/top.sh: pfprof top's memory and CPU over a long run. Runs `pfprof
# top --batch` system-wide for SECS under the 256 MiB touch loop (a new
# process every fraction of a second, about 200,000 faults/s here), prints
# its RSS every STEP seconds, then its CPU time and the snapshots it
# printed. Memory must stay flat: it is bounded by what is distinct, not by
# the faults or the processes seen.
#
# Usage: bash bench/top.sh [SECS] [STEP]     (as root; default 300 30)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
step=${2:-30}
. bench/common.sh
bench_setup top
(while :; do "$work/touch" 256 >/dev/null; done) &
load=$!
"$pfprof" top --batch -d 1 >"$work/top.out" 2>/dev/null &
top=$!
trap 'kill $load $top 2>/dev/null; bench_cleanup' EXIT
printf '%8s %12s %12s\n' seconds 'RSS MB' 'peak MB'
for ((t = step; t <= secs; t += step)); do
  sleep "$step"
  awk -v t="$t" '/VmRSS/ {r = $2} /VmHWM/ {h = $2} END {printf "%8d %12.1f %12.1f\n", t, r / 1024, h / 1024}' "/proc/$top/status"
done
cpu=$(awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$top/stat")
kill -TERM "$top"; wait "$top" || true
kill "$load"; wait "$load" 2>/dev/null || true
echo "pfprof top: ${cpu} s of CPU in ${secs} s ($(grep -c '^pfprof top ' "$work/top.out") snapshots)"
grep '^pfprof top ' "$work/top.out" | tail -1
