#!/usr/bin/env bash
# RFC 2544 through a forwarding namespace: Linux `ip_forward` vs `rsstack forward`, on the
# same veths and the same core budget (issue 16 item 4). Root only; not part of the CI test
# command (a full run takes a few minutes); `--smoke` runs two frame sizes with short trials.
#
#   [tester ns] t0 ──veth── r0 [forwarding ns] r1 ──veth── t1 [tester ns]
#    10.80.1.2                10.80.1.1   10.80.2.1                10.80.2.2
#
# One `rsstack rfc2544` process owns both tester ports (AF_PACKET; generator on t0, receiver on
# t1; neither has a kernel address). The DUT is either the forwarding namespace's kernel
# (addresses on r0/r1, net.ipv4.ip_forward=1) or `rsstack forward` on r0/r1 (no kernel
# addresses, ip_forward=0, --busy-poll: the DUT core spins, as a DPDK router does), once per
# I/O backend in $DUT_IOS (default `af_packet af_xdp`). Core budget: the tester is pinned to
# CPU $TESTER_CPU, the DUT to CPU $DUT_CPU: rsstack with --cores, the kernel through RPS on r0
# (the forwarding softirq of frames arriving on r0 runs on $DUT_CPU); RPS on r0 applies to
# rsstack on AF_PACKET too (the copy into its ring runs there). With AF_XDP the XDP program
# runs in r0's NAPI poll, which veth schedules on the *sender's* CPU: the script turns r0's
# NAPI threaded and pins its thread to $DUT_CPU, so that work stays in the DUT's budget too.
# RPS on t1 sends the receive side's kernel work back to the tester's CPU, for every DUT
# alike.
#
# First series, `wire`: no router, r0's ingress redirected to r1 by a tc mirred action (the
# kernel's cheapest path between two veths): the tester's own ceiling, to show it outpaces
# every DUT (the generator sends through a TPACKET_V2 transmit ring, one send(2) per burst).
#
# Usage: scripts/rfc2544-compare.sh [--smoke] [RESULTS_DIR]   (default results/rfc2544-DATE)
# Environment: TESTER_CPU, DUT_CPU, DUT_IOS, SIZES, TRIAL_SECS, RESOLUTION_PCT, RSSTACK_BIN.
# Writes wire.json, linux.json, rsstack-<io>.json, table.txt, plot.svg and
# rsstack-forward-<io>.txt there.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; shift; fi
OUT=${1:-results/rfc2544-$(date +%Y%m%d-%H%M%S)}
TESTER_CPU=${TESTER_CPU:-0}
DUT_CPU=${DUT_CPU:-1}
if [ "$(id -u)" != 0 ]; then echo "rfc2544-compare: needs root (namespaces, veths)" >&2; exit 2; fi
BIN=${RSSTACK_BIN:-target/ci/rsstack}
if [ -z "${RSSTACK_BIN:-}" ]; then cargo build --quiet --profile ci -p cli; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ "$SMOKE" = 1 ]; then
  ARGS=(--sizes 64,1518 --trial-secs 0.3 --resolution-pct 10)
else
  ARGS=(--trial-secs "${TRIAL_SECS:-1}" --resolution-pct "${RESOLUTION_PCT:-2}")
fi
# SIZES=64,1518 (say) runs only those frame sizes.
if [ -n "${SIZES:-}" ]; then ARGS+=(--sizes "$SIZES"); fi

DUT_IOS=${DUT_IOS:-af_packet af_xdp}
T=rfc2544-t-$$
R=rfc2544-r-$$
FWD_PID=
cleanup() {
  if [ -n "$FWD_PID" ]; then kill -TERM "$FWD_PID" 2>/dev/null && wait "$FWD_PID" 2>/dev/null || true; fi
  ip netns del "$T" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$T"
ip netns add "$R"
ip link add t0 netns "$T" type veth peer name r0 netns "$R"
ip link add t1 netns "$T" type veth peer name r1 netns "$R"
for ns in "$T" "$R"; do
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
for d in t0 t1; do ip -n "$T" link set "$d" up; done
for d in r0 r1; do ip -n "$R" link set "$d" up; done
mask=$(printf '%x' $((1 << DUT_CPU)))
tmask=$(printf '%x' $((1 << TESTER_CPU)))
ip netns exec "$R" sh -c "echo $mask > /sys/class/net/r0/queues/rx-0/rps_cpus"
ip netns exec "$T" sh -c "echo $tmask > /sys/class/net/t1/queues/rx-0/rps_cpus"

tester() { # label, extra args...
  local label=$1; shift
  ip netns exec "$T" taskset -c "$TESTER_CPU" "$BIN" rfc2544 --io af_packet --tx-port t0 --rx-port t1 \
    --src-ip 10.80.1.2 --dst-ip 10.80.2.2 --gateway 10.80.1.1 --label "$label" \
    --json "$OUT/$label.json" "${ARGS[@]}" "$@"
}

echo "== (0) wire: tc mirred r0 -> r1, no router (the tester's ceiling)"
ip netns exec "$R" tc qdisc add dev r0 clsact
ip netns exec "$R" tc filter add dev r0 ingress protocol all u32 match u32 0 0 \
  action mirred egress redirect dev r1
R0_MAC=$(ip netns exec "$R" cat /sys/class/net/r0/address)
tester wire --dut-mac "$R0_MAC" | tee "$OUT/wire-table.txt"
ip netns exec "$R" tc qdisc del dev r0 clsact

echo "== (a) Linux ip_forward in the middle (DUT CPU $DUT_CPU via RPS)"
ip -n "$R" addr add 10.80.1.1/24 dev r0
ip -n "$R" addr add 10.80.2.1/24 dev r1
ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1
tester linux | tee "$OUT/linux-table.txt"
ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=0
ip -n "$R" addr flush dev r0
ip -n "$R" addr flush dev r1

# Pins the NAPI threads of r0 (threaded mode) to the DUT's CPU; prints how many it pinned.
# Threaded NAPI kthreads are named napi/<dev>-<napi id> and live in the initial namespace, so
# ours are the ones that appear when r0 turns threaded.
napi_r0_pids() { ps -e -o pid=,comm= | awk '$2 ~ /^napi\/r0-/ {print $1}' | sort; }
pin_r0_napi() {
  local before n=0 pid
  before=$(napi_r0_pids)
  ip netns exec "$R" sh -c 'echo 1 > /sys/class/net/r0/threaded'
  for pid in $(comm -13 <(echo "$before") <(napi_r0_pids)); do
    taskset -pc "$DUT_CPU" "$pid" >/dev/null && n=$((n + 1))
  done
  echo "$n"
}

COMPARE=(--compare "$OUT/wire.json" --compare "$OUT/linux.json")
LAST=
for io in $DUT_IOS; do
  if [ -n "$LAST" ]; then COMPARE+=(--compare "$OUT/$LAST.json"); fi
  label=rsstack-${io//_/-}
  echo "== (b) rsstack forward --io $io in the middle (pinned to CPU $DUT_CPU)"
  ip netns exec "$R" "$BIN" forward --io "$io" --port r0 --ip 10.80.1.1/24 --port r1 \
    --ip 10.80.2.1/24 --cores "$DUT_CPU" --busy-poll --live-every 0 \
    >"$OUT/rsstack-forward-$io.txt" 2>&1 &
  FWD_PID=$!
  for _ in $(seq 100); do
    grep -q "forwarding between" "$OUT/rsstack-forward-$io.txt" && break
    sleep 0.1
  done
  if [ "$io" = af_xdp ]; then
    echo "pinned $(pin_r0_napi) r0 NAPI thread(s) to CPU $DUT_CPU"
  fi
  tester "$label" "${COMPARE[@]}" --svg "$OUT/plot.svg" | tee "$OUT/table.txt"
  kill -TERM "$FWD_PID"; wait "$FWD_PID" || true; FWD_PID=
  ip netns exec "$R" sh -c 'echo 0 > /sys/class/net/r0/threaded' 2>/dev/null || true
  echo "== rsstack forward's summary: $OUT/rsstack-forward-$io.txt"
  grep -E '^(forwarded|drops_total|drop_no_neighbour|drops_io|drop_rx_kernel|tx_kicks|tx_ring_full|forwarded_per_s):' \
    "$OUT/rsstack-forward-$io.txt" || true
  LAST=$label
done
echo "== results in $OUT (table.txt, plot.svg, *.json)"
