#!/usr/bin/env bash
# Forwarding micro-benchmarks (issue 16): instructions per forwarded frame through
# forward::Forwarder::process_burst and per LPM lookup, counted by callgrind; then the same
# runs on the wall clock (lookups/s, frames/s on this machine: noisy on a shared host).
#
#   scripts/bench-forward.sh [BURSTS] [LOOKUPS]
#
# BURSTS (default 2000) bursts of 64 frames per callgrind run; LOOKUPS (default 2M) lookups
# per callgrind LPM run. The wall-clock runs use the example's defaults.
#
# What is counted: only `forward_one_burst` (one call of process_burst on 64 frames) and
# `lpm4_lookups` / `lpm6_lookups`, selected with --toggle-collect: building the tables and
# refilling the frames between bursts (what a NIC would do) are excluded.
#
# Set-up (crates/forward/examples/forward_bench.rs): two ports; ~80k random IPv4 routes
# (/16–/28, weighted to /24) and 1,000 IPv6 /48s plus defaults, all via one resolved
# gateway (forward::NeighbourTable, an ordered map); 64 distinct destinations per burst.
# burst: 64-byte IPv4/UDP frames (60 + FCS); burst6: 82-byte IPv6 frames.
# lpm4: ~450k routes (/8–/32, BGP-like weight on /24, 16,384 /24s with longer routes),
# random addresses. lpm6: 100k routes (/32–/128), half the addresses inside a route.
set -euo pipefail
cd "$(dirname "$0")/.."

BURSTS="${1:-2000}"
LOOKUPS="${2:-2000000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-forward}"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

cargo build --quiet --release -p forward --example forward_bench
BIN="$CARGO_TARGET_DIR/release/examples/forward_bench"

# run_cg MODE COUNT FUNCTION: prints the Ir inside FUNCTION.
run_cg() {
  local cg="$OUT/callgrind.$1.out"
  valgrind --tool=callgrind --callgrind-out-file="$cg" --toggle-collect="*$3*" \
    "$BIN" "$1" "$2" >"$OUT/$1.txt" 2>"$OUT/valgrind.$1.log"
  sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$cg" | head -1
}
per() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }

echo "== callgrind: instructions (Ir)"
printf '%-8s %12s %14s %12s\n' mode items instructions per_item
for m in burst burst6; do
  ir="$(run_cg "$m" "$BURSTS" forward_one_burst)"
  frames=$((BURSTS * 64))
  printf '%-8s %12s %14s %12s   (per forwarded frame)\n' "$m" "$frames" "$ir" "$(per "$ir" "$frames")"
done
for m in lpm4 lpm6; do
  ir="$(run_cg "$m" "$LOOKUPS" "${m}_lookups")"
  n="$(sed -n 's/.*lookups=\([0-9]*\).*/\1/p' "$OUT/$m.txt")"
  printf '%-8s %12s %14s %12s   (per lookup)\n' "$m" "$n" "$ir" "$(per "$ir" "$n")"
done

echo
echo "== wall clock (this machine, shared: indicative only)"
for m in burst burst6 lpm4 lpm6; do "$BIN" "$m"; done
