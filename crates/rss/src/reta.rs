//! The RSS indirection table (RETA): hash low bits → queue.

use core::fmt;

/// Default RETA size (entries), as on the Intel 82599 and most Linux drivers.
pub const RETA_SIZE_DEFAULT: usize = 128;
/// Largest supported RETA size (entries), as on Intel E810 PFs.
pub const RETA_SIZE_MAX: usize = 2048;

/// Why a RETA operation was refused. The table is left unchanged on every error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetaError {
    /// Size not a power of two in `1..=2048`.
    BadSize,
    /// `fill_equal(0)`: no queue to spread over.
    NoQueues,
    /// Every weight is zero.
    AllWeightsZero,
    /// The weights sum past the table size, so some queue with a non-zero weight could get
    /// no entry (`ethtool -X` refuses this too).
    WeightsExceedSize,
    /// More weights than queue numbers (`u16`).
    TooManyWeights,
    /// `set` with an index past the end of the table.
    IndexOutOfRange,
}

impl fmt::Display for RetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RetaError::BadSize => "RETA size must be a power of two in 1..=2048",
            RetaError::NoQueues => "RETA fill needs at least one queue",
            RetaError::AllWeightsZero => "at least one weight must be non-zero",
            RetaError::WeightsExceedSize => "total weight exceeds the size of the RETA",
            RetaError::TooManyWeights => "more weights than queue numbers",
            RetaError::IndexOutOfRange => "RETA index out of range",
        })
    }
}

impl core::error::Error for RetaError {}

/// Indirection table: `queue_for_hash(h) = entries[h & (size − 1)]`.
///
/// Invariant: `entries.len()` is a power of two in `1..=RETA_SIZE_MAX`, so the mask never
/// indexes out of range. Freshly built tables map every entry to queue 0 until filled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reta {
    entries: Vec<u16>,
}

impl Default for Reta {
    /// 128 entries spread over one queue (all zeros).
    fn default() -> Self {
        Self {
            entries: vec![0; RETA_SIZE_DEFAULT],
        }
    }
}

impl Reta {
    /// A table of `size_entries` entries, all on queue 0.
    pub fn new(size_entries: usize) -> Result<Self, RetaError> {
        if !size_entries.is_power_of_two() || size_entries > RETA_SIZE_MAX {
            return Err(RetaError::BadSize);
        }
        Ok(Self {
            entries: vec![0; size_entries],
        })
    }

    /// A table holding exactly `entries` (e.g. read back from a device or a config file).
    pub fn from_entries(entries: &[u16]) -> Result<Self, RetaError> {
        let mut reta = Self::new(entries.len())?;
        reta.entries.copy_from_slice(entries);
        Ok(reta)
    }

    /// A table of `size_entries` entries filled like `ethtool -X equal queues`.
    pub fn with_equal(size_entries: usize, queues: u16) -> Result<Self, RetaError> {
        let mut reta = Self::new(size_entries)?;
        reta.fill_equal(queues)?;
        Ok(reta)
    }

    /// Number of entries (a power of two).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: a RETA has at least one entry. (Present for clippy's `len` convention.)
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, index order.
    pub fn entries(&self) -> &[u16] {
        &self.entries
    }

    /// Index a hash selects: its low `log2(size)` bits.
    #[inline]
    pub fn index_for_hash(&self, hash: u32) -> usize {
        (hash as usize) & (self.entries.len() - 1)
    }

    /// Queue for a hash: `entries[hash & (size − 1)]`.
    #[inline]
    pub fn queue_for_hash(&self, hash: u32) -> u16 {
        // The index is masked below len (power of two ≥ 1): `get` cannot miss.
        self.entries
            .get(self.index_for_hash(hash))
            .copied()
            .unwrap_or(0)
    }

    /// Round-robin: entry `i` → queue `i % queues`, like `ethtool -X <dev> equal N`.
    pub fn fill_equal(&mut self, queues: u16) -> Result<(), RetaError> {
        if queues == 0 {
            return Err(RetaError::NoQueues);
        }
        for (i, entry) in self.entries.iter_mut().enumerate() {
            // i < 2048, so the remainder fits in u16.
            *entry = (i % usize::from(queues)) as u16;
        }
        Ok(())
    }

    /// Proportional fill like `ethtool -X <dev> weight w0 w1 …`: queue `q` gets about
    /// `size · w_q / Σw` consecutive entries.
    ///
    /// ethtool's algorithm (userspace `fill_indir_table`): with cumulative weights
    /// `P_q = w_0 + … + w_q`, entry `i` belongs to the first queue `q` with
    /// `i < ⌊size · P_q / Σw⌋`. Queue `q` therefore owns the contiguous index range
    /// `[⌊size·P_{q−1}/Σw⌋, ⌊size·P_q/Σw⌋)`, whose length differs from the exact share
    /// `size·w_q/Σw` by less than one entry; zero-weight queues own nothing. Like ethtool we
    /// refuse an all-zero weight list and a weight sum above the table size.
    pub fn fill_weights(&mut self, weights: &[u32]) -> Result<(), RetaError> {
        if weights.len() > usize::from(u16::MAX) + 1 {
            return Err(RetaError::TooManyWeights);
        }
        let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        if sum == 0 {
            return Err(RetaError::AllWeightsZero);
        }
        let size = self.entries.len() as u64;
        if sum > size {
            return Err(RetaError::WeightsExceedSize);
        }
        let mut queue: usize = 0;
        let mut partial: u64 = weights.first().map_or(0, |&w| u64::from(w));
        for (i, entry) in self.entries.iter_mut().enumerate() {
            // Advance while entry i lies at or past queue's upper boundary. Terminates: the
            // last boundary is size·sum/sum = size > i.
            while (i as u64) >= size * partial / sum {
                queue += 1;
                partial += weights.get(queue).map_or(0, |&w| u64::from(w));
            }
            // queue < weights.len() ≤ 65,536 (checked above).
            *entry = queue as u16;
        }
        Ok(())
    }

    /// Points entry `index` at `queue`, leaving every other entry alone (the primitive that
    /// rebalancing builds on).
    pub fn set(&mut self, index: usize, queue: u16) -> Result<(), RetaError> {
        let slot = self
            .entries
            .get_mut(index)
            .ok_or(RetaError::IndexOutOfRange)?;
        *slot = queue;
        Ok(())
    }

    /// Entries per queue: `counts[q]` = number of entries pointing at queue `q`, for queues
    /// `0..=max queue`.
    pub fn entries_per_queue(&self) -> Vec<usize> {
        let top = self.entries.iter().copied().max().map_or(0, usize::from);
        let mut counts = vec![0usize; top + 1];
        for &q in &self.entries {
            if let Some(c) = counts.get_mut(usize::from(q)) {
                *c += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_sizes_not_power_of_two_or_too_big() {
        assert_eq!(Reta::new(0), Err(RetaError::BadSize));
        assert_eq!(Reta::new(96), Err(RetaError::BadSize));
        assert_eq!(Reta::new(4096), Err(RetaError::BadSize));
        assert_eq!(Reta::new(1).map(|r| r.len()), Ok(1));
        assert_eq!(Reta::new(2048).map(|r| r.len()), Ok(2048));
        assert_eq!(Reta::default().len(), 128);
    }

    #[test]
    fn queue_for_hash_uses_low_bits() {
        let mut reta = Reta::new(128).expect("valid size");
        reta.set(0x55, 7).expect("in range");
        assert_eq!(reta.queue_for_hash(0xdead_bf55), 7);
        assert_eq!(reta.queue_for_hash(0x0000_0055), 7);
        assert_eq!(reta.queue_for_hash(0x0000_0054), 0);
        let one = Reta::new(1).expect("valid size");
        assert_eq!(one.queue_for_hash(u32::MAX), 0);
    }

    #[test]
    fn fill_equal_is_round_robin_like_ethtool_equal() {
        let mut reta = Reta::new(128).expect("valid size");
        reta.fill_equal(3).expect("three queues");
        for (i, &q) in reta.entries().iter().enumerate() {
            assert_eq!(usize::from(q), i % 3);
        }
        assert_eq!(reta.entries_per_queue(), vec![43, 43, 42]);
        assert_eq!(reta.fill_equal(0), Err(RetaError::NoQueues));
    }

    #[test]
    fn fill_weights_6_0_8_1_matches_ethtool_proportions() {
        let mut reta = Reta::new(128).expect("valid size");
        reta.fill_weights(&[6, 0, 8, 1]).expect("valid weights");
        // Boundaries ⌊128·6/15⌋ = 51, ⌊128·6/15⌋ = 51, ⌊128·14/15⌋ = 119, 128:
        // exact shares 51.2, 0, 68.3, 8.5.
        assert_eq!(reta.entries_per_queue(), vec![51, 0, 68, 9]);
        // Contiguous ranges, queue order.
        assert!(reta.entries().windows(2).all(|w| w[0] <= w[1]));
        // Each share is within one entry of the exact proportion.
        for (q, (&count, &w)) in reta
            .entries_per_queue()
            .iter()
            .zip(&[6u32, 0, 8, 1])
            .enumerate()
        {
            let exact = 128.0 * f64::from(w) / 15.0;
            assert!(
                (count as f64 - exact).abs() < 1.0 + 1e-9,
                "queue {q}: {count} entries vs exact {exact}"
            );
        }
    }

    #[test]
    fn fill_weights_equal_weights_give_equal_blocks() {
        let mut reta = Reta::new(128).expect("valid size");
        reta.fill_weights(&[1, 1, 1, 1]).expect("valid weights");
        assert_eq!(reta.entries_per_queue(), vec![32, 32, 32, 32]);
        assert_eq!(reta.entries().first(), Some(&0));
        assert_eq!(reta.entries().last(), Some(&3));
    }

    #[test]
    fn fill_weights_rejects_zero_and_oversized_weights_without_change() {
        let mut reta = Reta::with_equal(16, 4).expect("valid");
        let before = reta.clone();
        assert_eq!(reta.fill_weights(&[0, 0]), Err(RetaError::AllWeightsZero));
        assert_eq!(reta.fill_weights(&[]), Err(RetaError::AllWeightsZero));
        assert_eq!(
            reta.fill_weights(&[10, 7]),
            Err(RetaError::WeightsExceedSize)
        );
        assert_eq!(reta, before);
    }

    #[test]
    fn from_entries_keeps_entries_and_checks_size() {
        let reta = Reta::from_entries(&[3, 1, 4, 1]).expect("size 4");
        assert_eq!(reta.entries(), &[3, 1, 4, 1]);
        assert_eq!(reta.queue_for_hash(6), 4);
        assert_eq!(Reta::from_entries(&[0; 3]), Err(RetaError::BadSize));
        assert_eq!(Reta::from_entries(&[]), Err(RetaError::BadSize));
    }

    proptest::proptest! {
        #[test]
        fn fill_weights_gives_each_queue_its_share_within_one_entry(
            size_log2 in 0u32..=11,
            weights in proptest::collection::vec(0u32..=64, 1..=16),
        ) {
            let size = 1usize << size_log2;
            let sum: u32 = weights.iter().sum();
            let mut reta = Reta::new(size).expect("valid size");
            let result = reta.fill_weights(&weights);
            if sum == 0 {
                proptest::prop_assert_eq!(result, Err(RetaError::AllWeightsZero));
            } else if sum as usize > size {
                proptest::prop_assert_eq!(result, Err(RetaError::WeightsExceedSize));
            } else {
                proptest::prop_assert_eq!(result, Ok(()));
                // Contiguous, ascending queue ranges.
                proptest::prop_assert!(reta.entries().windows(2).all(|w| w[0] <= w[1]));
                let counts = reta.entries_per_queue();
                for (q, &w) in weights.iter().enumerate() {
                    let count = counts.get(q).copied().unwrap_or(0) as f64;
                    let exact = size as f64 * f64::from(w) / f64::from(sum);
                    proptest::prop_assert!((count - exact).abs() < 1.0, "queue {q}: {count} vs {exact}");
                    if w == 0 {
                        proptest::prop_assert_eq!(count, 0.0);
                    }
                }
            }
        }
    }

    #[test]
    fn set_moves_only_that_bucket() {
        let mut reta = Reta::with_equal(128, 8).expect("valid");
        let before = reta.clone();
        reta.set(17, 5).expect("in range");
        for (i, (&a, &b)) in before.entries().iter().zip(reta.entries()).enumerate() {
            if i == 17 {
                assert_eq!(b, 5);
            } else {
                assert_eq!(a, b, "entry {i} moved");
            }
        }
        assert_eq!(reta.set(128, 0), Err(RetaError::IndexOutOfRange));
    }
}
