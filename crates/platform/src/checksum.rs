//! Vector kernels for the Internet checksum (RFC 1071), chosen once at run time.
//!
//! Two kernels, both for any length and any alignment: [`sum_or`] sums a buffer, and
//! [`copy_and_sum_or`] copies one while it sums it. Each returns what `wire::checksum::sum`
//! returns: the folded 16-bit one's-complement sum of the bytes taken as big-endian words,
//! an odd last byte padded with a zero byte after it (RFC 1071 §4.1), not complemented.
//!
//! The kernel is picked on the first call and remembered in a function pointer (an
//! `AtomicPtr` that starts at a resolver, as an ELF IFUNC does): every later call is one load
//! and one indirect call, with no feature test and no `Option`. Where the CPU has no AVX2 the
//! pointer names the caller's own portable function, passed along with every call (`wire`
//! keeps its scalar add-with-carry chain; this crate does not duplicate it).
//!
//! Why here: calling a `#[target_feature]` function from code compiled without the feature is
//! `unsafe`, and `unsafe` lives in this crate only.

use core::sync::atomic::{AtomicPtr, Ordering};

/// A sum function: the folded one's-complement sum of `data` as big-endian 16-bit words (an
/// odd last byte padded with zero), as `wire::checksum::sum` returns it. Any length.
pub type SumFn = fn(data: &[u8]) -> u16;

/// A copy-and-sum function: copies `src` into `dst` (of the same length) and returns
/// [`SumFn`]'s sum of `src`. Any length.
pub type CopySumFn = fn(dst: &mut [u8], src: &[u8]) -> u16;

/// What [`SUM`] holds: a sum function that is handed the caller's portable one as well.
type SumDispatch = fn(&[u8], SumFn) -> u16;

/// What [`COPY_SUM`] holds.
type CopySumDispatch = fn(&mut [u8], &[u8], CopySumFn) -> u16;

/// The sum function of this CPU: [`resolve_sum`] until the first call, then the AVX2 kernel's
/// entry or [`portable_sum`]. Invariant: it only ever holds a [`SumDispatch`] cast to a
/// pointer.
static SUM: AtomicPtr<()> = AtomicPtr::new(resolve_sum as *mut ());

/// The copy-and-sum function of this CPU, as [`SUM`]. Invariant: it only ever holds a
/// [`CopySumDispatch`] cast to a pointer.
static COPY_SUM: AtomicPtr<()> = AtomicPtr::new(resolve_copy_sum as *mut ());

/// [`SumFn`]'s sum of `data` by this CPU's kernel (AVX2), or by `portable` where there is none.
/// The choice is made on the first call and kept: one load and one indirect call per call.
#[inline]
pub fn sum_or(data: &[u8], portable: SumFn) -> u16 {
    let f = SUM.load(Ordering::Relaxed);
    // SAFETY: `SUM` only ever holds `SumDispatch` function pointers (its initial value and
    // what `resolve_sum` stores), and a function pointer round-trips through `*mut ()`.
    let f = unsafe { core::mem::transmute::<*mut (), SumDispatch>(f) };
    f(data, portable)
}

/// Copies `src` into `dst` and returns [`SumFn`]'s sum of `src`, in one pass by this CPU's
/// kernel (AVX2), or by `portable` where there is none; chosen once, as [`sum_or`].
///
/// # Panics
/// When `dst.len() != src.len()` (as `copy_from_slice`).
#[inline]
pub fn copy_and_sum_or(dst: &mut [u8], src: &[u8], portable: CopySumFn) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum: lengths differ");
    let f = COPY_SUM.load(Ordering::Relaxed);
    // SAFETY: `COPY_SUM` only ever holds `CopySumDispatch` function pointers (its initial
    // value and what `resolve_copy_sum` stores).
    let f = unsafe { core::mem::transmute::<*mut (), CopySumDispatch>(f) };
    f(dst, src, portable)
}

/// The AVX2 sum kernel when this CPU has AVX2, else `None`: for tests and benchmarks that
/// call it directly (the data path goes through [`sum_or`]).
pub fn sum_kernel() -> Option<SumFn> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return Some(avx2_sum);
        }
    }
    None
}

/// The AVX2 copy-and-sum kernel when this CPU has AVX2, else `None` (as [`sum_kernel`]).
/// Unequal lengths panic, as [`copy_and_sum_or`].
pub fn copy_sum_kernel() -> Option<CopySumFn> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return Some(avx2_copy_sum);
        }
    }
    None
}

/// [`SUM`]'s first value: picks the kernel, stores it for every later call, and runs it.
/// Racing first calls store the same choice.
fn resolve_sum(data: &[u8], portable: SumFn) -> u16 {
    let chosen = choose_sum(sum_kernel().is_some());
    SUM.store(chosen as *mut (), Ordering::Relaxed);
    chosen(data, portable)
}

/// [`COPY_SUM`]'s first value, as [`resolve_sum`].
fn resolve_copy_sum(dst: &mut [u8], src: &[u8], portable: CopySumFn) -> u16 {
    let chosen = choose_copy_sum(copy_sum_kernel().is_some());
    COPY_SUM.store(chosen as *mut (), Ordering::Relaxed);
    chosen(dst, src, portable)
}

/// What [`resolve_sum`] stores: the AVX2 kernel's entry when `avx2` (the CPU has it), else
/// the caller's portable function.
fn choose_sum(avx2: bool) -> SumDispatch {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        return avx2_sum_dispatch;
    }
    let _ = avx2;
    portable_sum
}

/// What [`resolve_copy_sum`] stores, as [`choose_sum`].
fn choose_copy_sum(avx2: bool) -> CopySumDispatch {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        return avx2_copy_sum_dispatch;
    }
    let _ = avx2;
    portable_copy_sum
}

/// The choice where the CPU has no kernel: the caller's own function.
fn portable_sum(data: &[u8], portable: SumFn) -> u16 {
    portable(data)
}

/// The copy-and-sum choice where the CPU has no kernel: the caller's own function.
fn portable_copy_sum(dst: &mut [u8], src: &[u8], portable: CopySumFn) -> u16 {
    portable(dst, src)
}

/// The AVX2 choice of [`SUM`]; stored only after the detection succeeded.
#[cfg(target_arch = "x86_64")]
fn avx2_sum_dispatch(data: &[u8], _portable: SumFn) -> u16 {
    // SAFETY: stored in `SUM` only by `resolve_sum`, after `sum_kernel` found AVX2.
    unsafe { x86::sum_avx2(data) }
}

/// The AVX2 choice of [`COPY_SUM`]; stored only after the detection succeeded. The lengths
/// were checked equal by [`copy_and_sum_or`].
#[cfg(target_arch = "x86_64")]
fn avx2_copy_sum_dispatch(dst: &mut [u8], src: &[u8], _portable: CopySumFn) -> u16 {
    // SAFETY: stored in `COPY_SUM` only by `resolve_copy_sum`, after `copy_sum_kernel` found
    // AVX2; `copy_and_sum_or`, its only caller, asserted `dst.len() == src.len()`.
    unsafe { x86::copy_sum_avx2(dst, src) }
}

/// The safe entry [`sum_kernel`] hands out, only after the detection succeeded.
#[cfg(target_arch = "x86_64")]
fn avx2_sum(data: &[u8]) -> u16 {
    // SAFETY: reachable only through `sum_kernel`, which returns it only when
    // `is_x86_feature_detected!("avx2")` held.
    unsafe { x86::sum_avx2(data) }
}

/// The safe entry [`copy_sum_kernel`] hands out, only after the detection succeeded.
#[cfg(target_arch = "x86_64")]
fn avx2_copy_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum: lengths differ");
    // SAFETY: reachable only through `copy_sum_kernel`, which returns it only when
    // `is_x86_feature_detected!("avx2")` held; the lengths were checked just above.
    unsafe { x86::copy_sum_avx2(dst, src) }
}

/// The RFC 1071 fold of a 64-bit accumulator to 16 bits, then swapped to the big-endian value
/// (the kernels sum native-order words; by §2(B) the fold of that sum is the big-endian sum
/// byte-swapped). Two end-around-carry folds by rotation: the high half of `x + rotl(x, h)`
/// is `hi + lo` plus the carry out of `lo + hi`, which is the one's-complement sum of the two
/// halves (never 0 unless both are).
#[inline(always)]
fn fold_swap(acc: u64) -> u16 {
    let a = (acc.wrapping_add(acc.rotate_left(32)) >> 32) as u32;
    let a = (a.wrapping_add(a.rotate_left(16)) >> 16) as u16;
    u16::from_be(a)
}

#[cfg(target_arch = "x86_64")]
// Before Rust 1.87 (the workspace's MSRV is 1.85) the intrinsics are `unsafe fn`s and need
// the blocks below; from 1.87 they are safe inside `#[target_feature]` code.
#[allow(unused_unsafe)]
mod x86 {
    use core::arch::x86_64::{
        __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_shuffle_epi32, _mm256_add_epi32,
        _mm256_and_si256, _mm256_castsi256_si128, _mm256_cmpgt_epi32, _mm256_extracti128_si256,
        _mm256_lddqu_si256, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maskload_epi32,
        _mm256_maskstore_epi32, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_setr_epi32,
        _mm256_setzero_si256, _mm256_storeu_si256, _mm256_xor_si256,
    };

    use super::fold_swap;

    /// One AVX2 register.
    const V: usize = 32;

    /// Bytes per iteration of the main loop: eight vectors added into one accumulator. The
    /// rest below a block is taken by its binary digits from four vectors down, so a block
    /// is eight.
    const BLOCK: usize = 8 * V;
    const _: () = assert!(BLOCK == 8 * V);

    /// Bytes whose 32-bit lanes are reduced to one `i32` at a time. Each lane of a
    /// multiply-add is at most 2^16 in magnitude per vector, so every partial sum of the
    /// accumulator's eight lanes over 2^11 vectors plus the masked one stays below
    /// (2^11 + 1) · 8 · 2^16 < 2^31: they are added in 32 bits and the result is exact.
    const CHUNK: usize = 2048 * V;

    /// The sum of `data`: [`sum_native`] folded and swapped.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_avx2(data: &[u8]) -> u16 {
        // SAFETY: `data` is `data.len()` readable bytes; nothing is written (`COPY` false);
        // the caller guarantees AVX2.
        fold_swap(unsafe { sum_native::<false>(core::ptr::null_mut(), data.as_ptr(), data.len()) })
    }

    /// Copies `src` into `dst` and returns the sum of `src`: [`sum_native`] with its stores.
    ///
    /// # Safety
    /// The CPU must have AVX2. `dst.len() == src.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_sum_avx2(dst: &mut [u8], src: &[u8]) -> u16 {
        debug_assert_eq!(dst.len(), src.len());
        let len = src.len().min(dst.len());
        // SAFETY: both slices hold at least `len` bytes; a shared and a unique borrow cannot
        // overlap; the caller guarantees AVX2.
        fold_swap(unsafe { sum_native::<true>(dst.as_mut_ptr(), src.as_ptr(), len) })
    }

    /// The plain (unfolded) sum of the `len` bytes at `p` taken as native-order 16-bit words,
    /// an odd last byte as a word of its own (zero-padded after it); with `COPY`, each byte is
    /// also written to the same offset at `q` as it passes.
    ///
    /// `VPMADDWD` multiplies signed 16-bit lanes and adds neighbours into 32-bit lanes, so
    /// each word `w` is first offset to `w − 2^15` (its top bit flipped, which reads as that
    /// signed value); multiplied by 1 and paired, that gives a 32-bit lane sum, and the
    /// offsets come back at the end as `2^15` times the word count. Three instructions per 32
    /// bytes (flip, multiply-add, add; with `COPY` a load and a store besides).
    ///
    /// The walk, for any length: [`BLOCK`]s of eight vectors added as a tree into one
    /// accumulator (its dependency chain one add per block); the rest below a block by its
    /// binary digits (four vectors, two, one); the whole 4-byte lanes of the last 0..=31
    /// bytes by one masked load (`VPMASKMOVD`: lanes outside the mask are neither read nor
    /// written and load as zero; their flip is masked too, so they add nothing); then 0..=3
    /// bytes as scalars. Every [`CHUNK`] the lanes are reduced into one `i64`. No alignment
    /// is assumed (unaligned loads cost the same on AVX2 CPUs).
    ///
    /// Without `COPY` the loads are plain (`VMOVDQU`, folded into the flip's `VPXOR`); with
    /// `COPY` they are `VLDDQU` (an unaligned load, as `VMOVDQU` on every AVX2 CPU): with
    /// plain loads LLVM recognizes the load-store pairs as a copy loop, calls `memcpy` for
    /// it and keeps the loads for the sum — two passes again.
    ///
    /// # Safety
    /// The CPU must have AVX2. `p` is valid for reading `len` bytes; with `COPY`, `q` is valid
    /// for writing `len` bytes and the two ranges do not overlap.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn sum_native<const COPY: bool>(q: *mut u8, p: *const u8, len: usize) -> u64 {
        // SAFETY: every access below is at `p + off` / `q + off` for a range inside
        // `0..len`: whole vectors with `off + 32 ≤ len` (full chunks only while more than
        // `CHUNK` bytes remain; the last part's blocks end at `len − rest`, and each step
        // below a block is taken only when `rest`, the bytes left, has that bit); masked
        // 4-byte lanes at `off + 4k` for `k < lanes` with `off + 4 · lanes ≤ len` (`off` is
        // then `len − rest % 32`; masked-off lanes are not accessed); the 2-byte word at
        // `len & !3` when `len & 2`, and the byte at `len − 1` when `len & 1`, both below
        // `len`. `q` is used only when `COPY`. The caller guarantees the ranges, that they do
        // not overlap, and AVX2.
        unsafe {
            let flip = _mm256_set1_epi16(i16::MIN);
            let one = _mm256_set1_epi16(1);
            // One vector at `off`: loaded (and stored), flipped and pair-added. A macro, not a
            // closure: a closure would not carry the function's `avx2` into the intrinsics.
            macro_rules! step {
                ($off:expr) => {{
                    let at = $off;
                    let v = if COPY {
                        let v = _mm256_lddqu_si256(p.add(at).cast::<__m256i>());
                        _mm256_storeu_si256(q.add(at).cast::<__m256i>(), v);
                        v
                    } else {
                        _mm256_loadu_si256(p.add(at).cast::<__m256i>())
                    };
                    _mm256_madd_epi16(_mm256_xor_si256(v, flip), one)
                }};
            }
            // `n` vectors from `off` added into one accumulator as a tree (as many adds as
            // vectors, one of them on the accumulator's dependency chain).
            macro_rules! sum_vectors {
                ($off:expr, 1) => {
                    step!($off)
                };
                ($off:expr, 2) => {
                    _mm256_add_epi32(step!($off), step!($off + V))
                };
                ($off:expr, 4) => {
                    _mm256_add_epi32(sum_vectors!($off, 2), sum_vectors!($off + 2 * V, 2))
                };
                ($off:expr, 8) => {
                    _mm256_add_epi32(sum_vectors!($off, 4), sum_vectors!($off + 4 * V, 4))
                };
            }
            // The eight 32-bit lanes of an accumulator added in 32 bits (exact: see `CHUNK`).
            macro_rules! reduce {
                ($a:expr) => {{
                    let a = $a;
                    let h =
                        _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
                    let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b01_00_11_10>(h));
                    let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b10_11_00_01>(h));
                    i64::from(_mm_cvtsi128_si32(h))
                }};
            }
            let mut total: i64 = 0;
            let mut off = 0;
            // Whole chunks while more than one is left (never for a packet).
            while len - off > CHUNK {
                let mut acc = _mm256_setzero_si256();
                let end = off + CHUNK;
                while off < end {
                    acc = _mm256_add_epi32(acc, sum_vectors!(off, 8));
                    off += BLOCK;
                }
                total += reduce!(acc);
            }
            // The last 0..=CHUNK bytes: blocks, then the rest below a block by its binary
            // digits (four vectors, two, one), then the whole 4-byte lanes by mask.
            let mut acc = _mm256_setzero_si256();
            let rest = (len - off) % BLOCK;
            let blocks_end = len - rest;
            while off < blocks_end {
                acc = _mm256_add_epi32(acc, sum_vectors!(off, 8));
                off += BLOCK;
            }
            if rest & (4 * V) != 0 {
                acc = _mm256_add_epi32(acc, sum_vectors!(off, 4));
                off += 4 * V;
            }
            if rest & (2 * V) != 0 {
                acc = _mm256_add_epi32(acc, sum_vectors!(off, 2));
                off += 2 * V;
            }
            if rest & V != 0 {
                acc = _mm256_add_epi32(acc, sum_vectors!(off, 1));
                off += V;
            }
            let lanes = (rest % V) / 4;
            if lanes != 0 {
                let mask = _mm256_cmpgt_epi32(
                    _mm256_set1_epi32(lanes as i32),
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                );
                let v = _mm256_maskload_epi32(p.add(off).cast::<i32>(), mask);
                if COPY {
                    _mm256_maskstore_epi32(q.add(off).cast::<i32>(), mask, v);
                }
                let flipped = _mm256_xor_si256(v, _mm256_and_si256(flip, mask));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(flipped, one));
            }
            total += reduce!(acc);
            // Σ(w − 2^15) + 2^15 · words = Σw ≥ 0, over the words of the whole 4-byte lanes.
            let lanes_end = len & !3;
            let mut acc = (total + (1i64 << 14) * lanes_end as i64) as u64;
            // The last 0..=3 bytes: a whole word, then an odd byte as the low byte of a
            // native-order (little-endian) word padded with zero after it.
            if len & 2 != 0 {
                let w = p.add(lanes_end).cast::<u16>().read_unaligned();
                if COPY {
                    q.add(lanes_end).cast::<u16>().write_unaligned(w);
                }
                acc += u64::from(w);
            }
            if len & 1 != 0 {
                let b = *p.add(len - 1);
                if COPY {
                    *q.add(len - 1) = b;
                }
                acc += u64::from(b);
            }
            acc
        }
    }
}

#[cfg(test)]
mod tests;
