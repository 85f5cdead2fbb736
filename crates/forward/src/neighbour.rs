//! Next-hop MAC resolution: the interface the forwarder asks, and a plain table for tests and
//! static set-ups.
//!
//! The forwarder does not queue packets for an unresolved neighbour: it drops the packet
//! (counted `no_neighbour`) and calls [`Neighbours::request`] so the caller's ARP/ND starts
//! resolving. This is the choice of most software routers' fast paths (VPP's "glean", DPDK's
//! l3fwd): a queue would need a copy or a held receive buffer per waiting packet, and a flood
//! towards an unresolvable next hop would pin buffers; a drop bounds both at zero, and the
//! first packets of a new flow are the only cost. The caller's resolver (the stack's
//! neighbour cache) deduplicates and bounds its own requests.
use core::net::IpAddr;
use std::collections::BTreeMap;

use wire::EthernetAddress;

/// The neighbour cache the forwarder consults, per egress port.
///
/// Called once per forwarded packet: implementations must not allocate in `lookup` and
/// should be cheap (a hash or ordered map, or an array indexed by next hop).
pub trait Neighbours {
    /// The MAC of `addr` on the link of `port`, when resolved and fresh at `now_ns`.
    fn lookup(&mut self, now_ns: u64, port: u16, addr: IpAddr) -> Option<EthernetAddress>;

    /// A packet needed `addr` on `port` and found no MAC: start resolving it (ARP request,
    /// neighbour solicitation). Called for every such packet; deduplicating requests already
    /// in flight is the implementation's job.
    fn request(&mut self, now_ns: u64, port: u16, addr: IpAddr);
}

/// A static neighbour table: entries never expire; requests are recorded (bounded) so a test
/// or a control loop can answer them.
#[derive(Debug, Clone, Default)]
pub struct NeighbourTable {
    entries: BTreeMap<(u16, IpAddr), EthernetAddress>,
    /// Distinct `(port, addr)` asked for and not yet taken. Invariant: ≤ `requests_max`.
    requests: Vec<(u16, IpAddr)>,
    requests_max: usize,
    /// Requests not recorded: duplicates of one already pending, or the record was full.
    requests_dropped: u64,
}

impl NeighbourTable {
    /// An empty table recording up to `requests_max` pending requests (reserved up front, so
    /// recording never allocates).
    pub fn new(requests_max: usize) -> NeighbourTable {
        NeighbourTable {
            entries: BTreeMap::new(),
            requests: Vec::with_capacity(requests_max),
            requests_max,
            requests_dropped: 0,
        }
    }

    /// Sets `addr` on `port` to `mac`; clears a pending request for it.
    pub fn insert(&mut self, port: u16, addr: IpAddr, mac: EthernetAddress) {
        self.entries.insert((port, addr), mac);
        self.requests.retain(|&r| r != (port, addr));
    }

    pub fn remove(&mut self, port: u16, addr: IpAddr) -> Option<EthernetAddress> {
        self.entries.remove(&(port, addr))
    }

    /// The pending requests, oldest first, emptied.
    pub fn take_requests(&mut self) -> Vec<(u16, IpAddr)> {
        core::mem::take(&mut self.requests)
    }

    /// Requests pending now.
    pub fn requests(&self) -> &[(u16, IpAddr)] {
        &self.requests
    }

    /// Requests not recorded (already pending, or the record full).
    pub fn requests_dropped(&self) -> u64 {
        self.requests_dropped
    }
}

impl Neighbours for NeighbourTable {
    fn lookup(&mut self, _now_ns: u64, port: u16, addr: IpAddr) -> Option<EthernetAddress> {
        self.entries.get(&(port, addr)).copied()
    }

    fn request(&mut self, _now_ns: u64, port: u16, addr: IpAddr) {
        if self.requests.len() >= self.requests_max || self.requests.contains(&(port, addr)) {
            self.requests_dropped += 1;
        } else {
            self.requests.push((port, addr));
        }
    }
}
