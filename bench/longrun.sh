#!/usr/bin/env bash
# bench/longrun.sh: a busy host for minutes. Under the 256 MiB touch fixture
# in a loop (about 200,000 faults/s here), runs for SECS seconds each, one
# after the other (interleaved over ROUNDS): nothing (the bare workload),
# `pfprof record -a --interval 10 --keep 3`, `pfprof record -a`, `perf
# record -a -g` and `perf record -a --call-graph dwarf` (on the fault
# events, with data addresses). For each tool it prints the faults it
# captured against the kernel's count (perf stat -a over the same time),
# the records lost, its peak RSS, the bytes it left on disk per minute, the
# CPU it used (user + sys), and the workload's slowdown (touch loops done,
# against the bare runs). BUSY=1 keeps the other CPU busy with a spinning
# loop throughout; IO=1 keeps the disk busy (4 GB written over and over,
# as a build or a database does), which throttles every writer.
#
# perf records every fault (-c 1), as pfprof does.
#
# Usage: bash bench/longrun.sh [SECS] [ROUNDS]     (as root; default 65 1)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-65}
rounds=${2:-1}
. bench/common.sh
bench_setup longrun
command -v perf >/dev/null || apt-get install -y -qq linux-perf >/dev/null
busy=
if [ "${BUSY:-0}" = 1 ]; then
  (while :; do :; done) &
  busy=$!
fi
io=
if [ "${IO:-0}" = 1 ]; then
  (while :; do dd if=/dev/zero of="$work/io" bs=1M count=4000 status=none; rm -f "$work/io"; done) &
  io=$!
fi
trap '[ -n "$io" ] && pkill -P "$io"; kill $busy $io 2>/dev/null; bench_cleanup' EXIT

# Runs the touch loop for $secs while "$@" profiles, with perf stat -a
# counting; prints: loops kernel_faults peak_kb cpu_s
measure() {
  local loops=0
  : >"$work/loops"
  (while :; do "$work/touch" 256 >/dev/null; echo >>"$work/loops"; done) &
  local load=$!
  perf stat -a -x, -e minor-faults,major-faults -o "$work/stat" -- sleep "$secs" &
  local stat=$!
  local tool=
  if [ $# -gt 0 ]; then
    /usr/bin/time -f '%M %U %S' -o "$work/time" "$@" >/dev/null 2>"$work/err" &
    tool=$!
  else
    echo '0 0 0' >"$work/time"
  fi
  wait "$stat" || true
  # The loops done while profiled: not those done while a tool writes its
  # outputs after the recording stopped.
  loops=$(wc -l <"$work/loops")
  [ -n "$tool" ] && { wait "$tool" || true; }
  kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true
  local kernel
  kernel=$(awk -F, '/faults/ {s += $1} END {print s + 0}' "$work/stat")
  read -r kb user sys <"$work/time"
  echo "$loops $kernel $kb $(python3 -c "print(round($user + $sys, 2))")"
}

# Faults captured and lost by each tool, from its output.
pfprof_interval() {
  # Its summary line counts every interval, the deleted ones too.
  python3 - "$work/err" <<'PY'
import re, sys
line = next(l for l in open(sys.argv[1]) if "intervals into" in l)
num = lambda m: int(m.group(1).replace(",", "")) if m else 0
print(num(re.search(r"\(([\d,]+) faults", line)), num(re.search(r"([\d,]+) records lost", line)), "")
PY
}
pfprof_all() {
  python3 -c "import json; t = json.load(open('$work/all/report.json'))['totals']; print(t['minor'] + t['major'] + t['cow'], t['lost'], '')"
}

declare -A row
tools=(bare interval record-a perf-g perf-dwarf)
for ((r = 1; r <= rounds; r++)); do
  for t in "${tools[@]}"; do
    rm -rf "$work/iv" "$work/all" "$work/perf.data"
    case $t in
      bare) m=$(measure) ; c="- - " ;;
      interval)
        m=$(measure "$pfprof" record -q -a --interval 10 --keep 3 --duration "$secs" -o "$work/iv")
        c=$(pfprof_interval); disk=$(du -sb "$work/iv" | cut -f1) ;;
      record-a)
        m=$(measure "$pfprof" record -q -a --duration "$secs" -o "$work/all")
        c=$(pfprof_all); disk=$(du -sb "$work/all" | cut -f1) ;;
      perf-g)
        m=$(measure perf record -q -a -g -d -c 1 -e minor-faults,major-faults -o "$work/perf.data" -- sleep "$secs")
        c=$(perf_sample_counts "$work/perf.data" ''); disk=$(stat -c %s "$work/perf.data") ;;
      perf-dwarf)
        m=$(measure perf record -q -a --call-graph dwarf -d -c 1 -e minor-faults,major-faults -o "$work/perf.data" -- sleep "$secs")
        c=$(perf_sample_counts "$work/perf.data" ''); disk=$(stat -c %s "$work/perf.data") ;;
    esac
    [ "$t" = bare ] && disk=0
    row[$t]="${row[$t]:-}|$m $c $disk"
  done
done

printf '%s s per run, %s round(s)%s%s\n' "$secs" "$rounds" "$([ -n "$busy" ] && echo ', other CPU busy')" \
  "$([ -n "$io" ] && echo ', disk busy')"
python3 - "$secs" "${row[bare]}" "${row[interval]}" "${row[record-a]}" "${row[perf-g]}" "${row[perf-dwarf]}" <<'PY'
import statistics, sys
secs = float(sys.argv[1])
names = ["bare", "pfprof --interval", "pfprof record -a", "perf record -a -g", "perf -a dwarf"]
def runs(s):
    return [r.split() for r in s.split("|") if r.strip()]
bare = statistics.median(int(r[0]) for r in runs(sys.argv[2]))
print(f"{'tool':20} {'captured':>11} {'kernel':>11} {'%':>6} {'lost':>9} {'peak RSS MB':>12} {'disk MB/min':>12} {'CPU s':>7} {'slowdown':>9}")
for name, arg in zip(names, sys.argv[2:]):
    rs = runs(arg)
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    loops, kernel, kb, cpu = med(0), med(1), med(2), med(3)
    if name == "bare":
        cap = lost = "-"; pct = "-"; disk = 0.0
    else:
        cap_v, lost_v, disk_b = med(4), med(5), float(rs[0][-1])
        cap, lost = f"{cap_v:,.0f}", f"{lost_v:,.0f}"
        pct = f"{100 * cap_v / kernel:.1f}" if kernel else "-"
        disk = disk_b / 1e6 / (secs / 60)
    slow = f"{bare / loops:.2f}x" if loops else "-"
    print(f"{name:20} {cap:>11} {kernel:>11,.0f} {pct:>6} {lost:>9} {kb / 1024:>12.1f} {disk:>12.1f} {cpu:>7.2f} {slow:>9}")
PY
