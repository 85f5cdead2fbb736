#!/usr/bin/env bash
# Simulated data-cache misses per frame of bench::scale's steady loop (issue 17 item 2):
# cachegrind runs scale_conns with E1 and E2 exchanges (default 20000 and 60000) and
# subtracts the totals, so setup, handshakes and the warm-up sweep cancel; the difference is
# divided by the 2·(E2 − E1) frames between them. Deterministic (unlike the wall clock on a
# shared machine). D1 is valgrind's default (the host's L1); the LL is set to 32 MiB, 16-way
# (valgrind would otherwise take the host's reported last level, 256 MiB direct-mapped here).
#
#   scripts/bench-scale-misses.sh [BINARY] [COUNTS="1 1000 10000 100000"] [E1] [E2]
#
# BINARY defaults to target/release/scale_conns (built if missing). Prints, per count, the
# per-frame differences of cachegrind's events (Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw);
# `cg_diff OUT/cg.N.E1 OUT/cg.N.E2 | cg_annotate` gives them per function.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
BIN="${1:-}"
if [ -z "$BIN" ]; then
  cargo build --quiet --release -p bench --bin scale_conns
  BIN="$CARGO_TARGET_DIR/release/scale_conns"
fi
COUNTS="${2:-1 1000 10000 100000}"
E1="${3:-20000}"
E2="${4:-60000}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-scale-misses}"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
CG_TUNABLES="glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295"
frames=$((2 * (E2 - E1)))
for n in $COUNTS; do
  for e in "$E1" "$E2"; do
    GLIBC_TUNABLES="$CG_TUNABLES" valgrind --tool=cachegrind --cache-sim=yes --LL=33554432,16,64 \
      --cachegrind-out-file="$OUT/cg.$n.$e" "$BIN" "$n" --exchanges "$e" --runs 1 --no-memory \
      >"$OUT/log.$n.$e" 2>&1
  done
  a="$(sed -n 's/^summary://p' "$OUT/cg.$n.$E1")"
  b="$(sed -n 's/^summary://p' "$OUT/cg.$n.$E2")"
  ev="$(sed -n 's/^events://p' "$OUT/cg.$n.$E1")"
  echo "connections=$n events:$ev"
  echo "connections=$n per_frame: $(awk -v a="$a" -v b="$b" -v f="$frames" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); s = "";
    for (i = 1; i <= n; i++) s = s sprintf("%.2f ", (y[i] - x[i]) / f); print s }')"
done
