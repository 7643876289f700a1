#!/usr/bin/env bash
# Per-core campaign throughput of two builds of ptecheck, side by side in one run:
#   benches/before_after.sh BEFORE_BINARY AFTER_BINARY
# For swarm and --no-swarm at three sizes (default, 2x max_nodes, depth 4 with 2x max_nodes),
# each row alternates the two binaries ROUNDS times (default 3) on the same seed and keeps each
# one's best programs/s (the report is identical for both; only time differs).
# Example (the build before issue K's per-core work):
#   git worktree add /tmp/before 6ddecb4 && (cd /tmp/before && cargo build --release)
#   benches/before_after.sh /tmp/before/target/release/ptecheck target/release/ptecheck
set -euo pipefail
before=$1 after=$2 rounds=${ROUNDS:-3} cases=${CASES:-1000}
configs=$(mktemp -d)
trap 'rm -rf "$configs"' EXIT
rate() { "$1" campaign --jobs 1 --cases "$cases" --seed 1 "${@:2}" 2>&1 | awk '/^cases/ {print $5}'; }
printf '%-34s %12s %12s %8s\n' "row ($cases cases, one core)" "before/s" "after/s" "ratio"
for size in 'default:{}' '2x max_nodes:{"max_nodes":16}' 'depth 4, 2x max_nodes:{"max_depth":4,"max_nodes":16}'; do
  name=${size%%:*} config="$configs/${name// /_}.json"
  printf '%s\n' "${size#*:}" > "$config"
  for mode in swarm no-swarm; do
    flags=(--config "$config"); [ "$mode" = no-swarm ] && flags+=(--no-swarm)
    b=0 a=0
    for _ in $(seq "$rounds"); do
      b=$(awk -v x="$b" -v y="$(rate "$before" "${flags[@]}")" 'BEGIN {print (y > x ? y : x)}')
      a=$(awk -v x="$a" -v y="$(rate "$after" "${flags[@]}")" 'BEGIN {print (y > x ? y : x)}')
    done
    printf '%-34s %12.1f %12.1f %7.2fx\n' "$mode, $name" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')"
  done
done
