#!/usr/bin/env bash
# Per-core campaign throughput of two builds of ptecheck, side by side in one run:
#   benches/before_after.sh BEFORE_BINARY AFTER_BINARY
# For swarm and --no-swarm at three sizes (default, 2x max_nodes, depth 4 with 2x max_nodes),
# each row alternates the two binaries ROUNDS times (default 3) on the same seed and keeps each
# one's best programs/s, then prints each binary's split of time across stages in its best run.
# Two builds with the same generator check the same cases (identical reports; only time
# differs); across generator changes the same seed draws other cases of the same configuration.
# A build from before `--jobs` (one thread anyway) is run without it. A build with the program's
# node budget (`max_total_nodes`) runs every row with it lifted, as builds before it generated.
# Example (the build before issue K, eb2344b, the parent of its first commit e0ae806; it is
# slow, so few cases):
#   git worktree add /tmp/before eb2344b && (cd /tmp/before && cargo build --release)
#   CASES=200 ROUNDS=1 benches/before_after.sh /tmp/before/target/release/ptecheck target/release/ptecheck
set -euo pipefail
before=$1 after=$2 rounds=${ROUNDS:-3} cases=${CASES:-1000}
configs=$(mktemp -d)
trap 'rm -rf "$configs"' EXIT
jobs_flag() { if "$1" campaign --help | grep -q -- '--jobs'; then echo --jobs 1; fi; }
declare -A jobs=([before]="$(jobs_flag "$before")" [after]="$(jobs_flag "$after")")
# ',"max_total_nodes":65536' for a build that has the node budget (it accepts the member).
budget_member() {
  printf '{"max_total_nodes":65536}\n' > "$configs/probe.json"
  # A build without it refuses the member (exit 2); a failing case would exit 1.
  local status=0
  "$1" campaign --cases 1 --config "$configs/probe.json" >/dev/null 2>&1 || status=$?
  if [ "$status" -ne 2 ]; then echo ',"max_total_nodes":65536'; fi
}
declare -A lift=([before]="$(budget_member "$before")" [after]="$(budget_member "$after")")
# One run: "programs/s<TAB>stage split" (the split in percent of the stages' summed time).
run() {
  local which=$1 bin=$2; shift 2
  # shellcheck disable=SC2086
  "$bin" campaign ${jobs[$which]} --cases "$cases" --seed 1 "$@" 2>&1 | awk '
    /^cases/ {rate = $5}
    /^time:/ {total = 0; for (i = 2; i < NF; i += 2) {v[i] = $(i + 1) + 0; total += v[i]}
              split_ = ""; for (i = 2; i < NF; i += 2) split_ = split_ sprintf("%s %.0f%% ", $i, 100 * v[i] / (total > 0 ? total : 1))}
    END {printf "%s\t%s\n", rate, split_}'
}
printf '%-34s %12s %12s %8s\n' "row ($cases cases, one core)" "before/s" "after/s" "ratio"
for size in 'default:' '2x max_nodes:"max_nodes":16' 'depth 4, 2x max_nodes:"max_depth":4,"max_nodes":16'; do
  name=${size%%:*} members=${size#*:}
  for which in before after; do
    # The size's members, then the budget lifted where the build has one.
    printf '{%s%s}\n' "$members" "${lift[$which]}" | sed 's/^{,/{/' > "$configs/${name// /_}.$which.json"
  done
  for mode in swarm no-swarm; do
    flags=(); [ "$mode" = no-swarm ] && flags+=(--no-swarm)
    b=0 a=0 bsplit='' asplit=''
    for _ in $(seq "$rounds"); do
      IFS=$'\t' read -r r s < <(run before "$before" --config "$configs/${name// /_}.before.json" ${flags[@]+"${flags[@]}"})
      if awk -v x="$r" -v y="$b" 'BEGIN {exit !(x > y)}'; then b=$r bsplit=$s; fi
      IFS=$'\t' read -r r s < <(run after "$after" --config "$configs/${name// /_}.after.json" ${flags[@]+"${flags[@]}"})
      if awk -v x="$r" -v y="$a" 'BEGIN {exit !(x > y)}'; then a=$r asplit=$s; fi
    done
    printf '%-34s %12.1f %12.1f %7.2fx\n' "$mode, $name" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')"
    printf '    before: %s\n    after:  %s\n' "$bsplit" "$asplit"
  done
done
