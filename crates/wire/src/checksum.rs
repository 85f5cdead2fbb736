//! The Internet checksum (RFC 1071), pseudo-headers (RFC 768, RFC 9293 §3.1, RFC 8200 §8.1)
//! and incremental update (RFC 1624).
//!
//! Vocabulary: a *sum* is the folded 16-bit one's-complement sum of some bytes (not yet
//! complemented); the *checksum* written on the wire is `!sum`. Sums of disjoint, even-length
//! pieces combine with [`combine`] (RFC 1071 §2(B): the sum is associative and commutative).

use core::net::{Ipv4Addr, Ipv6Addr};

/// Folds a 64-bit one's-complement accumulator down to 16 bits (end-around carries).
///
/// Two folds by rotation: the high half of `x + rotl(x, h)` (wrapping) is `hi + lo` plus the
/// carry out of the low halves' sum, which is the one's-complement sum of the two halves; it
/// is 0 only when both are. Four instructions a fold (the masks and shifts of the plain
/// `(x & 0xffff) + (x >> 16)` steps took twice as many).
#[inline]
pub fn fold(acc: u64) -> u16 {
    let a = (acc.wrapping_add(acc.rotate_left(32)) >> 32) as u32;
    (a.wrapping_add(a.rotate_left(16)) >> 16) as u16
}

/// One's-complement 64-bit add with end-around carry.
#[inline(always)]
fn add64(acc: u64, word: u64) -> u64 {
    let (sum, carry) = acc.overflowing_add(word);
    // If it overflowed, `sum < word <= u64::MAX`, so adding the carry cannot overflow again.
    sum + carry as u64
}

/// `a + b + carry_in` with the carry out: the shape LLVM turns into an `adc` chain (the
/// standard library's `carrying_add` is not stable yet).
#[inline(always)]
fn carrying_add(a: u64, b: u64, carry: bool) -> (u64, bool) {
    let (s, c1) = a.overflowing_add(b);
    let (s, c2) = s.overflowing_add(u64::from(carry));
    (s, c1 | c2)
}

/// Bytes per iteration of [`sum`]'s main loop (sixteen 64-bit words).
const SUM_BLOCK_BYTES: usize = 128;

/// The folded one's-complement sum of `data` taken as big-endian 16-bit words; an odd trailing
/// byte is padded with a zero byte on its right (RFC 1071 §4.1).
///
/// How (RFC 1071 §2): the sum is independent of byte order (§2(B)) and of word width (§2(C)),
/// so `data` is summed as *native-order* 64-bit words — no byte swap per word — with one
/// carry chain (add with carry: one instruction per 8 bytes on x86-64, 128 bytes per
/// iteration), folded to 16 bits and swapped once at the end (`u16::from_be`, a no-op on
/// big-endian targets). The last 0..7 bytes are read as one zero-padded word: the padding lies
/// after them, at the same even/odd positions, so an odd last byte is padded on its right as
/// §4.1 asks. Any length, any alignment; no `unsafe`. Callgrind: ~0.28 instructions per byte
/// over a 1,460-byte payload (the big-endian two-accumulator loop it replaced: 0.66).
///
/// From [`VECTOR_MIN_BYTES`] on, the CPU's vector kernel takes the whole buffer when it has
/// one (`platform::checksum::sum_or`: AVX2, any length, chosen once and called through a
/// function pointer; on a CPU without AVX2 the pointer names [`sum_portable`], the chain).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    if data.len() >= VECTOR_MIN_BYTES {
        return platform::checksum::sum_or(data, sum_portable);
    }
    u16::from_be(fold(sum_scalar(0, data)))
}

/// Below this length [`sum`] keeps to the chain (the kernel's call, lane reduction and fold
/// cost about what its vectors save). Callgrind, per call: the chain and the AVX2 kernel cost
/// the same at ~24 bytes; at 64 bytes the kernel is ~20 instructions cheaper, at 96 ~30.
pub const VECTOR_MIN_BYTES: usize = 64;

/// `acc` plus `data`'s native-order words, unfolded: one add-with-carry chain, 128 bytes per
/// iteration, the last 0..7 bytes as one zero-padded word.
#[inline(always)]
fn sum_scalar(acc: u64, data: &[u8]) -> u64 {
    let mut acc = acc;
    let mut carry = false;
    let mut blocks = data.chunks_exact(SUM_BLOCK_BYTES);
    for block in &mut blocks {
        for word in block.chunks_exact(8) {
            (acc, carry) = carrying_add(acc, ne64(word), carry);
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for word in &mut words {
        (acc, carry) = carrying_add(acc, ne64(word), carry);
    }
    (acc, carry) = carrying_add(acc, tail_ne64(words.remainder()), carry);
    add64(acc, u64::from(carry))
}

/// [`sum`] for a header: `data` of 20 to [`HEADER_SUM_MAX_BYTES`] bytes whose length is a
/// multiple of 4 (an IPv4 or TCP header, options included); see [`sum_pseudo_v4_header`].
#[inline]
pub fn sum_header(data: &[u8]) -> u16 {
    let acc = match header_words(data) {
        Some(acc) => acc,
        None => return sum(data),
    };
    u16::from_be(fold(acc))
}

/// The combined sum of an IPv4 pseudo-header (RFC 9293 §3.1: `src`, `dst`, zero, `protocol`,
/// `length_bytes`) and a transport header `header`: what
/// `combine(&[pseudo_header_v4(..), sum(header)])` gives, in one accumulator. A header of 20
/// to [`HEADER_SUM_MAX_BYTES`] bytes whose length is a multiple of 4 (a TCP header, options
/// included) is summed in native order, unrolled for 20 and 32 bytes (no options;
/// timestamps) as a short add-with-carry chain of 64-bit words, and folded once; any other
/// takes [`sum`]. A receive path that verifies a
/// segment's checksum in pieces (the text summed while it is copied) sums this part so,
/// where `sum`'s block and word loops, tail and call, and a separate pseudo-header sum, cost
/// more than the adds.
#[inline]
pub fn sum_pseudo_v4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    length_bytes: u16,
    header: &[u8],
) -> u16 {
    let [lh, ll] = length_bytes.to_be_bytes();
    // The pseudo-header's words in the native order the header's are read in.
    let pseudo = u64::from(u32::from_ne_bytes(src.octets()))
        + u64::from(u32::from_ne_bytes(dst.octets()))
        + u64::from(u32::from_ne_bytes([0, protocol, lh, ll]));
    match header_words(header) {
        Some(acc) => u16::from_be(fold(add64(acc, pseudo))),
        None => combine(&[
            pseudo_header_v4(src, dst, protocol, u32::from(length_bytes)),
            sum(header),
        ]),
    }
}

/// The unfolded native-order one's-complement accumulator of a header's words, for 20 to
/// [`HEADER_SUM_MAX_BYTES`] bytes in whole 4-byte words; `None` otherwise. The 20- and
/// 32-byte headers (no options; timestamps) as 64-bit words in one add-with-carry chain
/// (`add`, then an `adc` per word and one for the last carry), the others as 32-bit adds.
#[inline(always)]
fn header_words(data: &[u8]) -> Option<u64> {
    if let Some(h) = data.first_chunk::<32>().filter(|_| data.len() == 32) {
        let q = |i: usize| ne64(&h[i..i + 8]);
        let (acc, carry) = carrying_add(q(0), q(8), false);
        let (acc, carry) = carrying_add(acc, q(16), carry);
        let (acc, carry) = carrying_add(acc, q(24), carry);
        return Some(add64(acc, u64::from(carry)));
    }
    if let Some(h) = data.first_chunk::<20>().filter(|_| data.len() == 20) {
        return Some(words_20(h));
    }
    if data.len() < 20 || data.len() > HEADER_SUM_MAX_BYTES || data.len() % 4 != 0 {
        return None;
    }
    let w = |c: &[u8]| u64::from(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
    Some(data.chunks_exact(4).map(w).sum())
}

/// The unfolded native-order one's-complement accumulator of 20 bytes: two 64-bit words
/// with carry, and the last 32-bit word.
#[inline(always)]
fn words_20(h: &[u8; 20]) -> u64 {
    let (acc, carry) = carrying_add(ne64(&h[0..8]), ne64(&h[8..16]), false);
    let last = u64::from(u32::from_ne_bytes([h[16], h[17], h[18], h[19]]));
    let (acc, carry) = carrying_add(acc, last, carry);
    add64(acc, u64::from(carry))
}

/// [`sum`] of a 20-byte header (an IPv4 header without options, the one every datagram of
/// a TCP flow carries): three adds with carry and a fold, no loop.
#[inline(always)]
pub fn sum_20(h: &[u8; 20]) -> u16 {
    u16::from_be(fold(words_20(h)))
}

/// The longest input [`sum_header`] sums itself: an IPv4 or TCP header with options.
pub const HEADER_SUM_MAX_BYTES: usize = 60;

/// Copies `src` into `dst` (of the same length) and returns [`sum`] of `src`: what
/// `dst.copy_from_slice(src)` followed by `sum(src)` give, with the bytes read once where the
/// CPU has a copy-and-sum kernel (`platform::checksum::copy_and_sum_or`: AVX2, any length,
/// from [`COPY_VECTOR_MIN_BYTES`] on; shorter inputs, and every input on a CPU without AVX2,
/// are copied, then summed). For a receive path that verifies a segment's checksum while it
/// copies the payload into a buffer: the copy lands before the verdict is known, so the
/// destination must be space nothing reads yet.
///
/// # Panics
/// When `dst.len() != src.len()` (as `copy_from_slice`).
#[inline]
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum: lengths differ");
    if src.len() >= COPY_VECTOR_MIN_BYTES {
        return platform::checksum::copy_and_sum_or(dst, src, copy_then_sum);
    }
    copy_then_sum(dst, src)
}

/// [`copy_and_sum`] in two passes: `copy_from_slice`, then [`sum`]. The portable function
/// the copy-and-sum kernel falls back to.
///
/// # Panics
/// When `dst.len() != src.len()`.
pub fn copy_then_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    dst.copy_from_slice(src);
    sum(src)
}

/// Below this length [`copy_and_sum`] copies and sums separately. Callgrind counts the
/// kernel cheaper at every length (the two-pass path calls `memcpy`); the few shortest
/// copies are left to `copy_from_slice`, whose fixed-size moves need no vector setup.
pub const COPY_VECTOR_MIN_BYTES: usize = 32;

/// The portable sum alone (no vector kernel): what [`sum`] computes on a CPU without AVX2.
/// For tests and benchmarks that compare the two.
pub fn sum_portable(data: &[u8]) -> u16 {
    u16::from_be(fold(sum_scalar(0, data)))
}

/// The last 0..=7 bytes as one native-order word, zero-padded after them. Built from
/// fixed-size moves (4, 2, 1 bytes): a variable-length `copy_from_slice` would call `memcpy`.
#[inline(always)]
fn tail_ne64(rest: &[u8]) -> u64 {
    let mut last = [0u8; 8];
    let mut at = 0;
    for width in [4usize, 2, 1] {
        if let (Some(dst), Some(src)) = (last.get_mut(at..at + width), rest.get(at..at + width)) {
            dst.copy_from_slice(src);
            at += width;
        }
    }
    u64::from_ne_bytes(last)
}

/// A native-order 64-bit word from exactly 8 bytes.
#[inline(always)]
fn ne64(word: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(word);
    u64::from_ne_bytes(bytes)
}

/// Reference RFC 1071 sum, one 16-bit word per step. Kept for tests and as documentation of
/// what [`sum`] must equal.
pub fn sum_naive(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        acc += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
        acc = (acc & 0xffff) + (acc >> 16);
        i += 2;
    }
    if i < data.len() {
        acc += u32::from(data[i]) << 8;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// One's-complement sum of already-folded sums (each piece must start at an even offset of the
/// checksummed message, or be a pseudo-header).
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The checksum to write on the wire for a message whose total sum is `total_sum`.
#[inline]
pub fn finish(total_sum: u16) -> u16 {
    !total_sum
}

/// Sum of the IPv4 pseudo-header (RFC 9293 §3.1, RFC 768): source, destination, zero, protocol,
/// upper-layer length in bytes.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length_bytes: u32) -> u16 {
    let s = u64::from(u32::from(src));
    let d = u64::from(u32::from(dst));
    // The upper-layer length is 16 bits in the IPv4 pseudo-header; wider values are folded the
    // same way a wider field would be, which only matters for callers that already erred.
    fold(s + d + u64::from(protocol) + u64::from(length_bytes))
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit upper-layer
/// length, three zero bytes, next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length_bytes: u32) -> u16 {
    let s = u128::from(src);
    let d = u128::from(dst);
    let mut acc = 0u64;
    for half in [
        s >> 64,
        s & u128::from(u64::MAX),
        d >> 64,
        d & u128::from(u64::MAX),
    ] {
        acc = add64(acc, half as u64);
    }
    acc = add64(acc, u64::from(length_bytes));
    acc = add64(acc, u64::from(next_header));
    fold(acc)
}

/// RFC 1624 §3 eqn. 3: the new checksum after one 16-bit field changed from `old` to `new`,
/// `HC' = ~(~HC + ~m + m')`, without touching the rest of the message.
#[inline]
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

/// [`update`] for a 32-bit field (e.g. an IPv4 address or a sequence number) at an even offset.
#[inline]
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = update(checksum, (old >> 16) as u16, (new >> 16) as u16);
    update(c, old as u16, new as u16)
}

/// What the caller wants done with checksums.
///
/// `verify_rx`: `parse` checks the checksum and returns [`crate::Error::BadChecksum`] on a
/// mismatch. `fill_tx`: `emit` computes the full checksum; when false (transmit offload) `emit`
/// writes only the folded pseudo-header sum for transport protocols (what a NIC with partial
/// checksum offload expects) and zero for the IPv4 header checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChecksumCaps {
    pub verify_rx: bool,
    pub fill_tx: bool,
}

impl ChecksumCaps {
    /// Verify on receive and fill on transmit: the software default.
    pub const ALL: ChecksumCaps = ChecksumCaps {
        verify_rx: true,
        fill_tx: true,
    };
    /// Both offloaded to hardware.
    pub const NONE: ChecksumCaps = ChecksumCaps {
        verify_rx: false,
        fill_tx: false,
    };
}

impl Default for ChecksumCaps {
    fn default() -> Self {
        ChecksumCaps::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums_to_ddf2() {
        // RFC 1071 §3 numerical example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(sum_naive(&data), 0xddf2);
    }

    #[test]
    fn odd_length_pads_last_byte_on_the_right() {
        assert_eq!(sum(&[0x12]), 0x1200);
        assert_eq!(sum(&[0x00, 0x01, 0x02]), 0x0201);
    }

    #[test]
    fn rfc1624_update_matches_recompute_for_example() {
        // RFC 1624 §4: checksum 0xdd2f, field 0x5555 → 0x3285 gives 0x0000 via eqn. 3.
        assert_eq!(update(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    /// Every length 0..=600 at every start offset 0..16 (so every alignment of the 8-byte
    /// words and every tail length) equals the RFC 1071 reference, on bytes that make carries.
    #[test]
    fn sum_equals_the_reference_for_every_length_and_offset() {
        let data: Vec<u8> = (0..640u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8 | 0x80)
            .collect();
        for offset in 0..16 {
            for len in 0..=600 {
                let d = &data[offset..offset + len];
                assert_eq!(sum(d), sum_naive(d), "offset {offset} len {len}");
            }
        }
        let ones = [0xffu8; 700];
        for len in 0..ones.len() {
            assert_eq!(sum(&ones[..len]), sum_naive(&ones[..len]), "len {len}");
        }
    }

    /// The copy and the sum of [`copy_and_sum`] are `copy_from_slice` and [`sum`], for every
    /// length 0..=600 (below the kernel, whole vectors, every tail) at every source offset
    /// 0..16, and on all-ones data (the sum must stay 0xffff, never 0).
    #[test]
    fn copy_and_sum_copies_and_sums_as_copy_then_sum_for_every_length_and_offset() {
        let data: Vec<u8> = (0..640u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8 | 0x80)
            .collect();
        for offset in 0..16 {
            for len in 0..=600 {
                let s = &data[offset..offset + len];
                let mut d = vec![0u8; len];
                assert_eq!(
                    copy_and_sum(&mut d, s),
                    sum_naive(s),
                    "offset {offset} len {len}"
                );
                assert_eq!(d, s, "offset {offset} len {len}: the copy");
            }
        }
        let ones = [0xffu8; 700];
        let mut d = [0u8; 700];
        for len in 1..ones.len() {
            let want = if len % 2 == 0 {
                0xffff
            } else {
                sum_naive(&ones[..len])
            };
            assert_eq!(copy_and_sum(&mut d[..len], &ones[..len]), want, "len {len}");
        }
        assert_eq!(copy_and_sum(&mut [], &[]), 0);
    }

    /// [`sum_header`] equals the reference for every length 0..=80 (multiples of 4 up to
    /// 60 summed by its adds, the rest by `sum`) at every start offset 0..8, and keeps
    /// 0xffff for all ones.
    #[test]
    fn sum_header_equals_the_reference_for_every_length_and_offset() {
        let data: Vec<u8> = (0..96u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8 | 0x81)
            .collect();
        for offset in 0..8 {
            for len in 0..=80 {
                let d = &data[offset..offset + len];
                assert_eq!(sum_header(d), sum_naive(d), "offset {offset} len {len}");
            }
        }
        for len in (4..=60).step_by(4) {
            assert_eq!(sum_header(&[0xff; 60][..len]), 0xffff, "len {len}");
        }
        assert_eq!(sum_header(&[]), 0);
    }

    /// [`sum_pseudo_v4_header`] equals the pseudo-header sum combined with the header's, for
    /// every header length 0..=64 (the unrolled 20 and 32, the word loop, the fallback) and
    /// random addresses, protocols and lengths.
    #[test]
    fn sum_pseudo_v4_header_equals_pseudo_header_combined_with_the_header_sum() {
        let data: Vec<u8> = (0..80u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        let mut x = 0x1234_5678u32;
        for len in 0..=64 {
            for _ in 0..20 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let (src, dst) = (Ipv4Addr::from(x), Ipv4Addr::from(x.rotate_left(11)));
                let (proto, seg_len) = (x as u8, (x >> 8) as u16);
                let h = &data[(x % 8) as usize..][..len];
                let want = combine(&[
                    pseudo_header_v4(src, dst, proto, u32::from(seg_len)),
                    sum_naive(h),
                ]);
                assert_eq!(
                    sum_pseudo_v4_header(src, dst, proto, seg_len, h),
                    want,
                    "len {len}"
                );
            }
        }
    }

    /// [`sum_pseudo_v4_header`] and [`sum_header`] with the words that carry most (all ones
    /// in the header and the pseudo-header: every add of the 64-bit chain carries) and none.
    #[test]
    fn header_sums_carry_through_all_ones_headers_and_pseudo_headers() {
        let ones = Ipv4Addr::new(255, 255, 255, 255);
        for len in [20usize, 24, 32, 60] {
            for (addr, proto, seg_len, byte) in
                [(ones, 0xff, 0xffff, 0xff), (Ipv4Addr::UNSPECIFIED, 0, 0, 0)]
            {
                let h = vec![byte; len];
                let want = combine(&[
                    pseudo_header_v4(addr, addr, proto, u32::from(seg_len)),
                    sum_naive(&h),
                ]);
                assert_eq!(
                    sum_pseudo_v4_header(addr, addr, proto, seg_len, &h),
                    want,
                    "len {len}"
                );
                assert_eq!(sum_header(&h), sum_naive(&h), "len {len}");
            }
        }
    }

    /// [`sum_20`] equals the reference on random headers, all ones and all zeros.
    #[test]
    fn sum_20_equals_the_reference() {
        let mut x = 0x9e37_79b9u32;
        for _ in 0..2_000 {
            let mut h = [0u8; 20];
            for b in &mut h {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            assert_eq!(sum_20(&h), sum_naive(&h), "{h:?}");
        }
        assert_eq!(sum_20(&[0xff; 20]), 0xffff);
        assert_eq!(sum_20(&[0; 20]), 0);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_and_sum_refuses_unequal_lengths() {
        copy_and_sum(&mut [0u8; 3], &[1u8; 4]);
    }

    proptest::proptest! {
        /// Random bytes, lengths and start offsets: the wide native-order sum (with the
        /// CPU's vector kernel from `VECTOR_MIN_BYTES`, and without) equals the 16-bit big-endian
        /// reference, and pieces at even offsets combine to the whole.
        #[test]
        fn sum_equals_the_reference(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
            start in 0usize..64,
            cut in 0usize..3000,
        ) {
            let start = start.min(data.len());
            let d = &data[start..];
            proptest::prop_assert_eq!(sum(d), sum_naive(d));
            proptest::prop_assert_eq!(sum_portable(d), sum_naive(d));
            let cut = (cut.min(d.len())) & !1;
            let (a, b) = d.split_at(cut);
            proptest::prop_assert_eq!(combine(&[sum(a), sum(b)]), sum_naive(d));
        }

        /// Random bytes and start offsets: [`copy_and_sum`] copies every byte and returns
        /// the reference sum (the kernel's whole vectors plus the chain's tail).
        #[test]
        fn copy_and_sum_equals_copy_then_reference(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
            start in 0usize..64,
        ) {
            let start = start.min(data.len());
            let s = &data[start..];
            let mut d = vec![0u8; s.len()];
            proptest::prop_assert_eq!(copy_and_sum(&mut d, s), sum_naive(s));
            proptest::prop_assert_eq!(&d[..], s);
        }
    }

    /// [`sum`] (the chain below [`VECTOR_MIN_BYTES`], the CPU's kernel from it), the chain
    /// alone ([`sum_portable`]: what a CPU without AVX2 runs at every length),
    /// [`copy_and_sum`] and its two-pass fallback [`copy_then_sum`] equal the RFC 1071
    /// reference for every length 0..=300 (and the bulk segment's 1,448), from an even and an
    /// odd start, on random bytes and on the constant bytes that stress the carries and the
    /// vector lanes (0xff, 0x80, 0x00).
    #[test]
    fn sums_and_copies_equal_the_reference_for_every_length_both_alignments_and_extreme_bytes() {
        let random: Vec<u8> = (0..2_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for (name, data) in [
            ("random", random),
            ("0xff", vec![0xff; 2_000]),
            ("0x80", vec![0x80; 2_000]),
            ("0x00", vec![0x00; 2_000]),
        ] {
            for start in [0usize, 1] {
                for len in (0..=300).chain([1_448, 1_460, 1_999]) {
                    let d = &data[start..start + len];
                    let want = sum_naive(d);
                    assert_eq!(sum(d), want, "{name}: sum of {len} from {start}");
                    assert_eq!(sum_portable(d), want, "{name}: chain of {len} from {start}");
                    let mut out = vec![0x5au8; len];
                    assert_eq!(copy_and_sum(&mut out, d), want, "{name}: copy of {len}");
                    assert_eq!(out, d, "{name}: the copy of {len} from {start}");
                    let mut out = vec![0x5au8; len];
                    assert_eq!(
                        copy_then_sum(&mut out, d),
                        want,
                        "{name}: two passes of {len}"
                    );
                    assert_eq!(out, d, "{name}: the two-pass copy of {len} from {start}");
                }
            }
        }
    }

    /// [`fold`] is the end-around-carry fold: the plain mask-and-shift steps agree on random
    /// accumulators and the edge values (0 stays 0, non-zero multiples of 0xffff give 0xffff).
    #[test]
    fn fold_equals_repeated_end_around_carry_folding() {
        let slow = |mut acc: u64| {
            while acc >> 16 != 0 {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut cases = vec![0, 1, 0xffff, 0x1_0000, 0xfffe_0001, 0xffff_ffff, u64::MAX];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.extend([x, x >> 28, x >> 40, x & 0x0000_ffff_ffff_0000]);
        }
        for acc in cases {
            assert_eq!(fold(acc), slow(acc), "{acc:#x}");
        }
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff * 12_345), 0xffff);
    }

    #[test]
    fn all_ones_data_sums_to_ffff_not_zero() {
        assert_eq!(sum(&[0xff; 64]), 0xffff);
        assert_eq!(sum(&[]), 0);
    }
}
