#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script).
# Installs what it needs when it is missing, so it works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "toolchain components"
for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
    rustup component add "$component"
  fi
done

step "system packages"
# Real peers and tools the interop tests use. Installed only when missing.
missing=()
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
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

step "conformance (packetdrill corpus; fails when fewer scripts pass than crates/conformance/PASSING records)"
cargo run --quiet --locked --profile ci -p cli -- conformance ../shared/conformance/packetdrill-google \
  --profile linux-compat --min-passed "$(tr -dc '0-9' < crates/conformance/PASSING)"
