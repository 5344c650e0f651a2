#!/usr/bin/env bash
# bench/busyhost.sh: pfprof's long-run modes on a host that does real work,
# side by side with perf, in one run.
#
# The load runs for the whole benchmark. Idle (the default), it is the
# 256 MiB touch fixture in a loop (about 200,000 faults/s, one process
# every 0.2 s). With BUSY=1 it is a busy host's mix, four loops side by
# side on this machine's CPUs:
#   touch  the 256 MiB touch fixture, again and again;
#   build  `make -j2` of zstd's library from Debian's source, `-g -O2`,
#          cleaned and built again (counted in KiB of object code
#          compiled: its 32 files differ a hundredfold in size);
#   short  short-lived programs that read big binaries: `nm -C -D` over
#          clang's 59 MB libclang-cpp, python importing json/sqlite3/asyncio, and
#          `gcc -O2 -g -c` of a small file (counted in rounds of the three).
# RUST=1 adds a fourth, a Rust build (rustc's stacks are deep, its names
# long, and its distinct stacks four times the mix's):
#   rust   `cargo build -j2` of this repository (debug), its two crates
#          cleaned and built again (counted in builds).
# For each tool in turn (TOOLS picks some; ROUNDS interleaves them) it
# records system-wide for SECS and prints what it captured against the
# kernel's count of the same faults over its own window (pfprof reads the
# counting side of its events, its own faults left out; for perf, `perf
# stat -a` over the same seconds), the records it lost, its peak RSS and its RSS at the middle and the end of the run
# (flat is the goal), the bytes it left on disk per minute, its CPU, and
# the load's progress per part against the bare runs: the slowdown the
# host pays. The last column compares each tool's throughput (the mean of
# the parts' ratios to bare) with perf record -a -g's.
#
# Tools: bare, interval (record -a --interval 10 --keep 3, dwarf stacks),
# interval60 (--interval 60), interval-fp (--call-graph fp), top (top
# --batch -d 1), record-a (record -a), record-a-res (record -a
# --resident: the ledger's cost on a busy host), perf-g (perf record -a -g -c 1),
# perf-dwarf (perf record -a --call-graph dwarf -c 1); perf on the fault
# events with data addresses, as pfprof records them.
#
# Usage: bash bench/busyhost.sh [SECS] [ROUNDS]   (as root; default 60 1;
#        LOGS=DIR keeps each run's messages there; RUST=1 with BUSY=1)
#        BUSY=1 TOOLS="bare interval perf-g" bash bench/busyhost.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
rounds=${2:-1}
. bench/common.sh
bench_setup busyhost
command -v perf >/dev/null || apt-get install -y -qq linux-perf >/dev/null
tools=(${TOOLS:-bare interval interval-fp top record-a perf-g perf-dwarf})
parts=(touch)

# The build: zstd's library from Debian's source package (deb-src is
# added for it when the machine has none).
setup_build() {
  local src=/var/cache/pfprof-bench/zstd
  if [ ! -f "$src/lib/Makefile" ]; then
    command -v dpkg-source >/dev/null || apt-get install -y -qq dpkg-dev >/dev/null
    command -v clang >/dev/null || apt-get install -y -qq clang >/dev/null
    if ! grep -rqs '^Types: deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        >/etc/apt/sources.list.d/pfprof-bench-src.sources
    fi
    apt-get update -qq
    mkdir -p /var/cache/pfprof-bench
    (cd /var/cache/pfprof-bench && apt-get source -qq --download-only zstd >/dev/null 2>&1)
    mkdir -p "$src"
    tar xf /var/cache/pfprof-bench/libzstd_*.orig.tar.xz -C "$src" --strip-components=1
  fi
  cp -a "$src" "$work/zstd"
  # The compiler, counting the KiB of each object it finished.
  cat >"$work/cc-count" <<SH
#!/bin/sh
gcc "\$@" || exit
while [ \$# -gt 1 ]; do
  if [ "\$1" = -o ]; then echo \$(( \$(stat -c %s "\$2") / 1024 )) >>'$work/n.build'; break; fi
  shift
done
SH
  chmod +x "$work/cc-count"
  cat >"$work/small.c" <<'C'
#include <stdio.h>
#include <string.h>
struct s { char name[64]; int n; };
int count(const struct s *v, int len, const char *want)
{
	int found = 0;
	for (int i = 0; i < len; i++)
		found += strcmp(v[i].name, want) == 0 ? v[i].n : 0;
	return found;
}
int main(void) { struct s v[2] = {{"a", 1}, {"b", 2}}; printf("%d\n", count(v, 2, "b")); }
C
}

# Starts each part's loop in its own session (killed as a group at the
# end); each appends a line to $work/n.PART per unit of work, with its
# weight.
start_load() {
  setsid bash -c "while :; do '$work/touch' 256 >/dev/null; echo 1 >>'$work/n.touch'; done" &
  [ "${BUSY:-0}" = 1 ] || return 0
  local big
  big=$(ls /usr/lib/llvm-*/lib/libclang-cpp.so.* | head -1)
  setsid bash -c "cd '$work/zstd/lib'; while :; do make -s clean >/dev/null 2>&1;
    make -j2 CC='$work/cc-count' CFLAGS='-g -O2' libzstd.a >/dev/null 2>&1; done" &
  setsid bash -c "while :; do nm -C -D '$big' >/dev/null; /usr/bin/python3 -c 'import json, sqlite3, asyncio';
    gcc -O2 -g -c '$work/small.c' -o '$work/small.o'; echo 1 >>'$work/n.short'; done" &
  [ "${RUST:-0}" = 1 ] || return 0
  setsid bash -c "cd '$PWD'; while :; do cargo build -q -j2 --target-dir '$work/rust' >/dev/null 2>&1 && echo 1 >>'$work/n.rust';
    cargo clean -q --target-dir '$work/rust' -p pfprof -p pfprof-symbolize >/dev/null 2>&1; done" &
}
stop_load() { pkill -s "$(ps -o sid= -p "$1" | tr -d ' ')" 2>/dev/null || true; }

if [ "${BUSY:-0}" = 1 ]; then setup_build; parts=(touch build short); fi
if [ "${BUSY:-0}" = 1 ] && [ "${RUST:-0}" = 1 ]; then
  cargo build -q -j2 --target-dir "$work/rust" >/dev/null 2>&1 # the dependencies, once
  parts+=(rust)
fi
for p in "${parts[@]}"; do : >"$work/n.$p"; done
loads=()
start_load
loads=($(jobs -p))
trap 'for l in "${loads[@]}"; do stop_load "$l"; done; bench_cleanup' EXIT
sleep 5

# Samples the RSS of pid $1 every second into $2 until it exits.
watch_rss() {
  while [ -d "/proc/$1" ]; do
    awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null >>"$2" || true
    sleep 1
  done
}

# The work part $1 has done so far.
done_of() { awk '{s += $1} END {print s + 0}' "$work/n.$1"; }

# Runs "$@" (a profiler, or nothing) for $secs while perf stat -a counts
# the faults; prints: the parts' progress (comma-separated), kernel
# faults, peak RSS kB, RSS kB at the middle and at the end, CPU s.
measure() {
  local before=() after=() p
  for p in "${parts[@]}"; do before+=("$(done_of "$p")"); done
  perf stat -a -x, -e minor-faults,major-faults -o "$work/stat" -- sleep "$secs" &
  local stat=$! tool=
  : >"$work/rss"
  if [ $# -gt 0 ]; then
    /usr/bin/time -f '%M %U %S' -o "$work/time" "$@" >"$work/out" 2>"$work/err" &
    tool=$!
    sleep 0.2
    watch_rss "$(pgrep -P "$tool" | head -1)" "$work/rss" &
  else
    echo '0 0 0' >"$work/time"
  fi
  wait "$stat" || true
  for p in "${parts[@]}"; do after+=("$(done_of "$p")"); done
  [ -n "$tool" ] && { wait "$tool" || true; }
  local progress=() i
  for i in "${!parts[@]}"; do progress+=("$((after[i] - before[i]))"); done
  local kernel kb user sys n mid end
  kernel=$(awk -F, '/faults/ {s += $1} END {print s + 0}' "$work/stat")
  read -r kb user sys <"$work/time"
  n=$(wc -l <"$work/rss")
  mid=0; end=0
  [ "$n" -gt 0 ] && { mid=$(sed -n "$(((n + 1) / 2))p" "$work/rss"); end=$(tail -1 "$work/rss"); }
  echo "$(IFS=,; echo "${progress[*]}") $kernel $kb ${mid:-0} ${end:-0} $(python3 -c "print(round($user + $sys, 2))")"
}

# Faults captured, records lost, and the kernel's count of the same faults
# over the tool's own window, pfprof's own faults left out (perf has no
# count of its own: "-" takes perf stat's), from each tool's output.
pfprof_interval() {
  python3 - "$work/err" <<'PY'
import re, sys
line = next((l for l in open(sys.argv[1]) if "intervals into" in l), "")
num = lambda m: int(m.group(1).replace(",", "")) if m else 0
print(num(re.search(r"\(([\d,]+) faults", line)), num(re.search(r"([\d,]+) records lost", line)),
      num(re.search(r"of the kernel's ([\d,]+)", line)) or "-")
PY
}
pfprof_top() {
  python3 - "$work/out" <<'PY'
import re, sys
faults = lost = kernel = 0
for line in open(sys.argv[1]):
    if line.startswith("pfprof top "):
        faults += int(re.search(r"\(([\d,]+) faults", line).group(1).replace(",", ""))
        lost += int(re.search(r"lost records ([\d,]+)", line).group(1).replace(",", ""))
        k = re.search(r"of the kernel's ([\d,]+)", line)
        kernel += int(k.group(1).replace(",", "")) if k else 0
print(faults, lost, kernel or "-")
PY
}
pfprof_all() {
  python3 -c "import json; t = json.load(open('$work/all/report.json'))['totals']; print(t['minor'] + t['major'] + t['cow'], t['lost'], t['kernel_minor'] + t['kernel_major'] - t['pfprof_faults'])"
}

declare -A row
for ((r = 1; r <= rounds; r++)); do
  for t in "${tools[@]}"; do
    rm -rf "$work/iv" "$work/all" "$work/perf.data"
    sync; sleep 2
    disk=0; c="- - -"
    case $t in
      bare) m=$(measure) ;;
      interval|interval60|interval-fp)
        args=(--interval 10 --keep 3)
        [ "$t" = interval60 ] && args=(--interval 60 --keep 3)
        [ "$t" = interval-fp ] && args+=(--call-graph fp)
        m=$(measure "$pfprof" record -a "${args[@]}" --duration "$secs" -o "$work/iv")
        c=$(pfprof_interval); disk=$(du -sb "$work/iv" | cut -f1) ;;
      top)
        m=$(measure "$pfprof" top --batch -d 1 -n "$secs")
        c=$(pfprof_top) ;;
      record-a|record-a-res)
        args=()
        [ "$t" = record-a-res ] && args=(--resident)
        m=$(measure "$pfprof" record -q -a "${args[@]}" --duration "$secs" -o "$work/all")
        c=$(pfprof_all); disk=$(du -sb "$work/all" | cut -f1) ;;
      perf-g)
        m=$(measure perf record -q -a -g -d -c 1 -e minor-faults,major-faults -o "$work/perf.data" -- sleep "$secs")
        c=$(perf_sample_counts "$work/perf.data" -); disk=$(stat -c %s "$work/perf.data") ;;
      perf-dwarf)
        m=$(measure perf record -q -a --call-graph dwarf -d -c 1 -e minor-faults,major-faults -o "$work/perf.data" -- sleep "$secs")
        c=$(perf_sample_counts "$work/perf.data" -); disk=$(stat -c %s "$work/perf.data") ;;
      *) echo "unknown tool $t" >&2; exit 2 ;;
    esac
    # LOGS=DIR keeps each run's messages (pfprof's interval lines, with
    # PFPROF_TIMING=1 its drain and trim times): when did a ring overflow.
    if [ -n "${LOGS:-}" ] && [ -f "$work/err" ]; then mkdir -p "$LOGS" && cp "$work/err" "$LOGS/$t.$r.err"; fi
    row[$t]="${row[$t]:-}|$m $c $disk"
    echo "round $r $t: $m $c $disk" >&2
  done
done

printf '%s s per tool, %s round(s), load: %s (%s CPUs, %s)\n' "$secs" "$rounds" "${parts[*]}" "$(nproc)" "$(uname -r)"
args=()
for t in "${tools[@]}"; do args+=("$t" "${row[$t]}"); done
python3 - "$secs" "${parts[*]}" "${args[@]}" <<'PY'
import statistics, sys
secs, parts, rest = float(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
rows = {rest[i]: [r.split() for r in rest[i + 1].split("|") if r.strip()] for i in range(0, len(rest), 2)}
def med(rs, i):
    return statistics.median(float(r[i]) for r in rs)
def progress(rs):
    return [statistics.median(float(r[0].split(",")[p]) for r in rs) for p in range(len(parts))]
bare = progress(rows["bare"]) if "bare" in rows else None
def throughput(rs):
    if not bare:
        return None
    return statistics.mean(d / b for d, b in zip(progress(rs), bare) if b)
perf = throughput(rows["perf-g"]) if "perf-g" in rows else None
head = f"{'tool':12} {'captured':>11} {'of kernel':>11} {'%':>6} {'lost':>10} {'peak RSS MB':>11} {'RSS mid/end':>11} {'disk MB/min':>11} {'CPU s':>7}"
head += "".join(f" {p + ' done':>11}" for p in parts) + f" {'vs perf -g':>10}"
print(head)
for name, rs in rows.items():
    kernel, kb, mid, end, cpu = (med(rs, i) for i in range(1, 6))
    if rs[0][6] == "-":
        cap = lost = pct = "-"
        of = f"{kernel:,.0f}"
    else:
        c, l = med(rs, 6), med(rs, 7)
        # The tool's own count of the kernel's, else perf stat's.
        own = med(rs, 8) if rs[0][8] != "-" else kernel
        cap, lost, of = f"{c:,.0f}", f"{l:,.0f}", f"{own:,.0f}"
        pct = f"{100 * c / own:.1f}" if own else "-"
    disk = med(rs, 9) / 1e6 / (secs / 60)
    line = f"{name:12} {cap:>11} {of:>11} {pct:>6} {lost:>10} {kb / 1024:>11.1f} {f'{mid / 1024:.0f}/{end / 1024:.0f}':>11} {disk:>11.1f} {cpu:>7.2f}"
    for p, done in enumerate(progress(rs)):
        slow = f" ({bare[p] / done:.2f}x)" if bare and done else ""
        line += f" {f'{done:.0f}{slow}':>11}"
    t = throughput(rs)
    line += f" {t / perf:>10.2f}" if t is not None and perf else f" {'-':>10}"
    print(line)
PY
