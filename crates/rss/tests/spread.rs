//! Distribution of many random flows over the RETA, and the symmetric-key value-space limit.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::collections::HashSet;

use rss::{HashInput, PortPair, Reta, RssHasher, RssKey, SymmetricMode};

/// SplitMix64: a tiny seeded PRNG so the test is deterministic without wall-clock randomness.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn random_v4_flow(rng: &mut SplitMix64) -> HashInput {
    let a = rng.next_u64();
    let b = rng.next_u64();
    HashInput::V4 {
        src: Ipv4Addr::from_bits(a as u32),
        dst: Ipv4Addr::from_bits((a >> 32) as u32),
        ports: Some(PortPair {
            src: b as u16,
            dst: (b >> 16) as u16,
        }),
    }
}

fn random_v6_flow(rng: &mut SplitMix64) -> HashInput {
    let s = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
    let d = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
    let p = rng.next_u64();
    HashInput::V6 {
        src: Ipv6Addr::from_bits(s),
        dst: Ipv6Addr::from_bits(d),
        ports: Some(PortPair {
            src: p as u16,
            dst: (p >> 16) as u16,
        }),
    }
}

/// max/mean of per-queue packet counts for `flows` random flows.
fn max_over_mean(hasher: &RssHasher, flows: usize, v6: bool, seed: u64) -> f64 {
    const QUEUES: u16 = 8;
    let reta = Reta::with_equal(128, QUEUES).expect("valid RETA");
    let mut rng = SplitMix64(seed);
    let mut counts = [0usize; QUEUES as usize];
    for _ in 0..flows {
        let flow = if v6 {
            random_v6_flow(&mut rng)
        } else {
            random_v4_flow(&mut rng)
        };
        counts[usize::from(reta.queue_for_hash(hasher.hash(&flow)))] += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    let ratio = max / (flows as f64 / f64::from(QUEUES));
    eprintln!(
        "{flows} flows, v6={v6}, {:?}: counts {counts:?}, max/mean {ratio:.4}",
        hasher.mode()
    );
    ratio
}

#[test]
fn hundred_thousand_ipv4_flows_spread_over_8_queues_within_5_percent() {
    let ratio = max_over_mean(&RssHasher::default(), 100_000, false, 0x5eed_0001);
    assert!(ratio <= 1.05, "max/mean = {ratio}");
}

#[test]
fn hundred_thousand_ipv6_flows_spread_over_8_queues_within_5_percent() {
    let ratio = max_over_mean(&RssHasher::default(), 100_000, true, 0x5eed_0002);
    assert!(ratio <= 1.05, "max/mean = {ratio}");
}

#[test]
fn symmetric_modes_still_spread_within_5_percent() {
    for mode in [SymmetricMode::RepeatedKey, SymmetricMode::XorFold] {
        let hasher = RssHasher::new(&RssKey::default(), mode);
        let ratio = max_over_mean(&hasher, 100_000, false, 0x5eed_0003);
        assert!(ratio <= 1.05, "{mode:?}: max/mean = {ratio}");
    }
}

#[test]
fn repeated_key_yields_at_most_65536_distinct_hashes() {
    let repeated = RssHasher::new(&RssKey::default(), SymmetricMode::RepeatedKey);
    let plain = RssHasher::default();
    let mut rng = SplitMix64(0x5eed_0004);
    let flows: Vec<HashInput> = (0..100_000).map(|_| random_v4_flow(&mut rng)).collect();
    let distinct = |h: &RssHasher| {
        flows
            .iter()
            .map(|f| h.hash(f))
            .collect::<HashSet<_>>()
            .len()
    };
    let repeated_distinct = distinct(&repeated);
    assert!(repeated_distinct <= 65_536, "{repeated_distinct}");
    // With 100,000 flows the plain key shows (almost) no collisions.
    assert!(distinct(&plain) > 99_000);
}
