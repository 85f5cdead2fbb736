#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while: scripts/fuzz.sh [SECONDS_PER_TARGET] [PARALLEL]
# Needs a nightly toolchain (cargo-fuzz builds with sanitizers); installs cargo-fuzz if missing.
# Logs go to fuzz/logs/<target>.log; a crash leaves its input in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
parallel=${2:-2}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
mkdir -p fuzz/logs
targets=$(cargo +nightly fuzz list)
cargo +nightly fuzz build >/dev/null
status=0
run_one() {
  local t=$1
  if cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
      >"fuzz/logs/$t.log" 2>&1; then
    echo "ok    $t $(grep -Eo '#[0-9]+.*DONE.*' "fuzz/logs/$t.log" | tail -n1)"
  else
    echo "CRASH $t (see fuzz/logs/$t.log)"
    return 1
  fi
}
export -f run_one
export seconds
printf '%s\n' $targets | xargs -P "$parallel" -I{} bash -c 'run_one {}' || status=1
exit $status
