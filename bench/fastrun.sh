#!/usr/bin/env bash
# bench/fastrun.sh: a small program's whole profile, and pfprof's pipeline
# against perf's on perf's own recordings, side by side, in one run.
#
# 1. `pfprof record` (every output) of `python3.11 -c 'import json, sqlite3'`
#    against the bare run: the seconds pfprof adds (medians of RUNS,
#    interleaved).
# 2. On `perf record -c 1 -g` of the 1 GiB touch fixture (262,144 faults)
#    and on `perf record --call-graph dwarf` of python's imports:
#    `pfprof flamegraph -i` and `pfprof report -i` against
#    `perf script | inferno-collapse-perf | inferno-flamegraph` (wall,
#    medians of RUNS, interleaved), and the ratios.
# 3. The symbolizer's throughput on libc's DWARF (libc6-dbg, 4,126 units):
#    20,000 addresses, half cold (the DWARF read on the way), half warm,
#    against binutils `addr2line -f -i -C` on the same addresses (cold).
#
# perf records the fault events with data addresses (-d), as pfprof needs.
# Step 1's `pfprof record` leaves plain copies of libc's and ld.so's debug
# files in the build-id cache (~/.debug), as any earlier record on the
# machine would; step 2's pfprof reads them from there.
#
# Usage: bash bench/fastrun.sh [RUNS]   (as root; installs inferno, linux-perf,
# libc6-dbg)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
export PATH="$HOME/.cargo/bin:$PATH"
command -v perf >/dev/null || apt-get install -y -qq linux-perf >/dev/null
command -v inferno-flamegraph >/dev/null || cargo install --locked inferno
grep -q ' tracefs ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing || true
if [ -z "${PFPROF:-}" ]; then cargo build --release --quiet; fi
pfprof=${PFPROF:-$PWD/target/release/pfprof}
python=/usr/bin/python3.11
work=$(mktemp -d /tmp/pfprof-fastrun.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -fno-omit-frame-pointer -o "$work/touch" fixtures/touch.c

# Wall seconds of a command (its output thrown away).
wall() {
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
perf_pipeline() {
  perf script -i "$1" 2>/dev/null | inferno-collapse-perf 2>/dev/null | inferno-flamegraph >"$work/perf.svg" 2>/dev/null
}

echo "1. record of a small program (median of $runs, interleaved)"
for i in $(seq "$runs"); do
  wall "$python" -c 'import json, sqlite3' >>"$work/bare"
  rm -rf "$work/py"
  wall "$pfprof" record -q -o "$work/py" -- "$python" -c 'import json, sqlite3' >>"$work/rec"
done
bare=$(median <"$work/bare"); rec=$(median <"$work/rec")
printf '   bare %s s, pfprof record %s s: %s s more\n' "$bare" "$rec" "$(echo "$rec - $bare" | bc -l)"

echo "2. perf's recordings: pfprof against perf script | inferno (median of $runs)"
perf record -q -c 1 -d -g -e minor-faults,major-faults -o "$work/fp.data" -- "$work/touch" 1024 >/dev/null 2>&1
perf record -q -c 1 -d --call-graph dwarf -e minor-faults,major-faults -o "$work/dwarf.data" -- "$python" -c 'import json, sqlite3' >/dev/null 2>&1
printf '   %-22s %10s %10s %10s %8s %8s\n' recording perf+inferno "pf flame" "pf report" "x flame" "x report"
for rec in fp dwarf; do
  data="$work/$rec.data"
  : >"$work/p"; : >"$work/f"; : >"$work/r"
  for i in $(seq "$runs"); do
    wall perf_pipeline "$data" >>"$work/p"
    rm -rf "$work/fg"; mkdir -p "$work/fg"
    wall "$pfprof" flamegraph -i "$data" -o "$work/fg" >>"$work/f"
    wall "$pfprof" report -i "$data" >>"$work/r"
  done
  p=$(median <"$work/p"); f=$(median <"$work/f"); r=$(median <"$work/r")
  printf '   %-22s %10s %10s %10s %7.1fx %7.1fx\n' "$rec ($(perf script -i "$data" 2>/dev/null | grep -c ': *[0-9]* *[a-z-]*faults:' || true) samples)" \
    "$p" "$f" "$r" "$(echo "$p / $f" | bc -l)" "$(echo "$p / $r" | bc -l)"
done

echo "3. the symbolizer on libc with its DWARF (libc6-dbg), against binutils addr2line"
command -v addr2line >/dev/null || apt-get install -y -qq binutils >/dev/null
dpkg -s libc6-dbg >/dev/null 2>&1 || apt-get install -y -qq libc6-dbg >/dev/null
cargo build --release --quiet -p pfprof-symbolize --example symbolize_file
libc=/usr/lib/x86_64-linux-gnu/libc.so.6
# Every 67th byte of .text (about 20,000 addresses; file offset = address in libc).
read -r text_addr text_size < <(readelf -SW "$libc" | awk '$2 == ".text" {print $4, $6}')
seq $((16#$text_addr)) 67 $((16#$text_addr + 16#$text_size - 1)) | awk '{printf "%x\n", $1}' >"$work/addrs"
target/release/examples/symbolize_file "$libc" bench $(cat "$work/addrs") | sed 's/^/   pfprof /'
id=$(readelf -n "$libc" | awk '/Build ID/ {print $3}')
debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
s=$(date +%s.%N)
addr2line -f -i -C -e "$debug" <"$work/addrs" >/dev/null
e=$(date +%s.%N)
n=$(wc -l <"$work/addrs")
printf '   binutils addr2line -f -i -C: %d addresses in %.1f ms, %.0f per second\n' "$n" \
  "$(echo "($e - $s) * 1000" | bc -l)" "$(echo "$n / ($e - $s)" | bc -l)"
