//! The neighbour cache shared by ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861).
//!
//! One bounded table keyed by IP address. An entry is either *incomplete* (requests in flight,
//! a capped queue of packets waiting for the answer) or *reachable* (a MAC and an expiry).
//! The table is a `BTreeMap`, so every walk over it (timers, eviction) runs in address order
//! and behaviour never depends on hashing.
//!
//! The cache itself never builds a packet: [`NeighborCache::handle_timeout`] reports what the
//! stack must send or drop.

use core::net::IpAddr;
use std::collections::{BTreeMap, VecDeque};

use wire::EthernetAddress;

/// A packet parked until its next hop resolves: the EtherType and the IP packet bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPacket {
    pub ethertype: wire::EtherType,
    pub ip_packet: Vec<u8>,
}

#[derive(Debug)]
enum State {
    /// Invariant: `pending.len()` ≤ the cache's `pending_max`; `requests_sent` ≥ 1.
    Incomplete {
        requests_sent: u8,
        next_request_ns: u64,
        pending: VecDeque<PendingPacket>,
    },
    Reachable {
        mac: EthernetAddress,
        expires_ns: u64,
        /// A unicast refresh request went out for this entry (see [`NeighborCache::lookup_for_send`]).
        refresh_sent: bool,
        /// Before this instant negative advice about this entry is ignored (see
        /// [`NeighborCache::advise_unreachable`]): `retry_ns` after it was learnt or last
        /// re-validated, so advice sends at most one request per `retry_ns` per neighbour.
        revalidate_after_ns: u64,
    },
}

/// What [`NeighborCache::lookup_or_queue`] did with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The neighbour is known: send the packet to this MAC now.
    Known(EthernetAddress),
    /// The packet was queued and a new entry was created: send the first request now.
    QueuedSendRequest,
    /// The packet was queued behind a request already in flight.
    Queued,
    /// The per-neighbour queue was full: the packet was dropped.
    DroppedQueueFull,
    /// Every entry is unresolved and none could be evicted: the packet was dropped.
    DroppedCacheFull,
}

/// What a timeout asks the stack to do.
#[derive(Debug, Default)]
pub struct TimeoutActions {
    /// Addresses to send another request for.
    pub retry: Vec<IpAddr>,
    /// Addresses that gave up, with the number of packets dropped.
    pub failed: Vec<(IpAddr, usize)>,
    /// Resolved entries that expired.
    pub expired: usize,
}

/// Bounded neighbour cache. See the module documentation.
#[derive(Debug)]
pub struct NeighborCache {
    entries: BTreeMap<IpAddr, State>,
    /// The last answer of [`NeighborCache::lookup_for_send`] that asked for no refresh:
    /// `(addr, mac, valid_until_ns)`, served again without the tree walk while `now <
    /// valid_until_ns` (a TCP flow sends every segment to one neighbour). Invariant: while
    /// set, `entries[addr]` is `Reachable` with this `mac`, and `valid_until_ns` is no later
    /// than its expiry, nor than the instant its refresh falls due if none was sent — so a
    /// hit answers exactly what the walk would. Every method that may replace, insert or
    /// remove an entry clears it (expiry needs no clearing: the bound covers it).
    last_send: Option<(IpAddr, EthernetAddress, u64)>,
    /// Invariant: `entries.len()` ≤ `entries_max`.
    entries_max: usize,
    pending_max: usize,
    reachable_ns: u64,
    retry_ns: u64,
    requests_max: u8,
}

impl NeighborCache {
    pub fn new(
        entries_max: usize,
        pending_max: usize,
        reachable_ns: u64,
        retry_ns: u64,
        requests_max: u8,
    ) -> Self {
        NeighborCache {
            entries: BTreeMap::new(),
            last_send: None,
            entries_max: entries_max.max(1),
            pending_max,
            reachable_ns,
            retry_ns,
            requests_max: requests_max.max(1),
        }
    }

    /// Number of entries (resolved or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The MAC of a resolved, unexpired neighbour.
    pub fn lookup(&self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        match self.entries.get(&addr) {
            Some(State::Reachable {
                mac, expires_ns, ..
            }) if *expires_ns > now => Some(*mac),
            _ => None,
        }
    }

    /// The MAC to send a packet to, and whether a unicast refresh request should go out now:
    /// an entry in use within `refresh_before_ns` of its expiry is re-validated once
    /// (RFC 1122 §2.3.2.1 unicast poll, RFC 4861 §7.3.3 probe) so a busy flow never falls into
    /// the queue-and-resolve path when the entry times out.
    #[inline]
    pub fn lookup_for_send(&mut self, now: u64, addr: IpAddr) -> Option<(EthernetAddress, bool)> {
        if let Some((a, mac, valid_until_ns)) = self.last_send {
            if a == addr && now < valid_until_ns {
                return Some((mac, false));
            }
        }
        self.lookup_for_send_walk(now, addr)
    }

    /// The MAC [`NeighborCache::lookup_for_send`] would answer for `addr` at `now` from its
    /// remembered last answer, with no refresh due; `None` when that answer is not
    /// remembered or no longer valid (ask `lookup_for_send`). Changes nothing.
    #[inline]
    pub(crate) fn cached_for_send(&self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        match self.last_send {
            Some((a, mac, valid_until_ns)) if a == addr && now < valid_until_ns => Some(mac),
            _ => None,
        }
    }

    /// [`NeighborCache::lookup_for_send`] through the tree; remembers an answer that asked
    /// for no refresh, until the entry's refresh falls due or it expires.
    fn lookup_for_send_walk(&mut self, now: u64, addr: IpAddr) -> Option<(EthernetAddress, bool)> {
        let refresh_before_ns = self.retry_ns.saturating_mul(u64::from(self.requests_max));
        match self.entries.get_mut(&addr) {
            Some(State::Reachable {
                mac,
                expires_ns,
                refresh_sent,
                ..
            }) if *expires_ns > now => {
                let due = !*refresh_sent && *expires_ns - now <= refresh_before_ns;
                if due {
                    *refresh_sent = true;
                }
                // Valid while neither the refresh falls due (`expires − now ≤
                // refresh_before`) nor the entry expires.
                let valid_until_ns = if *refresh_sent {
                    *expires_ns
                } else {
                    *expires_ns - refresh_before_ns
                };
                self.last_send = (!due).then_some((addr, *mac, valid_until_ns));
                Some((*mac, due))
            }
            _ => {
                self.last_send = None;
                None
            }
        }
    }

    /// True when an entry (of either kind) exists for `addr`.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.entries.contains_key(&addr)
    }

    /// Returns the MAC for `addr`, or parks `packet` until it resolves. Counts nothing; the
    /// caller counts by the returned variant.
    pub fn lookup_or_queue(
        &mut self,
        now: u64,
        addr: IpAddr,
        packet: PendingPacket,
    ) -> (Resolution, bool) {
        self.last_send = None;
        let mut evicted = false;
        match self.entries.get_mut(&addr) {
            Some(State::Reachable {
                mac, expires_ns, ..
            }) if *expires_ns > now => {
                return (Resolution::Known(*mac), false);
            }
            Some(State::Incomplete { pending, .. }) => {
                if pending.len() >= self.pending_max {
                    return (Resolution::DroppedQueueFull, false);
                }
                pending.push_back(packet);
                return (Resolution::Queued, false);
            }
            Some(State::Reachable { .. }) => {
                // Expired but not yet swept: resolve again below.
                self.entries.remove(&addr);
            }
            None => {}
        }
        if self.entries.len() >= self.entries_max {
            if !self.evict_one() {
                return (Resolution::DroppedCacheFull, false);
            }
            evicted = true;
        }
        let mut pending = VecDeque::new();
        if self.pending_max == 0 {
            self.entries.insert(
                addr,
                State::Incomplete {
                    requests_sent: 1,
                    next_request_ns: now.saturating_add(self.retry_ns),
                    pending,
                },
            );
            return (Resolution::DroppedQueueFull, evicted);
        }
        pending.push_back(packet);
        self.entries.insert(
            addr,
            State::Incomplete {
                requests_sent: 1,
                next_request_ns: now.saturating_add(self.retry_ns),
                pending,
            },
        );
        (Resolution::QueuedSendRequest, evicted)
    }

    /// Starts resolving `addr` with no packet parked (a forwarder drops the packets that
    /// found no neighbour instead of queueing them). Returns whether a request should be sent
    /// now (false when an entry already exists, resolved or in progress, or when the cache is
    /// full of unresolved entries: [`Resolution::DroppedCacheFull`]) and whether an entry was
    /// evicted for it.
    pub fn start_resolution(&mut self, now: u64, addr: IpAddr) -> (Resolution, bool) {
        self.last_send = None;
        match self.entries.get(&addr) {
            Some(State::Reachable { expires_ns, .. }) if *expires_ns <= now => {
                self.entries.remove(&addr);
            }
            Some(_) => return (Resolution::Queued, false),
            None => {}
        }
        let mut evicted = false;
        if self.entries.len() >= self.entries_max {
            if !self.evict_one() {
                return (Resolution::DroppedCacheFull, false);
            }
            evicted = true;
        }
        self.entries.insert(
            addr,
            State::Incomplete {
                requests_sent: 1,
                next_request_ns: now.saturating_add(self.retry_ns),
                pending: VecDeque::new(),
            },
        );
        (Resolution::QueuedSendRequest, evicted)
    }

    /// Evicts the resolved entry closest to expiry (lowest address on ties). False when every
    /// entry is unresolved.
    fn evict_one(&mut self) -> bool {
        self.last_send = None;
        let victim = self
            .entries
            .iter()
            .filter_map(|(a, s)| match s {
                State::Reachable { expires_ns, .. } => Some((*expires_ns, *a)),
                State::Incomplete { .. } => None,
            })
            .min();
        match victim {
            Some((_, a)) => {
                self.entries.remove(&a);
                true
            }
            None => false,
        }
    }

    /// Records `addr` → `mac`. With `create` false only an existing entry is updated (the
    /// RFC 826 merge rule for packets not aimed at us, and RFC 4861 §7.2.5 for NA). Returns
    /// the packets that were waiting for this neighbour, to be sent now, and whether an entry
    /// was evicted to make room.
    pub fn learn(
        &mut self,
        now: u64,
        addr: IpAddr,
        mac: EthernetAddress,
        create: bool,
    ) -> (Vec<PendingPacket>, bool) {
        self.last_send = None;
        let expires_ns = now.saturating_add(self.reachable_ns);
        let revalidate_after_ns = now.saturating_add(self.retry_ns);
        let mut evicted = false;
        let released = match self.entries.get_mut(&addr) {
            Some(state) => {
                let old = core::mem::replace(
                    state,
                    State::Reachable {
                        mac,
                        expires_ns,
                        refresh_sent: false,
                        revalidate_after_ns,
                    },
                );
                match old {
                    State::Incomplete { pending, .. } => pending.into_iter().collect(),
                    State::Reachable { .. } => Vec::new(),
                }
            }
            None => {
                if !create {
                    return (Vec::new(), false);
                }
                if self.entries.len() >= self.entries_max {
                    if !self.evict_one() {
                        return (Vec::new(), false);
                    }
                    evicted = true;
                }
                self.entries.insert(
                    addr,
                    State::Reachable {
                        mac,
                        expires_ns,
                        refresh_sent: false,
                        revalidate_after_ns,
                    },
                );
                Vec::new()
            }
        };
        (released, evicted)
    }

    /// Negative advice from a higher layer (RFC 1122 §2.3.2.1 "higher-layer advice",
    /// §4.2.3.5: TCP retransmitted the same segment by timeout R1 times): the resolved entry
    /// for `addr` may be wrong. Returns true when the caller should send a *broadcast*
    /// resolution request now; the entry stays in use meanwhile (as Linux's PROBE state keeps
    /// sending to the old address), and the answer, through [`NeighborCache::learn`], replaces
    /// the MAC if it changed. A unicast poll would not do: sent to a wrong MAC (a peer that
    /// changed its NIC, a failover, a reply corrupted past the link's check) it reaches nobody,
    /// and the entry would blackhole every packet until it expired.
    ///
    /// Rate limited per entry: advice within `retry_ns` of the entry being learnt or last
    /// re-validated is ignored (false), so a lossy path costs at most one request per
    /// `retry_ns` per neighbour. Unresolved and unknown entries: false (a resolution is
    /// already in flight, or the next packet starts one).
    pub fn advise_unreachable(&mut self, now: u64, addr: IpAddr) -> bool {
        match self.entries.get_mut(&addr) {
            Some(State::Reachable {
                expires_ns,
                revalidate_after_ns,
                ..
            }) if *expires_ns > now && *revalidate_after_ns <= now => {
                *revalidate_after_ns = now.saturating_add(self.retry_ns);
                true
            }
            _ => false,
        }
    }

    /// The earliest deadline of any entry.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.entries
            .values()
            .map(|s| match s {
                State::Incomplete {
                    next_request_ns, ..
                } => *next_request_ns,
                State::Reachable { expires_ns, .. } => *expires_ns,
            })
            .min()
    }

    /// Expires resolved entries, schedules retries and gives up on neighbours that used their
    /// last request (dropping their queued packets).
    pub fn handle_timeout(&mut self, now: u64) -> TimeoutActions {
        let mut actions = TimeoutActions::default();
        let retry_ns = self.retry_ns;
        let requests_max = self.requests_max;
        self.entries.retain(|addr, state| match state {
            State::Reachable { expires_ns, .. } => {
                if *expires_ns <= now {
                    actions.expired += 1;
                    false
                } else {
                    true
                }
            }
            State::Incomplete {
                requests_sent,
                next_request_ns,
                pending,
            } => {
                if *next_request_ns > now {
                    return true;
                }
                if *requests_sent >= requests_max {
                    actions.failed.push((*addr, pending.len()));
                    return false;
                }
                *requests_sent += 1;
                *next_request_ns = now.saturating_add(retry_ns);
                actions.retry.push(*addr);
                true
            }
        });
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn pkt(n: u8) -> PendingPacket {
        PendingPacket {
            ethertype: wire::EtherType::IPV4,
            ip_packet: vec![n],
        }
    }

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
    }

    #[test]
    fn send_lookups_answer_the_same_across_refresh_relearn_eviction_and_expiry() {
        // Reachable 100 ns, refresh due within 3 × 10 ns of expiry.
        let mut c = NeighborCache::new(2, 1, 100, 10, 3);
        let (a, b) = (
            EthernetAddress([2, 0, 0, 0, 0, 0xa]),
            EthernetAddress([2, 0, 0, 0, 0, 0xb]),
        );
        c.learn(0, ip(1), a, true);
        for now in 0..70 {
            assert_eq!(c.lookup_for_send(now, ip(1)), Some((a, false)), "t={now}");
        }
        // The refresh falls due once, at 70, whether or not the last answer was remembered.
        assert_eq!(c.lookup_for_send(70, ip(1)), Some((a, true)));
        assert_eq!(c.lookup_for_send(71, ip(1)), Some((a, false)));
        assert_eq!(c.lookup_for_send(99, ip(1)), Some((a, false)));
        assert_eq!(c.lookup_for_send(100, ip(1)), None, "expired");
        // A new answer replaces the remembered MAC at once.
        c.learn(100, ip(1), a, true);
        assert_eq!(c.lookup_for_send(110, ip(1)), Some((a, false)));
        c.learn(111, ip(1), b, false);
        assert_eq!(c.lookup_for_send(112, ip(1)), Some((b, false)));
        // Another neighbour's lookup, then an eviction of the remembered one.
        c.learn(112, ip(2), a, true);
        assert_eq!(c.lookup_for_send(113, ip(2)), Some((a, false)));
        assert_eq!(c.lookup_for_send(113, ip(1)), Some((b, false)));
        let (r, evicted) = c.lookup_or_queue(114, ip(3), pkt(1));
        assert_eq!((r, evicted), (Resolution::QueuedSendRequest, true));
        assert_eq!(
            c.lookup_for_send(115, ip(1)),
            None,
            "ip 1 expired first: evicted"
        );
        assert_eq!(c.lookup_for_send(115, ip(2)), Some((a, false)));
    }

    #[test]
    fn queue_cap_drops_extra_packets_and_learn_releases_in_order() {
        let mut c = NeighborCache::new(4, 2, 100, 10, 3);
        assert_eq!(
            c.lookup_or_queue(0, ip(1), pkt(1)).0,
            Resolution::QueuedSendRequest
        );
        assert_eq!(c.lookup_or_queue(0, ip(1), pkt(2)).0, Resolution::Queued);
        assert_eq!(
            c.lookup_or_queue(0, ip(1), pkt(3)).0,
            Resolution::DroppedQueueFull
        );
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let (released, _) = c.learn(5, ip(1), mac, false);
        assert_eq!(released, vec![pkt(1), pkt(2)]);
        assert_eq!(c.lookup(5, ip(1)), Some(mac));
        assert_eq!(c.lookup(105, ip(1)), None);
    }

    #[test]
    fn full_cache_of_unresolved_entries_refuses_new_neighbours() {
        let mut c = NeighborCache::new(2, 1, 100, 10, 3);
        c.lookup_or_queue(0, ip(1), pkt(1));
        c.lookup_or_queue(0, ip(2), pkt(2));
        assert_eq!(
            c.lookup_or_queue(0, ip(3), pkt(3)).0,
            Resolution::DroppedCacheFull
        );
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn negative_advice_asks_for_a_broadcast_at_most_once_per_retry_interval() {
        let mut c = NeighborCache::new(4, 2, 100, 10, 3);
        let wrong = EthernetAddress([2, 0, 0, 0, 0x40, 1]);
        let right = EthernetAddress([2, 0, 0, 0, 0, 1]);
        c.learn(0, ip(1), wrong, true);
        // Fresh evidence: advice within retry_ns of learning is ignored.
        assert!(!c.advise_unreachable(5, ip(1)));
        assert!(c.advise_unreachable(10, ip(1)));
        // The entry stays in use while the request is out.
        assert_eq!(c.lookup(10, ip(1)), Some(wrong));
        assert!(!c.advise_unreachable(19, ip(1)));
        // The answer replaces the MAC.
        c.learn(12, ip(1), right, false);
        assert_eq!(c.lookup(12, ip(1)), Some(right));
        assert!(!c.advise_unreachable(21, ip(1)));
        assert!(c.advise_unreachable(22, ip(1)));
        // Unknown, unresolved and expired entries: nothing to re-validate.
        assert!(!c.advise_unreachable(22, ip(2)));
        c.lookup_or_queue(22, ip(3), pkt(3));
        assert!(!c.advise_unreachable(40, ip(3)));
        assert!(!c.advise_unreachable(500, ip(1)));
    }

    #[test]
    fn retries_stop_at_the_limit_and_report_dropped_packets() {
        let mut c = NeighborCache::new(4, 2, 100, 10, 3);
        c.lookup_or_queue(0, ip(1), pkt(1));
        assert_eq!(c.handle_timeout(10).retry, vec![ip(1)]);
        assert_eq!(c.handle_timeout(20).retry, vec![ip(1)]);
        let a = c.handle_timeout(30);
        assert!(a.retry.is_empty());
        assert_eq!(a.failed, vec![(ip(1), 1)]);
        assert!(c.is_empty());
    }
}
