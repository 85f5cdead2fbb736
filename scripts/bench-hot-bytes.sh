#!/usr/bin/env bash
# Which bytes of one connection's state a segment touches, measured (issue 17 item 2: "hot
# state per connection <= 128 bytes").
#
# valgrind's DHAT counts, for every heap block of at most 1,024 bytes, the reads and writes
# of each byte. The script runs each workload twice on ONE connection, for a small and a
# large amount of traffic, and scripts/hot-bytes.py subtracts the per-byte counts of the
# blocks that hold the connection's state (the TCB `Box<tcp::Connection>`, its counters box,
# the stack's socket-slot vector), so setup, handshake and close cancel; it maps offsets to
# fields with gdb (`ptype /o`) on the same binary, built with full debug information.
#
#   scripts/bench-hot-bytes.sh [E1 E2 B1 B2]
#
# Workloads (E1/E2 exchanges, default 2000 and 6000; B1/B2 bytes, default 2M and 6M):
# - rr: `scale_conns 1 --exchanges E --runs 1 --no-memory` (64-byte request/response; per
#   exchange each end receives one segment and sends one); rr-ecn: the same with `--ecn`;
# - bulk: `rsstack_bulk B` (client = sender, server = receiver; unit = one data segment,
#   the ACKs between the runs reported beside);
# - bulk-ecn: `rsstack_bulk B --ecn`.
# With ECN negotiated every segment takes the full input path, not header prediction's short
# one (`crates/tcp/src/connection/predict.rs`), so NAME-ecn against NAME shows what the short
# path spares (ECN adds its own few bytes: `ecn.rx`, the CE/ECT checks). The report ends with
# that comparison.
# The runs set RSSTACK_HUGE_BOX=off: the TCBs are then heap blocks of their own, as DHAT
# needs, instead of slots of huge-page chunks (`platform::huge_box`); layout is the same.
# Builds into target/hot-bytes (CARGO_PROFILE_RELEASE_DEBUG=2) so the release build of the
# other scripts is left alone. Output files in $BENCH_OUT (default target/hot-bytes/out).
set -euo pipefail
cd "$(dirname "$0")/.."
E1="${1:-2000}"
E2="${2:-6000}"
B1="${3:-2M}"
B2="${4:-6M}"
if ! [[ "$E1" =~ ^[0-9]+$ && "$E2" =~ ^[0-9]+$ ]] || [ "$E2" -le "$E1" ]; then
  echo "usage: scripts/bench-hot-bytes.sh [E1 E2 B1 B2] (exchanges E1 < E2; bytes B1 < B2, suffixes k/M)" >&2
  exit 2
fi
export CARGO_TARGET_DIR="${HOT_BYTES_TARGET_DIR:-$PWD/target/hot-bytes}"
for tool in valgrind gdb python3; do
  command -v "$tool" >/dev/null || { echo "$tool is missing" >&2; exit 1; }
done
CARGO_PROFILE_RELEASE_DEBUG=2 cargo build --quiet --release -p bench --bin scale_conns --bin rsstack_bulk
BIN="$CARGO_TARGET_DIR/release"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/out}"
mkdir -p "$OUT"

dhat() { # OUTFILE BINARY ARGS... ; prints the program's stdout
  local out="$1"
  shift
  # TCBs as heap blocks of their own, which DHAT watches (not in huge-page chunks:
  # platform::huge_box).
  RSSTACK_HUGE_BOX=off valgrind --tool=dhat --dhat-out-file="$out" "$@" 2>"$out.log"
}
field() { # KEY LINE
  sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"
}

specs=()
for variant in rr rr-ecn; do
  extra=()
  [ "$variant" = rr-ecn ] && extra=(--ecn)
  for e in "$E1" "$E2"; do
    dhat "$OUT/$variant.$e.json" "$BIN/scale_conns" 1 --exchanges "$e" --runs 1 --no-memory "${extra[@]}" >"$OUT/$variant.$e.txt"
  done
  specs+=("$variant (per exchange, one segment in and one out at each end):$OUT/$variant.$E1.json:$OUT/$variant.$E2.json:$((E2 - E1))")
done
for variant in bulk bulk-ecn; do
  extra=()
  [ "$variant" = bulk-ecn ] && extra=(--ecn)
  a="$(dhat "$OUT/$variant.$B1.json" "$BIN/rsstack_bulk" "$B1" "${extra[@]}")"
  b="$(dhat "$OUT/$variant.$B2.json" "$BIN/rsstack_bulk" "$B2" "${extra[@]}")"
  echo "$a" >"$OUT/$variant.$B1.txt"
  echo "$b" >"$OUT/$variant.$B2.txt"
  segs=$(($(field data_segments "$b") - $(field data_segments "$a")))
  if [ "$segs" -le 0 ]; then
    echo "bulk: no more data segments with $B2 than with $B1 (B1 < B2 needed)" >&2
    exit 2
  fi
  acks=$(($(field frames_to_client "$b") - $(field frames_to_client "$a")))
  specs+=("$variant (per data segment; active = sender, passive = receiver):$OUT/$variant.$B1.json:$OUT/$variant.$B2.json:$segs:$acks")
done
python3 scripts/hot-bytes.py "$BIN/scale_conns" "${specs[@]}" | tee "$OUT/report.txt"
