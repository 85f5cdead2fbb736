//! A vector kernel for the Internet checksum (RFC 1071), chosen at run time.
//!
//! `wire::checksum::sum` is the portable sum (one add-with-carry chain, ~0.28 instructions per
//! byte); this module adds an AVX2 kernel for the bulk of long buffers and hands it out only
//! when the CPU has AVX2 ([`sum_kernel`]). The kernel returns the plain sum of the buffer's
//! native-order 16-bit words as a `u64` (unfolded); by RFC 1071 §2(B) (byte-order
//! independence) its fold is the buffer's one's-complement sum in native order, so the caller
//! adds it into its own accumulator with end-around carry and folds once.
//!
//! Why here: calling a `#[target_feature]` function from code compiled without the feature is
//! `unsafe`, and `unsafe` lives in this crate only.

/// A checksum kernel: the unfolded one's-complement accumulator of `data`'s native-order
/// 16-bit words. Only for lengths that are a multiple of [`KERNEL_BLOCK_BYTES`]; other lengths
/// return `None` and the caller sums them itself.
pub type SumKernel = fn(data: &[u8]) -> Option<u64>;

/// The kernel consumes whole blocks of this many bytes (four 32-byte vectors).
pub const KERNEL_BLOCK_BYTES: usize = 128;

/// The AVX2 kernel when this CPU has AVX2, else `None` (checked once, then cached by std).
pub fn sum_kernel() -> Option<SumKernel> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return Some(avx2_entry);
        }
    }
    None
}

/// A copy-and-sum kernel: copies `src` into `dst` and returns the unfolded one's-complement
/// accumulator of `src`'s native-order 16-bit words (as [`SumKernel`] does; an odd last byte
/// is padded with a zero byte after it, RFC 1071 §4.1), in one pass over the bytes. Any
/// length; `dst.len() != src.len()` returns `None` with `dst` untouched.
pub type CopySumKernel = fn(dst: &mut [u8], src: &[u8]) -> Option<u64>;

/// The copy-and-sum kernel's vector width in bytes (one AVX2 register): whole vectors are
/// loaded and stored plainly, the last 0..=31 bytes with masked moves of 4-byte lanes and
/// then single bytes.
pub const COPY_SUM_VECTOR_BYTES: usize = 32;

/// The AVX2 copy-and-sum kernel when this CPU has AVX2, else `None`. Where data is copied
/// anyway (a received segment's payload into its connection's receive ring), the copy's load
/// feeds the sum: each 32 bytes cost a load, a store and the sum's flip, multiply-add and add
/// in one pass, where a copy followed by a separate sum loads them twice.
pub fn copy_sum_kernel() -> Option<CopySumKernel> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return Some(avx2_copy_entry);
        }
    }
    None
}

/// The safe entry [`copy_sum_kernel`] hands out, only after the detection succeeded.
#[cfg(target_arch = "x86_64")]
fn avx2_copy_entry(dst: &mut [u8], src: &[u8]) -> Option<u64> {
    if dst.len() != src.len() {
        return None;
    }
    // SAFETY: reachable only through `copy_sum_kernel`, which returns it only when
    // `is_x86_feature_detected!("avx2")` held; the lengths were checked just above.
    Some(unsafe { x86::copy_sum_avx2(dst, src) })
}

/// The safe entry the function pointer names; handed out by [`sum_kernel`] only after the
/// detection succeeded.
#[cfg(target_arch = "x86_64")]
fn avx2_entry(data: &[u8]) -> Option<u64> {
    if data.len() % KERNEL_BLOCK_BYTES != 0 {
        return None;
    }
    // SAFETY: this function is reachable only through `sum_kernel`, which returns it only
    // when `is_x86_feature_detected!("avx2")` held, so the CPU executes AVX2.
    Some(unsafe { x86::sum_blocks_avx2(data) })
}

#[cfg(target_arch = "x86_64")]
// Before Rust 1.87 (the workspace's MSRV is 1.85) the intrinsics are `unsafe fn`s and need
// the blocks below; from 1.87 they are safe inside `#[target_feature]` code.
#[allow(unused_unsafe)]
mod x86 {
    use core::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_add_epi64, _mm256_castsi256_si128, _mm256_cmpgt_epi32,
        _mm256_cvtepi32_epi64, _mm256_extracti128_si256, _mm256_lddqu_si256, _mm256_loadu_si256,
        _mm256_madd_epi16, _mm256_maskload_epi32, _mm256_maskstore_epi32, _mm256_set1_epi16,
        _mm256_set1_epi32, _mm256_setr_epi32, _mm256_setzero_si256, _mm256_storeu_si256,
        _mm256_xor_si256,
    };

    use super::KERNEL_BLOCK_BYTES;

    /// Blocks summed into the 32-bit lanes before they are widened: each lane gains at most
    /// 2^16 in magnitude per block, so 2^14 blocks stay inside an `i32` (2^30 at most).
    const BLOCKS_PER_FLUSH: usize = 1 << 14;

    /// [`copy_sum_avx2`]'s blocks between flushes: its four accumulators are added together
    /// in 32 bits before widening, so they share [`BLOCKS_PER_FLUSH`]'s bound: 4 · (2^12 + 1)
    /// vectors of at most 2^16 per lane stay inside an `i32`.
    const COPY_BLOCKS_PER_FLUSH: usize = 1 << 12;

    /// The sum of `data`'s native-order 16-bit words, as a plain (unfolded) `u64`.
    ///
    /// `VPMADDWD` multiplies signed 16-bit lanes and adds neighbours into 32-bit lanes, so
    /// each word `w` is first offset to `w − 2^15` (its top bit flipped, which reads as that
    /// signed value); multiplied by 1 and paired, that gives a 32-bit lane sum, and the
    /// offsets come back at the end as `2^15` times the word count. Three instructions per 32
    /// bytes (flip, multiply-add, add), four independent accumulators per 128-byte block.
    ///
    /// # Safety
    /// The CPU must have AVX2. `data.len()` must be a multiple of [`KERNEL_BLOCK_BYTES`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_blocks_avx2(data: &[u8]) -> u64 {
        debug_assert_eq!(data.len() % KERNEL_BLOCK_BYTES, 0);
        // SAFETY: register intrinsics; unaligned 32-byte loads at offsets 0, 32, 64 and 96 of
        // a `KERNEL_BLOCK_BYTES` chunk of `data`, and unaligned 32-byte stores into a local
        // array of 4 `i64`s; the caller guarantees AVX2.
        unsafe {
            let flip = _mm256_set1_epi16(i16::MIN);
            let one = _mm256_set1_epi16(1);
            let mut wide = _mm256_setzero_si256();
            for chunk in data.chunks(BLOCKS_PER_FLUSH * KERNEL_BLOCK_BYTES) {
                let mut acc: [__m256i; 4] = [_mm256_setzero_si256(); 4];
                for block in chunk.chunks_exact(KERNEL_BLOCK_BYTES) {
                    let p = block.as_ptr();
                    for (i, a) in acc.iter_mut().enumerate() {
                        let v = _mm256_loadu_si256(p.add(32 * i).cast::<__m256i>());
                        let pairs = _mm256_madd_epi16(_mm256_xor_si256(v, flip), one);
                        *a = _mm256_add_epi32(*a, pairs);
                    }
                }
                // Widened to 64-bit lanes one accumulator at a time (their 32-bit sum could
                // overflow), in registers.
                for a in acc {
                    let low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a));
                    let high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(a));
                    wide = _mm256_add_epi64(wide, _mm256_add_epi64(low, high));
                }
            }
            let mut lanes = [0i64; 4];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), wide);
            let total: i64 = lanes.iter().sum();
            let words = (data.len() / 2) as i64;
            // Σ(w − 2^15) + 2^15 · words = Σw ≥ 0.
            (total + (1 << 15) * words) as u64
        }
    }

    /// Copies `src` into `dst` and returns the sum of `src`'s native-order 16-bit words as a
    /// plain (unfolded) `u64`: [`sum_blocks_avx2`]'s arithmetic (top bits flipped,
    /// `VPMADDWD` by 1 into 32-bit lanes, offsets added back at the end) on the vectors as
    /// they pass from load to store. 128-byte blocks into four accumulators, then the last
    /// 0..=3 vectors into the first three; every [`COPY_BLOCKS_PER_FLUSH`] blocks the four
    /// are added in 32 bits and widened into 64-bit lanes.
    ///
    /// The loads are `VLDDQU` (an unaligned load, as `VMOVDQU` on every AVX2 CPU): with
    /// plain loads LLVM recognizes the load-store pairs as a copy loop, calls `memcpy` for
    /// it and keeps the loads for the sum — two passes again (callgrind showed the call).
    ///
    /// The last 0..=31 bytes: their whole 4-byte lanes by one masked load and store
    /// (`VPMASKMOVD`: lanes outside the mask are neither read nor written, and load as zero,
    /// which the offset correction counts like any word), then 0..=3 single bytes added as
    /// one zero-padded native-order word.
    ///
    /// # Safety
    /// The CPU must have AVX2. `dst.len() == src.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_sum_avx2(dst: &mut [u8], src: &[u8]) -> u64 {
        const V: usize = super::COPY_SUM_VECTOR_BYTES;
        debug_assert_eq!(dst.len(), src.len());
        let len = src.len().min(dst.len());
        let blocks_end = len - len % KERNEL_BLOCK_BYTES;
        let vectors_end = len - len % V;
        let (p, q) = (src.as_ptr(), dst.as_mut_ptr());
        // SAFETY: register intrinsics; unaligned 32-byte loads from `p + off` and stores to
        // `q + off` with `off + 32 ≤ vectors_end ≤ len`, the length of both slices; masked
        // 4-byte lanes at `vectors_end + 4k` for `k < lanes`, `vectors_end + 4 · lanes ≤
        // len` (masked-off lanes are not accessed); single bytes at `done + k < len`: every
        // access lies inside both slices; `src` and `dst` cannot overlap (a shared and a unique
        // borrow); an unaligned 32-byte store into a local array of 4 `i64`s; the caller
        // guarantees AVX2.
        unsafe {
            let flip = _mm256_set1_epi16(i16::MIN);
            let one = _mm256_set1_epi16(1);
            let mut wide = _mm256_setzero_si256();
            let mut off = 0;
            loop {
                let mut acc: [__m256i; 4] = [_mm256_setzero_si256(); 4];
                let flush_end = blocks_end.min(off + COPY_BLOCKS_PER_FLUSH * KERNEL_BLOCK_BYTES);
                while off < flush_end {
                    for (i, a) in acc.iter_mut().enumerate() {
                        let v = _mm256_lddqu_si256(p.add(off + V * i).cast::<__m256i>());
                        _mm256_storeu_si256(q.add(off + V * i).cast::<__m256i>(), v);
                        let pairs = _mm256_madd_epi16(_mm256_xor_si256(v, flip), one);
                        *a = _mm256_add_epi32(*a, pairs);
                    }
                    off += KERNEL_BLOCK_BYTES;
                }
                if off == blocks_end {
                    // The last 0..=3 vectors, one into each of the first accumulators.
                    for a in acc.iter_mut() {
                        if off == vectors_end {
                            break;
                        }
                        let v = _mm256_lddqu_si256(p.add(off).cast::<__m256i>());
                        _mm256_storeu_si256(q.add(off).cast::<__m256i>(), v);
                        let pairs = _mm256_madd_epi16(_mm256_xor_si256(v, flip), one);
                        *a = _mm256_add_epi32(*a, pairs);
                        off += V;
                    }
                }
                // The four accumulators added in 32 bits (each lane of the sum gained at most
                // 2^16 per vector over at most 4 · (2^12 + 1) vectors: below 2^31), then
                // widened to 64-bit lanes once.
                let a = _mm256_add_epi32(
                    _mm256_add_epi32(acc[0], acc[1]),
                    _mm256_add_epi32(acc[2], acc[3]),
                );
                let low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a));
                let high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(a));
                wide = _mm256_add_epi64(wide, _mm256_add_epi64(low, high));
                if off >= vectors_end {
                    break;
                }
            }
            // The whole 4-byte lanes of the last 0..=31 bytes: `lanes` of the eight, by mask.
            let lanes = (len - vectors_end) / 4;
            let mut words = vectors_end / 2;
            if lanes > 0 {
                let mask = _mm256_cmpgt_epi32(
                    _mm256_set1_epi32(lanes as i32),
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                );
                let v = _mm256_maskload_epi32(p.add(vectors_end).cast::<i32>(), mask);
                _mm256_maskstore_epi32(q.add(vectors_end).cast::<i32>(), mask, v);
                let pairs = _mm256_madd_epi16(_mm256_xor_si256(v, flip), one);
                let low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(pairs));
                let high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(pairs));
                wide = _mm256_add_epi64(wide, _mm256_add_epi64(low, high));
                // All 16 words were counted, the masked-off zeros too (flipped, then
                // corrected back to 0).
                words += V / 2;
            }
            let mut store = [0i64; 4];
            _mm256_storeu_si256(store.as_mut_ptr().cast::<__m256i>(), wide);
            let total: i64 = store.iter().sum();
            let mut acc = (total + (1 << 15) * words as i64) as u64;
            // The last 0..=3 bytes, zero-padded after them.
            let done = vectors_end + 4 * lanes;
            let mut last = [0u8; 4];
            for (k, b) in last.iter_mut().enumerate().take(len - done) {
                *b = *p.add(done + k);
                *q.add(done + k) = *b;
            }
            acc += u64::from(u32::from_ne_bytes(last));
            acc
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: native-order 16-bit words summed one at a time, folded.
    fn fold16(mut acc: u64) -> u16 {
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    fn reference(data: &[u8]) -> u16 {
        fold16(
            data.chunks_exact(2)
                .map(|w| u64::from(u16::from_ne_bytes([w[0], w[1]])))
                .sum(),
        )
    }

    #[test]
    fn the_kernel_folds_to_the_reference_sum_for_every_block_count() {
        let Some(kernel) = sum_kernel() else {
            eprintln!("no AVX2 on this CPU: the kernel is never used here");
            return;
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..64 * KERNEL_BLOCK_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for blocks in 0..=64 {
            let d = &data[..blocks * KERNEL_BLOCK_BYTES];
            let acc = kernel(d).expect("whole blocks");
            assert_eq!(fold16(acc), reference(d), "{blocks} blocks");
        }
        // Past the 2^14 blocks after which the 32-bit lanes are widened, on bytes that make
        // every lane's magnitude grow fastest (all ones, all zeros with the top bits set).
        for byte in [0xffu8, 0x80, 0x00] {
            let big = vec![byte; 20_000 * KERNEL_BLOCK_BYTES];
            let acc = kernel(&big).expect("whole blocks");
            assert_eq!(acc, u64::from(u16::from_ne_bytes([byte, byte])) * 1_280_000);
            assert_eq!(fold16(acc), reference(&big), "byte {byte:#x}");
        }
    }

    /// The reference with an odd last byte padded by a zero byte after it (RFC 1071 §4.1).
    fn reference_padded(data: &[u8]) -> u16 {
        let mut padded = data.to_vec();
        if padded.len() % 2 == 1 {
            padded.push(0);
        }
        reference(&padded)
    }

    #[test]
    fn the_copy_kernel_copies_and_sums_as_the_reference_for_every_length() {
        let Some(kernel) = copy_sum_kernel() else {
            eprintln!("no AVX2 on this CPU: the kernel is never used here");
            return;
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..70 * COPY_SUM_VECTOR_BYTES + 1)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        // Every length from 0 to 70 vectors (whole blocks, 1..=3 trailing vectors, every
        // masked tail and 0..=3 last bytes), from an even and an odd start in the source;
        // the bytes after the destination are never written.
        const GUARD: usize = 40;
        for start in [0usize, 1] {
            for len in 0..=70 * COPY_SUM_VECTOR_BYTES {
                let s = &data[start..start + len];
                let mut d = vec![0x5au8; len + GUARD];
                let acc = kernel(&mut d[..len], s).expect("equal lengths");
                assert_eq!(fold16(acc), reference_padded(s), "{len} bytes from {start}");
                assert_eq!(&d[..len], s, "{len} bytes from {start}: the copy");
                assert!(
                    d[len..].iter().all(|&b| b == 0x5a),
                    "{len} bytes: wrote past the end"
                );
            }
        }
        // Past the widening point, with the bytes that grow every lane fastest.
        for byte in [0xffu8, 0x80, 0x00] {
            let n = 20_000 * KERNEL_BLOCK_BYTES + 3 * COPY_SUM_VECTOR_BYTES + 30;
            let big = vec![byte; n];
            let mut d = vec![!byte; n];
            let acc = kernel(&mut d, &big).expect("equal lengths");
            assert_eq!(fold16(acc), reference_padded(&big), "byte {byte:#x}");
            assert!(d == big, "byte {byte:#x}: the copy");
        }
    }

    #[test]
    fn the_copy_kernel_refuses_unequal_lengths_and_leaves_dst_alone() {
        if let Some(kernel) = copy_sum_kernel() {
            let src = [7u8; 2 * COPY_SUM_VECTOR_BYTES];
            let mut short = [0u8; COPY_SUM_VECTOR_BYTES];
            assert_eq!(kernel(&mut short, &src), None);
            assert_eq!(short, [0u8; COPY_SUM_VECTOR_BYTES]);
        }
    }

    #[test]
    fn the_kernel_refuses_a_length_that_is_not_whole_blocks() {
        if let Some(kernel) = sum_kernel() {
            assert_eq!(kernel(&[0u8; KERNEL_BLOCK_BYTES + 2]), None);
        }
    }
}
