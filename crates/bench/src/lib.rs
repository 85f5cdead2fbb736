//! Benchmarks of issue 3: instructions per data segment and wall throughput of a bulk transfer
//! between two [`stack::Stack`]s over a perfect in-memory link, and memory per connection
//! (the TCB's size and the heap footprint of idle established connections).
//!
//! The library holds the rsstack side of every harness so the binaries, the callgrind script
//! and the tests share one implementation:
//!
//! - [`bulk`]: two stacks back to back, one client streaming N bytes to a server that reads
//!   everything; counts data segments (frames carrying TCP payload) and measures wall time of
//!   the transfer loop only ([`bulk::bulk_transfer_loop`], the function callgrind's
//!   `--toggle-collect` selects);
//! - [`shard_bulk`]: the same transfer between two shard cores (`shard::Shard`): NIC model,
//!   NAPI poll, stack, application API and events — the per-segment cost of the whole shard
//!   path ([`shard_bulk::shard_transfer_loop`]);
//! - [`idle`]: many established, idle connections between two stacks, for heap measurements;
//! - [`short`]: one request/response connection after another (handshake, buffers, teardown),
//!   counted in [`short::short_connections_loop`];
//! - [`tcb`]: `size_of` of the engine's state and the part of it touched on every segment;
//! - [`pattern`] and [`frame`]: the payload pattern with its stream hash, and the frame
//!   parser that tells data segments apart (shared with the smoltcp harness in
//!   `examples/smoltcp_bulk`).
//!
//! The smoltcp peer is a dev-dependency (issue 3), so its harness lives in
//! `examples/smoltcp_bulk/harness.rs` and is tested from `tests/`.
//!
//! This crate is a harness: unlike the sans-IO crates it reads the wall clock.
#![deny(unsafe_code)]

pub mod bulk;
pub mod frame;
pub mod idle;
pub mod moves;
pub mod offload_bulk;
pub mod pattern;
pub mod scale;
pub mod shard_bulk;
pub mod short;
pub mod tcb;

/// Parses a byte count with an optional binary or decimal suffix: `10M` = 10,000,000,
/// `10MiB` = 10,485,760, `1G`, `512k`, or a plain number.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let n: u64 = digits.replace('_', "").parse().ok()?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_suffixes() {
        assert_eq!(parse_bytes("1460"), Some(1460));
        assert_eq!(parse_bytes("10M"), Some(10_000_000));
        assert_eq!(parse_bytes("100MB"), Some(100_000_000));
        assert_eq!(parse_bytes("1MiB"), Some(1 << 20));
        assert_eq!(parse_bytes("1_000"), Some(1000));
        assert_eq!(parse_bytes("12x"), None);
        assert_eq!(parse_bytes(""), None);
    }
}
