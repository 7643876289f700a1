#!/usr/bin/env bash
# Two workers as threads against two as processes, side by side in one run:
#   benches/processes.sh [BINARY]        (default target/release/ptecheck)
# Alternates `campaign --jobs 1`, `--jobs 2` and `--processes 2` on the same no-swarm cases
# (CASES, default 8000; seed 7) ROUNDS times (default 3), prints each run's wall time (GNU
# time) and the median of each round's ratio of one job's time to each two-worker mode's.
# Build with `--features flat-memory` first to measure that build (docs/performance.md, section 4).
set -euo pipefail
bin=${1:-target/release/ptecheck} rounds=${ROUNDS:-3} cases=${CASES:-8000}
wall() { /usr/bin/time -f '%e' "$bin" campaign --no-swarm --cases "$cases" --seed 7 "$@" 2>&1 >/dev/null | tail -1; }
threads=() procs=()
for r in $(seq "$rounds"); do
  one=$(wall --jobs 1) two=$(wall --jobs 2) p=$(wall --processes 2)
  echo "round $r: 1 job ${one} s, 2 jobs ${two} s, 2 processes ${p} s"
  threads+=("$(echo "$one / $two" | bc -l)") procs+=("$(echo "$one / $p" | bc -l)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.2fx", a[int((NR+1)/2)]}'; }
echo "1 job vs 2 jobs (threads): median $(median "${threads[@]}"); vs 2 processes: median $(median "${procs[@]}")"
