//! `SimRng`: the simulator's seeded pseudo-random number generator.
//!
//! Algorithm (fixed forever, so a seed reproduces the same run on every platform and version):
//! - **xoshiro256\*\*** (Blackman & Vigna, 2018) produces the numbers: 256 bits of state,
//!   output `rotl(s1 * 5, 7) * 9`, then the standard xor/shift/rotate state update.
//! - **SplitMix64** (Steele, Lea & Flood, 2014) expands a 64-bit seed into the four state
//!   words, as the xoshiro authors recommend. SplitMix64 is a bijection of its counter, so four
//!   consecutive outputs are never all zero and the xoshiro state is never the all-zero fixed
//!   point.
//! - [`SimRng::fork`] derives an independent stream from the seed this generator was created
//!   with and a stream id (SplitMix64 finaliser over both), so each link and host gets its own
//!   stream and adding draws to one stream never shifts another.
//!
//! This is a simulation RNG, not a cryptographic one.

/// SplitMix64 increment (the golden ratio in 64-bit fixed point).
const SPLITMIX_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One SplitMix64 step: advances `state` and returns the mixed output.
fn splitmix64_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(SPLITMIX_GAMMA);
    splitmix64_mix(*state)
}

/// The SplitMix64 output finaliser (a bijection on `u64`).
pub(crate) fn splitmix64_mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seeded xoshiro256** generator with deterministic, position-independent forking.
///
/// Invariant: `state` is never all zero (guaranteed by SplitMix64 seeding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    /// The seed this generator was created from; [`SimRng::fork`] derives from it.
    seed: u64,
    state: [u64; 4],
}

impl SimRng {
    /// A generator whose whole output sequence is a function of `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let state = [
            splitmix64_next(&mut sm),
            splitmix64_next(&mut sm),
            splitmix64_next(&mut sm),
            splitmix64_next(&mut sm),
        ];
        Self { seed, state }
    }

    /// The seed this generator was created from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// An independent generator for stream `stream_id`.
    ///
    /// The result depends only on this generator's *seed* and `stream_id`, not on how many
    /// numbers have been drawn, so forks are stable however the parent is used.
    pub fn fork(&self, stream_id: u64) -> SimRng {
        let derived = splitmix64_mix(
            self.seed
                .rotate_left(17)
                .wrapping_add(splitmix64_mix(stream_id ^ SPLITMIX_GAMMA)),
        );
        SimRng::new(derived)
    }

    /// The next 64 uniformly distributed bits (xoshiro256**).
    pub fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = self.state;
        let result = s1.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s1 << 17;
        let s2 = s2 ^ s0;
        let s3 = s3 ^ s1;
        let s1 = s1 ^ s2;
        let s0 = s0 ^ s3;
        let s2 = s2 ^ t;
        let s3 = s3.rotate_left(45);
        self.state = [s0, s1, s2, s3];
        result
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        // 2^-53: the top 53 bits become the mantissa exactly.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `range` (half-open), without modulo bias (Lemire's
    /// multiply-and-reject method). An empty range yields `range.start` and draws nothing.
    pub fn gen_range(&mut self, range: core::ops::Range<u64>) -> u64 {
        let Some(span) = range.end.checked_sub(range.start).filter(|s| *s > 0) else {
            return range.start;
        };
        let mut m = u128::from(self.next_u64()) * u128::from(span);
        let mut low = m as u64;
        if low < span {
            // Values of `low` below (2^64 mod span) would over-represent some outputs.
            let threshold = span.wrapping_neg() % span;
            while low < threshold {
                m = u128::from(self.next_u64()) * u128::from(span);
                low = m as u64;
            }
        }
        range.start + (m >> 64) as u64
    }

    /// A uniform integer in `0..=max_inclusive`.
    pub fn gen_upto(&mut self, max_inclusive: u64) -> u64 {
        match max_inclusive.checked_add(1) {
            Some(end) => self.gen_range(0..end),
            None => self.next_u64(),
        }
    }

    /// `true` with probability `p`. `p <= 0` (or NaN) never draws and is always `false`;
    /// `p >= 1` never draws and is always `true`.
    pub fn chance(&mut self, p: f64) -> bool {
        if p.is_nan() || p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.next_f64() < p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_published_vector() {
        // The widely published SplitMix64 sequence for seed 1234567.
        let mut s = 1_234_567u64;
        let got: Vec<u64> = (0..5).map(|_| splitmix64_next(&mut s)).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821,
            ]
        );
    }

    #[test]
    fn output_is_pinned_across_versions() {
        // Golden values: if this changes, every recorded seed stops reproducing.
        let mut r = SimRng::new(42);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, PINNED_SEED_42);
        let mut f = SimRng::new(42).fork(7);
        assert_eq!(f.next_u64(), PINNED_SEED_42_FORK_7);
    }

    const PINNED_SEED_42: [u64; 3] = [
        1_546_998_764_402_558_742,
        6_990_951_692_964_543_102,
        12_544_586_762_248_559_009,
    ];
    const PINNED_SEED_42_FORK_7: u64 = 5_192_866_950_964_678_726;

    #[test]
    fn xoshiro256starstar_matches_reference_for_state_1_2_3_4() {
        // Reference outputs of the xoshiro256** C code from state {1, 2, 3, 4}.
        let mut r = SimRng {
            seed: 0,
            state: [1, 2, 3, 4],
        };
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11_520, 0, 1_509_978_240]);
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different_sequence() {
        let mut a = SimRng::new(1);
        let mut b = SimRng::new(1);
        let mut c = SimRng::new(2);
        let sa: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let sb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let sc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(sa, sb);
        assert_ne!(sa, sc);
    }

    #[test]
    fn fork_is_independent_of_parent_draws() {
        let parent = SimRng::new(9);
        let mut used = parent.clone();
        for _ in 0..100 {
            used.next_u64();
        }
        assert_eq!(parent.fork(3), used.fork(3));
        assert_ne!(parent.fork(3), parent.fork(4));
        assert_ne!(parent.fork(3), SimRng::new(10).fork(3));
    }

    #[test]
    fn gen_range_stays_in_bounds_and_hits_every_value() {
        let mut r = SimRng::new(5);
        let mut seen = [0u32; 7];
        for _ in 0..7_000 {
            let v = r.gen_range(10..17);
            assert!((10..17).contains(&v));
            if let Some(slot) = seen.get_mut((v - 10) as usize) {
                *slot += 1;
            }
        }
        // Each value expected 1000 times; a fixed seed cannot flake, bounds are ~6 sigma.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }

    #[test]
    fn gen_range_empty_returns_start_without_drawing_and_edges_work() {
        let mut r = SimRng::new(5);
        let before = r.clone();
        let (lo, hi) = (9, 3);
        assert_eq!(r.gen_range(4..4), 4);
        assert_eq!(r.gen_range(lo..hi), 9);
        assert_eq!(r, before, "an empty range draws nothing");
        assert_eq!(r.gen_range(u64::MAX - 1..u64::MAX), u64::MAX - 1);
        assert_eq!(r.gen_upto(0), 0);
        // The full range goes through `next_u64` and must not overflow.
        let mut a = SimRng::new(6);
        let mut b = SimRng::new(6);
        assert_eq!(a.gen_upto(u64::MAX), b.next_u64());
        assert!(a.gen_range(u64::MAX / 2..u64::MAX) >= u64::MAX / 2);
    }

    #[test]
    fn chance_extremes_are_exact_and_middle_is_fair() {
        let mut r = SimRng::new(11);
        assert!((0..1000).all(|_| !r.chance(0.0)));
        assert!((0..1000).all(|_| r.chance(1.0)));
        assert!(!r.chance(f64::NAN));
        let hits = (0..100_000).filter(|_| r.chance(0.25)).count();
        // Expected 25000, sigma ~137: +-1000 is > 7 sigma, and the seed is fixed.
        assert!((24_000..26_000).contains(&hits), "{hits}");
    }

    #[test]
    fn next_f64_is_in_unit_interval() {
        let mut r = SimRng::new(3);
        assert!(
            (0..10_000)
                .map(|_| r.next_f64())
                .all(|x| (0.0..1.0).contains(&x))
        );
    }
}
