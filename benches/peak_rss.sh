#!/usr/bin/env bash
# Peak RSS of the default campaign at two lengths, side by side in one run:
#   benches/peak_rss.sh [BINARY]        (default target/release/ptecheck)
# Alternates a SHORT-case and a LONG-case campaign (defaults 10,000 and 100,000; JOBS, default 2)
# ROUNDS times (default 5) and prints every peak (GNU time's maxrss) and each length's median
# and maximum. Peak RSS of one run moves by a few MB with how the threads' cases interleave, so
# one pair of runs says little; the medians and maxima of several do. NOASLR=1 runs each campaign
# with address-space randomisation off (`setarch -R`, util-linux): with JOBS=1 the peaks then
# repeat from run to run, so what is left between the two lengths is the campaign's, not the
# layout's (two jobs still vary with which cases run side by side).
# PROCESSES=N runs `--processes N` in place of `--jobs`; GNU time then gives the largest of the
# processes' peaks (each shard process's own), not their sum.
set -euo pipefail
bin=${1:-target/release/ptecheck} rounds=${ROUNDS:-5} short=${SHORT:-10000} long=${LONG:-100000}
export MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:-0}
launch=()
if [ "${NOASLR:-0}" = 1 ]; then launch=(setarch -R); fi
workers=(--jobs "${JOBS:-2}")
if [ -n "${PROCESSES:-}" ]; then workers=(--processes "$PROCESSES"); fi
peak() { "${launch[@]}" /usr/bin/time -f '%M' "$bin" campaign "${workers[@]}" --cases "$1" --seed 1 2>&1 >/dev/null | tail -1; }
s=() l=()
for _ in $(seq "$rounds"); do
  s+=("$(peak "$short")") l+=("$(peak "$long")")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "median %6.1f MiB  max %6.1f MiB", a[int((NR+1)/2)]/1024, a[NR]/1024}'; }
printf '%-8s cases: %s  (runs: %s KB)\n' "$short" "$(stats "${s[@]}")" "${s[*]}"
printf '%-8s cases: %s  (runs: %s KB)\n' "$long" "$(stats "${l[@]}")" "${l[*]}"
printf 'long/short median: %s\n' "$(printf '%s\n' "${s[@]}" | sort -n | awk -v L="$(printf '%s\n' "${l[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" '{a[NR]=$1} END {printf "%.3f", L / a[int((NR+1)/2)]}')"
