#!/usr/bin/env bash
# bench/memory.sh: is the analysis' memory bounded by what is distinct, not
# by the number of faults? Records the 256 MiB touch fixture in a loop
# system-wide (-a --call-graph fp) for SECS and for 4 x SECS seconds, then
# runs `pfprof report -i` on each recording and prints its faults, the peak
# of its anonymous memory (RssAnon, sampled every 10 ms: the recording
# itself is mapped from the file and not counted) and its peak RSS. Also
# prints the same for `perf report` of a `perf record -a -g` of the same
# load, for scale.
#
# Usage: bash bench/memory.sh [SECS]        (as root; default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
. bench/common.sh
bench_setup memory
command -v perf >/dev/null || apt-get install -y -qq linux-perf >/dev/null

# The peak RssAnon and VmHWM (kB) of a command, sampled every 10 ms.
peak_of() {
  "$@" >/dev/null 2>"$work/err" &
  local pid=$! anon=0 hwm=0 a h
  while kill -0 "$pid" 2>/dev/null; do
    a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    h=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ "${a:-0}" -gt "$anon" ] && anon=$a
    [ "${h:-0}" -gt "$hwm" ] && hwm=$h
    sleep 0.01
  done
  wait "$pid" || { cat "$work/err" >&2; return 1; }
  echo "$anon $hwm"
}

(while :; do "$work/touch" 256 >/dev/null; done) &
spinner=$!
printf '%-22s %12s %14s %14s %12s\n' tool faults "anon peak MB" "RSS peak MB" "bytes/fault"
for s in "$secs" $((4 * secs)); do
  rm -rf "$work/rec"
  "$pfprof" record -q -a --call-graph fp --duration "$s" -o "$work/rec" >/dev/null 2>&1
  faults=$(python3 -c "import json; t = json.load(open('$work/rec/report.json'))['totals']; print(t['minor'] + t['major'] + t['cow'])")
  read -r anon hwm < <(peak_of "$pfprof" report -i "$work/rec")
  printf '%-22s %12d %14.1f %14.1f %12.1f\n' "pfprof report ${s}s" "$faults" \
    "$(echo "$anon / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$(echo "$anon * 1024 / $faults" | bc -l)"
  rm -f "$work/perf.data"
  perf record -q -a -g -c 1 -e minor-faults,major-faults -d -o "$work/perf.data" -- sleep "$s" >/dev/null 2>&1
  read -r anon hwm < <(peak_of perf report -i "$work/perf.data" --stdio --no-children)
  printf '%-22s %12s %14.1f %14.1f\n' "perf report ${s}s" "" \
    "$(echo "$anon / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
done
