# bench/common.sh: the set-up bench/loss.sh and bench/stacks.sh share
# (sourced from the repository root): tracefs, a release build in $pfprof
# (or $PFPROF),
# a work directory $work removed on exit (with the busy-CPU $spinner, if
# one was started), and the fork storm and 1 GiB touch fixtures built there.
# Usage: bench_setup NAME
bench_setup() {
  export PATH="$HOME/.cargo/bin:$PATH"
  grep -q ' tracefs ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing || true
  # PFPROF=path benchmarks that binary (no build): a build that stays put
  # while the tree changes.
  if [ -n "${PFPROF:-}" ]; then
    pfprof=$PFPROF
  else
    cargo build --release --quiet
    pfprof=$PWD/target/release/pfprof
  fi
  work=$(mktemp -d "/tmp/pfprof-$1.XXXXXX")
  spinner=
  trap bench_cleanup EXIT
  cc -g -O1 -fno-omit-frame-pointer -pthread -o "$work/fork_storm" fixtures/fork_storm.c
  cc -g -O1 -fno-omit-frame-pointer -o "$work/touch" fixtures/touch.c
}

bench_cleanup() {
  [ -n "$spinner" ] && kill "$spinner" 2>/dev/null
  rm -rf "$work"
}

# Samples and lost records of a perf recording, from `perf report --stats`
# (the first block is the aggregate; per-event blocks follow it), then
# `$2` as a third field (the kernel's count, when the caller has none).
perf_sample_counts() {
  perf report -i "$1" --stats 2>/dev/null | awk -v third="${2:-}" '
    {gsub(",", "")} /stats:/ && !/Aggregated/ {done = 1} done {next}
    /SAMPLE events:/ {s = $3} /LOST events:/ {l += $3} /LOST_SAMPLES events:/ {l += $3}
    END {print s + 0, l + 0, third}'
}
