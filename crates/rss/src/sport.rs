//! Source-port selection for active opens: pick a local port whose *reply* traffic hashes to
//! the queue of the opening shard, so the connection's packets come home without a
//! cross-shard hop (the DPDK/Seastar habit of drawing ports until the hash fits).

use core::net::IpAddr;
use core::ops::RangeInclusive;

use crate::input::{HashInput, PortPair, RssHasher};
use crate::reta::Reta;

/// What an active open knows when it picks its source port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcePortQuery {
    /// Our address (the reply's destination).
    pub local: IpAddr,
    /// The peer's address (the reply's source).
    pub remote: IpAddr,
    /// The peer's port (the reply's source port).
    pub remote_port: u16,
    /// Queue the reply must land on.
    pub wanted_queue: u16,
    /// Ports we may use (e.g. the ephemeral range `49152..=65535`, RFC 6335 §6).
    pub range: RangeInclusive<u16>,
    /// Where to start scanning (e.g. a per-shard cursor or a hashed offset, RFC 6056 §3.3);
    /// clamped to the range start when outside it.
    pub start_hint: u16,
}

/// Scans `query.range` from `start_hint`, wrapping once, for a port `p` not `in_use` such that
/// the reply packet `remote:remote_port → local:p` hashes (4-tuple, with `hasher`'s key and
/// symmetric mode) to an entry of `reta` that names `wanted_queue`.
///
/// Work is bounded by the range size (≤ 65,536 hashes). Returns `None` when no port fits:
/// the range is empty, every fitting port is in use, no RETA entry names the queue, or the
/// addresses are of different families. Only meaningful when the protocol's 4-tuple hash
/// type is enabled (otherwise the port does not influence the queue).
pub fn pick_source_port(
    query: &SourcePortQuery,
    reta: &Reta,
    hasher: &RssHasher,
    in_use: impl Fn(u16) -> bool,
) -> Option<u16> {
    let (first, last) = (*query.range.start(), *query.range.end());
    if first > last || !reta.entries().contains(&query.wanted_queue) {
        return None;
    }
    let count_ports = u32::from(last) - u32::from(first) + 1;
    let offset = if query.range.contains(&query.start_hint) {
        u32::from(query.start_hint - first)
    } else {
        0
    };
    let reply_for = |port: u16| -> Option<HashInput> {
        let ports = Some(PortPair {
            src: query.remote_port,
            dst: port,
        });
        match (query.remote, query.local) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => Some(HashInput::V4 { src, dst, ports }),
            (IpAddr::V6(src), IpAddr::V6(dst)) => Some(HashInput::V6 { src, dst, ports }),
            _ => None,
        }
    };
    for step in 0..count_ports {
        // first + ((offset + step) mod count) ≤ last ≤ u16::MAX: the conversion cannot fail.
        let port = u16::try_from(u32::from(first) + (offset + step) % count_ports).ok()?;
        if in_use(port) {
            continue;
        }
        let input = reply_for(port)?;
        if reta.queue_for_hash(hasher.hash(&input)) == query.wanted_queue {
            return Some(port);
        }
    }
    None
}
