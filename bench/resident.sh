#!/usr/bin/env bash
# bench/resident.sh: what the resident-memory view costs, and how close its
# totals come to the kernel's, side by side in one run.
#
# 1. Cost: `pfprof record --resident` against `pfprof record`,
#    interleaved, medians of RUNS: wall seconds and CPU seconds (pfprof and
#    the program: the kernel's share of each fault is the program's), and
#    the ratios. On the 1 GiB touch fixture (262,144 anonymous faults, the
#    worst case: every fault fires kmem:rss_stat, filtered out in the kernel),
#    on python's imports (a real program: files, heap, loader; 0.15 s, where
#    pfprof's fixed costs weigh most) and on 2 s of python (json of 200,000
#    objects, then compileall of three stdlib packages: ~100,000 faults).
# 2. Exactness: fixtures/resident.c (sites of known KiB), python's imports,
#    gcc compiling a small file and headless chromium rendering a page (its
#    processes forked from a zygote, its 290 MB binary's page cache in large
#    folios): pfprof's KiB at the peak and at exit beside the kernel's count
#    of file pages at the same moments, and the sites' KiB.
# 3. What the rest of the machine pays: 1 M one-byte `dd` reads and writes
#    (2 M syscalls, none of them recorded) alone, beside `pfprof record
#    --resident -- sleep`, beside `pfprof record -- sleep`, and beside
#    `perf record -a -e syscalls:sys_enter_munmap` (the kernel's
#    syscall-tracing path, which any syscall tracepoint turns on for every
#    task: the floor), interleaved, medians of RUNS.
#
# Usage: bash bench/resident.sh [RUNS]   (as root)
#        PFPROF=/path/to/pfprof bash bench/resident.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
command -v bc >/dev/null || { apt-get update -qq && apt-get install -y -qq bc; }
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
grep -q ' tracefs ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing || true
if [ -z "${PFPROF:-}" ]; then cargo build --release --quiet; fi
pfprof=${PFPROF:-$PWD/target/release/pfprof}
python=/usr/bin/python3.11

work=$(mktemp -d /tmp/pfprof-resident.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -fno-omit-frame-pointer -o "$work/touch" fixtures/touch.c
cc -O1 -g -fno-omit-frame-pointer -o "$work/resident" fixtures/resident.c

median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
# Appends "wall cpu" of one record run to FILE.
timed() {
  local file=$1
  shift
  rm -rf "$work/out"
  /usr/bin/time -f "%e %U %S" -o "$work/t" "$pfprof" record -q -o "$work/out" "$@" >/dev/null 2>&1
  awk '{printf "%s %.3f\n", $1, $2 + $3}' "$work/t" >>"$file"
}

echo "1. cost: record --resident against record (median of $runs, interleaved)"
printf '   %-22s %9s %9s %9s %9s %8s %8s\n' program "wall" "wall no" "cpu" "cpu no" "x wall" "x cpu"
cp -r /usr/lib/python3.11/email /usr/lib/python3.11/json /usr/lib/python3.11/asyncio "$work/"
pywork="import json, compileall
d = [{'k%d' % i: list(range(i % 50))} for i in range(200000)]
json.loads(json.dumps(d))
compileall.compile_dir('$work', force=True, quiet=1)"
for name in touch python python-2s; do
  case $name in
    touch) cmd=("$work/touch" 1024) ;;
    python) cmd=("$python" -c 'import json, sqlite3') ;;
    python-2s) cmd=("$python" -c "$pywork") ;;
  esac
  : >"$work/with"; : >"$work/without"
  for _ in $(seq "$runs"); do
    timed "$work/with" --resident -- "${cmd[@]}"
    timed "$work/without" -- "${cmd[@]}"
  done
  w=$(cut -d' ' -f1 "$work/with" | median); wn=$(cut -d' ' -f1 "$work/without" | median)
  c=$(cut -d' ' -f2 "$work/with" | median); cn=$(cut -d' ' -f2 "$work/without" | median)
  printf '   %-22s %9s %9s %9s %9s %7.2fx %7.2fx\n' "$name" "$w" "$wn" "$c" "$cn" \
    "$(echo "$w / $wn" | bc -l)" "$(echo "$c / $cn" | bc -l)"
done

echo "2. exactness: pfprof's KiB against the kernel's at the same moments"
echo '<html><body><script>let a = []; for (let i = 0; i < 200000; i++) a.push({i, s: "x" + i}); document.body.append(a.length)</script></body></html>' >"$work/page.html"
for name in resident python gcc chromium; do
  case $name in
    resident) cmd=("$work/resident" "$work/resident.dat") ;;
    python) cmd=("$python" -c 'import json, sqlite3') ;;
    gcc) cmd=(gcc -O2 -c -o "$work/touch.o" fixtures/touch.c) ;;
    chromium) cmd=(chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$work/page.html") ;;
  esac
  rm -rf "$work/out"
  "$pfprof" record -q --resident -o "$work/out" -- "${cmd[@]}" >/dev/null 2>&1
  python3 - "$work/out/report.json" "$name" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["resident"]
for moment in ("peak", "end"):
    k, kk = r[moment]["kib"], r[moment].get("kernel_kib", {})
    # Less what the kernel took back without a syscall (reclaim).
    file = k['file'] - r[moment].get("reconciled_kib", {}).get('file', 0)
    print(f"   {sys.argv[2]:<10} {moment:<5} anon {k['anon']:>7} KiB  file {file:>7} KiB "
          f"(kernel {kk.get('file', '-'):>7}, {100 * (file - kk.get('file', 0)) / max(kk.get('file', 1), 1):+.2f}%)  "
          f"shmem {k['shmem']} (kernel {kk.get('shmem', '-')})")
top = ", ".join(f"{s.get('function') or '?'} {s['kib']}" for s in r["peak"]["top"][:4])
print(f"   {sys.argv[2]:<10} top at the peak: {top}")
print(f"   {sys.argv[2]:<10} pages: {r['pages']}")
EOF
done

echo "3. the machine's other syscalls: 1 M one-byte dd reads and writes (median of $runs)"
dd_seconds() {
  /usr/bin/time -f %e dd if=/dev/zero of=/dev/null bs=1 count=1000000 2>&1 | tail -1
}
# Runs dd with "$@" (a recorder of 30 s) beside it, once; "" alone.
beside() {
  if [ $# -eq 0 ]; then dd_seconds; return; fi
  "$@" >/dev/null 2>&1 &
  local recorder=$!
  # Past the 2 s after which `record --resident` moves the syscalls'
  # records to their own tracepoints (record/bpf.rs's MemoryWatch).
  sleep 3
  dd_seconds
  kill -INT "$recorder" 2>/dev/null || true
  wait "$recorder" 2>/dev/null || true
}
: >"$work/alone"; : >"$work/resident"; : >"$work/plain"; : >"$work/perf"
for _ in $(seq "$runs"); do
  beside >>"$work/alone"
  beside "$pfprof" record -q --resident -o "$work/o1" -- sleep 30 >>"$work/resident"
  beside "$pfprof" record -q -o "$work/o2" -- sleep 30 >>"$work/plain"
  beside perf record -q -a -e syscalls:sys_enter_munmap -o "$work/perf.data" -- sleep 30 >>"$work/perf"
done
alone=$(median <"$work/alone")
for what in resident plain perf; do
  m=$(median <"$work/$what")
  printf '   beside %-9s %6s s against %6s s alone: %5.2fx, %4.0f ns more a syscall\n' \
    "$what" "$m" "$alone" "$(echo "$m / $alone" | bc -l)" "$(echo "($m - $alone) * 1000000000 / 2000000" | bc -l)"
done
