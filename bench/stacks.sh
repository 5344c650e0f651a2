#!/usr/bin/env bash
# bench/stacks.sh: complete call stacks on real programs, pfprof against
# `perf record --call-graph dwarf -c 1 -e minor-faults,major-faults -d`,
# side by side in one run. Programs nobody here wrote, tried with each
# tool's defaults:
#   python   /usr/bin/python3 -c 'import json, sqlite3, asyncio'
#   gcc      gcc -c small.c (gcc -> cc1 -> as)
#   gdb      gdb -batch -ex 'info line main' /bin/ls
#   bash     bash -c 'for i in 1 .. 8; do x=$(echo $i); done'
#   git      git status (in this repository)
#   perl     perl -e 1
#   chromium chromium --headless --dump-dom about:blank (16 processes, V8 JIT)
#   storm    fixtures/fork_storm (200 processes x 8 threads x 64 pages)
#   touch    fixtures/touch (1 GiB, 262,144 faults)
#
# Prints per program and tool: faults recorded, lost % (records the kernel
# could not store, over all), complete-chain % (the chain reaches the
# thread's entry: _start, clone/clone3, start_thread; samples without any
# user frame, such as faults inside execve, are left out of the share),
# pfprof's truncation reasons, and the wall time of the recorded run over
# the bare run (perf: `perf record`; pfprof: `pfprof record` minus its final
# analysis, which is timed apart as `pfprof flamegraph -i`, as
# bench/record.sh does; "total×" is the whole `pfprof record`).
#
# Usage: bash bench/stacks.sh [PROGRAM...]          (as root; default: all)
# Env:   BUSY=1   keep the other CPU busy with a spinning loop meanwhile
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v perf >/dev/null || need+=(linux-perf)
command -v gcc >/dev/null || need+=(gcc)
command -v gdb >/dev/null || need+=(gdb)
command -v git >/dev/null || need+=(git)
command -v perl >/dev/null || need+=(perl)
command -v python3 >/dev/null || need+=(python3)
command -v chromium >/dev/null || need+=(chromium)
dpkg -s libc6-dbg >/dev/null 2>&1 || need+=(libc6-dbg)
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
. bench/common.sh
bench_setup stacks
repo=$PWD
printf 'int main(void) { return 0; }\n' >"$work/small.c"
mkdir -p "$work/home"

declare -A cmd=(
  [python]="/usr/bin/python3 -c 'import json, sqlite3, asyncio'"
  [gcc]="gcc -c $work/small.c -o $work/small.o"
  [gdb]="gdb -batch -ex 'info line main' /bin/ls"
  [bash]="bash -c 'for i in 1 .. 8; do x=\$(echo \$i); done'"
  [git]="git -C $repo status"
  [perl]="perl -e 1"
  [chromium]="env HOME=$work/home chromium --headless --no-sandbox --disable-gpu --dump-dom about:blank"
  [storm]="$work/fork_storm"
  [touch]="$work/touch"
)
order=(python gcc gdb bash git perl chromium storm touch)
[ $# -gt 0 ] && order=("$@")

if [ "${BUSY:-0}" = 1 ]; then
  (while :; do :; done) &
  spinner=$!
  echo "BUSY=1: a spinning loop keeps one CPU busy (pid $spinner)"
fi

cat >"$work/perf_stats.py" <<'EOF'
# Reads `perf script -F ip,sym,dso` (samples separated by blank lines,
# frames leaf first) and prints: samples with a user frame, complete %.
import sys
# perf's unwinder (libdw) ends main-thread chains at glibc's
# __libc_start_call_main, whose CFI it reads as the outermost frame: count
# those complete too.
ROOTS = {"_start", "clone", "clone3", "__clone", "__clone3", "start_thread",
         "_dl_start_user", "__GI___clone3", "__GI___clone",
         "__libc_start_call_main", "__libc_start_main_impl", "__libc_start_main"}
samples = complete = 0
frames = []
def flush():
    global samples, complete
    user = [f for f in frames if "[kernel.kallsyms]" not in f[1]]
    if user:
        samples += 1
        if user[-1][0] in ROOTS:
            complete += 1
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        flush()
        frames = []
        continue
    parts = line.split(None, 1)
    if len(parts) < 2:
        continue
    rest = parts[1]
    sym, _, dso = rest.rpartition(" (")
    sym = sym.split("+0x")[0].strip()
    frames.append((sym, dso))
flush()
print(samples, f"{100.0 * complete / max(samples, 1):.1f}")
EOF

cat >"$work/pfprof_stats.py" <<'EOF'
# Reads pfprof's report.json: faults, lost %, complete %, reasons.
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
u = t.get("unwind") or {}
captured = t["minor"] + t["major"] + t["cow"]
lost = t.get("lost", 0)
samples = u.get("samples", 0) - u.get("no_process", 0)
complete = u.get("complete", 0)
reasons = "copy {} unreadable {} no-cfi {} bad {} deep {}".format(
    u.get("stack_copy", 0), u.get("stack_unreadable", 0), u.get("no_unwind_info", 0),
    u.get("corrupt", 0), u.get("too_deep", 0))
print(captured, f"{100.0 * lost / max(captured + lost, 1):.2f}",
      f"{100.0 * complete / max(samples, 1):.2f}", reasons)
EOF

wall() { # runs "$@", prints seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

printf '%-9s %-6s %9s %7s %9s %7s %7s  %s\n' program tool faults lost% complete% wall× total× "truncated by reason (pfprof)"
for p in "${order[@]}"; do
  c=${cmd[$p]}
  cd "$work"
  bare=$(wall sh -c "$c")
  # perf
  rm -f perf.data
  pw=$(wall sh -c "perf record -q -o perf.data --call-graph dwarf -c 1 -e minor-faults,major-faults -d -- $c")
  lost=$(perf report -i perf.data --stats 2>/dev/null | awk '/LOST_SAMPLES|LOST events/ {s+=$NF} END {print s+0}')
  read -r psamples pcomplete < <(perf script -i perf.data -F ip,sym,dso 2>/dev/null | python3 perf_stats.py)
  plost=$(echo "100 * $lost / ($psamples + $lost)" | bc -l)
  printf '%-9s %-6s %9s %7.2f %9s %7s\n' "$p" perf "$psamples" "$plost" "$pcomplete" "$(ratio "$pw" "$bare")"
  rm -f perf.data
  # pfprof
  rm -rf out out.old
  fw=$(wall sh -c "$pfprof record -q -o out -- $c")
  read -r faults flost fcomplete reasons < <(python3 pfprof_stats.py out/report.json)
  analysis=$(wall "$pfprof" flamegraph -i out -o again)
  rec=$(echo "$fw - $analysis" | bc -l)
  printf '%-9s %-6s %9s %7s %9s %7s %7s  %s\n' "$p" pfprof "$faults" "$flost" "$fcomplete" "$(ratio "$rec" "$bare")" "$(ratio "$fw" "$bare")" "$reasons"
  rm -rf out out.old again
  cd "$repo"
done
