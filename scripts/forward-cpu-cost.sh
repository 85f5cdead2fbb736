#!/usr/bin/env bash
# Where the DUT's time goes: CPU time per forwarded 64-byte frame on the DUT's CPU, for Linux
# `ip_forward` and `rsstack forward` (AF_PACKET with the transmit ring, AF_PACKET with one
# send(2) per frame, AF_XDP), on the veths of scripts/rfc2544-compare.sh (same CPUs, same
# RPS). A wall-clock rate on a shared machine measures the share of the CPU the DUT got; this
# measures what each forwarded frame cost.
#
# Per mode: the DUT starts (rsstack without --busy-poll, so its thread's samples are work,
# not spinning); `perf record -e cpu-clock -C $DUT_CPU` samples the DUT's CPU for 3 s with no
# test traffic (the baseline), then for 3 s in the middle of one 6 s trial in which the tester
# offers 64-byte frames at $RATE_FPS (default 60,000 a second, below what every DUT forwards
# here; the frames of the window are taken as half of the trial's).
# Samples of the router thread are rsstack's (its user code and the system calls it makes:
# the transmit path's skb building and veth_xmit); samples of other tasks whose call chain is
# in the softirq or NAPI (net_rx_action, process_backlog, veth_poll, handle_softirqs,
# ksoftirqd, napi/...) are the kernel's receive and forwarding work; other processes' own
# samples are ignored. Other load on the same CPU has softirqs too (its network traffic,
# timers): the baseline is subtracted from both counts, which are divided by the frames the
# tester received back in the window (`fwd` is the whole trial's; well below `sent` means the
# DUT was overloaded and its drops are charged to the forwarded frames: lower RATE_FPS). The
# kernel column is only as good as the CPU is quiet: other network traffic on the DUT's CPU
# during the window is counted as the DUT's.
# Root only; needs perf.
#
# Usage: scripts/forward-cpu-cost.sh [MODE...]   (default: linux afp afp-send xdp)
# Environment: TESTER_CPU (0), DUT_CPU (1), RATE_FPS (60000), RSSTACK_BIN (default
# target/ci/rsstack, built).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "forward-cpu-cost: needs root" >&2; exit 2; fi
command -v perf >/dev/null || { echo "forward-cpu-cost: needs perf" >&2; exit 2; }
TESTER_CPU=${TESTER_CPU:-0}
DUT_CPU=${DUT_CPU:-1}
RATE_FPS=${RATE_FPS:-60000}
TRIAL_SECS=6
IDLE_SECS=3
WINDOW_SECS=3
SAMPLE_HZ=4000
BIN=${RSSTACK_BIN:-target/ci/rsstack}
if [ -z "${RSSTACK_BIN:-}" ]; then cargo build --quiet --profile ci -p cli || exit 1; fi
MODES=("$@")
[ ${#MODES[@]} -gt 0 ] || MODES=(linux afp afp-send xdp)
for m in "${MODES[@]}"; do
  case $m in linux|afp|afp-send|xdp) ;; *) echo "unknown mode $m (linux afp afp-send xdp)" >&2; exit 2;; esac
done
WORK=$(mktemp -d)
T=fwdcost-t-$$
R=fwdcost-r-$$
FWD_PID=
cleanup() {
  if [ -n "$FWD_PID" ]; then kill -TERM "$FWD_PID" 2>/dev/null; wait "$FWD_PID" 2>/dev/null; fi
  ip netns del "$T" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

setup() {
  ip netns add "$T"; ip netns add "$R"
  ip link add t0 netns "$T" type veth peer name r0 netns "$R"
  ip link add t1 netns "$T" type veth peer name r1 netns "$R"
  for ns in "$T" "$R"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  for d in t0 t1; do ip -n "$T" link set "$d" up; done
  for d in r0 r1; do ip -n "$R" link set "$d" up; done
  ip netns exec "$R" sh -c "printf '%x' $((1 << DUT_CPU)) > /sys/class/net/r0/queues/rx-0/rps_cpus"
  ip netns exec "$T" sh -c "printf '%x' $((1 << TESTER_CPU)) > /sys/class/net/t1/queues/rx-0/rps_cpus"
}

napi_r0_pids() { ps -e -o pid=,comm= | awk '$2 ~ /^napi\/r0-/ {print $1}' | sort; }

router() { # io, extra args
  local io=$1; shift
  ip netns exec "$R" "$BIN" forward --io "$io" --port r0 --ip 10.80.1.1/24 --port r1 \
    --ip 10.80.2.1/24 --cores "$DUT_CPU" --live-every 0 "$@" >"$WORK/dut.txt" 2>&1 &
  FWD_PID=$!
  for _ in $(seq 100); do grep -q "forwarding between" "$WORK/dut.txt" && break; sleep 0.1; done
}

record() { # file, seconds
  perf record -q -e cpu-clock -F "$SAMPLE_HZ" -C "$DUT_CPU" -g -o "$1" -- sleep "$2" \
    >/dev/null 2>&1
}

# Samples of a recording: router thread, kernel network work (see the header), all.
classify() {
  perf script -i "$1" -F comm,ip,sym 2>/dev/null | awk '
    BEGIN { RS = ""; FS = "\n" }
    { n++; split($1, h, " "); comm = h[1]; net = 0
      for (i = 2; i <= NF; i++)
        if ($i ~ /net_rx_action|process_backlog|__napi_poll|veth_poll|napi_threaded_poll|handle_softirqs|__do_softirq/) { net = 1; break }
      if (comm ~ /^router-shard/) r++
      else if (net || comm ~ /^(napi\/|ksoftirqd)/) k++ }
    END { printf "%d %d %d\n", r, k, n }'
}

printf '%-9s %9s %9s %8s %7s %7s %7s %7s %12s %10s %10s\n' mode sent fwd samples router \
  router0 kernel kernel0 us_per_frame router_us kernel_us
for m in "${MODES[@]}"; do
  setup
  case $m in
    linux)
      ip -n "$R" addr add 10.80.1.1/24 dev r0
      ip -n "$R" addr add 10.80.2.1/24 dev r1
      ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1 ;;
    afp) router af_packet ;;
    afp-send) router af_packet --tx-send-per-frame ;;
    xdp)
      router af_xdp
      before=$(napi_r0_pids)
      ip netns exec "$R" sh -c 'echo 1 > /sys/class/net/r0/threaded'
      for p in $(comm -13 <(echo "$before") <(napi_r0_pids)); do taskset -pc "$DUT_CPU" "$p" >/dev/null; done ;;
  esac
  sleep 1
  record "$WORK/idle.data" "$IDLE_SECS"
  read -r r_idle k_idle _ < <(classify "$WORK/idle.data")
  ip netns exec "$T" taskset -c "$TESTER_CPU" "$BIN" rfc2544 --io af_packet --tx-port t0 \
    --rx-port t1 --src-ip 10.80.1.2 --dst-ip 10.80.2.2 --gateway 10.80.1.1 --sizes 64 \
    --trial-secs "$TRIAL_SECS" --rate-fps "$RATE_FPS" >"$WORK/tester.txt" 2>&1 &
  TESTER=$!
  sleep 2
  record "$WORK/busy.data" "$WINDOW_SECS"
  wait "$TESTER"
  if [ -n "$FWD_PID" ]; then kill -TERM "$FWD_PID"; wait "$FWD_PID"; FWD_PID=; fi
  ip netns del "$T"; ip netns del "$R"
  read -r r_busy k_busy n_busy < <(classify "$WORK/busy.data")
  # "lost L of S": the tester sent S frames and received S - L back through the DUT.
  read -r lost sent < <(sed -n 's/.*lost \([0-9]*\) of \([0-9]*\).*/\1 \2/p' "$WORK/tester.txt")
  awk -v m="$m" -v sent="${sent:-0}" -v fwd=$(( ${sent:-0} - ${lost:-0} )) -v hz="$SAMPLE_HZ" \
    -v rb="$r_busy" -v kb="$k_busy" -v n="$n_busy" -v ri="$r_idle" -v ki="$k_idle" \
    -v share="$WINDOW_SECS/$TRIAL_SECS" 'BEGIN {
      r = rb - ri; k = kb - ki; if (r < 0) r = 0; if (k < 0) k = 0
      split(share, q, "/"); us = 1e6 / hz; f = fwd * q[1] / q[2]; if (f < 1) f = 1
      printf "%-9s %9d %9d %8d %7d %7d %7d %7d %12.2f %10.2f %10.2f\n", m, sent, fwd, n, rb,
        ri, kb, ki, (r + k) * us / f, r * us / f, k * us / f }'
done
