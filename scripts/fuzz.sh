#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while: scripts/fuzz.sh [SECONDS_PER_TARGET] [PARALLEL] [TARGET...]
#
# Works on the stable toolchain: targets are built with `--sanitizer none` (libFuzzer's
# coverage instrumentation through -Cpasses=sancov-module and -Cllvm-args, which stable rustc
# accepts; AddressSanitizer needs -Zsanitizer, i.e. nightly, and is not needed for safe Rust)
# and with debug assertions and overflow checks on (-a). Installs cargo-fuzz if missing.
# With a nightly toolchain, FUZZ_FLAGS="--sanitizer address" brings ASan back.
#
# Targets: the eight header parsers, handoff_decode, and the stateful ones — live_tcp (two
# stacks with a live connection under a program of faults, forged segments and application
# calls), sim_faults (the whole simulator from a chosen seed and fault schedule), reassembly
# (IPv4/IPv6 fragments) and packetdrill_parse (the script parser, seeded with the corpus).
# Each stateful target has a seeded stand-in in the test suite running the same body.
#
# Logs go to fuzz/logs/<target>.log (the last line of each is summarised: runs, execs/s,
# coverage); a crash leaves its input in fuzz/artifacts/<target>/ and fails the script.
# Reproduce one with: cargo fuzz run --sanitizer none -O -a TARGET fuzz/artifacts/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
parallel=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
flags=${FUZZ_FLAGS:---sanitizer none}
case "$seconds$parallel" in
  *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [PARALLEL] [TARGET...]" >&2; exit 2 ;;
esac
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
mkdir -p fuzz/logs
if [ $# -gt 0 ]; then
  targets="$*"
else
  targets=$(cargo fuzz list)
fi
# shellcheck disable=SC2086
cargo fuzz build $flags -O -a >/dev/null
run_one() {
  local t=$1
  local corpus=(fuzz/corpus/"$t")
  mkdir -p "${corpus[0]}"
  local extra=()
  case "$t" in
    # The parser's seeds: every script of the packetdrill corpus.
    packetdrill_parse) corpus+=(crates/conformance/corpus) ;;
    # A whole simulation per input (tens of ms to seconds): a 24-byte input names the
    # workload, seed and every fault, so inputs are full length from the start instead of
    # growing from 4 bytes, and a run of several seconds is expected, not reported as slow.
    sim_faults) extra=(-len_control=0 -max_len=32 -report_slow_units=60) ;;
  esac
  # shellcheck disable=SC2086
  if nice -n 10 cargo fuzz run $flags -O -a "$t" "${corpus[@]}" -- "${extra[@]}" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=120 -print_final_stats=1 \
      >"fuzz/logs/$t.log" 2>&1; then
    local runs execs cov
    runs=$(grep -Eo '^stat::number_of_executed_units: *[0-9]+' "fuzz/logs/$t.log" | grep -Eo '[0-9]+$' || echo '?')
    execs=$(grep -Eo '^stat::average_exec_per_sec: *[0-9]+' "fuzz/logs/$t.log" | grep -Eo '[0-9]+$' || echo '?')
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "fuzz/logs/$t.log" | tail -n1 || echo '?')
    echo "ok    $t: $runs runs in ${seconds}s, $execs execs/s, $cov"
  else
    echo "CRASH $t (see fuzz/logs/$t.log; input in fuzz/artifacts/$t/)"
    return 1
  fi
}
export -f run_one
export seconds flags
status=0
printf '%s\n' $targets | xargs -P "$parallel" -I{} bash -c 'run_one {}' || status=1
exit $status
