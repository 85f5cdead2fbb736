#!/usr/bin/env bash
# Seed 002 Figures 7 and 8 in memory (crates/bench/src/offload_bulk.rs): a host sends
# 1,460-byte messages over N connections, K of them on the offload engine ("OS N-K // NIC K").
#
#   scripts/bench-offload.sh [PACKETS=20000] ["N:K N:K ..."] [BINARY]
#
# Each run also lasts at least TURNS_MIN measured turns (environment, default 0): with host
# and engine connections side by side the shares settle over several turns.
#
# Each setting runs once under callgrind with the host's and the engine's turns selected
# (--toggle-collect on measured_host_turn and measured_engine_turn; setup, handshakes,
# handoffs and the warm-up are outside them), and callgrind_annotate's inclusive counts of the
# two functions are divided by the TCP packets the system sent and received in the measured
# turns (seed Figure 7's normalisation). The command kinds per 1,000 packets (Figure 8) come
# from the binary's own line. glibc's rep-string thresholds are raised as in
# bench-callgrind.sh (valgrind counts each rep iteration). BINARY defaults to this tree's
# release build (pass a saved binary to compare two trees side by side).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKETS="${1:-20000}"
SETTINGS="${2:-1:0 1:1 256:0 256:256 512:256 1024:0 1024:256}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-offload}"
mkdir -p "$OUT"
BIN="${3:-}"
if [ -z "$BIN" ]; then
  cargo build --quiet --release -p bench --bin offload_bulk
  BIN="$CARGO_TARGET_DIR/release/offload_bulk"
fi
TUNABLES="glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295"

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
incl() { # incl FILE FUNCTION
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk -v f="$2" 'index($0, f) && /^ *[0-9,]+ / && !done { gsub(",", "", $1); print $1; done = 1 }' || true
}

printf '%-12s %9s %9s %13s %15s %10s %10s %10s %10s %10s %10s\n' \
  'OS//NIC' packets engine% host_instr/pkt engine_instr/pkt cmds/pkt send/pkt ack/pkt recv/pkt resource/pkt host_frames/pkt
for s in $SETTINGS; do
  n="${s%%:*}" k="${s##*:}"
  cg="$OUT/callgrind.$n-$k.out"
  line="$(GLIBC_TUNABLES="$TUNABLES" valgrind --tool=callgrind --callgrind-out-file="$cg" \
    --toggle-collect='*measured_host_turn*' --toggle-collect='*measured_engine_turn*' \
    "$BIN" "$n" --offloaded "$k" --packets "$PACKETS" --turns-min "${TURNS_MIN:-0}" --warmup-turns 200 2>"$OUT/valgrind.$n-$k.log")"
  echo "$line" >"$OUT/line.$n-$k.txt"
  p="$(field packets "$line")"
  ep="$(field engine_packets "$line")"
  hi="$(incl "$cg" measured_host_turn)"
  ei="$(incl "$cg" measured_engine_turn)"
  awk -v n="$n" -v k="$k" -v p="$p" -v ep="$ep" -v hi="${hi:-0}" -v ei="${ei:-0}" \
    -v c="$(field commands_per_kpkt "$line")" -v sd="$(field send_per_kpkt "$line")" \
    -v a="$(field ack_per_kpkt "$line")" -v rv="$(field recv_per_kpkt "$line")" \
    -v r="$(field resource_per_kpkt "$line")" \
    -v ht="$(field host_tx_per_kpkt "$line")" -v hr="$(field host_rx_per_kpkt "$line")" \
    'BEGIN { printf "%-12s %9d %8.0f%% %13.0f %15.0f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n",
      (n - k) "//" k, p, 100 * ep / p, hi / p, (ep > 0 ? ei / ep : 0), c / 1000, sd / 1000, a / 1000, rv / 1000, r / 1000, (ht + hr) / 1000 }'
done
echo "(host_instr/pkt: the host's turns over every TCP packet of the system; engine_instr/pkt:"
echo " the engine's turns over the packets it received and sent; per-kind columns are commands"
echo " per TCP packet of the system, both directions)"
