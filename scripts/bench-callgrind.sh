#!/usr/bin/env bash
# Instruction-count benchmark of issue 3: a bulk transfer between two rsstack stacks and,
# side by side, between two smoltcp interfaces, each over a perfect in-memory link, counted
# by valgrind's callgrind; then a plain wall-clock run of each.
#
#   scripts/bench-callgrind.sh [BYTES] [WALL_BYTES]
#
# BYTES (default 10M) is what each callgrind run transfers; WALL_BYTES (default 100M) what
# the wall-clock runs transfer. Suffixes: k, M, G (decimal), KiB, MiB, GiB.
#
# What is counted: only the transfer loop (`bench::bulk::bulk_transfer_loop` and
# `smoltcp_transfer_loop`), selected with callgrind's --toggle-collect, so building the
# stacks, ARP, the handshake and buffer allocation are excluded. Inside the loop everything
# is counted: both stacks (sender and receiver), the application's send/recv copies, frame
# allocation, and the harness's few instructions per frame to count data segments.
# Instructions per segment = Ir of the loop / data segments (frames carrying TCP payload).
#
# Configurations (each stack's MSS is 1460, buffers 256 KiB):
#   rsstack        rsstack defaults: timestamps on (1448-byte payload), software checksums
#   rsstack-shard  the same transfer between two shard cores (crates/shard): the NIC model
#                  (checksum verification, moderation off, no coalescing), NAPI poll, stack
#                  (trusting the NIC's checksum verdicts: each checksum verified once),
#                  application API and events, and a copy of every frame into the receiver's
#                  buffer (the link as DMA): the whole per-shard path
#   rsstack-nots   timestamps off: like-for-like with smoltcp's defaults
#   smoltcp        smoltcp 0.12 defaults: no timestamps, software checksums
#   *-offload      both checksums left to the "NIC" (neither filled nor verified)
# The ratio compares rsstack-nots with smoltcp (and the offload pair), measured in this run.
#
# glibc's memcpy/memset switch to `rep movsb`/`rep stosb` above a size threshold, and
# valgrind counts every iteration of a rep-prefixed instruction as one instruction: a
# 1448-byte copy would count ~1448 "instructions" or ~90, depending on a threshold glibc
# derives from the cache sizes. The runs below raise both thresholds out of reach
# (GLIBC_TUNABLES), so copies are counted as the vector loops they are otherwise;
# BENCH_KEEP_ERMS=1 keeps glibc's choice.
set -euo pipefail
cd "$(dirname "$0")/.."

BYTES="${1:-10M}"
WALL_BYTES="${2:-100M}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-callgrind}"
mkdir -p "$OUT"

if ! command -v valgrind >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
  else
    echo "valgrind is missing and we are not root: install it (apt-get install valgrind)" >&2
    exit 1
  fi
fi

# The release profile keeps line tables (debug = 1), which callgrind_annotate uses.
cargo build --quiet --release -p bench --bin rsstack_bulk --example smoltcp_bulk
RS="$CARGO_TARGET_DIR/release/rsstack_bulk"
SM="$CARGO_TARGET_DIR/release/examples/smoltcp_bulk"

field() { # field NAME LINE
  sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"
}

# Only the callgrind runs get these; the wall-clock runs keep glibc's own choice.
CG_TUNABLES="${GLIBC_TUNABLES:-}"
if [ "${BENCH_KEEP_ERMS:-0}" != 1 ]; then
  CG_TUNABLES="glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295"
fi

declare -A IR SEGS ACKS BYTES_DONE
rows=()

# run_cg NAME BINARY LOOP_FUNCTION ARGS...
run_cg() {
  local name="$1" bin="$2" func="$3"
  shift 3
  local cg="$OUT/callgrind.$name.out"
  local line
  line="$(GLIBC_TUNABLES="$CG_TUNABLES" valgrind --tool=callgrind --callgrind-out-file="$cg" --toggle-collect="*$func*" \
    "$bin" "$BYTES" "$@" 2>"$OUT/valgrind.$name.log")"
  local ir
  ir="$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$cg")"
  if [ -z "$ir" ]; then
    ir="$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$cg")"
  fi
  IR[$name]="$ir"
  SEGS[$name]="$(field data_segments "$line")"
  ACKS[$name]="$(field frames_to_client "$line")"
  BYTES_DONE[$name]="$(field bytes "$line")"
  rows+=("$name")
}

run_cg rsstack "$RS" bulk_transfer_loop
run_cg rsstack-shard "$RS" shard_transfer_loop --shard
run_cg rsstack-nots "$RS" bulk_transfer_loop --no-timestamps
run_cg smoltcp "$SM" smoltcp_transfer_loop
run_cg rsstack-offload "$RS" bulk_transfer_loop --offload
run_cg rsstack-nots-offload "$RS" bulk_transfer_loop --no-timestamps --offload
run_cg smoltcp-offload "$SM" smoltcp_transfer_loop --offload

per_seg() { awk -v ir="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", ir / s; else print "n/a" }'; }

echo
echo "== callgrind: instructions (Ir) in the transfer loop, $BYTES per run"
printf '%-22s %12s %14s %10s %16s %14s\n' stack bytes data_segments acks instructions \
  instr/segment
for r in "${rows[@]}"; do
  printf '%-22s %12s %14s %10s %16s %14s\n' "$r" "${BYTES_DONE[$r]}" "${SEGS[$r]}" \
    "${ACKS[$r]}" "${IR[$r]}" "$(per_seg "${IR[$r]}" "${SEGS[$r]}")"
done
echo "(acks: frames server -> client; each stack's receiver decides how often it acknowledges)"
ratio() {
  awk -v a="${IR[$1]}" -v sa="${SEGS[$1]}" -v b="${IR[$2]}" -v sb="${SEGS[$2]}" \
    'BEGIN { if (sa > 0 && sb > 0 && b > 0) printf "%.2f", (a / sa) / (b / sb); else print "n/a" }'
}
echo
echo "ratio rsstack-nots / smoltcp (instructions per segment):                 $(ratio rsstack-nots smoltcp)"
echo "ratio rsstack / smoltcp (rsstack with its default timestamps):            $(ratio rsstack smoltcp)"
echo "ratio rsstack-nots-offload / smoltcp-offload (no checksums either side):   $(ratio rsstack-nots-offload smoltcp-offload)"
echo "ratio rsstack-shard / rsstack (the whole shard path over the bare stacks):  $(ratio rsstack-shard rsstack)"

echo
echo "== top 5 functions by self Ir (callgrind_annotate, inlined parts summed per function)"
top5() { # top5 FILE [NAME_PREFIX_REGEX_TO_EXCLUDE]
  local exclude="${2:-}"
  callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null |
    awk '
      /PROGRAM TOTALS/ { next }
      /^ *[0-9][0-9,]* \(/ {
        ir = $1; gsub(",", "", ir)
        line = $0; sub(/^ *[0-9,]+ \( *[0-9.]+%\) +/, "", line); sub(/ \[[^]]*\]$/, "", line)
        i = index(line, ":"); fn = substr(line, i + 1)
        sum[fn] += ir; total += ir
      }
      END { for (f in sum) printf "%14d %5.1f%%  %s\n", sum[f], 100 * sum[f] / total, f }' |
    if [ -n "$exclude" ]; then grep -Ev "^ *[0-9]+ +[0-9.]+%  ($exclude)"; else cat; fi |
    sort -rn | awk 'NR <= 5'
}
for r in rsstack smoltcp rsstack-offload smoltcp-offload; do
  echo "-- $r"
  top5 "$OUT/callgrind.$r.out"
  echo "   without libc (memcpy, malloc, free, memset):"
  top5 "$OUT/callgrind.$r.out" '__mem|_int_|malloc|free|cfree|realloc'
done

echo
WALL_RUNS="${BENCH_WALL_RUNS:-3}"
echo "== wall clock, $WALL_BYTES per run, one core (virtual transfer, both stacks on one thread);"
echo "   best of $WALL_RUNS runs (the machine is shared: the best run is the least disturbed)"
for args in "rsstack:$RS:" "rsstack-shard:$RS:--shard" "rsstack-nots:$RS:--no-timestamps" "smoltcp:$SM:" \
  "rsstack-offload:$RS:--offload" "smoltcp-offload:$SM:--offload"; do
  IFS=: read -r name bin flag <<<"$args"
  best=""
  best_ns=""
  for _ in $(seq "$WALL_RUNS"); do
    # shellcheck disable=SC2086
    line="$("$bin" "$WALL_BYTES" $flag)"
    ns="$(field wall_ns "$line")"
    if [ -z "$best_ns" ] || [ "$ns" -lt "$best_ns" ]; then
      best="$line"
      best_ns="$ns"
    fi
  done
  printf '%-22s %8s Gbit/s  (%s bytes, %s data segments, %s ns)\n' "$name" \
    "$(field gbit_per_s "$best")" "$(field bytes "$best")" "$(field data_segments "$best")" \
    "$best_ns"
done
echo
echo "callgrind profiles: $OUT/callgrind.*.out (callgrind_annotate FILE)"
