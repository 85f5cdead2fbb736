//! IP fragment reassembly for IPv4 (RFC 791 §3.2, hole tracking after RFC 815) and IPv6
//! (RFC 8200 §4.5).
//!
//! Policy (the same for both families):
//! - bounded: at most `datagrams_max` datagrams in progress, at most `bytes_max` bytes of
//!   payload per datagram, and a timer per datagram started by its first fragment;
//! - a fragment that overlaps any byte already received drops the whole datagram and every
//!   fragment that follows for it until the timer runs out (RFC 5722 §4 for IPv6; our policy
//!   for IPv4, where overlap is the classic evasion trick). An *exact* duplicate (same offset,
//!   same length) is dropped alone and counted;
//! - a non-final fragment whose length is not a multiple of 8, or a fragment that disagrees
//!   with the total length the final fragment announced, drops the whole datagram.
//!
//! Received pieces are kept as sorted, disjoint byte ranges (RFC 815's holes are the gaps
//! between them). The table is a `BTreeMap`, so the timer walk runs in key order.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::collections::BTreeMap;

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
    /// The table was full; the fragment was dropped.
    TableFull,
    /// The datagram would exceed the byte limit and was dropped.
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
    datagrams_max: usize,
    bytes_max: usize,
    timeout_ns: u64,
}

impl Reassembler {
    pub fn new(datagrams_max: usize, bytes_max: usize, timeout_ns: u64) -> Self {
        Reassembler {
            entries: BTreeMap::new(),
            datagrams_max,
            // Neither family's reassembled payload can exceed 65535 bytes of offsets + data.
            bytes_max: bytes_max.min(65_535 + 8 * 0x1fff),
            timeout_ns,
        }
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
            if self.entries.len() >= self.datagrams_max {
                return Err(ReasmDrop::TableFull);
            }
            self.entries.insert(
                key,
                Entry {
                    deadline_ns: now.saturating_add(self.timeout_ns),
                    ranges: Vec::new(),
                    data: Vec::new(),
                    total_len: None,
                    poisoned: false,
                    protocol,
                },
            );
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
        let Some(total) = entry.total_len else {
            return Err(ReasmDrop::Incomplete);
        };
        // Ranges are disjoint, so full coverage is "their lengths add up to the total".
        let covered: usize = entry.ranges.iter().map(|&(s, e)| e - s).sum();
        if covered != total {
            return Err(ReasmDrop::Incomplete);
        }
        match self.entries.remove(&key) {
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
    }

    /// The earliest reassembly deadline.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.entries.values().map(|e| e.deadline_ns).min()
    }

    /// Removes expired datagrams; returns how many incomplete (not already condemned)
    /// datagrams timed out.
    pub fn handle_timeout(&mut self, now: u64) -> u64 {
        let mut timed_out = 0;
        self.entries.retain(|_, e| {
            if e.deadline_ns > now {
                return true;
            }
            if !e.poisoned {
                timed_out += 1;
            }
            false
        });
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
        }
    }
}
