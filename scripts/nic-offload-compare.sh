#!/usr/bin/env bash
# `--nic-offload all` against `none` (issue 18 item 1): a bulk `rsstack ttcp send` into a
# Linux `socat` sink, over a TAP (the namespace's kernel is the peer) or over a veth with
# AF_PACKET or AF_XDP (the peer in a second namespace). Runs alternate on/off, side by side,
# RUNS times each; prints per run the frames rsstack handed the kernel, its TSO frames (the
# kernel's or, over AF_XDP, the NIC model's), the throughput and rsstack's CPU cycles per
# byte (process CPU time, user and system: steadier than throughput on a shared machine),
# then the medians and the on/off ratios. Every run checks the sink is
# byte-exact (the ttcp pattern). Root only; not part of the CI test command.
#
# Usage: scripts/nic-offload-compare.sh [tap|af_packet|af_xdp] [BYTES] [RUNS]
#        (default: tap 256M 3; RSSTACK_BIN picks the binary, default target/release/rsstack)
set -euo pipefail
cd "$(dirname "$0")/.."

BACKEND=${1:-tap}
BYTES=${2:-256M}
RUNS=${3:-3}
case "$BACKEND" in tap | af_packet | af_xdp) ;; *)
  echo "nic-offload-compare: backend is tap, af_packet or af_xdp, not '$BACKEND'" >&2
  exit 2
  ;;
esac
if ! [[ "$RUNS" =~ ^[1-9][0-9]?$ ]]; then
  echo "nic-offload-compare: RUNS is 1 to 99, not '$RUNS'" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then echo "nic-offload-compare: needs root (namespaces)" >&2; exit 2; fi
for t in socat python3; do
  command -v "$t" >/dev/null || { echo "nic-offload-compare: needs $t" >&2; exit 2; }
done
BIN=${RSSTACK_BIN:-target/release/rsstack}
if [ -z "${RSSTACK_BIN:-}" ]; then cargo build --quiet --release -p cli; fi

TAG="nofc$$"
PEER="${TAG}p"
DUT="${TAG}d"
WORK=$(mktemp -d)
cleanup() {
  ip netns del "$PEER" 2>/dev/null || true
  ip netns del "$DUT" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$PEER"
ip -n "$PEER" link set lo up
if [ "$BACKEND" = tap ]; then
  DUT=$PEER
  ip -n "$PEER" tuntap add dev tap0 mode tap multi_queue
  ip -n "$PEER" addr add 10.77.0.1/24 dev tap0
  ip -n "$PEER" link set tap0 up
  IO=(--tap tap0)
else
  ip netns add "$DUT"
  ip link add veth0 netns "$PEER" type veth peer name veth1 netns "$DUT"
  ip -n "$PEER" addr add 10.77.0.1/24 dev veth0
  ip -n "$PEER" link set veth0 up
  ip netns exec "$DUT" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  ip -n "$DUT" link set veth1 up
  IO=(--iface veth1 --io "$BACKEND")
fi

# The expected sink: the ttcp pattern (byte i is i % 251) over BYTES.
python3 - "$BYTES" "$WORK/want.bin" <<'PY'
import sys
t = sys.argv[1].upper()
mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1], 1)
n = int(t[:-1] if t[-1] in "KMG" else t) * mult
block = bytes(i % 251 for i in range(251 * 4096))
with open(sys.argv[2], "wb") as f:
    while n > 0:
        k = min(n, len(block))
        f.write(block[:k])
        n -= k
PY

run() { # $1: offload setting; prints "frames tso_frames mbps cycles_per_byte"
  rm -f "$WORK/sink.bin"
  ip netns exec "$PEER" socat -u TCP-LISTEN:5001,reuseaddr "OPEN:$WORK/sink.bin,creat,trunc" &
  local sink=$!
  for _ in $(seq 100); do
    ip netns exec "$PEER" ss -Hltn 'sport = :5001' | grep -q . && break
    sleep 0.05
  done
  local out
  out=$(ip netns exec "$DUT" "$BIN" ttcp send --to 10.77.0.1:5001 --bytes "$BYTES" \
    --nic-offload "$1" --counters "${IO[@]}" --ip 10.77.0.2/24 --mac 02:72:73:00:00:02)
  wait "$sink"
  cmp -s "$WORK/sink.bin" "$WORK/want.bin" || { echo "run $1: the sink is not byte-exact" >&2; exit 1; }
  local frames tso mbps
  frames=$(awk '$1 == "tx_frames:" {print $2}' <<<"$out")
  tso=$(awk '$1 == "tx_tso_frames:" {print $2 + 0}' <<<"$out")
  nic_tso=$(awk '$1 == "nic_tso_sends:" {print $2 + 0}' <<<"$out")
  mbps=$(awk '$1 == "throughput_Mbps:" {print $2}' <<<"$out")
  cpb=$(awk '$1 == "cycles_per_byte:" {print $2}' <<<"$out")
  # Over TAP/AF_PACKET the NIC model counts the requests it passes to the kernel too.
  echo "$frames $((tso > nic_tso ? tso : nic_tso)) $mbps $cpb"
}

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "backend $BACKEND, $BYTES per run, $RUNS runs each, alternating"
printf '%-5s %-4s %10s %10s %10s %10s\n' run mode frames tso Mbit/s cyc/byte
: >"$WORK/on" && : >"$WORK/off"
for i in $(seq "$RUNS"); do
  for mode in all none; do
    r=$(run "$mode")
    printf '%-5s %-4s %10s %10s %10s %10s\n' "$i" "$mode" $r
    echo "$r" >>"$WORK/$([ "$mode" = all ] && echo on || echo off)"
  done
done
on_frames=$(awk '{print $1}' "$WORK/on" | median)
off_frames=$(awk '{print $1}' "$WORK/off" | median)
on_mbps=$(awk '{print $3}' "$WORK/on" | median)
off_mbps=$(awk '{print $3}' "$WORK/off" | median)
echo "median frames: on $on_frames, off $off_frames ($(awk -v a="$on_frames" -v b="$off_frames" 'BEGIN {printf "%.1f", 100 * (1 - a / b)}') % fewer with offloads)"
echo "median throughput: on $on_mbps Mbit/s, off $off_mbps Mbit/s (ratio $(awk -v a="$on_mbps" -v b="$off_mbps" 'BEGIN {printf "%.2f", a / b}'))"
on_cpb=$(awk '{print $4}' "$WORK/on" | median)
off_cpb=$(awk '{print $4}' "$WORK/off" | median)
echo "median cycles per byte: on $on_cpb, off $off_cpb (off/on $(awk -v a="$on_cpb" -v b="$off_cpb" 'BEGIN {printf "%.2f", b / a}'))"
