#!/usr/bin/env bash
# Scaling benchmark of issue 17 item 1: cost per packet and memory per connection as the
# number of connections grows (bench::scale, the scale_conns binary).
#
#   scripts/bench-scale.sh [COUNTS] [EXCHANGES]
#
# COUNTS (default "1 1000 10000 100000") are the connection counts; EXCHANGES (default
# 100000) the measured request/response exchanges per run. For each count:
#   - callgrind counts `bench::scale::scale_loop` alone (--toggle-collect: setup, the
#     handshakes and the warm-up sweep are excluded): instructions per frame = Ir / frames;
#   - a native run gives the median wall ns per frame of BENCH_WALL_RUNS (default 5) loops
#     and the heap per connection idle, after traffic and in TIME-WAIT.
# Ratios are to the first count. glibc's rep-string thresholds are raised for the callgrind
# runs as in bench-callgrind.sh (valgrind counts each rep iteration as an instruction).
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTS="${1:-1 1000 10000 100000}"
EXCHANGES="${2:-100000}"
WALL_RUNS="${BENCH_WALL_RUNS:-5}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-scale}"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

cargo build --quiet --release -p bench --bin scale_conns
BIN="$CARGO_TARGET_DIR/release/scale_conns"
CG_TUNABLES="glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295"

field() { # field NAME LINE
  sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"
}

declare -A IPF NSF FPE IDLE TRAFFIC TW
for n in $COUNTS; do
  cg="$OUT/callgrind.$n.out"
  line="$(GLIBC_TUNABLES="$CG_TUNABLES" valgrind --tool=callgrind --callgrind-out-file="$cg" \
    --toggle-collect='*scale_loop*' "$BIN" "$n" --exchanges "$EXCHANGES" --runs 1 --no-memory \
    2>"$OUT/valgrind.$n.log" | grep '^run=')"
  ir="$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$cg")"
  [ -n "$ir" ] || ir="$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$cg")"
  IPF[$n]="$(awk -v ir="$ir" -v f="$(field frames "$line")" 'BEGIN { printf "%.0f", ir / f }')"
  native="$("$BIN" "$n" --exchanges "$EXCHANGES" --runs "$WALL_RUNS")"
  res="$(grep '^result' <<<"$native")"
  mem="$(grep '^memory' <<<"$native")"
  NSF[$n]="$(field median_ns_per_frame "$res")"
  FPE[$n]="$(field frames_per_exchange "$res")"
  IDLE[$n]="$(field idle_bytes_per_endpoint "$mem")"
  TRAFFIC[$n]="$(field after_traffic_bytes_per_endpoint "$mem")"
  TW[$n]="$(field time_wait_bytes_per_connection "$mem")"
  echo "done: $n connections" >&2
done

first="${COUNTS%% *}"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
echo "64-byte request/response, $EXCHANGES exchanges per run; ratios to $first connection(s)"
echo
echo "| connections | instructions/frame | ratio | wall ns/frame (median of $WALL_RUNS) | ratio | frames/exchange | heap B/endpoint idle | after traffic | TIME-WAIT B/conn |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $COUNTS; do
  echo "| $n | ${IPF[$n]} | $(ratio "${IPF[$n]}" "${IPF[$first]}") | ${NSF[$n]} | $(ratio "${NSF[$n]}" "${NSF[$first]}") | ${FPE[$n]} | ${IDLE[$n]} | ${TRAFFIC[$n]} | ${TW[$n]} |"
done
echo
echo "callgrind profiles: $OUT/callgrind.*.out (callgrind_annotate FILE)"
