#!/usr/bin/env bash
# bench/record.sh: pfprof against `perf record -g` + `perf script | inferno`
# on the 1 GiB touch fixture (262,144 page faults), side by side, in one run.
#
# Prints, per tool: wall time of the profiled run (median of N), its ratio to
# the bare run, faults captured vs the kernel's count, recording size, and the
# time from recording to SVG flame graphs.
#
# Usage: bash bench/record.sh [RUNS] [MiB]      (as root; installs inferno)
#        PFPROF=/path/to/pfprof bash bench/record.sh   (another build, e.g. before a change)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
mib=${2:-1024}

export PATH="$HOME/.cargo/bin:$PATH"
command -v inferno-flamegraph >/dev/null || cargo install --locked inferno
command -v bc >/dev/null || { apt-get update -qq && apt-get install -y -qq bc; }
command -v perf >/dev/null || { echo "perf is required (apt-get install linux-perf)" >&2; exit 1; }
grep -q ' tracefs ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing || true
if [ -z "${PFPROF:-}" ]; then cargo build --release --quiet; fi
pfprof=${PFPROF:-$PWD/target/release/pfprof}

work=$(mktemp -d /tmp/pfprof-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -fno-omit-frame-pointer -o "$work/touch" fixtures/touch.c

now() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc -l; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bare=(); perf_rec=(); perf_an=(); pf_rec=(); pf_an=()
perf_lost_pct=(); pf_lost_pct=()
for i in $(seq "$runs"); do
  t0=$(now); "$work/touch" "$mib"; t1=$(now)
  bare+=("$(elapsed "$t0" "$t1")")

  t0=$(now)
  perf record -q -c 1 -g -e minor-faults,major-faults -d -o "$work/perf.data" -- "$work/touch" "$mib" 2>"$work/perf.err"
  t1=$(now)
  perf_rec+=("$(elapsed "$t0" "$t1")")
  t0=$(now)
  perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf 2>/dev/null | inferno-flamegraph > "$work/perf.svg" 2>/dev/null
  t1=$(now)
  perf_an+=("$(elapsed "$t0" "$t1")")
  perf_samples=$(perf script -i "$work/perf.data" -F event 2>/dev/null | wc -l)
  kernel=$(perf stat -x, -e minor-faults,major-faults "$work/touch" "$mib" 2>&1 >/dev/null | awk -F, '{s+=$1} END {print s}')
  perf_lost_pct+=("$(echo "100 * (1 - $perf_samples / $kernel)" | bc -l)")

  t0=$(now)
  "$pfprof" record -q --call-graph fp -o "$work/pf" -- "$work/touch" "$mib" 2>"$work/pf.err"
  t1=$(now)
  t2=$(now)
  "$pfprof" flamegraph -i "$work/pf" 2>/dev/null
  t3=$(now)
  an=$(elapsed "$t2" "$t3")
  # `record` analyses once at the end as well; its recording phase is the total minus that.
  pf_rec+=("$(echo "$(elapsed "$t0" "$t1") - $an" | bc -l)")
  pf_an+=("$an")
  pf_lost_pct+=("$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; k=t["kernel_minor"]+t["kernel_major"]; c=t["minor"]+t["major"]+t["cow"]; print(100*(1-c/k))' "$work/pf/report.json")")
done

b=$(printf '%s\n' "${bare[@]}" | median)
pr=$(printf '%s\n' "${perf_rec[@]}" | median)
pa=$(printf '%s\n' "${perf_an[@]}" | median)
fr=$(printf '%s\n' "${pf_rec[@]}" | median)
fa=$(printf '%s\n' "${pf_an[@]}" | median)
pl=$(printf '%s\n' "${perf_lost_pct[@]}" | median)
fl=$(printf '%s\n' "${pf_lost_pct[@]}" | median)
psize=$(stat -c %s "$work/perf.data"); fsize=$(stat -c %s "$work/pf/pfprof.data")

echo
echo "touch ${mib} MiB, median of $runs runs ($(nproc) CPUs, $(uname -r))"
printf '%-28s %10s %10s %10s %12s %14s\n' "" "wall s" "x bare" "lost %" "size MB" "to SVG s"
printf '%-28s %10.3f %10s %10s %12s %14s\n' "bare" "$b" "1.00" "-" "-" "-"
printf '%-28s %10.3f %10.2f %10.1f %12.1f %14.3f\n' "perf record -g + script|inferno" "$pr" "$(echo "$pr/$b" | bc -l)" "$pl" "$(echo "$psize/1000000" | bc -l)" "$pa"
printf '%-28s %10.3f %10.2f %10.1f %12.1f %14.3f\n' "pfprof record" "$fr" "$(echo "$fr/$b" | bc -l)" "$fl" "$(echo "$fsize/1000000" | bc -l)" "$fa"
echo
printf 'recording overhead, pfprof/perf: %.2f   analysis speed-up, perf pipeline/pfprof: %.1fx\n' \
  "$(echo "($fr-$b)/($pr-$b)" | bc -l)" "$(echo "$pa/$fa" | bc -l)"
