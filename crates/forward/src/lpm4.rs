//! IPv4 longest-prefix match as DIR-24-8 (Gupta, Lin and McKeown, "Routing Lookups in Hardware
//! at Memory Access Speeds", INFOCOM 1998; the layout DPDK's `rte_lpm` uses).
//!
//! A lookup is one or two dependent memory reads, whatever the table holds:
//!
//! - `tbl24`: 2^24 entries of 16 bits (32 MiB), indexed by the top 24 bits of the address. An
//!   entry is either empty (`0`), a next-hop id plus one (`1..=0x7fff`), or — top bit set — the
//!   index of a `tbl8` group;
//! - `tbl8`: groups of 256 entries of 16 bits, one per /24 that holds a route longer than /24,
//!   indexed by the low 8 bits; an entry is empty or a next-hop id plus one.
//!
//! Why DIR-24-8 rather than DIR-16-8-8: BGP-like tables are dominated by /24 and shorter
//! prefixes, so almost every lookup ends in the first read; the cost is 32 MiB of mostly
//! untouched first level (zero pages until a route covers them), which a forwarding host can
//! afford once per shard-group. DIR-16-8-8 would need 128 KiB but a third read for every /17–/24.
//!
//! Updates are incremental and exact. The control plane keeps the route list (one ordered map
//! per prefix length); inserting or deleting `p/len` *repaints* `p`'s range: first with the
//! value that now applies to the whole range (the route itself, or its longest strictly
//! shorter cover), then every more specific route inside the range, shortest first, so the
//! longest match always wins. A `/0` change repaints the whole table; a `/24` change touches one
//! entry plus its group.
//!
//! Memory is bounded: the first level is fixed and `tbl8` holds at most `tbl8_groups_max`
//! groups (512 bytes each); an insert that would need one more fails with
//! [`LpmError::Tbl8Full`] and leaves the table unchanged. [`Lpm4::memory_bytes`] reports it.
use std::collections::BTreeMap;

use crate::LpmError;

/// Largest next-hop id a DIR-24-8 entry can hold (15 bits, stored as id + 1).
pub const NEXT_HOP_ID_MAX: u16 = 0x7ffe;
/// Entries of the first level.
pub const TBL24_ENTRIES: usize = 1 << 24;
/// Entries of one second-level group.
pub const TBL8_GROUP_ENTRIES: usize = 256;
/// Most groups a 15-bit group index can name.
pub const TBL8_GROUPS_LIMIT: usize = 1 << 15;

/// Top bit of a `tbl24` entry: the low 15 bits are a `tbl8` group index.
const EXT: u16 = 0x8000;
/// An empty entry: no route.
const EMPTY: u16 = 0;

/// Bitmask of the first `len` bits of an IPv4 address.
#[inline]
pub(crate) fn mask4(len: u8) -> u32 {
    match len {
        0 => 0,
        n => u32::MAX << (32 - u32::from(n.min(32))),
    }
}

/// DIR-24-8 IPv4 longest-prefix-match table mapping prefixes to next-hop ids
/// (`0..=NEXT_HOP_ID_MAX`). See the module documentation.
pub struct Lpm4 {
    /// Invariant: length [`TBL24_ENTRIES`]; an `EXT` entry names an allocated group.
    tbl24: Box<[u16]>,
    /// Invariant: length = groups allocated × 256 ≤ `tbl8_groups_max` × 256.
    tbl8: Vec<u16>,
    /// Allocated groups not in use (their /24 lost its last long route).
    tbl8_free: Vec<u16>,
    /// Invariant: ≤ [`TBL8_GROUPS_LIMIT`].
    tbl8_groups_max: usize,
    /// The route list: `routes[len]` maps a masked prefix to its next-hop id.
    /// Invariant: a /24 has a group in `tbl24` exactly when it holds a route longer than /24.
    routes: Vec<BTreeMap<u32, u16>>,
}

impl core::fmt::Debug for Lpm4 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lpm4")
            .field("routes", &self.len())
            .field("tbl8_groups_used", &self.tbl8_groups_used())
            .field("tbl8_groups_max", &self.tbl8_groups_max)
            .finish()
    }
}

impl Lpm4 {
    /// An empty table that may hold up to `tbl8_groups_max` (clamped to
    /// [`TBL8_GROUPS_LIMIT`]) /24s with longer routes.
    pub fn new(tbl8_groups_max: usize) -> Lpm4 {
        Lpm4 {
            tbl24: vec![EMPTY; TBL24_ENTRIES].into_boxed_slice(),
            tbl8: Vec::new(),
            tbl8_free: Vec::new(),
            tbl8_groups_max: tbl8_groups_max.min(TBL8_GROUPS_LIMIT),
            routes: (0..=32).map(|_| BTreeMap::new()).collect(),
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.iter().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Groups holding a /24's longer routes now.
    pub fn tbl8_groups_used(&self) -> usize {
        self.tbl8.len() / TBL8_GROUP_ENTRIES - self.tbl8_free.len()
    }

    /// Bytes held by the lookup structure: the fixed first level plus the groups allocated
    /// (the route list, a control-plane copy, is not counted). At most
    /// `2 × 2^24 + 512 × tbl8_groups_max`.
    pub fn memory_bytes(&self) -> usize {
        (self.tbl24.len() + self.tbl8.capacity()) * core::mem::size_of::<u16>()
    }

    /// The upper bound of [`Lpm4::memory_bytes`] for this table.
    pub fn memory_bytes_max(&self) -> usize {
        (TBL24_ENTRIES + self.tbl8_groups_max * TBL8_GROUP_ENTRIES) * core::mem::size_of::<u16>()
    }

    /// The next-hop id of the longest prefix covering `addr` (two reads at most).
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u16> {
        let e = self
            .tbl24
            .get((addr >> 8) as usize)
            .copied()
            .unwrap_or(EMPTY);
        let e = if e & EXT != 0 {
            let i = (usize::from(e & !EXT) << 8) | (addr & 0xff) as usize;
            self.tbl8.get(i).copied().unwrap_or(EMPTY)
        } else {
            e
        };
        e.checked_sub(1)
    }

    /// The next-hop id of the exact route `prefix/len`, if present.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u16> {
        self.routes
            .get(usize::from(len))?
            .get(&(prefix & mask4(len)))
            .copied()
    }

    /// Every route, as `(prefix, len, next-hop id)`, shortest prefixes first.
    pub fn routes(&self) -> impl Iterator<Item = (u32, u8, u16)> + '_ {
        self.routes
            .iter()
            .enumerate()
            .flat_map(|(len, m)| m.iter().map(move |(&p, &nh)| (p, len as u8, nh)))
    }

    /// Adds or replaces `prefix/len` → `next_hop` (bits of `prefix` past `len` are ignored).
    /// Returns the next-hop id it replaced. The table is unchanged on error.
    pub fn insert(&mut self, prefix: u32, len: u8, next_hop: u16) -> Result<Option<u16>, LpmError> {
        if len > 32 {
            return Err(LpmError::BadPrefixLength);
        }
        if next_hop > NEXT_HOP_ID_MAX {
            return Err(LpmError::BadNextHop);
        }
        let prefix = prefix & mask4(len);
        if len > 24 {
            self.ensure_group((prefix >> 8) as usize)?;
        }
        let old = self.routes[usize::from(len)].insert(prefix, next_hop);
        self.repaint(prefix, len);
        Ok(old)
    }

    /// Removes `prefix/len`; returns its next-hop id, `None` (and no change) when absent.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u16> {
        let prefix = prefix & mask4(len);
        let old = self.routes.get_mut(usize::from(len))?.remove(&prefix)?;
        self.repaint(prefix, len);
        if len > 24 {
            self.release_group_if_unused((prefix >> 8) as usize);
        }
        Some(old)
    }

    /// Makes sure the /24 at `idx24` has a group, filled with what the /24 held.
    fn ensure_group(&mut self, idx24: usize) -> Result<(), LpmError> {
        let e = self.tbl24[idx24];
        if e & EXT != 0 {
            return Ok(());
        }
        let group = match self.tbl8_free.pop() {
            Some(g) => g,
            None => {
                let allocated = self.tbl8.len() / TBL8_GROUP_ENTRIES;
                if allocated >= self.tbl8_groups_max {
                    return Err(LpmError::Tbl8Full);
                }
                self.tbl8
                    .resize(self.tbl8.len() + TBL8_GROUP_ENTRIES, EMPTY);
                allocated as u16
            }
        };
        let start = usize::from(group) * TBL8_GROUP_ENTRIES;
        self.tbl8[start..start + TBL8_GROUP_ENTRIES].fill(e);
        self.tbl24[idx24] = EXT | group;
        Ok(())
    }

    /// Frees the /24's group once no route longer than /24 lies inside it; the /24's entry
    /// takes the value the group's entries all share.
    fn release_group_if_unused(&mut self, idx24: usize) {
        let e = self.tbl24[idx24];
        if e & EXT == 0 {
            return;
        }
        let lo = (idx24 as u32) << 8;
        let hi = lo | 0xff;
        if (25..=32).any(|l| self.routes[l].range(lo..=hi).next().is_some()) {
            return;
        }
        let group = e & !EXT;
        let start = usize::from(group) * TBL8_GROUP_ENTRIES;
        let value = self.tbl8[start];
        debug_assert!(
            self.tbl8[start..start + TBL8_GROUP_ENTRIES]
                .iter()
                .all(|&v| v == value)
        );
        self.tbl24[idx24] = value;
        self.tbl8_free.push(group);
    }

    /// The encoded entry (`id + 1`, or empty) that applies to the whole of `prefix/len` from
    /// routes of length ≤ `len`.
    fn cover_value(&self, prefix: u32, len: u8) -> u16 {
        (0..=len)
            .rev()
            .find_map(|l| self.routes[usize::from(l)].get(&(prefix & mask4(l))))
            .map_or(EMPTY, |&nh| nh + 1)
    }

    /// Rewrites every entry `prefix/len` covers: its cover first, then each more specific
    /// route inside it, shortest first (so longer prefixes overwrite shorter ones).
    fn repaint(&mut self, prefix: u32, len: u8) {
        let value = self.cover_value(prefix, len);
        self.paint(prefix, len, value);
        let last = prefix | !mask4(len);
        for l in len + 1..=32 {
            // Collected per length to release the borrow of `routes` while painting; this is
            // the control plane (route changes), never the per-packet path.
            let inner: Vec<(u32, u16)> = self.routes[usize::from(l)]
                .range(prefix..=last)
                .map(|(&p, &nh)| (p, nh))
                .collect();
            for (p, nh) in inner {
                self.paint(p, l, nh + 1);
            }
        }
    }

    /// Sets every entry under `prefix/len` to `value` (groups included for `len` ≤ 24).
    fn paint(&mut self, prefix: u32, len: u8, value: u16) {
        if len <= 24 {
            let first = (prefix >> 8) as usize;
            let count = 1usize << (24 - len);
            for e in &mut self.tbl24[first..first + count] {
                if *e & EXT != 0 {
                    let start = usize::from(*e & !EXT) * TBL8_GROUP_ENTRIES;
                    self.tbl8[start..start + TBL8_GROUP_ENTRIES].fill(value);
                } else {
                    *e = value;
                }
            }
        } else {
            let e = self.tbl24[(prefix >> 8) as usize];
            debug_assert!(e & EXT != 0, "a route longer than /24 lives in a group");
            if e & EXT == 0 {
                return;
            }
            let start = usize::from(e & !EXT) * TBL8_GROUP_ENTRIES + (prefix & 0xff) as usize;
            let count = 1usize << (32 - len);
            self.tbl8[start..start + count].fill(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u32 {
        u32::from(s.parse::<core::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn longest_prefix_wins_and_delete_restores_the_cover() {
        let mut t = Lpm4::new(16);
        t.insert(a("10.0.0.0"), 8, 1).unwrap();
        t.insert(a("10.1.0.0"), 16, 2).unwrap();
        t.insert(a("10.1.2.128"), 25, 3).unwrap();
        t.insert(a("10.1.2.129"), 32, 4).unwrap();
        assert_eq!(t.lookup(a("10.9.9.9")), Some(1));
        assert_eq!(t.lookup(a("10.1.9.9")), Some(2));
        assert_eq!(t.lookup(a("10.1.2.1")), Some(2));
        assert_eq!(t.lookup(a("10.1.2.200")), Some(3));
        assert_eq!(t.lookup(a("10.1.2.129")), Some(4));
        assert_eq!(t.lookup(a("11.0.0.0")), None);
        assert_eq!(t.tbl8_groups_used(), 1);
        assert_eq!(t.remove(a("10.1.2.128"), 25), Some(3));
        assert_eq!(t.lookup(a("10.1.2.200")), Some(2));
        assert_eq!(t.remove(a("10.1.2.129"), 32), Some(4));
        assert_eq!(
            t.tbl8_groups_used(),
            0,
            "the group is released with its last long route"
        );
        assert_eq!(t.lookup(a("10.1.2.129")), Some(2));
        assert_eq!(t.remove(a("10.1.0.0"), 16), Some(2));
        assert_eq!(t.lookup(a("10.1.2.129")), Some(1));
        t.insert(0, 0, 7).unwrap();
        assert_eq!(t.lookup(a("11.0.0.0")), Some(7));
        assert_eq!(t.lookup(a("10.1.0.0")), Some(1));
    }

    #[test]
    fn group_limit_refuses_and_leaves_the_table_unchanged() {
        let mut t = Lpm4::new(1);
        t.insert(a("10.0.0.0"), 25, 1).unwrap();
        assert_eq!(t.insert(a("10.0.1.0"), 25, 2), Err(LpmError::Tbl8Full));
        assert_eq!(t.len(), 1);
        assert_eq!(t.lookup(a("10.0.1.1")), None);
        assert!(t.memory_bytes() <= t.memory_bytes_max());
    }
}
