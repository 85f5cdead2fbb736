//! Property tests for the checksum: the fast sum equals the 16-bit reference for every length
//! and alignment, and the RFC 1624 incremental update equals a full recompute.

use proptest::prelude::*;
use wire::checksum;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fast_sum_equals_naive_for_any_length_and_alignment(
        data in proptest::collection::vec(any::<u8>(), 0..600), start in 0usize..9,
    ) {
        let s = data.get(start..).unwrap_or(&[]);
        prop_assert_eq!(checksum::sum(s), checksum::sum_naive(s));
    }

    #[test]
    fn fast_sum_equals_naive_on_all_ones_heavy_data(len in 0usize..300, fill in 0xf0u8..=0xff) {
        let data = vec![fill; len];
        prop_assert_eq!(checksum::sum(&data), checksum::sum_naive(&data));
    }

    #[test]
    fn incremental_update_equals_full_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 2..200).prop_filter("even", |d| d.len() % 2 == 0),
        word_index in any::<prop::sample::Index>(), new in any::<u16>(),
    ) {
        let i = word_index.index(data.len() / 2) * 2;
        let before = checksum::finish(checksum::sum(&data));
        let old = u16::from_be_bytes([data[i], data[i + 1]]);
        data[i..i + 2].copy_from_slice(&new.to_be_bytes());
        let recomputed = checksum::finish(checksum::sum(&data));
        let updated = checksum::update(before, old, new);
        if data.iter().all(|&b| b == 0) {
            // The one case eqn. 3 and a recompute differ: +0 vs -0 for an all-zero message
            // (RFC 1624 §3); both verify.
            prop_assert_eq!((updated, recomputed), (0x0000, 0xffff));
        } else {
            prop_assert_eq!(updated, recomputed);
        }
    }

    #[test]
    fn combine_of_split_sums_equals_whole_sum(
        data in proptest::collection::vec(any::<u8>(), 0..400), cut in any::<prop::sample::Index>(),
    ) {
        // Split at an even offset so both halves keep their 16-bit word alignment.
        let c = (cut.index(data.len() / 2 + 1) * 2).min(data.len());
        let (a, b) = data.split_at(c);
        prop_assert_eq!(checksum::combine(&[checksum::sum(a), checksum::sum(b)]), checksum::sum(&data));
    }
}
