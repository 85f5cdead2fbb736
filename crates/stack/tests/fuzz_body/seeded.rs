//! Seeded inputs for the fuzz targets' stand-ins in the suite: random bytes and random
//! operation programs from a fixed seed, so each run checks the same inputs.
#![allow(dead_code)]

/// SplitMix64: a small, well-mixed, seedable generator (no dependency).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// `count` inputs of 0..`len_max` random bytes each, from `seed`.
pub fn random_inputs(seed: u64, count: usize, len_max: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let len = rng.below(len_max as u64 + 1) as usize;
            rng.bytes(len)
        })
        .collect()
}
