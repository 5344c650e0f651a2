#!/usr/bin/env bash
# bench/dwarf.sh: pfprof against `perf record --call-graph dwarf` on programs
# built WITHOUT frame pointers, side by side, in one run:
#   (a) fixtures/deep_nofp.c, cc -g -O2 -fomit-frame-pointer, 64 MiB
#       (16,384 faults in main -> level1 -> level2 -> level3 -> fill)
#   (b) fixtures/rust_pages, rustc -g -O (no force-frame-pointers), 32 MiB
#       (8,192 faults in rust_pages::pages::touch_every_page)
#   (c) fixtures/touch.c, cc -O1 -g, 1024 MiB (262,144 faults in touch_pages)
#
# Prints, per case and tool: wall time of the profiled run (median of N; for
# pfprof the recording phase, i.e. `record` minus its final analysis, which is
# timed as `pfprof flamegraph -i`, as bench/record.sh does), its ratio to the
# bare run, faults lost vs the kernel's count, recording size, the time of
# the analysis pass (perf: the unwinding `perf script`; pfprof: flamegraph),
# and the share of faults whose stack reaches `main` / `_start` / the full
# expected chain.
#
# Usage: bash bench/dwarf.sh [RUNS]                      (as root)
# Env:   PFPROF_CG  pfprof's --call-graph value (default dwarf)
#        BUSY=1     keep every CPU busy with a spinning shell loop meanwhile
#                   (where perf loses the most)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
cg=${PFPROF_CG:-dwarf}

export PATH="$HOME/.cargo/bin:$PATH"
command -v bc >/dev/null || { apt-get update -qq && apt-get install -y -qq bc; }
command -v perf >/dev/null || { echo "perf is required (apt-get install linux-perf)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
grep -q ' tracefs ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing || true
cargo build --release --quiet
pfprof=$PWD/target/release/pfprof

work=$(mktemp -d /tmp/pfprof-dwarf.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -g -O2 -fomit-frame-pointer -o "$work/deep_nofp" fixtures/deep_nofp.c
rustc --edition 2021 -g -O --crate-name rust_pages -o "$work/rust_pages" fixtures/rust_pages/main.rs
cc -O1 -g -o "$work/touch" fixtures/touch.c

# Stack statistics. `perf CASE` reads `perf script -F event,ip,sym` (one
# unindented header line per sample, then its frames leaf first, one per
# tab-indented line "IP SYM", inlined ones as "SYM (inlined)");
# `folded CASE FILE` reads pfprof's all.folded (class;comm;frame;...;[target]
# COUNT, root first). Prints: faults main% _start% chain%.
cat > "$work/stacks.py" <<'EOF'
import sys

MAIN = {"a": {"main"}, "b": {"main", "rust_pages::main"}, "c": {"main"}}

def consecutive(frames, seq):
    n = len(seq)
    return any(frames[i:i + n] == seq for i in range(len(frames) - n + 1))

def chain(case, f):
    """f: frames, root first."""
    if case == "a":
        return consecutive(f, ["main", "level1", "level2", "level3", "fill"])
    if case == "b":
        # std::rt::lang_start... -> ... rust_pages::main -> ... touch_every_page
        try:
            i = next(k for k, s in enumerate(f) if "std::rt::lang_start" in s)
            j = f.index("rust_pages::main", i + 1)
            f.index("rust_pages::pages::touch_every_page", j + 1)
            return True
        except (StopIteration, ValueError):
            return False
    return consecutive(f, ["main", "touch_pages"])

def name(sym):
    sym = sym.strip()
    return sym[:-len(" (inlined)")] if sym.endswith(" (inlined)") else sym

def samples_perf():
    frames = None
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if not line[0].isspace():          # header: "minor-faults: "
            if frames is not None:
                yield frames[::-1], 1
            frames = []
        elif frames is not None:
            parts = line.strip().split(None, 1)
            frames.append(name(parts[1]) if len(parts) > 1 else "[unknown]")
    if frames is not None:
        yield frames[::-1], 1

def samples_folded(path):
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, count = line.rsplit(" ", 1)
            parts = stack.split(";")
            # drop class and comm; the last element is the [target]
            yield [name(s) for s in parts[2:-1]], int(count)

case = sys.argv[2]
it = samples_perf() if sys.argv[1] == "perf" else samples_folded(sys.argv[3])
total = main = start = full = 0
for frames, n in it:
    total += n
    if any(s in MAIN[case] for s in frames):
        main += n
    if "_start" in frames:
        start += n
    if chain(case, frames):
        full += n
pct = lambda x: 100.0 * x / total if total else 0.0
print(total, pct(main), pct(start), pct(full))
EOF

now() { date +%s.%N; }
# Each profiled run starts from a settled machine: perf's run writes up to
# 2 GB, and on a VM the host's writeback of it steals CPU from whatever runs
# next (seen: 1-2 s of steal across both vCPUs, and records lost by
# whichever profiler ran then).
settle() { sync; sleep 1; }
elapsed() { echo "$2 - $1" | bc -l; }
# `put CASE TOOL METRIC VALUE`: one measurement; medians are taken at the end.
put() { echo "$1 $2 $3 $4" >> "$work/results"; }
: > "$work/results"

cmd_of() {
  case $1 in
    a) cmd=("$work/deep_nofp" 64) ;;
    b) cmd=("$work/rust_pages") ;;
    c) cmd=("$work/touch" 1024) ;;
  esac
}

if [ "${BUSY:-0}" = 1 ]; then
  for _ in $(seq "$(nproc)"); do sh -c 'while :; do :; done' & done
  trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
fi

for i in $(seq "$runs"); do
  for c in a b c; do
    cmd_of "$c"
    echo "run $i/$runs, case $c: ${cmd[*]}" >&2

    t0=$(now); "${cmd[@]}"; t1=$(now)
    put "$c" bare wall "$(elapsed "$t0" "$t1")"

    # perf record --call-graph dwarf (8 KiB of user stack per sample)
    rm -f "$work/perf.data" "$work/perf.data.old"
    settle
    t0=$(now)
    perf record -q -c 1 --call-graph dwarf -e minor-faults,major-faults -d -o "$work/perf.data" -- "${cmd[@]}" 2>"$work/perf.err"
    t1=$(now)
    put "$c" perf wall "$(elapsed "$t0" "$t1")"
    put "$c" perf size "$(stat -c %s "$work/perf.data")"
    perf_samples=$(perf script -i "$work/perf.data" -F event 2>/dev/null | wc -l)
    kernel=$(perf stat -x, -e minor-faults,major-faults "${cmd[@]}" 2>&1 >/dev/null | awk -F, '{s+=$1} END {print s}')
    put "$c" perf lost "$(echo "100 * (1 - $perf_samples / $kernel)" | bc -l)"
    t0=$(now)
    read -r n main start full < <(perf script -i "$work/perf.data" -F event,ip,sym 2>/dev/null | python3 "$work/stacks.py" perf "$c")
    t1=$(now)
    put "$c" perf post "$(elapsed "$t0" "$t1")"
    [ "$n" = "$perf_samples" ] || echo "warning: case $c: parsed $n perf samples, perf script -F event has $perf_samples" >&2
    put "$c" perf main "$main"; put "$c" perf start "$start"; put "$c" perf chain "$full"
    rm -f "$work/perf.data"

    # pfprof record
    rm -rf "$work/pf" "$work/pf.old"
    settle
    t0=$(now)
    "$pfprof" record -q --call-graph "$cg" -o "$work/pf" -- "${cmd[@]}" 2>"$work/pf.err"
    t1=$(now)
    t2=$(now)
    "$pfprof" flamegraph -i "$work/pf" 2>/dev/null
    t3=$(now)
    an=$(elapsed "$t2" "$t3")
    # `record` analyses once at the end as well; its recording phase is the total minus that.
    put "$c" pfprof wall "$(echo "$(elapsed "$t0" "$t1") - $an" | bc -l)"
    put "$c" pfprof post "$an"
    put "$c" pfprof size "$(stat -c %s "$work/pf/pfprof.data")"
    put "$c" pfprof lost "$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; k=t["kernel_minor"]+t["kernel_major"]; c=t["minor"]+t["major"]+t["cow"]; print(100*(1-c/k))' "$work/pf/report.json")"
    read -r _ main start full < <(python3 "$work/stacks.py" folded "$c" "$work/pf/all.folded")
    put "$c" pfprof main "$main"; put "$c" pfprof start "$start"; put "$c" pfprof chain "$full"
    rm -rf "$work/pf" "$work/pf.old"
  done
done

# med CASE TOOL METRIC: median of the runs
med() {
  awk -v c="$1" -v t="$2" -v m="$3" '$1==c && $2==t && $3==m {print $4}' "$work/results" |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

title_of() {
  case $1 in
    a) echo "(a) deep_nofp 64 MiB, cc -g -O2 -fomit-frame-pointer; chain = main;level1;level2;level3;fill" ;;
    b) echo "(b) rust_pages 32 MiB, rustc -g -O (no frame pointers); main = main or rust_pages::main;" \
            "chain = std::rt::lang_start* .. rust_pages::main .. rust_pages::pages::touch_every_page" ;;
    c) echo "(c) touch 1024 MiB, cc -O1 -g; chain = main;touch_pages" ;;
  esac
}

echo
busy=""; [ "${BUSY:-0}" = 1 ] && busy="; every CPU kept busy by a spinning loop"
echo "median of $runs runs ($(nproc) CPUs, $(uname -r)$busy); perf record -c 1 --call-graph dwarf; pfprof record --call-graph $cg"
summary=()
for c in a b c; do
  echo
  title_of "$c"
  printf '%-24s %8s %7s %7s %9s %8s %8s %9s %8s\n' "" "wall s" "x bare" "lost %" "size MB" "post s" "main %" "_start %" "chain %"
  b=$(med "$c" bare wall)
  printf '%-24s %8.3f %7s %7s %9s %8s %8s %9s %8s\n' "bare" "$b" "1.00" "-" "-" "-" "-" "-" "-"
  for tool in perf pfprof; do
    if [ "$tool" = perf ]; then label="perf record (dwarf)"; else label="pfprof record ($cg)"; fi
    w=$(med "$c" "$tool" wall)
    printf '%-24s %8.3f %7.2f %7.1f %9.1f %8.3f %8.1f %9.1f %8.1f\n' "$label" "$w" \
      "$(echo "$w/$b" | bc -l)" "$(med "$c" "$tool" lost)" \
      "$(echo "$(med "$c" "$tool" size)/1000000" | bc -l)" "$(med "$c" "$tool" post)" \
      "$(med "$c" "$tool" main)" "$(med "$c" "$tool" start)" "$(med "$c" "$tool" chain)"
  done
  pw=$(med "$c" perf wall); fw=$(med "$c" pfprof wall)
  ps=$(med "$c" perf size); fs=$(med "$c" pfprof size)
  summary+=("$(printf '(%s) pfprof/perf: wall %.2f   size %.3f' "$c" "$(echo "$fw/$pw" | bc -l)" "$(echo "$fs/$ps" | bc -l)")")
done
echo
printf '%s\n' "${summary[@]}"
