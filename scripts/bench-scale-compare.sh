#!/usr/bin/env bash
# Side-by-side wall clock of two scale_conns binaries (issue 17): for each connection count,
# the two binaries alternate REPS times (each run: the median of 3 in-process loops of
# 100,000 64-byte exchanges, `--no-memory`); prints the median of each side's REPS figures
# and their ratio. Alternating keeps a shared machine's load drift out of the ratio.
#
#   scripts/bench-scale-compare.sh BEFORE_BIN AFTER_BIN [REPS=5] [COUNTS...]
#
# Build each side with `cargo build --release -p bench --bin scale_conns` on its tree and
# copy target/release/scale_conns aside.
set -euo pipefail
B="$1"
A="$2"
REPS="${3:-5}"
shift 2
[ $# -gt 0 ] && shift
COUNTS="${*:-1 1000 10000 100000}"
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ns() { "$1" "$2" --runs 3 --no-memory | sed -n 's/.*median_ns_per_frame=\([0-9.]*\).*/\1/p'; }
for n in $COUNTS; do
  bs=()
  as=()
  for _ in $(seq "$REPS"); do
    bs+=("$(ns "$B" "$n")")
    as+=("$(ns "$A" "$n")")
  done
  mb="$(printf '%s\n' "${bs[@]}" | median)"
  ma="$(printf '%s\n' "${as[@]}" | median)"
  echo "connections=$n before_ns_per_frame=$mb after_ns_per_frame=$ma" \
    "after/before=$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", a / b }')" \
    "before_runs=${bs[*]// /,} after_runs=${as[*]// /,}"
done
