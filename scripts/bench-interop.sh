#!/usr/bin/env bash
# Benchmarks of rsstack against real Linux peers (issue 5, item 5). Not run in CI: the figures
# are reported, not asserted. Needs root, and the tools scripts/test.sh installs (wrk, iperf,
# nginx, ethtool, iproute2).
#
# In one run, on the same namespace layout as the interop tests (crates/cli/tests/common) and
# the same core budget (the server side on CPU $SERVER_CPU, the Linux client on $CLIENT_CPU;
# receive packet steering puts each side's kernel receive work on its own CPU too):
#   1. wrk requests/s against `rsstack serve http` vs nginx serving the same file;
#   2. iperf2 throughput into `rsstack serve discard` vs into the Linux kernel (iperf -s);
#   3. rsstack over AF_PACKET (TPACKET_V2 and TPACKET_V3 rings) vs AF_XDP vs TAP (the same
#      wrk and iperf runs), as ratios;
#   4. ping round trips (min/avg, 200 pings 5 ms apart) to each server, before its iperf run.
#
# Environment: RSSTACK (binary; default: build `cargo build --release -p cli`), DURATION_S
# (wrk and iperf run length, default 10), CONNECTIONS (wrk, default 100), FILE_BYTES (the
# served file, default 1024), SERVER_CPU / CLIENT_CPU (default 1 / 0).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION_S=${DURATION_S:-10}
CONNECTIONS=${CONNECTIONS:-100}
FILE_BYTES=${FILE_BYTES:-1024}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
PEER_V4=10.77.0.1
DUT_V4=10.77.0.2
DUT_MAC=02:72:73:00:00:02
TAG="rsst-bench-$$"
PEER_NS="$TAG-peer"
DUT_NS="$TAG-dut"
WORK=$(mktemp -d "/tmp/$TAG.XXXX")
PIDS=()

[ "$(id -u)" = 0 ] || { echo "bench-interop.sh needs root (network namespaces)" >&2; exit 2; }
for tool in wrk iperf nginx ip ethtool taskset timeout ping; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 2; }
done

cleanup() {
  local pid ns
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for pid in "${PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for ns in "$PEER_NS" "$DUT_NS"; do
    if ip netns list | grep -q "^$ns\b"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

if [ -z "${RSSTACK:-}" ]; then
  cargo build --release --quiet -p cli
  RSSTACK="${CARGO_TARGET_DIR:-target}/release/rsstack"
fi
[ -x "$RSSTACK" ] || { echo "no rsstack binary at $RSSTACK" >&2; exit 2; }

mkdir -p "$WORK/site"
head -c "$FILE_BYTES" /dev/urandom > "$WORK/site/file.bin"

# --- layouts ---------------------------------------------------------------------------------

# Receive Packet Steering: the kernel's receive work for frames arriving on NS's DEV runs on
# CPU (not on the sender's CPU, where a veth or TAP transmit would otherwise leave it), so the
# server side's kernel work stays on $SERVER_CPU and the client's on $CLIENT_CPU.
rps() {
  local ns=$1 dev=$2 cpu=$3 q
  for q in $(ip netns exec "$ns" sh -c "ls -d /sys/class/net/$dev/queues/rx-*"); do
    ip netns exec "$ns" sh -c "printf '%x' $((1 << cpu)) > $q/rps_cpus"
  done
}

# veth: the Linux client in $PEER_NS on veth0; veth1 in $DUT_NS, bare (rsstack) or with the
# kernel address (nginx, iperf -s).
setup_veth() {
  local kernel_dut=$1
  teardown
  ip netns add "$PEER_NS"
  ip netns add "$DUT_NS"
  ip link add veth0 netns "$PEER_NS" type veth peer name veth1 netns "$DUT_NS"
  ip -n "$PEER_NS" link set lo up
  ip -n "$DUT_NS" link set lo up
  ip netns exec "$DUT_NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  ip netns exec "$DUT_NS" sysctl -qw net.ipv6.conf.veth1.disable_ipv6=1
  ip -n "$PEER_NS" addr add "$PEER_V4/24" dev veth0
  if [ "$kernel_dut" = kernel ]; then
    ip -n "$DUT_NS" addr add "$DUT_V4/24" dev veth1
  fi
  ip -n "$PEER_NS" link set veth0 up
  ip -n "$DUT_NS" link set veth1 up
  rps "$PEER_NS" veth0 "$CLIENT_CPU"
  rps "$DUT_NS" veth1 "$SERVER_CPU"
}

# TAP: one namespace; the kernel side of tap0 is the client, rsstack attaches to it.
setup_tap() {
  teardown
  ip netns add "$PEER_NS"
  ip -n "$PEER_NS" link set lo up
  ip -n "$PEER_NS" tuntap add dev tap0 mode tap multi_queue
  ip -n "$PEER_NS" addr add "$PEER_V4/24" dev tap0
  ip -n "$PEER_NS" link set tap0 up
  rps "$PEER_NS" tap0 "$CLIENT_CPU"
}

teardown() {
  local ns pid
  stop_server
  for ns in "$PEER_NS" "$DUT_NS"; do
    if ip netns list | grep -q "^$ns\b"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns del "$ns"
    fi
  done
}

# --- servers ---------------------------------------------------------------------------------

SERVER_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    timeout 15 tail --pid="$SERVER_PID" -f /dev/null 2>/dev/null || kill -KILL "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}

# start_rsstack NS IO_ARGS... -- APP_ARGS...: runs rsstack on $SERVER_CPU, waits for `listening`.
start_rsstack() {
  local ns=$1; shift
  local log="$WORK/rsstack.log"
  : > "$log"
  ip netns exec "$ns" taskset -c "$SERVER_CPU" "$RSSTACK" "$@" \
    --ip "$DUT_V4/24" --mac "$DUT_MAC" --shards 1 >"$log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 300); do
    grep -q listening "$log" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "rsstack $* did not start:" >&2
  cat "$log" >&2
  SERVER_PID=
  return 1
}

start_nginx() {
  mkdir -p "$WORK/nginx/logs"
  cat > "$WORK/nginx/nginx.conf" <<EOF
user root;
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/nginx;
  proxy_temp_path $WORK/nginx;
  fastcgi_temp_path $WORK/nginx;
  uwsgi_temp_path $WORK/nginx;
  scgi_temp_path $WORK/nginx;
  server { listen $DUT_V4:80; root $WORK/site; }
}
EOF
  ip netns exec "$DUT_NS" taskset -c "$SERVER_CPU" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
    >"$WORK/nginx/out.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 100); do
    ip netns exec "$DUT_NS" ss -Hltn "sport = :80" | grep -q . && return 0
    sleep 0.1
  done
  echo "nginx did not start" >&2; cat "$WORK/nginx/"*.log >&2; return 1
}

start_iperf_server() {
  ip netns exec "$DUT_NS" taskset -c "$SERVER_CPU" iperf -s -p 5001 >"$WORK/iperf-s.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 100); do
    ip netns exec "$DUT_NS" ss -Hltn "sport = :5001" | grep -q . && return 0
    sleep 0.1
  done
  echo "iperf -s did not start" >&2; return 1
}

# --- clients ---------------------------------------------------------------------------------

# Prints requests/s, or 0 when wrk failed; errors go to stderr.
wrk_rps() {
  local out
  out=$(timeout $((DURATION_S + 30)) ip netns exec "$PEER_NS" taskset -c "$CLIENT_CPU" \
    wrk -c "$CONNECTIONS" -d "${DURATION_S}s" -t 2 "http://$DUT_V4/file.bin" 2>&1) || true
  if grep -q "Socket errors\|Non-2xx" <<<"$out"; then
    grep "Socket errors\|Non-2xx" <<<"$out" | sed 's/^ */  wrk: /' >&2
  fi
  awk '/^Requests\/sec:/ { print $2; found=1 } END { if (!found) print 0 }' <<<"$out"
}

# Prints Mbit/s, or 0 when iperf failed.
iperf_mbps() {
  local out
  out=$(timeout $((DURATION_S + 30)) ip netns exec "$PEER_NS" taskset -c "$CLIENT_CPU" \
    iperf -c "$DUT_V4" -p 5001 -t "$DURATION_S" -y C 2>&1) || true
  awk -F, 'NF >= 9 { v = $9 } END { printf "%.1f\n", (v == "" ? 0 : v / 1e6) }' <<<"$out"
}

# Prints "min/avg" round-trip milliseconds of 200 pings, or "n/a".
ping_rtt() {
  local out
  out=$(timeout 30 ip netns exec "$PEER_NS" taskset -c "$CLIENT_CPU" \
    ping -c 200 -i 0.005 -q "$DUT_V4" 2>&1) || true
  awk -F'[/ =]+' '/^rtt/ { printf "%s/%s\n", $6, $7; found=1 } END { if (!found) print "n/a" }' <<<"$out"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# --- runs ------------------------------------------------------------------------------------

declare -A RPS MBPS RTT

bench_rsstack() {
  local name=$1; shift
  local setup=$1; shift
  local ns=$1; shift
  $setup
  if start_rsstack "$ns" serve http --dir "$WORK/site" --port 80 "$@"; then
    RPS[$name]=$(wrk_rps)
  else
    RPS[$name]=0
  fi
  stop_server
  if start_rsstack "$ns" serve discard --port 5001 "$@"; then
    RTT[$name]=$(ping_rtt)
    MBPS[$name]=$(iperf_mbps)
  else
    RTT[$name]=n/a
    MBPS[$name]=0
  fi
  stop_server
  echo "  $name: ${RPS[$name]} requests/s, ${MBPS[$name]} Mbit/s, ping min/avg ${RTT[$name]} ms" >&2
}

echo "== bench-interop: ${DURATION_S}s runs, wrk -c $CONNECTIONS -t 2 on a ${FILE_BYTES}-byte file," \
  "server on CPU $SERVER_CPU, client on CPU $CLIENT_CPU, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)," \
  "rsstack $(git rev-parse --short HEAD 2>/dev/null || echo '?') ($RSSTACK)" >&2

setup_veth kernel
start_nginx && RPS[nginx]=$(wrk_rps) || RPS[nginx]=0
stop_server
RTT[linux]=$(ping_rtt)
start_iperf_server && MBPS[linux]=$(iperf_mbps) || MBPS[linux]=0
stop_server
echo "  linux: nginx ${RPS[nginx]} requests/s, iperf -s ${MBPS[linux]} Mbit/s, ping min/avg ${RTT[linux]} ms" >&2

bench_rsstack af_packet_v2 "setup_veth bare" "$DUT_NS" --iface veth1 --io af_packet --af-packet-ring v2
bench_rsstack af_packet_v3 "setup_veth bare" "$DUT_NS" --iface veth1 --io af_packet --af-packet-ring v3
bench_rsstack af_xdp "setup_veth bare" "$DUT_NS" --iface veth1 --io af_xdp
bench_rsstack tap setup_tap "$PEER_NS" --tap tap0
teardown

printf '\n%-34s %14s %14s %16s\n' "" "requests/s" "Mbit/s" "ping min/avg ms"
printf '%-34s %14s %14s %16s\n' "Linux (nginx / iperf -s), veth" "${RPS[nginx]}" "${MBPS[linux]}" "${RTT[linux]}"
for b in af_packet_v2 af_packet_v3 af_xdp tap; do
  printf '%-34s %14s %14s %16s\n' "rsstack, $b" "${RPS[$b]}" "${MBPS[$b]}" "${RTT[$b]}"
done
printf '\n%-34s %14s %14s\n' "ratios" "requests/s" "Mbit/s"
printf '%-34s %14s %14s\n' "rsstack af_packet_v2 / Linux" "$(ratio "${RPS[af_packet_v2]}" "${RPS[nginx]}")" \
  "$(ratio "${MBPS[af_packet_v2]}" "${MBPS[linux]}")"
printf '%-34s %14s %14s\n' "rsstack af_packet v2 / v3" "$(ratio "${RPS[af_packet_v2]}" "${RPS[af_packet_v3]}")" \
  "$(ratio "${MBPS[af_packet_v2]}" "${MBPS[af_packet_v3]}")"
printf '%-34s %14s %14s\n' "rsstack af_xdp / af_packet_v2" "$(ratio "${RPS[af_xdp]}" "${RPS[af_packet_v2]}")" \
  "$(ratio "${MBPS[af_xdp]}" "${MBPS[af_packet_v2]}")"
printf '%-34s %14s %14s\n' "rsstack tap / af_packet_v2" "$(ratio "${RPS[tap]}" "${RPS[af_packet_v2]}")" \
  "$(ratio "${MBPS[tap]}" "${MBPS[af_packet_v2]}")"
