#!/usr/bin/env bash
# Issue 17's goal as a side-by-side figure: thread CPU ns per frame of bench::scale at each
# connection count, as a ratio to 1 connection. For REPS rounds the counts run one after
# another (each run: `scale_conns N --runs 3`, the median of its 3 in-process loops), so a
# shared machine's load drift touches every count alike; prints each count's median over
# the rounds and its ratio to the first count's. EXTRA is passed to every run (e.g.
# "--burst 32" for bursts through the receive look-ahead). Thread CPU time
# (`/proc/thread-self/schedstat`) leaves out time other jobs held the CPU; binaries older than
# that figure report wall time, which is used instead (run those on a quiet machine).
#
#   scripts/bench-scale-ratio.sh [BINARY] [COUNTS="1 1000 100000"] [REPS=5] [EXTRA...]
#
# Set GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in the environment to back the heap with
# transparent huge pages (THP in `madvise` mode): fewer TLB misses on the per-connection state.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
BIN="${1:-}"
if [ -z "$BIN" ]; then
  cargo build --quiet --release -p bench --bin scale_conns
  BIN="$CARGO_TARGET_DIR/release/scale_conns"
fi
COUNTS="${2:-1 1000 100000}"
REPS="${3:-5}"
shift $(($# < 3 ? $# : 3))
EXTRA=("$@")
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A runs
for _ in $(seq "$REPS"); do
  for n in $COUNTS; do
    out="$("$BIN" "$n" --runs 3 --no-memory "${EXTRA[@]}" | grep '^result')"
    v="$(sed -n 's/.*median_cpu_ns_per_frame=\([0-9.]*\).*/\1/p' <<<"$out")"
    # Binaries older than the thread-CPU figure report wall time only.
    [ -n "$v" ] || v="$(sed -n 's/.*median_ns_per_frame=\([0-9.]*\).*/\1/p' <<<"$out")"
    runs[$n]="${runs[$n]:-} $v"
  done
done
base=""
for n in $COUNTS; do
  m="$(printf '%s\n' ${runs[$n]} | median)"
  [ -z "$base" ] && base="$m"
  echo "connections=$n cpu_ns_per_frame=$m ratio_to_first=$(awk -v a="$m" -v b="$base" \
    'BEGIN { printf "%.2f", a / b }') runs:${runs[$n]} extra=${EXTRA[*]:-none}"
done
