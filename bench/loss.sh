#!/usr/bin/env bash
# bench/loss.sh: does the default recording lose records? Runs pfprof record
# (defaults) RUNS times on each of: the fork storm (fixtures/fork_storm.c:
# 200 processes x 8 threads x 64 pages), the 1 GiB touch (fixtures/touch.c,
# 262,144 faults) and python (/usr/bin/python3 -c 'import json, sqlite3,
# asyncio'), first with the machine idle, then with a spinning loop keeping
# one CPU busy; and chromium's headless start-up (16 processes, ~50,000
# faults in ~2 s) when chromium is installed. Prints each run's lost records
# and truncated stacks, and per program and condition the runs with zero
# loss. PROGRAMS="storm chromium" picks some; CONDITIONS="busy" one condition.
#
# Usage: bash bench/loss.sh [RUNS]        (as root; default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
. bench/common.sh
bench_setup loss

declare -A cmd=(
  [storm]="$work/fork_storm"
  [touch]="$work/touch"
  [python]="/usr/bin/python3 -c 'import json, sqlite3, asyncio'"
  [chromium]="env HOME=$work/chome chromium --headless --no-sandbox --disable-gpu --disable-background-networking --dump-dom about:blank"
)
programs=${PROGRAMS:-storm touch python chromium}
command -v chromium >/dev/null || programs=${programs//chromium/}
for condition in ${CONDITIONS:-idle busy}; do
  if [ "$condition" = busy ]; then
    (while :; do :; done) &
    spinner=$!
  fi
  for p in $programs; do
    clean=0
    line=""
    for ((i = 1; i <= runs; i++)); do
      rm -rf "$work/out" "$work/out.old"
      sh -c "$pfprof record -q -o $work/out -- ${cmd[$p]}" >/dev/null 2>&1 || true
      read -r lost truncated < <(python3 -c "
import json; t = json.load(open('$work/out/report.json'))['totals']
print(t['lost'], t['truncated_stacks'])")
      [ "$lost" = 0 ] && clean=$((clean + 1))
      line="$line $lost/$truncated"
    done
    printf '%-5s %-7s zero loss in %d of %d runs (lost/truncated per run:%s)\n' "$condition" "$p" "$clean" "$runs" "$line"
  done
  if [ -n "$spinner" ]; then kill "$spinner"; spinner=; fi
done
