//! The one-owner check of the `migrate` and `offload` workloads (DESIGN handoff invariant 1:
//! no connection is live at two owners at once — two server shards, or the host and its
//! offload engine).
//!
//! Between steps the workloads list every live 4-tuple of every owner and look for a tuple
//! listed twice, by sorting. The sort was the check's whole cost: comparing `SocketAddr`
//! pairs field by field through their enums. Here each entry of an all-IPv4 list is packed
//! into one `u128` — local address and port, remote address and port, owner, index — whose
//! integer order is exactly the order of `(FourTuple, owner)` (`SocketAddrV4` orders by
//! address, then port), and the packed keys are sorted instead. A list with an IPv6 tuple
//! (or more than 65,536 entries) is sorted by the full comparison, as before. Either way the
//! result is the same sequence, so the `migrate` workload, which draws its next move from the
//! sorted list, makes the same choices.

use core::net::SocketAddr;

use stack::FourTuple;

/// Entries the packed sort takes (the index has 16 bits).
const PACKED_ENTRIES_MAX: usize = 1 << 16;

/// The live tuples of every owner, and the scratch to sort them without allocating.
#[derive(Debug, Default)]
pub(super) struct Owners {
    /// `(owner, tuple)`; sorted by `(tuple, owner)` after [`Owners::sort_and_find_shared`].
    pub(super) entries: Vec<(u16, FourTuple)>,
    /// One owner's tuples, as `Stack::tcp_live_tuples` appends them.
    pub(super) one: Vec<FourTuple>,
    keys: Vec<u128>,
    spare: Vec<(u16, FourTuple)>,
}

impl Owners {
    /// Appends the tuples in `one` as `owner`'s, and empties `one`.
    pub(super) fn take_one(&mut self, owner: u16) {
        self.entries.extend(self.one.drain(..).map(|t| (owner, t)));
    }

    /// Sorts the entries by `(tuple, owner)` and returns the first tuple two entries hold,
    /// with their owners (lower first).
    pub(super) fn sort_and_find_shared(&mut self) -> Option<(FourTuple, u16, u16)> {
        if !self.sort_packed() {
            // Unstable is enough: the key orders distinct entries totally, and equal ones
            // are alike.
            self.entries.sort_unstable_by_key(|&(owner, t)| (t, owner));
        }
        self.entries
            .windows(2)
            .find(|pair| pair[0].1 == pair[1].1)
            .map(|pair| (pair[0].1, pair[0].0, pair[1].0))
    }

    /// The packed sort (module documentation); false, with the entries untouched, when a
    /// tuple is not IPv4 at both ends or there are too many entries.
    fn sort_packed(&mut self) -> bool {
        if self.entries.len() > PACKED_ENTRIES_MAX {
            return false;
        }
        self.keys.clear();
        for (index, &(owner, t)) in self.entries.iter().enumerate() {
            let Some(key) = tuple_key(&t) else {
                return false;
            };
            self.keys
                .push(key | u128::from(owner) << 16 | index as u128);
        }
        self.keys.sort_unstable();
        self.spare.clear();
        let entries = &self.entries;
        self.spare.extend(
            self.keys
                .iter()
                .filter_map(|&k| entries.get((k & 0xffff) as usize).copied()),
        );
        core::mem::swap(&mut self.entries, &mut self.spare);
        true
    }
}

/// `t` packed above the low 32 bits (which take the owner and the index): local address,
/// local port, remote address, remote port, most significant first; `None` unless both ends
/// are IPv4.
fn tuple_key(t: &FourTuple) -> Option<u128> {
    match (t.local, t.remote) {
        (SocketAddr::V4(l), SocketAddr::V4(r)) => Some(
            u128::from(u32::from(*l.ip())) << 96
                | u128::from(l.port()) << 80
                | u128::from(u32::from(*r.ip())) << 48
                | u128::from(r.port()) << 32,
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

    fn v4(a: u8, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, a, 1)), port)
    }

    fn tuple(local: SocketAddr, remote: SocketAddr) -> FourTuple {
        FourTuple { local, remote }
    }

    #[test]
    fn a_tuple_live_at_two_owners_is_reported_with_both_owners() {
        let shared = tuple(v4(2, 5001), v4(1, 40_000));
        let mut o = Owners {
            entries: vec![
                (3, shared),
                (0, tuple(v4(2, 5001), v4(1, 40_001))),
                (1, tuple(v4(2, 5001), v4(1, 39_999))),
                (1, shared),
            ],
            ..Owners::default()
        };
        assert_eq!(o.sort_and_find_shared(), Some((shared, 1, 3)));
        // The same through the full comparison (an IPv6 tuple in the list).
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 80);
        o.entries.push((0, tuple(v6, v6)));
        assert_eq!(o.sort_and_find_shared(), Some((shared, 1, 3)));
        o.entries.retain(|&(owner, _)| owner != 3);
        assert_eq!(o.sort_and_find_shared(), None);
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            8 => (0u8..3, 0u16..3).prop_map(|(a, p)| v4(a, p)),
            1 => (0u16..3).prop_map(|p| SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), p)),
        ]
    }

    proptest! {
        /// The packed sort leaves the entries in exactly the order of the full comparison,
        /// and both find the same shared tuple.
        #[test]
        fn packed_sort_orders_as_the_full_comparison(
            entries in proptest::collection::vec((0u16..4, addr(), addr()), 0..40)
        ) {
            let entries: Vec<(u16, FourTuple)> =
                entries.into_iter().map(|(o, l, r)| (o, tuple(l, r))).collect();
            let mut want = entries.clone();
            want.sort_by_key(|&(owner, t)| (t, owner));
            let want_shared = want
                .windows(2)
                .find(|p| p[0].1 == p[1].1)
                .map(|p| (p[0].1, p[0].0, p[1].0));
            let mut o = Owners { entries, ..Owners::default() };
            prop_assert_eq!(o.sort_and_find_shared(), want_shared);
            prop_assert_eq!(&o.entries, &want);
        }
    }
}
