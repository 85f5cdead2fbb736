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

/// Which connections [`ports_steered_to`] looks for: `client:p → server:server_port` with `p`
/// in `range`, landing on `server_queue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SteeredPortsQuery {
    /// The client's address (the packets' source).
    pub client: IpAddr,
    /// The server's address (the packets' destination).
    pub server: IpAddr,
    /// The server's port.
    pub server_port: u16,
    /// The server queue the connections must land on.
    pub server_queue: u16,
    /// Client ports to scan, in order.
    pub range: RangeInclusive<u16>,
}

/// Up to `count` client ports whose connections the *server's* RSS (`hasher`, `reta`) steers
/// to `q.server_queue`, each in a RETA entry of its own (so that moving entries can spread
/// them): how a load generator places a skewed load on one server queue on purpose. In
/// ascending port order.
pub fn ports_steered_to(
    hasher: &RssHasher,
    reta: &Reta,
    q: &SteeredPortsQuery,
    count: usize,
) -> Vec<u16> {
    let (client, server, server_port, server_queue) =
        (q.client, q.server, q.server_port, q.server_queue);
    let mut entries = Vec::new();
    let mut ports = Vec::with_capacity(count.min(q.range.len()));
    for port in q.range.clone() {
        if ports.len() >= count {
            break;
        }
        let p = Some(PortPair {
            src: port,
            dst: server_port,
        });
        let input = match (client, server) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => HashInput::V4 { src, dst, ports: p },
            (IpAddr::V6(src), IpAddr::V6(dst)) => HashInput::V6 { src, dst, ports: p },
            _ => return Vec::new(),
        };
        let hash = hasher.hash(&input);
        let entry = reta.index_for_hash(hash);
        if reta.queue_for_hash(hash) == server_queue && !entries.contains(&entry) {
            entries.push(entry);
            ports.push(port);
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn steered_ports_land_on_the_queue_in_distinct_entries() {
        let hasher = RssHasher::default();
        let reta = Reta::with_equal(128, 4).expect("valid");
        let (c, s) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
        let q = SteeredPortsQuery {
            client: c.into(),
            server: s.into(),
            server_port: 80,
            server_queue: 0,
            range: 20_000..=40_000,
        };
        let ports = ports_steered_to(&hasher, &reta, &q, 8);
        assert_eq!(ports.len(), 8);
        let mut entries = Vec::new();
        for &p in &ports {
            let input = HashInput::V4 {
                src: c,
                dst: s,
                ports: Some(PortPair { src: p, dst: 80 }),
            };
            let h = hasher.hash(&input);
            assert_eq!(reta.queue_for_hash(h), 0);
            entries.push(reta.index_for_hash(h));
        }
        entries.dedup();
        assert_eq!(entries.len(), 8, "{entries:?}");
    }
}
