//! A set of slot indices as a hierarchical bitmap: the TCP part's dirty set (issue 17
//! item 3, "a flag-plus-vector dirty list; no tree operation per segment").
//!
//! The flag is one bit per slot (level 0); each higher level has one bit per word of the
//! level below, set iff that word is non-zero. Insert and remove touch one word per level
//! while a word changes between zero and non-zero (at most `levels` ≤ 4 words for 16 M
//! slots); [`IndexSet::next_from`] climbs until a word has a bit at or after the position
//! and descends by `trailing_zeros`, so it is O(levels) too.
//!
//! Why bits and not a vector of dirty slots: the flush drains dirty connections round-robin
//! from a cursor in *slot order* (deterministic output: the simulator's traces and every
//! packet test depend on it), and an insertion-ordered vector would change that order. The
//! bitmap keeps the order of the `BTreeSet<usize>` it replaces exactly.
//!
//! Invariant: for every level `l > 0`, bit `w` of `levels[l]` is set iff `levels[l-1][w]`
//! is non-zero; the top level is a single word; `len` counts the set bits of level 0.

/// Slot indices, ordered (see the module docs).
#[derive(Clone, Default)]
pub(crate) struct IndexSet {
    levels: Vec<Vec<u64>>,
    len: usize,
}

impl core::fmt::Debug for IndexSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IndexSet")
            .field("len", &self.len)
            .field("first", &self.first())
            .finish()
    }
}

impl IndexSet {
    pub(crate) fn new() -> IndexSet {
        IndexSet::default()
    }

    /// Indices in the set.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Grows the levels so index `i` fits (allocates only when the slot table grew).
    fn reserve_index(&mut self, i: usize) {
        let mut words = i / 64 + 1;
        let mut l = 0;
        loop {
            if self.levels.len() <= l {
                // A new top level: one bit per word of the level below, set where that word
                // already has members.
                let below: Vec<u64> = self.levels.last().cloned().unwrap_or_default();
                let mut v = vec![0u64; below.len().div_ceil(64).max(1)];
                for (w, &word) in below.iter().enumerate() {
                    if word != 0 {
                        if let Some(x) = v.get_mut(w / 64) {
                            *x |= 1 << (w % 64);
                        }
                    }
                }
                self.levels.push(v);
            }
            if let Some(v) = self.levels.get_mut(l) {
                if v.len() < words {
                    // New words of a grown level: their children are new too, so all zero.
                    v.resize(words, 0);
                }
                words = v.len();
            }
            if words == 1 {
                break;
            }
            words = words.div_ceil(64);
            l += 1;
        }
    }

    /// True if `i` is in the set.
    pub(crate) fn contains(&self, i: usize) -> bool {
        self.levels
            .first()
            .and_then(|v| v.get(i / 64))
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Adds `i`; false if it was there. Inlined for the per-segment case (a connection
    /// already in the set, or its level-0 word the only level or already non-zero: one
    /// word touched); the rest out of line.
    #[inline(always)]
    pub(crate) fn insert(&mut self, i: usize) -> bool {
        let bit = 1u64 << (i % 64);
        let single = self.levels.len() == 1;
        if let Some(word) = self.levels.first_mut().and_then(|v| v.get_mut(i / 64)) {
            let was = *word;
            if was & bit != 0 {
                return false;
            }
            if was != 0 || single {
                // No level above changes: the word was already marked there, or there is
                // no level above.
                *word = was | bit;
                self.len += 1;
                return true;
            }
        }
        self.insert_slow(i)
    }

    /// [`IndexSet::insert`] when the levels must grow or a higher level changes.
    #[inline(never)]
    fn insert_slow(&mut self, i: usize) -> bool {
        let bit = 1u64 << (i % 64);
        if self.levels.first().is_none_or(|v| v.len() <= i / 64) {
            self.reserve_index(i);
        }
        let Some(word) = self.levels.first_mut().and_then(|v| v.get_mut(i / 64)) else {
            return false;
        };
        let was = *word;
        if was & bit != 0 {
            return false;
        }
        *word = was | bit;
        self.len += 1;
        if was == 0 {
            // The word became non-zero: mark it in the levels above, up to the first word
            // that already had a bit.
            let mut pos = i / 64;
            for v in self.levels.iter_mut().skip(1) {
                let Some(w) = v.get_mut(pos / 64) else {
                    break;
                };
                let was = *w;
                *w |= 1 << (pos % 64);
                if was != 0 {
                    break;
                }
                pos /= 64;
            }
        }
        true
    }

    /// Removes `i`; false if it was not there.
    pub(crate) fn remove(&mut self, i: usize) -> bool {
        if !self.contains(i) {
            return false;
        }
        self.len -= 1;
        let mut pos = i;
        for v in self.levels.iter_mut() {
            let Some(w) = v.get_mut(pos / 64) else {
                break;
            };
            *w &= !(1 << (pos % 64));
            if *w != 0 {
                break;
            }
            pos /= 64;
        }
        true
    }

    /// The smallest index `≥ from` in the set.
    pub(crate) fn next_from(&self, from: usize) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut level = 0;
        let mut pos = from;
        loop {
            let words = self.levels.get(level)?;
            let w = pos / 64;
            let word = *words.get(w)?;
            let masked = word & (u64::MAX << (pos % 64));
            if masked != 0 {
                pos = w * 64 + masked.trailing_zeros() as usize;
                break;
            }
            level += 1;
            pos = w + 1;
        }
        while level > 0 {
            level -= 1;
            let word = *self.levels.get(level)?.get(pos)?;
            pos = pos * 64 + word.trailing_zeros() as usize;
        }
        Some(pos)
    }

    /// The smallest index in the set.
    pub(crate) fn first(&self) -> Option<usize> {
        self.next_from(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Same answers as `BTreeSet<usize>` for insert, remove, contains, first and the
        /// cursor query the flush uses (`range(from..).next()`), over sizes that need one to
        /// three levels.
        #[test]
        fn the_bitmap_behaves_like_the_btreeset(
            ops in proptest::collection::vec(
                (0u8..4, prop_oneof![0usize..70, 0usize..5_000, 0usize..300_000]), 1..400),
        ) {
            let mut s = IndexSet::new();
            let mut m = BTreeSet::new();
            for (op, i) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(s.insert(i), m.insert(i)),
                    2 => prop_assert_eq!(s.remove(i), m.remove(&i)),
                    _ => prop_assert_eq!(s.contains(i), m.contains(&i)),
                }
                prop_assert_eq!(s.len(), m.len());
                prop_assert_eq!(s.first(), m.first().copied());
                prop_assert_eq!(s.next_from(i), m.range(i..).next().copied());
                prop_assert_eq!(s.next_from(i + 1), m.range(i + 1..).next().copied());
            }
            let mut at = 0;
            let mut got = Vec::new();
            while let Some(i) = s.next_from(at) {
                got.push(i);
                at = i + 1;
            }
            prop_assert_eq!(got, m.into_iter().collect::<Vec<_>>());
        }
    }
}
