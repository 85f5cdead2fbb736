//! IP fragment reassembly for IPv4 (RFC 791 §3.2, hole tracking after RFC 815) and IPv6
//! (RFC 8200 §4.5).
//!
//! Policy (the same for both families):
//! - bounded: at most `datagrams_max` datagrams in progress, at most `bytes_max` bytes of
//!   payload per datagram, and a timer per datagram started by its first fragment;
//! - memory-bounded and never starved (as Linux's `ipfrag_high_thresh`): every datagram is
//!   charged its buffers plus [`ENTRY_OVERHEAD_BYTES`]; all datagrams together hold at most
//!   `mem_max` bytes, the datagrams of one source address at most `source_mem_max`. A
//!   fragment that would break a bound evicts the oldest incomplete datagram — of its own
//!   source when the per-source bound is the one hit, of any source otherwise — instead of
//!   being refused, so a flood delays another source's datagram by at most one eviction.
//!   "Oldest" is creation order, kept in an ordered index (no hash order involved);
//! - a fragment that overlaps any byte already received drops the whole datagram and every
//!   fragment that follows for it until the timer runs out (RFC 5722 §4 for IPv6; our policy
//!   for IPv4, where overlap is the classic evasion trick). An *exact* duplicate (same offset,
//!   same length) is dropped alone and counted;
//! - a non-final fragment whose length is not a multiple of 8, or a fragment that disagrees
//!   with the total length the final fragment announced, drops the whole datagram.
//!
//! Received pieces are kept as sorted, disjoint byte ranges (RFC 815's holes are the gaps
//! between them). The table is a `BTreeMap`, so the timer walk runs in key order.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::{BTreeMap, BTreeSet};

/// Bytes charged per datagram on top of its buffers: the entry itself and its index nodes
/// (a deliberate over-estimate, so that a flood of empty first fragments is paid for).
pub const ENTRY_OVERHEAD_BYTES: usize = 256;

/// Identifies one datagram under reassembly (RFC 791: source, destination, protocol, ident;
/// RFC 8200 §4.5: source, destination, identification).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReasmKey {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        ident: u16,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ident: u32,
    },
}

impl ReasmKey {
    /// The source address, the unit of the per-source bound.
    pub fn src(&self) -> IpAddr {
        match *self {
            ReasmKey::V4 { src, .. } => IpAddr::V4(src),
            ReasmKey::V6 { src, .. } => IpAddr::V6(src),
        }
    }
}

/// Datagrams evicted to make room, by the bound that forced it (cumulative until taken with
/// [`Reassembler::take_evictions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasmEvictions {
    /// The source's own oldest datagram, for the per-source memory bound.
    pub source: u64,
    /// The oldest datagram of any source, for the global memory bound.
    pub memory: u64,
    /// The oldest datagram of any source, for the datagram-count bound.
    pub table: u64,
}

/// Why a fragment did not complete a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasmDrop {
    /// The fragment was kept; the datagram is still incomplete.
    Incomplete,
    /// The datagram was dropped for an overlap.
    Overlap,
    /// The fragment belongs to a datagram already dropped (overlap, bad length, too big),
    /// kept as a tombstone until its timer runs out.
    Condemned,
    /// The fragment was an exact duplicate and was dropped alone.
    Duplicate,
    /// The table was full and nothing could be evicted (a zero-sized table); the fragment
    /// was dropped.
    TableFull,
    /// The datagram would exceed the per-datagram byte limit, or alone the per-source or
    /// global memory bound, and was dropped.
    TooBig,
    /// Lengths inconsistent; the datagram was dropped.
    Malformed,
}

#[derive(Debug)]
struct Entry {
    deadline_ns: u64,
    /// Sorted, disjoint `[start, end)` byte ranges received.
    ranges: Vec<(usize, usize)>,
    /// Reassembly buffer; grows to the highest end seen.
    data: Vec<u8>,
    /// Known once the final fragment (MF = 0) arrived.
    total_len: Option<usize>,
    /// Set when the datagram was condemned (overlap): later fragments are dropped until the
    /// timer removes the entry, so a retransmitted tail cannot resurrect it.
    poisoned: bool,
    /// Upper-layer protocol (IPv6: next header of the fragment header; IPv4: protocol field).
    protocol: u8,
    /// Creation order (the key of `order`): smaller is older.
    seq: u64,
    /// Bytes charged for this entry (see `Entry::cost`), as last accounted.
    charged: usize,
}

impl Entry {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD_BYTES
            + self.data.capacity()
            + self.ranges.capacity() * core::mem::size_of::<(usize, usize)>()
    }
}

/// A completed datagram.
#[derive(Debug, PartialEq, Eq)]
pub struct Reassembled {
    pub key: ReasmKey,
    pub protocol: u8,
    pub payload: Vec<u8>,
}

/// The reassembly table. See the module documentation.
#[derive(Debug)]
pub struct Reassembler {
    entries: BTreeMap<ReasmKey, Entry>,
    /// Creation order → key: the first is the oldest datagram.
    order: BTreeMap<u64, ReasmKey>,
    /// (source, creation order): the first of a source is its oldest datagram.
    by_source: BTreeSet<(IpAddr, u64)>,
    /// Bytes charged per source (sources holding nothing are absent).
    source_bytes: BTreeMap<IpAddr, usize>,
    /// Bytes charged in total.
    held_bytes: usize,
    next_seq: u64,
    evictions: ReasmEvictions,
    datagrams_max: usize,
    bytes_max: usize,
    mem_max: usize,
    source_mem_max: usize,
    timeout_ns: u64,
}

impl Reassembler {
    /// A table with count and per-datagram bounds only (no memory bounds; see
    /// [`Reassembler::with_memory`]).
    pub fn new(datagrams_max: usize, bytes_max: usize, timeout_ns: u64) -> Self {
        Reassembler {
            entries: BTreeMap::new(),
            order: BTreeMap::new(),
            by_source: BTreeSet::new(),
            source_bytes: BTreeMap::new(),
            held_bytes: 0,
            next_seq: 0,
            evictions: ReasmEvictions::default(),
            datagrams_max,
            // Neither family's reassembled payload can exceed 65535 bytes of offsets + data.
            bytes_max: bytes_max.min(65_535 + 8 * 0x1fff),
            mem_max: usize::MAX,
            source_mem_max: usize::MAX,
            timeout_ns,
        }
    }

    /// Sets the global and per-source memory bounds (bytes charged, see the module docs).
    pub fn with_memory(mut self, mem_max: usize, source_mem_max: usize) -> Self {
        self.mem_max = mem_max;
        self.source_mem_max = source_mem_max;
        self
    }

    /// Bytes charged for all datagrams in progress; never above the global bound once
    /// [`Reassembler::add`] returns.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Bytes charged for one source's datagrams in progress.
    pub fn source_held_bytes(&self, src: IpAddr) -> usize {
        self.source_bytes.get(&src).copied().unwrap_or(0)
    }

    /// Datagrams in progress from one source.
    pub fn source_len(&self, src: IpAddr) -> usize {
        self.by_source.range((src, 0)..=(src, u64::MAX)).count()
    }

    /// Evictions since the last call, by reason; resets them.
    pub fn take_evictions(&mut self) -> ReasmEvictions {
        core::mem::take(&mut self.evictions)
    }

    /// Removes an entry and everything that indexes or charges it.
    fn remove(&mut self, key: &ReasmKey) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        let src = key.src();
        self.order.remove(&e.seq);
        self.by_source.remove(&(src, e.seq));
        self.held_bytes -= e.charged;
        if let Some(b) = self.source_bytes.get_mut(&src) {
            *b -= e.charged;
            if *b == 0 {
                self.source_bytes.remove(&src);
            }
        }
        Some(e)
    }

    /// Re-accounts an entry after its buffers changed.
    fn recharge(&mut self, key: &ReasmKey) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        let (old, new) = (e.charged, e.cost());
        e.charged = new;
        self.held_bytes = self.held_bytes - old + new;
        let b = self.source_bytes.entry(key.src()).or_insert(0);
        *b = *b - old + new;
    }

    /// The oldest datagram other than `keep`, of `src` if given, else of any source.
    fn oldest_except(&self, src: Option<IpAddr>, keep: &ReasmKey) -> Option<ReasmKey> {
        match src {
            Some(src) => self
                .by_source
                .range((src, 0)..=(src, u64::MAX))
                .filter_map(|&(_, seq)| self.order.get(&seq))
                .find(|k| *k != keep)
                .copied(),
            None => self.order.values().find(|k| *k != keep).copied(),
        }
    }

    /// Evicts the oldest other datagrams until `key`'s source and the table are within their
    /// memory bounds. Returns false if `key` alone breaks a bound (then the caller drops it).
    fn enforce_memory(&mut self, key: &ReasmKey) -> bool {
        let src = key.src();
        while self.source_held_bytes(src) > self.source_mem_max {
            let Some(victim) = self.oldest_except(Some(src), key) else {
                return false;
            };
            self.remove(&victim);
            self.evictions.source += 1;
        }
        while self.held_bytes > self.mem_max {
            let Some(victim) = self.oldest_except(None, key) else {
                return false;
            };
            self.remove(&victim);
            self.evictions.memory += 1;
        }
        true
    }

    /// Datagrams in progress (poisoned ones included until their timer runs out).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds one fragment: `offset_bytes` into the datagram's payload, `more_frags` as carried.
    pub fn add(
        &mut self,
        now: u64,
        key: ReasmKey,
        protocol: u8,
        offset_bytes: usize,
        more_frags: bool,
        data: &[u8],
    ) -> Result<Reassembled, ReasmDrop> {
        let start = offset_bytes;
        let end = start.saturating_add(data.len());
        if more_frags && (data.is_empty() || data.len() % 8 != 0) {
            // RFC 8200 §4.5: a non-final fragment must be a multiple of 8 bytes long.
            self.condemn(key);
            return Err(ReasmDrop::Malformed);
        }
        if end > self.bytes_max {
            self.condemn(key);
            return Err(ReasmDrop::TooBig);
        }
        if !self.entries.contains_key(&key) {
            // Make room by evicting the oldest, never by refusing the newcomer.
            while self.entries.len() >= self.datagrams_max {
                let Some(victim) = self.oldest_except(None, &key) else {
                    return Err(ReasmDrop::TableFull);
                };
                self.remove(&victim);
                self.evictions.table += 1;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            self.entries.insert(
                key,
                Entry {
                    deadline_ns: now.saturating_add(self.timeout_ns),
                    ranges: Vec::new(),
                    data: Vec::new(),
                    total_len: None,
                    poisoned: false,
                    protocol,
                    seq,
                    charged: 0,
                },
            );
            self.order.insert(seq, key);
            self.by_source.insert((key.src(), seq));
            self.recharge(&key);
            if !self.enforce_memory(&key) {
                self.remove(&key);
                return Err(ReasmDrop::TooBig);
            }
        }
        let Some(entry) = self.entries.get_mut(&key) else {
            return Err(ReasmDrop::TableFull);
        };
        if entry.poisoned {
            return Err(ReasmDrop::Condemned);
        }
        // Consistency with the total length (RFC 791: the final fragment fixes it).
        let bad_len = match entry.total_len {
            Some(total) => end > total || (!more_frags && end != total),
            None => !more_frags && entry.ranges.last().is_some_and(|&(_, e)| e > end),
        };
        if bad_len {
            self.condemn(key);
            return Err(ReasmDrop::Malformed);
        }
        // Insertion point: first range starting at or after `start`.
        let idx = entry.ranges.partition_point(|&(s, _)| s < start);
        if entry.ranges.get(idx) == Some(&(start, end)) {
            return Err(ReasmDrop::Duplicate);
        }
        let overlaps_prev = idx
            .checked_sub(1)
            .and_then(|i| entry.ranges.get(i))
            .is_some_and(|&(_, e)| e > start);
        let overlaps_next = entry.ranges.get(idx).is_some_and(|&(s, _)| s < end);
        if (overlaps_prev || overlaps_next) && start != end {
            self.condemn(key);
            return Err(ReasmDrop::Overlap);
        }
        if entry.data.len() < end {
            // Exact growth: the charge is the capacity, so keep it at what is needed.
            entry.data.reserve_exact(end - entry.data.len());
            entry.data.resize(end, 0);
        }
        if let Some(dst) = entry.data.get_mut(start..end) {
            dst.copy_from_slice(data);
        }
        if start != end {
            entry.ranges.insert(idx, (start, end));
        }
        if !more_frags {
            entry.total_len = Some(end);
            entry.protocol = protocol;
        } else if start == 0 {
            entry.protocol = protocol;
        }
        // Ranges are disjoint, so full coverage is "their lengths add up to the total".
        let complete = entry
            .total_len
            .is_some_and(|total| entry.ranges.iter().map(|&(s, e)| e - s).sum::<usize>() == total);
        let total = entry.total_len.unwrap_or(0);
        if !complete {
            self.recharge(&key);
            if !self.enforce_memory(&key) {
                self.remove(&key);
                return Err(ReasmDrop::TooBig);
            }
            return Err(ReasmDrop::Incomplete);
        }
        match self.remove(&key) {
            Some(mut e) => {
                e.data.truncate(total);
                Ok(Reassembled {
                    key,
                    protocol: e.protocol,
                    payload: e.data,
                })
            }
            None => Err(ReasmDrop::Incomplete),
        }
    }

    /// Drops the datagram's data but keeps a poisoned entry until its timer runs out.
    fn condemn(&mut self, key: ReasmKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.poisoned = true;
            e.ranges = Vec::new();
            e.data = Vec::new();
        }
        self.recharge(&key);
    }

    /// The earliest reassembly deadline.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.entries.values().map(|e| e.deadline_ns).min()
    }

    /// Removes expired datagrams; returns how many incomplete (not already condemned)
    /// datagrams timed out.
    pub fn handle_timeout(&mut self, now: u64) -> u64 {
        let mut timed_out = 0;
        // Key order, so the walk is deterministic; the list is as long as what expires.
        let expired: Vec<ReasmKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.deadline_ns <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            if self.remove(&key).is_some_and(|e| !e.poisoned) {
                timed_out += 1;
            }
        }
        timed_out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: ReasmKey = ReasmKey::V6 {
        src: Ipv6Addr::LOCALHOST,
        dst: Ipv6Addr::LOCALHOST,
        ident: 1,
    };

    #[test]
    fn overlap_condemns_datagram_and_later_fragments() {
        let mut r = Reassembler::new(4, 65535, 100);
        assert_eq!(
            r.add(0, KEY, 17, 0, true, &[1; 16]),
            Err(ReasmDrop::Incomplete)
        );
        assert_eq!(
            r.add(0, KEY, 17, 8, true, &[2; 16]),
            Err(ReasmDrop::Overlap)
        );
        assert_eq!(
            r.add(0, KEY, 17, 16, false, &[3; 4]),
            Err(ReasmDrop::Condemned)
        );
        assert_eq!(r.handle_timeout(100), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn exact_duplicate_is_dropped_alone() {
        let mut r = Reassembler::new(4, 65535, 100);
        assert_eq!(
            r.add(0, KEY, 17, 0, true, &[1; 8]),
            Err(ReasmDrop::Incomplete)
        );
        assert_eq!(
            r.add(0, KEY, 17, 0, true, &[1; 8]),
            Err(ReasmDrop::Duplicate)
        );
        let done = r.add(0, KEY, 17, 8, false, &[2; 3]).expect("complete");
        assert_eq!(done.payload, [1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn unaligned_middle_fragment_drops_the_datagram() {
        let mut r = Reassembler::new(4, 65535, 100);
        assert_eq!(
            r.add(0, KEY, 17, 0, true, &[1; 7]),
            Err(ReasmDrop::Malformed)
        );
    }

    fn v4key(src: u8, ident: u16) -> ReasmKey {
        ReasmKey::V4 {
            src: Ipv4Addr::new(10, 0, 0, src),
            dst: Ipv4Addr::new(10, 0, 0, 254),
            protocol: 17,
            ident,
        }
    }

    #[test]
    fn per_source_bound_evicts_that_sources_oldest_only() {
        // Room for two 64-byte first fragments per source.
        let one = ENTRY_OVERHEAD_BYTES + 64 + 4 * 16;
        let mut r = Reassembler::new(100, 65535, 100).with_memory(usize::MAX, 2 * one);
        r.add(0, v4key(2, 0), 17, 0, true, &[0; 64]).unwrap_err();
        for ident in 0..5 {
            r.add(0, v4key(1, ident), 17, 0, true, &[0; 64])
                .unwrap_err();
        }
        assert_eq!(r.take_evictions().source, 3);
        assert_eq!(r.source_len(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))), 2);
        // The other source's datagram survived, and the attacker's newest two are kept.
        assert!(r.entries.contains_key(&v4key(2, 0)));
        assert!(r.entries.contains_key(&v4key(1, 3)) && r.entries.contains_key(&v4key(1, 4)));
    }

    #[test]
    fn memory_bound_evicts_the_globally_oldest_and_accounting_returns_to_zero() {
        let one = ENTRY_OVERHEAD_BYTES + 64 + 4 * 16;
        let mut r = Reassembler::new(100, 65535, 100).with_memory(3 * one, usize::MAX);
        for src in 1..=5 {
            r.add(0, v4key(src, 0), 17, 0, true, &[0; 64]).unwrap_err();
            assert!(r.held_bytes() <= 3 * one);
        }
        assert_eq!(r.take_evictions().memory, 2);
        assert!(!r.entries.contains_key(&v4key(1, 0)) && !r.entries.contains_key(&v4key(2, 0)));
        let done = r
            .add(0, v4key(5, 0), 17, 64, false, &[1; 3])
            .expect("complete");
        assert_eq!(done.payload.len(), 67);
        assert_eq!(r.handle_timeout(100), 2);
        assert_eq!((r.held_bytes(), r.len()), (0, 0));
        assert!(r.source_bytes.is_empty() && r.order.is_empty() && r.by_source.is_empty());
    }

    proptest! {
        #[test]
        fn any_arrival_order_reassembles_the_original(
            len in 1usize..3000,
            chunk8 in 1usize..40,
            seed in any::<u64>(),
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let chunk = chunk8 * 8;
            let mut frags: Vec<(usize, bool, &[u8])> = data
                .chunks(chunk)
                .enumerate()
                .map(|(i, c)| (i * chunk, (i + 1) * chunk < len, c))
                .collect();
            // Deterministic shuffle from the seed.
            let mut s = seed | 1;
            for i in (1..frags.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                frags.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let mut r = Reassembler::new(4, 65535, 100);
            let mut result = None;
            for (off, mf, bytes) in frags {
                match r.add(0, KEY, 17, off, mf, bytes) {
                    Ok(done) => result = Some(done.payload),
                    Err(e) => prop_assert_eq!(e, ReasmDrop::Incomplete),
                }
            }
            prop_assert_eq!(result, Some(data));
            prop_assert!(r.is_empty());
            prop_assert_eq!(r.held_bytes(), 0);
        }
    }
}
