//! The connection table's index: compact entries, one cache line per lookup (issue 17 item 2).
//!
//! Each entry is 8 bytes: the flow's 32-bit table hash ([`crate::tcp_sockets::FlowKey::
//! table_hash`]) and its socket slot plus one (0 is an empty entry), in one array with open
//! addressing and linear probing. A lookup reads the entries from the hash's home position to
//! the first empty one — at most 3/4 of the array is used, so that is nearly always the home
//! entry's cache line — and, for an entry whose 32-bit hash matches, asks the caller whether
//! the slot holds the 4-tuple (the key lives in the socket slot, which the segment reads
//! next anyway). Against a `HashMap<FlowKey, usize>` (control bytes in one array, 80-byte
//! buckets holding the key in another: two random lines, sometimes three) this touches one
//! random line, and stores 8 bytes per entry instead of 81.
//!
//! Removal shifts later entries of the run back (no tombstones), so a lookup never reads
//! more than the run its hash falls in. The table never iterates in hash-map order that could
//! leak into behaviour: [`ConnTable::slots`] walks positions, a function of the hashes, which
//! are themselves a deterministic function of the stack's secret.
//!
//! In front of the lookup sits a one-entry record of the last flow a segment found
//! ([`LastFlow`]): the IPv4 4-tuple (and the carried hash) compared in a few words, so a
//! run of segments of one flow — a bulk transfer — skips the key, the hash and the probe.
//! It answers only what [`ConnTable::get`] would: every change of the table drops it, and
//! it is used only while the socket table's contents are unchanged since it was made
//! (`Sockets::epoch`).
//!
//! Invariants: `entries.len()` is 0 or a power of two ≥ [`MIN_ENTRIES`]; `len` entries are
//! non-zero, `len * 4 ≤ entries.len() * 3` (so every run ends in an empty entry); every
//! entry sits in the run that starts at or after its home position with no empty entry
//! between home and it; at most one entry per slot. Bounded by the socket table: one entry
//! per connection or moved marker, each of which holds a slot.

/// The smallest array, entries.
const MIN_ENTRIES: usize = 16;

/// Odd multiplier for Fibonacci hashing (2^32 / φ): the top bits of `hash · MUL` index the
/// array, so every bit of the hash moves the position.
const MUL: u32 = 0x9e37_79b9;

/// The connection table's index (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct ConnTable {
    /// `(hash << 32) | (slot + 1)`; 0 is empty.
    entries: Vec<u64>,
    /// Non-empty entries.
    len: usize,
    /// `32 − log2(entries.len())`: the position is the top bits of `hash · MUL`.
    shift: u32,
    /// The last flow a received segment found (see the module doc); `None` after any change
    /// of the table.
    last: Option<LastFlow>,
}

/// What [`LastFlow`] compares: an IPv4 segment's addresses and ports as received, and the
/// hash the NIC carried with it (the lookup's key depends on it when the table is keyed by
/// the carried hash: a segment with another hash is looked up again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastFlowKey {
    /// Source address (high half) and destination address (low half), as received.
    pub(crate) addrs: u64,
    /// Source port (high half) and destination port (low half).
    pub(crate) ports: u32,
    /// The carried hash, if any.
    pub(crate) carried: Option<u32>,
}

/// The one-entry record of the last flow found. Invariant: while `ConnTable::last` holds
/// it and `Sockets::epoch` still equals `sockets_epoch`, the table's lookup of the segment
/// key `key` describes answers `Some(slot)`: the table has not changed (every change drops
/// the record) and neither has any slot's content (every change bumps the epoch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastFlow {
    key: LastFlowKey,
    slot: usize,
    sockets_epoch: u64,
}

#[inline(always)]
fn entry(hash: u32, slot: usize) -> u64 {
    // Slots are below `u32::MAX` (socket handles name them with a `u32`).
    (u64::from(hash) << 32) | (slot as u64 + 1)
}

#[inline(always)]
fn entry_hash(e: u64) -> u32 {
    (e >> 32) as u32
}

#[inline(always)]
fn entry_slot(e: u64) -> usize {
    (e as u32 as usize).wrapping_sub(1)
}

impl ConnTable {
    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The array's length, entries.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Heap bytes the table holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * core::mem::size_of::<u64>()
    }

    #[inline(always)]
    fn home(&self, hash: u32) -> usize {
        (hash.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// Look-ahead, first step: asks for the line holding `hash`'s home entry (a hint only).
    #[inline]
    pub(crate) fn prefetch_home(&self, hash: u32) {
        if let Some(e) = self.entries.get(self.home(hash)) {
            platform::prefetch::prefetch_line(e);
        }
    }

    /// Look-ahead, second step: the slot of the first entry with `hash`, without comparing
    /// keys (a colliding entry names the wrong slot: the hint is then wasted, never wrong,
    /// since only [`ConnTable::get`] decides which connection a segment is for).
    #[inline]
    pub(crate) fn first_with_hash(&self, hash: u32) -> Option<usize> {
        self.get(hash, |_| true)
    }

    /// The slot of the entry with `hash` for which `is_key(slot)` holds. Always inlined: it
    /// is the per-segment lookup, and as a call the key goes through memory.
    #[inline(always)]
    pub(crate) fn get(&self, hash: u32, mut is_key: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.entries.len() - 1;
        let mut pos = self.home(hash);
        loop {
            let e = *self.entries.get(pos)?;
            if e == 0 {
                return None;
            }
            if entry_hash(e) == hash {
                let slot = entry_slot(e);
                if is_key(slot) {
                    return Some(slot);
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// The slot the last-flow record holds for `key`, when it holds one made at
    /// `sockets_epoch` (the socket table's current epoch): the slot [`ConnTable::get`] would
    /// find (see [`LastFlow`]).
    #[inline(always)]
    pub(crate) fn last_get(&self, key: &LastFlowKey, sockets_epoch: u64) -> Option<usize> {
        match &self.last {
            Some(l) if l.key == *key && l.sockets_epoch == sockets_epoch => Some(l.slot),
            _ => None,
        }
    }

    /// Records that the lookup of the segment `key` describes found `slot`, with the socket
    /// table at `sockets_epoch`.
    #[inline(always)]
    pub(crate) fn last_set(&mut self, key: LastFlowKey, slot: usize, sockets_epoch: u64) {
        self.last = Some(LastFlow {
            key,
            slot,
            sockets_epoch,
        });
    }

    /// Adds the entry (`hash`, `slot`), unless the table already holds it. The caller keeps
    /// one entry per key: it inserts a key only when `get` found none or found this slot.
    pub(crate) fn insert(&mut self, hash: u32, slot: usize) {
        self.last = None;
        if self.position(hash, slot).is_some() {
            return;
        }
        if (self.len + 1) * 4 > self.entries.len() * 3 {
            self.resize((self.entries.len() * 2).max(MIN_ENTRIES));
        }
        self.place(entry(hash, slot));
        self.len += 1;
    }

    /// Removes the entry (`hash`, `slot`); false when there was none.
    pub(crate) fn remove(&mut self, hash: u32, slot: usize) -> bool {
        self.last = None;
        let Some(mut hole) = self.position(hash, slot) else {
            return false;
        };
        let mask = self.entries.len() - 1;
        // Backward shift: move each later entry of the run into the hole when its home is
        // not cyclically within (hole, j], so every entry stays reachable from its home.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.entries[j];
            if e == 0 {
                break;
            }
            let home = self.home(entry_hash(e));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.entries[hole] = e;
                hole = j;
            }
        }
        self.entries[hole] = 0;
        self.len -= 1;
        true
    }

    /// Memory back to the allocator past the table's high-water mark: an array at most an
    /// eighth full shrinks to the smallest one that keeps it at most 3/8 full (O(length), and
    /// only after the length fell by a factor of two or more since it last grew: O(1)
    /// amortized per removal). An empty table frees its array.
    pub(crate) fn shrink(&mut self) {
        if self.entries.len() <= MIN_ENTRIES || self.len * 8 > self.entries.len() {
            return;
        }
        if self.len == 0 {
            *self = ConnTable::default();
            return;
        }
        let want = (self.len * 8 / 3 + 1).next_power_of_two().max(MIN_ENTRIES);
        if want < self.entries.len() {
            self.resize(want);
        }
    }

    /// Every slot in the table, in position order (deterministic: positions are a function
    /// of the hashes).
    pub(crate) fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries
            .iter()
            .filter(|&&e| e != 0)
            .map(|&e| entry_slot(e))
    }

    /// Where the entry (`hash`, `slot`) sits.
    fn position(&self, hash: u32, slot: usize) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        let want = entry(hash, slot);
        let mask = self.entries.len() - 1;
        let mut pos = self.home(hash);
        loop {
            let e = *self.entries.get(pos)?;
            if e == 0 {
                return None;
            }
            if e == want {
                return Some(pos);
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Puts `e` at the first empty entry of its run (room is the caller's invariant).
    fn place(&mut self, e: u64) {
        let mask = self.entries.len() - 1;
        let mut pos = self.home(entry_hash(e));
        while self.entries[pos] != 0 {
            pos = (pos + 1) & mask;
        }
        self.entries[pos] = e;
    }

    /// Rebuilds the array with `n` entries (a power of two holding `len` at ≤ 3/4) from the
    /// hashes the entries carry: the socket slots are not read.
    #[cold]
    fn resize(&mut self, n: usize) {
        self.last = None;
        debug_assert!(n.is_power_of_two() && self.len * 4 <= n * 3);
        // The new array on huge pages (one random entry per segment): advised before the
        // zeros are written.
        let mut entries = platform::huge_vec::with_capacity_huge(n);
        entries.resize(n, 0);
        let old = core::mem::replace(&mut self.entries, entries);
        self.shift = 32 - n.trailing_zeros();
        for e in old.into_iter().filter(|&e| e != 0) {
            self.place(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reference model: the (hash, slot) pairs in a vector.
    fn check_against(t: &ConnTable, model: &[(u32, usize)]) {
        assert_eq!(t.len(), model.len());
        for &(h, s) in model {
            assert_eq!(t.get(h, |x| x == s), Some(s), "entry ({h:#x}, {s}) lost");
        }
        let mut slots: Vec<usize> = t.slots().collect();
        slots.sort_unstable();
        let mut want: Vec<usize> = model.iter().map(|&(_, s)| s).collect();
        want.sort_unstable();
        assert_eq!(slots, want);
        assert!(t.len() * 4 <= t.capacity() * 3 || t.capacity() == 0);
    }

    #[test]
    fn insert_get_remove_agree_with_a_model_under_colliding_hashes() {
        // Few distinct hashes (many full collisions, long runs that wrap around the array)
        // and many slots: every path of the backward shift is taken.
        let mut t = ConnTable::default();
        let mut model: Vec<(u32, usize)> = Vec::new();
        let mut x: u64 = 0x1234_5678;
        for step in 0..20_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let hash = (x % 37) as u32 * 0x0100_0193;
            let slot = (x >> 20) as usize % 3000;
            let present = model.iter().position(|&(_, s)| s == slot);
            match present {
                Some(k) if x & 1 == 0 => {
                    let (h, s) = model.swap_remove(k);
                    assert!(t.remove(h, s));
                    assert!(!t.remove(h, s), "removed twice");
                }
                Some(_) => {}
                None => {
                    t.insert(hash, slot);
                    model.push((hash, slot));
                }
            }
            if step % 997 == 0 {
                check_against(&t, &model);
                t.shrink();
                check_against(&t, &model);
            }
        }
        check_against(&t, &model);
        for (h, s) in model.drain(..) {
            assert!(t.remove(h, s));
        }
        check_against(&t, &model);
        t.shrink();
        assert_eq!(t.heap_bytes(), 0, "an empty table frees its array");
    }

    #[test]
    fn the_last_flow_record_is_dropped_by_every_change_of_the_table() {
        let key = LastFlowKey {
            addrs: 0x0a00_0001_0a00_0002,
            ports: 0x1234_0050,
            carried: None,
        };
        let mut t = ConnTable::default();
        t.insert(7, 3);
        t.last_set(key, 3, 5);
        assert_eq!(t.last_get(&key, 5), Some(3));
        // Another epoch of the socket table, another key: no answer.
        assert_eq!(t.last_get(&key, 6), None);
        let other = LastFlowKey {
            carried: Some(1),
            ..key
        };
        assert_eq!(t.last_get(&other, 5), None);
        // An insert drops it.
        t.insert(9, 4);
        assert_eq!(t.last_get(&key, 5), None);
        // A removal drops it, even of another entry, and one that finds nothing.
        t.last_set(key, 3, 5);
        t.remove(9, 4);
        assert_eq!(t.last_get(&key, 5), None);
        t.last_set(key, 3, 5);
        assert!(!t.remove(1, 1));
        assert_eq!(t.last_get(&key, 5), None);
        // A shrink that changes nothing keeps it; one that rebuilds the array drops it.
        t.last_set(key, 3, 5);
        t.shrink();
        assert_eq!(t.last_get(&key, 5), Some(3));
        for i in 0..64 {
            t.insert(100 + i, 10 + i as usize);
        }
        for i in 0..64 {
            t.remove(100 + i, 10 + i as usize);
        }
        t.last_set(key, 3, 5);
        let before = t.capacity();
        t.shrink();
        assert!(t.capacity() < before, "the array shrank");
        assert_eq!(t.last_get(&key, 5), None);
    }

    #[test]
    fn lookup_compares_the_key_not_only_the_hash() {
        let mut t = ConnTable::default();
        // Two flows with the same 32-bit hash: the caller's key test tells them apart.
        t.insert(7, 10);
        t.insert(7, 11);
        assert_eq!(t.get(7, |s| s == 11), Some(11));
        assert_eq!(t.get(7, |s| s == 10), Some(10));
        assert_eq!(t.get(7, |_| false), None);
        assert_eq!(t.get(8, |_| true), None);
        // Inserting an entry it holds changes nothing.
        t.insert(7, 10);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn table_stays_at_most_three_quarters_full_and_shrinks_after_a_burst() {
        let mut t = ConnTable::default();
        for s in 0..100_000usize {
            t.insert((s as u32).wrapping_mul(0x85eb_ca6b), s);
        }
        assert_eq!(t.capacity(), 262_144, "100,000 entries at ≤ 3/4 load");
        assert_eq!(t.heap_bytes(), 262_144 * 8);
        for s in 100..100_000usize {
            assert!(t.remove((s as u32).wrapping_mul(0x85eb_ca6b), s));
        }
        t.shrink();
        assert_eq!(t.capacity(), 512, "100 entries kept at ≤ 3/8 load");
        for s in 0..100usize {
            assert_eq!(
                t.get((s as u32).wrapping_mul(0x85eb_ca6b), |x| x == s),
                Some(s)
            );
        }
    }
}
