//! The one-owner check of the `migrate` and `offload` workloads (DESIGN handoff invariant 1:
//! no connection is live at two owners at once — two server shards, or the host and its
//! offload engine).
//!
//! Between steps the workloads list every live 4-tuple of every owner and look for a tuple
//! listed twice (at two owners, or twice at one). Each entry of an all-IPv4 list is packed
//! into one `u128` — local address and port, remote address and port, owner, index — whose
//! integer order is exactly the order of `(FourTuple, owner)` (`SocketAddrV4` orders by
//! address, then port). The check puts each packed tuple into an open-addressing table of
//! twice the entries' size (reused between steps): one probe sequence per entry, where it
//! used to sort the whole list, and the same answer — a tuple listed twice is found whatever
//! the order. When one is found the list is sorted and the first shared tuple in
//! `(tuple, owner)` order reported, as before. The `migrate` workload draws its next move
//! from the list in that order: [`Owners::nth_in_order`] finds the one entry it draws
//! (`select_nth_unstable` on the packed keys, no full sort), the entry the sorted list held
//! at that place, so the workload makes the same choices. A list with an IPv6 tuple (or more
//! than 65,536 entries) is sorted by the full comparison, as before.

use core::net::SocketAddr;

use stack::FourTuple;

/// Entries the packed keys take (the index has 16 bits).
const PACKED_ENTRIES_MAX: usize = 1 << 16;

/// The live tuples of every owner, and the scratch to check them without allocating.
#[derive(Debug, Default)]
pub(super) struct Owners {
    /// `(owner, tuple)`, in the order the owners listed them (sorted by `(tuple, owner)`
    /// when the packed keys could not be used, or a shared tuple was found).
    pub(super) entries: Vec<(u16, FourTuple)>,
    /// One owner's tuples, as `Stack::tcp_live_tuples` appends them.
    pub(super) one: Vec<FourTuple>,
    /// The entries' packed keys, in entry order (valid when `packed`).
    keys: Vec<u128>,
    /// The open-addressing table: entry index + 1 per slot, 0 for empty.
    table: Vec<u32>,
    /// Whether `keys` holds every entry's key (else `entries` is sorted).
    packed: bool,
}

impl Owners {
    /// Appends the tuples in `one` as `owner`'s, and empties `one`.
    pub(super) fn take_one(&mut self, owner: u16) {
        self.entries.extend(self.one.drain(..).map(|t| (owner, t)));
    }

    /// Returns the first tuple (in `(tuple, owner)` order) that two entries hold, with their
    /// owners (lower first); `None` when every tuple is listed once.
    pub(super) fn find_shared(&mut self) -> Option<(FourTuple, u16, u16)> {
        if self.pack() && !self.any_key_twice() {
            return None;
        }
        // A tuple listed twice (or no packed keys): the full sort says which one comes first.
        self.packed = false;
        self.entries.sort_unstable_by_key(|&(owner, t)| (t, owner));
        self.entries
            .windows(2)
            .find(|pair| pair[0].1 == pair[1].1)
            .map(|pair| (pair[0].1, pair[0].0, pair[1].0))
    }

    /// The entry at place `k` of the list sorted by `(tuple, owner)` (after
    /// [`Owners::find_shared`]); `None` past the end.
    pub(super) fn nth_in_order(&mut self, k: usize) -> Option<(u16, FourTuple)> {
        if k >= self.entries.len() {
            return None;
        }
        if !self.packed {
            return self.entries.get(k).copied();
        }
        let (_, &mut key, _) = self.keys.select_nth_unstable(k);
        self.entries.get((key & 0xffff) as usize).copied()
    }

    /// Number of entries.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Packs every entry's key; false (nothing packed) when a tuple is not IPv4 at both
    /// ends or there are too many entries.
    fn pack(&mut self) -> bool {
        self.packed = false;
        self.keys.clear();
        if self.entries.len() > PACKED_ENTRIES_MAX {
            return false;
        }
        for (index, &(owner, t)) in self.entries.iter().enumerate() {
            let Some(key) = tuple_key(&t) else {
                return false;
            };
            self.keys
                .push(key | u128::from(owner) << 16 | index as u128);
        }
        self.packed = true;
        true
    }

    /// Whether two packed keys carry the same tuple (their bits above the low 32).
    fn any_key_twice(&mut self) -> bool {
        let slots = (self.keys.len() * 2).max(16).next_power_of_two();
        let bits = slots.trailing_zeros();
        self.table.clear();
        self.table.resize(slots, 0);
        let mask = slots - 1;
        for (index, &key) in self.keys.iter().enumerate() {
            let tuple = key >> 32;
            let h = ((tuple >> 64) as u64 ^ tuple as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut slot = (h >> (64 - bits)) as usize;
            loop {
                match self.table.get(slot).copied() {
                    Some(0) | None => {
                        if let Some(s) = self.table.get_mut(slot) {
                            *s = index as u32 + 1;
                        }
                        break;
                    }
                    Some(other) => {
                        let other_key = self.keys.get(other as usize - 1).copied().unwrap_or(0);
                        if other_key >> 32 == tuple {
                            return true;
                        }
                        slot = (slot + 1) & mask;
                    }
                }
            }
        }
        false
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
        assert_eq!(o.find_shared(), Some((shared, 1, 3)));
        // The same through the full comparison (an IPv6 tuple in the list).
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 80);
        o.entries.push((0, tuple(v6, v6)));
        assert_eq!(o.find_shared(), Some((shared, 1, 3)));
        o.entries.retain(|&(owner, _)| owner != 3);
        assert_eq!(o.find_shared(), None);
        // A tuple listed twice by one owner is found too.
        o.entries.retain(|&(_, t)| t != tuple(v6, v6));
        o.entries.push((0, tuple(v4(2, 5001), v4(1, 40_001))));
        assert_eq!(
            o.find_shared(),
            Some((tuple(v4(2, 5001), v4(1, 40_001)), 0, 0))
        );
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            8 => (0u8..3, 0u16..3).prop_map(|(a, p)| v4(a, p)),
            1 => (0u16..3).prop_map(|p| SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), p)),
        ]
    }

    proptest! {
        /// The table finds the same shared tuple as the sorted list, and the order statistic
        /// gives, at every place, the entry the sorted list holds there.
        #[test]
        fn the_check_and_the_draw_agree_with_the_sorted_list(
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
            prop_assert_eq!(o.find_shared(), want_shared);
            prop_assert_eq!(o.len(), want.len());
            for (k, w) in want.iter().enumerate() {
                prop_assert_eq!(o.nth_in_order(k), Some(*w));
            }
            prop_assert_eq!(o.nth_in_order(want.len()), None);
        }
    }
}
