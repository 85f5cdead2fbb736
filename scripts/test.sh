#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script).
# Installs what it needs when it is missing, so it works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Variables the tests read that change what they run: inherited from a developer's shell they
# would make a green run claim more than it checked. SIM_SEED replaces the soak's 1,000+ seeds
# with the ones it names; UPDATE_OUTCOMES rewrites the outcome snapshot instead of comparing
# against it (and passes); PROPTEST_* change the case count, shrinking and failure persistence;
# RSSTACK_BIN points the interop tests at another binary than the one built here; SIM_DEBUG and
# SIM_TRACE_PORT add tracing to the simulator. (`grep -rn 'env::var' crates` finds them; keep
# this list in step.) RSSTACK_REQUIRE_ROOT_TESTS is not cleared: it only makes tests stricter.
unset SIM_SEED UPDATE_OUTCOMES RSSTACK_BIN SIM_DEBUG SIM_TRACE_PORT
for var in $(compgen -e | grep '^PROPTEST_' || true); do
  unset "$var"
done

step() { printf '\n== %s\n' "$*"; }

step "toolchain components"
for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
    rustup component add "$component"
  fi
done

step "system packages"
# Real peers and tools the interop tests use (crates/cli/tests/interop_*.rs): one
# "command package" pair per line. Installed only when the command is missing, without
# prompts; nginx is only a benchmark peer, so its service is never started here.
missing=()
while read -r cmd pkg; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done <<'PACKAGES'
tshark tshark
ip iproute2
ping iputils-ping
curl curl
wrk wrk
tcpdump tcpdump
iperf iperf
socat socat
nc netcat-openbsd
iptables iptables
ethtool ethtool
tcpreplay tcpreplay
python3 python3
nginx nginx-light
PACKAGES
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    # No service may start from a package's install script (nginx would bind port 80 here).
    policy_rc_created=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      policy_rc_created=1
    fi
    install_status=0
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
      install_status=$?
    [ "$policy_rc_created" = 0 ] || rm -f /usr/sbin/policy-rc.d
    [ "$install_status" = 0 ] || { echo "installing ${missing[*]} failed" >&2; exit "$install_status"; }
  else
    echo "missing ${missing[*]} and not root: the tests that need them will not run" >&2
  fi
fi

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "fuzz targets compile"
cargo check --manifest-path fuzz/Cargo.toml --bins --quiet

step "tests"
# Tests that need root (TAP devices, network namespaces) must run, not pass vacuously, in CI.
if [ "${CI:-}" = "true" ] || [ "$(id -u)" = 0 ]; then
  export RSSTACK_REQUIRE_ROOT_TESTS=1
fi
cargo test --workspace --locked --profile ci --no-fail-fast

step "conformance (Google's whole packetdrill suite; fails when a script listed in crates/conformance/PASSING stops passing)"
cargo run --quiet --locked --profile ci -p cli -- conformance crates/conformance/corpus/packetdrill-google-all \
  --profile linux-compat --expect-passing crates/conformance/PASSING
