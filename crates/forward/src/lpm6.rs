//! IPv6 longest-prefix match as a poptrie-style compressed multibit trie (Asai and Ohara,
//! "Poptrie: A Compressed Trie with Population Count for Fast and Scalable Software IP
//! Routing Table Lookup", SIGCOMM 2015), without the direct-pointing top level.
//!
//! The address is read 6 bits at a time (stride 6, so a node's slots fit one `u64`): 22 levels
//! cover 128 bits (the last reads 2 address bits and 4 zero bits). Each node holds two
//! bitmaps over its 64 slots:
//!
//! - `children`: slot *s* continues in a child node; children of a node are contiguous in
//!   `nodes` from `child_base`, so child *s* is at `child_base + popcount(children ≤ s) − 1`;
//! - `leaves`: slot *s* starts a new run of equal leaf values; runs are stored once, contiguous
//!   from `leaf_base`, so leaf slot *s* reads `leaves[leaf_base + popcount(leaves ≤ s) − 1]`.
//!
//! A lookup is one node read and one `popcnt` per 6 bits until a leaf, then one leaf read:
//! a /48 ends after 8 nodes, a /64 after 11. Leaves are prefix-expanded (a route of length
//! 6d + k fills 2^(6−k) slots of its depth-d node) and leaf-pushed (a child inherits its slot's
//! value as the default of its subtree), so no backtracking is ever needed.
//!
//! Why this structure for IPv6: a DIR-style table over 128 bits is impossible and a binary trie
//! costs up to 128 dependent reads; a multibit trie with stride 6 bounds the reads at 22 and
//! the bitmaps keep sparse nodes small (a node is 24 bytes whatever its fan-out; leaf runs make
//! a node with one route inside a large cover cost 2–3 leaves, not 64).
//!
//! Updates rebuild the structure from the route list (O(routes × depth), control plane only)
//! into fresh vectors and swap them in, so a failed update leaves the table as it was; batch
//! changes with [`Lpm6::extend`]. Memory is bounded by `nodes_max` (each node 24 bytes, at
//! most 64 leaves of 2 bytes): an update that would need more fails with
//! [`LpmError::NodesFull`].
use std::collections::BTreeMap;

use crate::LpmError;

/// Largest next-hop id a leaf can hold (stored as id + 1, 0 meaning no route).
pub const NEXT_HOP_ID_MAX: u16 = u16::MAX - 1;
/// Address bits consumed per level.
const STRIDE_BITS: u32 = 6;
/// Levels needed for 128 bits.
pub const LEVELS: u32 = 128u32.div_ceil(STRIDE_BITS);
/// An empty leaf: no route.
const EMPTY: u16 = 0;

/// Bitmask of the first `len` bits of an IPv6 address.
#[inline]
pub(crate) fn mask6(len: u8) -> u128 {
    match len {
        0 => 0,
        n => u128::MAX << (128 - u32::from(n.min(128))),
    }
}

/// The 6-bit slot index of `addr` at `depth` (bits past 128 read as zero).
#[inline]
fn chunk(addr: u128, depth: u32) -> usize {
    let end = STRIDE_BITS * (depth + 1);
    if end <= 128 {
        ((addr >> (128 - end)) & 63) as usize
    } else {
        ((addr << (end - 128)) & 63) as usize
    }
}

/// `bit` and every lower bit.
#[inline]
fn upto(bit: u64) -> u64 {
    bit | (bit - 1)
}

/// One trie node. See the module documentation for the bitmaps' meaning.
///
/// Invariants: `leaves` has the bit of the lowest slot not in `children` (when any); the
/// indices computed from the bitmaps stay inside `nodes` and `leaves`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Node {
    children: u64,
    leaves: u64,
    child_base: u32,
    leaf_base: u32,
}

/// Poptrie-style IPv6 longest-prefix-match table mapping prefixes to next-hop ids
/// (`0..=NEXT_HOP_ID_MAX`). See the module documentation.
#[derive(Debug)]
pub struct Lpm6 {
    /// Invariant: `nodes[0]` is the root (always present); ≤ `nodes_max` entries.
    nodes: Vec<Node>,
    /// Leaf values, `id + 1` or [`EMPTY`].
    leaves: Vec<u16>,
    nodes_max: usize,
    /// The route list: `(len, masked prefix)` → next-hop id.
    routes: BTreeMap<(u8, u128), u16>,
}

/// A route as the builder walks them.
#[derive(Debug, Clone, Copy)]
struct Route {
    prefix: u128,
    len: u8,
    value: u16,
}

impl Lpm6 {
    /// An empty table bounded to `nodes_max` nodes (at least 1, the root).
    pub fn new(nodes_max: usize) -> Lpm6 {
        let mut t = Lpm6 {
            nodes: Vec::new(),
            leaves: Vec::new(),
            nodes_max: nodes_max.max(1),
            routes: BTreeMap::new(),
        };
        // An empty route list always fits in one node.
        let _ = t.rebuild();
        t
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Nodes in the lookup structure.
    pub fn nodes_used(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes held by the lookup structure (nodes and leaves; not the route list). At most
    /// [`Lpm6::memory_bytes_max`].
    pub fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * core::mem::size_of::<Node>()
            + self.leaves.capacity() * core::mem::size_of::<u16>()
    }

    /// The bound on [`Lpm6::memory_bytes`]: `nodes_max` nodes with 64 leaves each.
    pub fn memory_bytes_max(&self) -> usize {
        self.nodes_max * (core::mem::size_of::<Node>() + 64 * core::mem::size_of::<u16>())
    }

    /// The next-hop id of the longest prefix covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u16> {
        let mut node = *self.nodes.first()?;
        for depth in 0..LEVELS {
            let bit = 1u64 << chunk(addr, depth);
            if node.children & bit != 0 {
                let i = node.child_base + (node.children & upto(bit)).count_ones() - 1;
                node = *self.nodes.get(i as usize)?;
            } else {
                let i = node.leaf_base + (node.leaves & upto(bit)).count_ones() - 1;
                return self.leaves.get(i as usize)?.checked_sub(1);
            }
        }
        None
    }

    /// The next-hop id of the exact route `prefix/len`, if present.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u16> {
        self.routes.get(&(len, prefix & mask6(len))).copied()
    }

    /// Every route, as `(prefix, len, next-hop id)`, shortest prefixes first.
    pub fn routes(&self) -> impl Iterator<Item = (u128, u8, u16)> + '_ {
        self.routes.iter().map(|(&(len, p), &nh)| (p, len, nh))
    }

    /// Adds or replaces `prefix/len` → `next_hop` (bits past `len` ignored); returns the id
    /// it replaced. Rebuilds; the table is unchanged on error.
    pub fn insert(
        &mut self,
        prefix: u128,
        len: u8,
        next_hop: u16,
    ) -> Result<Option<u16>, LpmError> {
        let mut replaced = None;
        self.extend_with(&[(prefix, len, next_hop)], |old| replaced = old)?;
        Ok(replaced)
    }

    /// Adds or replaces every route, then rebuilds once. All or nothing: on error the table
    /// is unchanged.
    pub fn extend(&mut self, routes: &[(u128, u8, u16)]) -> Result<(), LpmError> {
        self.extend_with(routes, |_| {})
    }

    fn extend_with(
        &mut self,
        routes: &[(u128, u8, u16)],
        mut replaced: impl FnMut(Option<u16>),
    ) -> Result<(), LpmError> {
        for &(_, len, nh) in routes {
            if len > 128 {
                return Err(LpmError::BadPrefixLength);
            }
            if nh > NEXT_HOP_ID_MAX {
                return Err(LpmError::BadNextHop);
            }
        }
        let mut undo = Vec::with_capacity(routes.len());
        for &(prefix, len, nh) in routes {
            let key = (len, prefix & mask6(len));
            let old = self.routes.insert(key, nh);
            undo.push((key, old));
            replaced(old);
        }
        let result = self.rebuild();
        if result.is_err() {
            for (key, old) in undo.into_iter().rev() {
                match old {
                    Some(nh) => self.routes.insert(key, nh),
                    None => self.routes.remove(&key),
                };
            }
        }
        result
    }

    /// Removes `prefix/len`; returns its next-hop id, `None` (and no change) when absent.
    /// Removing never needs more nodes, so it cannot fail.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u16> {
        let old = self.routes.remove(&(len, prefix & mask6(len)))?;
        let rebuilt = self.rebuild();
        debug_assert!(rebuilt.is_ok(), "fewer routes never need more nodes");
        Some(old)
    }

    /// Rebuilds the lookup structure from the route list into fresh vectors; swaps them in
    /// only on success.
    fn rebuild(&mut self) -> Result<(), LpmError> {
        let mut b = Builder {
            nodes: vec![Node::default()],
            leaves: Vec::new(),
            nodes_max: self.nodes_max,
        };
        let default = self.routes.get(&(0, 0)).map_or(EMPTY, |&nh| nh + 1);
        let mut all: Vec<Route> = self
            .routes
            .iter()
            .filter(|((len, _), _)| *len > 0)
            .map(|(&(len, prefix), &nh)| Route {
                prefix,
                len,
                value: nh + 1,
            })
            .collect();
        // Prefix order makes each slot's routes contiguous at every depth.
        all.sort_by_key(|r| (r.prefix, r.len));
        b.build(0, 0, &all, default)?;
        b.nodes.shrink_to_fit();
        b.leaves.shrink_to_fit();
        self.nodes = b.nodes;
        self.leaves = b.leaves;
        Ok(())
    }
}

/// The structure under construction.
struct Builder {
    nodes: Vec<Node>,
    leaves: Vec<u16>,
    nodes_max: usize,
}

impl Builder {
    /// Fills node `idx` at `depth` from `routes` (every route longer than `6 × depth` inside
    /// the node's subtree, in prefix order) with `inherited` as the subtree's default.
    fn build(
        &mut self,
        idx: usize,
        depth: u32,
        routes: &[Route],
        inherited: u16,
    ) -> Result<(), LpmError> {
        let start_bits = STRIDE_BITS * depth;
        let end_bits = start_bits + STRIDE_BITS;
        let mut slots = [inherited; 64];
        let mut short: Vec<Route> = routes
            .iter()
            .filter(|r| u32::from(r.len) <= end_bits)
            .copied()
            .collect();
        short.sort_by_key(|r| r.len);
        for r in &short {
            // Prefix expansion: the route fixes `k` of this node's 6 bits.
            let k = u32::from(r.len) - start_bits;
            let first = chunk(r.prefix, depth);
            let count = 1usize << (STRIDE_BITS - k);
            slots[first..first + count].fill(r.value);
        }
        let long: Vec<Route> = routes
            .iter()
            .filter(|r| u32::from(r.len) > end_bits)
            .copied()
            .collect();
        let mut children = 0u64;
        for r in &long {
            children |= 1u64 << chunk(r.prefix, depth);
        }
        let mut leaves = 0u64;
        let leaf_base = self.leaves.len();
        let mut last = None;
        for (s, &v) in slots.iter().enumerate() {
            if children & (1u64 << s) == 0 && last != Some(v) {
                leaves |= 1u64 << s;
                self.leaves.push(v);
                last = Some(v);
            }
        }
        let child_count = children.count_ones() as usize;
        let child_base = self.nodes.len();
        if child_base + child_count > self.nodes_max {
            return Err(LpmError::NodesFull);
        }
        self.nodes.resize(child_base + child_count, Node::default());
        self.nodes[idx] = Node {
            children,
            leaves,
            child_base: child_base as u32,
            leaf_base: leaf_base as u32,
        };
        let mut rest = &long[..];
        for j in 0..child_count {
            let Some(first) = rest.first() else { break };
            let s = chunk(first.prefix, depth);
            let n = rest
                .iter()
                .take_while(|r| chunk(r.prefix, depth) == s)
                .count();
            let (mine, tail) = rest.split_at(n);
            self.build(child_base + j, depth + 1, mine, slots[s])?;
            rest = tail;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u128 {
        u128::from(s.parse::<core::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn longest_prefix_wins_across_levels_and_at_128() {
        let mut t = Lpm6::new(1024);
        assert_eq!(t.lookup(a("2001:db8::1")), None);
        t.insert(0, 0, 9).unwrap();
        t.insert(a("2001:db8::"), 32, 1).unwrap();
        t.insert(a("2001:db8:1::"), 48, 2).unwrap();
        t.insert(a("2001:db8:1::1"), 128, 3).unwrap();
        t.insert(a("2001:db8:1::"), 127, 4).unwrap();
        assert_eq!(t.lookup(a("fe80::1")), Some(9));
        assert_eq!(t.lookup(a("2001:db8:2::1")), Some(1));
        assert_eq!(t.lookup(a("2001:db8:1:5::1")), Some(2));
        assert_eq!(t.lookup(a("2001:db8:1::1")), Some(3));
        assert_eq!(t.lookup(a("2001:db8:1::")), Some(4));
        assert_eq!(t.lookup(a("2001:db8:1::2")), Some(2));
        assert_eq!(t.remove(a("2001:db8:1::1"), 128), Some(3));
        assert_eq!(t.lookup(a("2001:db8:1::1")), Some(4));
        assert_eq!(t.remove(0, 0), Some(9));
        assert_eq!(t.lookup(a("fe80::1")), None);
    }

    #[test]
    fn node_limit_refuses_and_leaves_the_table_unchanged() {
        let mut t = Lpm6::new(3);
        assert_eq!(t.insert(a("2001:db8::1"), 128, 1), Err(LpmError::NodesFull));
        assert!(t.is_empty());
        assert_eq!(t.lookup(a("2001:db8::1")), None);
        assert!(t.memory_bytes() <= t.memory_bytes_max());
    }
}
