//! The soak's position-keyed byte pattern ([`super::pattern_byte`]): one table of random
//! bytes shared by every stream, so sending is a slice of it and checking is one `memcmp`.
//!
//! Stream `s` carries at offset `o` the byte `TABLE[(start(s) + o) mod PERIOD_BYTES]`, where
//! `start(s)` is a hash of the stream id. Why this catches what the soak must catch:
//!
//! - **Misplacement within a stream** (a lost, duplicated, reordered or shifted segment, a
//!   sequence-number error): bytes placed `k` positions away from their own offset read
//!   another part of the table unless `k` is a multiple of [`PERIOD_BYTES`]. The period is a
//!   prime just under 2 MiB: more than both ends of a soak connection can hold at once (send
//!   and receive buffers of at most 256 KiB each in the stacks, 768 KiB in the offload
//!   engine), so no byte the stacks hold can be delivered a whole period away from its
//!   place; and `2^32 mod PERIOD_BYTES ≠ 0`, so a sequence-space wrap is no multiple either.
//!   Within one period, the table is built so that **no two 8-byte windows are equal**
//!   (checked by `no_two_eight_byte_windows_of_the_table_are_equal`): any run of 8 or more
//!   bytes in the wrong place is certainly caught, shorter ones with the odds of random
//!   bytes.
//! - **A duplicated, dropped or swapped byte**: the table never holds the same byte twice in
//!   a row (also across the wrap; each byte's top bit is its position's parity), so a byte
//!   repeated, or two neighbours swapped, always changes what is read; a dropped byte shifts
//!   everything after it (above), by one: every byte after it differs in its top bit.
//! - **A flipped bit**: every byte is compared.
//! - **Bytes of another stream**: they match only if the two streams' table positions
//!   coincide there (`start(a) + o_a ≡ start(b) + o_b`), one alignment in `PERIOD_BYTES`;
//!   two streams of one run start at the same place with odds of about one in two million
//!   per pair.
//!
//! The mutation tests below swap, duplicate, drop and flip bytes and segments of a stream and
//! check every change is caught.
//!
//! The table is `PERIOD_BYTES + WINDOW_BYTES_MAX` long, its tail a copy of its head, so any
//! window of up to [`WINDOW_BYTES_MAX`] bytes is one contiguous slice. It is built once per
//! process (2 MiB of SplitMix64 output over a counter, about 3 M instructions), from a fixed
//! seed: the same bytes in every run.

use std::sync::OnceLock;

use crate::rng::splitmix64_mix;

/// The pattern's period in bytes: a prime, larger than all the bytes both ends of a soak
/// connection can hold (see the module documentation).
pub(crate) const PERIOD_BYTES: usize = 2_097_143;

/// The longest window [`Pattern::window`] serves as one slice.
pub(crate) const WINDOW_BYTES_MAX: usize = 64 * 1024;

/// The table's fixed seed.
const TABLE_SEED: u64 = 0x5041_5454_4552_4e31; // "PATTERN1"

/// The shared table: `PERIOD_BYTES` bytes, followed by a copy of the first
/// `WINDOW_BYTES_MAX`. Seven random bits per byte; the top bit is the position's parity
/// (clear at even positions, set at odd ones), so no byte equals its neighbour, and a byte
/// shifted by an odd amount always differs in that bit. The one neighbouring pair of equal
/// parity, across the wrap (`PERIOD_BYTES` is odd), is made to differ too.
fn table() -> &'static [u8] {
    static TABLE: OnceLock<Box<[u8]>> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

/// Bytes 1, 3, 5 and 7 of a little-endian word: the odd positions of a word that starts at
/// an even one.
const ODD_TOP_BITS: u64 = 0x8000_8000_8000_8000;

fn build_table() -> Box<[u8]> {
    let mut t = vec![0u8; PERIOD_BYTES + WINDOW_BYTES_MAX];
    let (period, tail) = t.split_at_mut(PERIOD_BYTES);
    // SplitMix64 over a counter (one multiply pair per 8 bytes, no dependency between words).
    let mut counter = TABLE_SEED;
    let mut next_word = || {
        counter = counter.wrapping_add(0x9e37_79b9_7f4a_7c15);
        ((splitmix64_mix(counter) & 0x7f7f_7f7f_7f7f_7f7f) | ODD_TOP_BITS).to_le_bytes()
    };
    let mut words = period.chunks_exact_mut(8);
    for word in &mut words {
        if let Ok(word) = <&mut [u8; 8]>::try_from(word) {
            *word = next_word();
        }
    }
    let rest = words.into_remainder();
    let last = next_word();
    rest.copy_from_slice(last.get(..rest.len()).unwrap_or(&[]));
    // Positions PERIOD_BYTES - 1 and 0 are both even: make the last differ from the first
    // (it differs from its other neighbour, at an odd position, by the top bit).
    if let [first, .., last] = period {
        if last == first {
            *last = (*last + 1) & 0x7f;
        }
    }
    tail.copy_from_slice(period.get(..WINDOW_BYTES_MAX).unwrap_or(&[]));
    t.into_boxed_slice()
}

/// One stream's view of the table.
#[derive(Clone)]
pub(super) struct Pattern {
    stream_id: u64,
    /// Where offset 0 of the stream is in the table (`< PERIOD_BYTES`).
    start: usize,
    table: &'static [u8],
}

impl core::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pattern({:#x})", self.stream_id)
    }
}

impl Pattern {
    pub(super) fn new(stream_id: u64) -> Self {
        let start = splitmix64_mix(stream_id ^ 0x7374_7265_616d) % PERIOD_BYTES as u64; // "stream"
        Pattern {
            stream_id,
            start: start as usize,
            table: table(),
        }
    }

    pub(super) fn stream_id(&self) -> u64 {
        self.stream_id
    }

    /// The table position of stream offset `offset`.
    fn position(&self, offset: u64) -> usize {
        ((self.start as u64 + offset % PERIOD_BYTES as u64) % PERIOD_BYTES as u64) as usize
    }

    /// The pattern bytes `[offset, offset + n)`, `n` at most [`WINDOW_BYTES_MAX`] (longer
    /// requests get that many).
    pub(super) fn window(&self, offset: u64, n: usize) -> &'static [u8] {
        let at = self.position(offset);
        let table: &'static [u8] = self.table;
        table.get(at..at + n.min(WINDOW_BYTES_MAX)).unwrap_or(&[])
    }

    /// The index of the first byte of `bytes` that is not the pattern at `offset + index`.
    pub(super) fn first_mismatch(&self, offset: u64, bytes: &[u8]) -> Option<usize> {
        let mut done = 0usize;
        for got in bytes.chunks(WINDOW_BYTES_MAX) {
            let want = self.window(offset + done as u64, got.len());
            if want != got {
                return got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a != b)
                    .map(|k| done + k);
            }
            done += got.len();
        }
        None
    }

    /// The byte at `offset`.
    pub(super) fn byte(&self, offset: u64) -> u8 {
        self.table.get(self.position(offset)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_equal_bytes_across_the_period_edge() {
        for stream in [0u64, 1, 7, 0xdead_beef_1234_5678, u64::MAX] {
            let p = Pattern::new(stream);
            let edge = (PERIOD_BYTES - p.start) as u64;
            for offset in [0u64, 1, 255, edge - 3, edge, (1 << 40) - 3] {
                let w = p.window(offset, 1_000);
                assert_eq!(w.len(), 1_000);
                for (k, b) in w.iter().enumerate() {
                    assert_eq!(*b, p.byte(offset + k as u64), "{stream} {offset} {k}");
                }
            }
            assert_eq!(p.byte(0), p.byte(PERIOD_BYTES as u64), "period");
        }
    }

    #[test]
    fn no_byte_of_the_table_equals_its_neighbour() {
        let t = table();
        for i in 0..PERIOD_BYTES {
            assert_ne!(t[i], t[(i + 1) % PERIOD_BYTES], "at {i}");
        }
        assert_eq!(t[PERIOD_BYTES..], t[..WINDOW_BYTES_MAX]);
    }

    #[test]
    fn no_two_eight_byte_windows_of_the_table_are_equal() {
        let t = table();
        let mut windows: Vec<u64> = (0..PERIOD_BYTES)
            .map(|i| {
                let mut w = [0u8; 8];
                for (k, b) in w.iter_mut().enumerate() {
                    *b = t[(i + k) % PERIOD_BYTES];
                }
                u64::from_le_bytes(w)
            })
            .collect();
        windows.sort_unstable();
        let before = windows.len();
        windows.dedup();
        assert_eq!(windows.len(), before, "two equal 8-byte windows");
    }

    #[test]
    fn the_period_is_a_prime_that_no_sequence_wrap_divides() {
        let p = PERIOD_BYTES as u64;
        assert!((2..).take_while(|d| d * d <= p).all(|d| p % d != 0));
        assert_ne!((1u64 << 32) % p, 0);
        // More than both ends can hold: 2 × 256 KiB in the stacks, 768 KiB in the engine.
        assert!(p > 2 * 768 * 1024);
    }

    #[test]
    fn first_mismatch_finds_the_first_wrong_byte_only() {
        let p = Pattern::new(42);
        let mut data = p.window(1_000, 700).to_vec();
        assert_eq!(p.first_mismatch(1_000, &data), None);
        data[600] ^= 1;
        data[650] ^= 1;
        assert_eq!(p.first_mismatch(1_000, &data), Some(600));
        assert_eq!(p.first_mismatch(1_001, &data[1..]), Some(599));
        let long: Vec<u8> = (0..3 * WINDOW_BYTES_MAX as u64 + 5)
            .map(|o| p.byte(o))
            .collect();
        assert_eq!(p.first_mismatch(0, &long), None);
        let mut bad = long.clone();
        bad[2 * WINDOW_BYTES_MAX + 1] ^= 0x80;
        assert_eq!(p.first_mismatch(0, &bad), Some(2 * WINDOW_BYTES_MAX + 1));
    }

    /// A stream of `len` bytes from `offset`, as the receiver would get it.
    fn stream(p: &Pattern, offset: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|k| p.byte(offset + k)).collect()
    }

    #[test]
    fn mutation_a_swapped_duplicated_dropped_or_flipped_byte_is_caught() {
        let p = Pattern::new(0x1234);
        for offset in [0u64, 77, (PERIOD_BYTES - p.start - 20) as u64] {
            let good = stream(&p, offset, 64);
            for i in 0..good.len() - 1 {
                let mut swapped = good.clone();
                swapped.swap(i, i + 1);
                assert!(p.first_mismatch(offset, &swapped).is_some(), "swap {i}");

                let mut duplicated = good.clone();
                duplicated.insert(i, good[i]);
                assert!(p.first_mismatch(offset, &duplicated).is_some(), "dup {i}");

                let mut dropped = good.clone();
                dropped.remove(i);
                assert!(p.first_mismatch(offset, &dropped).is_some(), "drop {i}");

                for bit in 0..8 {
                    let mut flipped = good.clone();
                    flipped[i] ^= 1 << bit;
                    assert_eq!(p.first_mismatch(offset, &flipped), Some(i), "flip {i}");
                }
            }
        }
    }

    #[test]
    fn mutation_a_lost_duplicated_or_reordered_segment_is_caught() {
        let p = Pattern::new(0xfeed);
        let mss = 1_460usize;
        let good = stream(&p, 0, 8 * mss);
        let seg = |k: usize| &good[k * mss..(k + 1) * mss];
        let rebuild =
            |order: &[usize]| -> Vec<u8> { order.iter().flat_map(|&k| seg(k)).copied().collect() };
        for k in 0..7 {
            let mut lost: Vec<usize> = (0..8).collect();
            lost.remove(k);
            assert!(p.first_mismatch(0, &rebuild(&lost)).is_some(), "lost {k}");
            let mut dup: Vec<usize> = (0..8).collect();
            dup.insert(k, k);
            assert!(p.first_mismatch(0, &rebuild(&dup)).is_some(), "dup {k}");
            let mut reordered: Vec<usize> = (0..8).collect();
            reordered.swap(k, k + 1);
            assert!(
                p.first_mismatch(0, &rebuild(&reordered)).is_some(),
                "swap {k}"
            );
        }
        // Shifted by any amount up to the largest window both ends hold, and by 2^32.
        for shift in [
            1u64,
            7,
            8,
            255,
            256,
            1_460,
            65_536,
            1 << 20,
            3 * (1 << 19),
            1 << 32,
        ] {
            let moved = stream(&p, shift, 4 * mss);
            assert!(p.first_mismatch(0, &moved).is_some(), "shift {shift}");
        }
        // Another stream's bytes at the same offset.
        let other = Pattern::new(0xfeed ^ 1);
        assert!(p.first_mismatch(0, &stream(&other, 0, mss)).is_some());
    }
}
