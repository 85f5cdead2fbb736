#!/usr/bin/env bash
# The TCP soak beyond the test suite's 1,000 seeds, for humans (no test runs it):
#
#   scripts/soak.sh N [FIRST_SEED] [WORKLOAD]
#
# runs seeds FIRST_SEED..FIRST_SEED+N (default first seed 1,000,000) of every workload, or of
# WORKLOAD alone (bulk, bulk-both, rr, many, handoff), through a release build of
# `rsstack sim soak`, in chunks of SOAK_CHUNK seeds (default 10,000) with one worker thread per
# core (SOAK_THREADS to change it). Each chunk's output goes to target/soak/<first>-<last>.log;
# every failing seed is printed as it is found, with the command that replays it, and a summary
# (seeds, failures per workload, wall time) ends the run. Exit status 1 when any seed failed.
#
# Example: scripts/soak.sh 100000          # seeds 1,000,000..1,099,999, all workloads
#          scripts/soak.sh 50000 2000000 many
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:?usage: scripts/soak.sh N [FIRST_SEED] [WORKLOAD]}
first=${2:-1000000}
workload=${3:-}
chunk=${SOAK_CHUNK:-10000}
threads=${SOAK_THREADS:-0}
case $n$first$chunk$threads in *[!0-9]*) echo "soak.sh: N, FIRST_SEED, SOAK_CHUNK and SOAK_THREADS are numbers" >&2; exit 2 ;; esac
[ "$n" -ge 1 ] && [ "$chunk" -ge 1 ] && [ "$chunk" -le 100000 ] || { echo "soak.sh: N ≥ 1, 1 ≤ SOAK_CHUNK ≤ 100000" >&2; exit 2; }

# The suite's own environment knobs must not change what runs here either.
unset SIM_SEED SIM_DEBUG SIM_TRACE_PORT UPDATE_OUTCOMES
cargo build --release -q -p cli
mkdir -p target/soak
# A private copy: a rebuild while the soak runs must not change what later chunks run.
bin=target/soak/rsstack.$$
cp target/release/rsstack "$bin"
trap 'rm -f "$bin"' EXIT
echo "soak: build $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo +dirty)" >&2

wl_args=()
[ -n "$workload" ] && wl_args=(--workload "$workload")
started=$(date +%s)
end=$((first + n))
seed=$first
failures=0
declare -A per_workload=()
while [ "$seed" -lt "$end" ]; do
  count=$((end - seed < chunk ? end - seed : chunk))
  log="target/soak/$seed-$((seed + count - 1)).log"
  # rsstack exits 1 when a seed failed; the log says which.
  "$bin" sim soak --first-seed "$seed" --seeds "$count" --threads "$threads" "${wl_args[@]}" >"$log" 2>&1 || true
  if ! grep -q '^seeds: ' "$log"; then
    echo "soak.sh: chunk $seed+$count did not finish (see $log)" >&2
    exit 2
  fi
  while IFS= read -r line; do
    w=$(sed -E 's/^FAIL ([a-z-]+) seed ([0-9]+).*/\1/' <<<"$line")
    s=$(sed -E 's/^FAIL ([a-z-]+) seed ([0-9]+).*/\2/' <<<"$line")
    per_workload[$w]=$(( ${per_workload[$w]:-0} + 1 ))
    failures=$((failures + 1))
    echo "$line" | cut -c1-400
    echo "  replay: target/release/rsstack sim soak --first-seed $s --seeds 1 --workload $w"
  done < <(grep '^FAIL ' "$log" || true)
  seed=$((seed + count))
  echo "… $((seed - first)) of $n seeds, $failures failing runs, $(( $(date +%s) - started )) s" >&2
done

echo "soak: seeds $first..$((end - 1)) ($n), workloads ${workload:-all}, $failures failing runs, $(( $(date +%s) - started )) s"
for w in "${!per_workload[@]}"; do
  echo "  $w: ${per_workload[$w]} failing seeds"
done
[ "$failures" -eq 0 ]
