//! The Toeplitz (RSS) hash of eight TCP/UDP-over-IPv4 4-tuples per call: AVX-512
//! `VPCLMULQDQ` and GFNI on 512-bit registers, detected at run time, behind a safe API.
//!
//! The arithmetic is [`crate::toeplitz`]'s GFNI form, four tuples to a register: each 128-bit
//! lane holds one tuple's 12 bytes (the 4 bytes after them cleared), one `VGF2P8AFFINEQB`
//! reverses the bits of every byte of four tuples, and three `VPCLMULQDQ` compute the three
//! 64×64 carry-less products of four tuples (`κ0·β1`, `κ1·β0`, `κ0·β0`, one per lane each).
//! The hash of a lane is bits 32..64 of `lo(κ0·β1) ⊕ lo(κ1·β0) ⊕ hi(κ0·β0)`; one
//! `VPERMT2D` gathers the eight hashes of two registers for one 32-byte store.
//!
//! Written with `asm!` rather than intrinsics: the workspace's MSRV (1.85) predates the
//! stable AVX-512 intrinsics and `#[target_feature(enable = "avx512f")]` (1.89), so the
//! instructions are spelled out and every vector register declared clobbered. Valgrind
//! (3.19 here) decodes none of them and reports none of the features in CPUID, so code under
//! callgrind never gets a [`BurstToeplitz`] and takes the caller's fallback.

use std::sync::OnceLock;

use crate::toeplitz::KEY_BYTES;

/// Tuples hashed per kernel call.
pub const BURST_TUPLES: usize = 8;

/// Bytes the kernel reads per tuple: the 12 tuple bytes and 4 it ignores (in a frame, the
/// next header bytes; elsewhere, padding).
pub const WINDOW_BYTES: usize = 16;

/// A readable window whose first 12 bytes are a tuple `src ‖ dst ‖ sport ‖ dport`, network
/// order; the last 4 bytes are ignored.
pub type TupleWindow = [u8; WINDOW_BYTES];

/// All zeroes: what a burst's unused slots point at (its hash, 0, is discarded).
static ZERO_WINDOW: TupleWindow = [0; WINDOW_BYTES];

/// An eight-tuple Toeplitz hasher for one key that exists only where the CPU (and the OS)
/// has AVX-512F, AVX-512BW, GFNI and VPCLMULQDQ.
///
/// Invariant: a value exists only after [`burst_available`] returned true, so its methods may
/// run the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstToeplitz {
    /// The first 128 key bits as a big-endian number, low word first: `kappa[0]` = key bytes
    /// 8..16, `kappa[1]` = key bytes 0..8 (each big-endian).
    kappa: [u64; 2],
}

impl BurstToeplitz {
    /// The hasher for `key` (only its first 16 bytes matter for a 12-byte input), or `None`
    /// where the CPU lacks one of the instructions.
    pub fn new(key: &[u8; KEY_BYTES]) -> Option<Self> {
        if !burst_available() {
            return None;
        }
        let be = |i: usize| {
            key.get(i..i + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or_default()
        };
        Some(BurstToeplitz {
            kappa: [be(8), be(0)],
        })
    }

    /// The hashes of eight tuples, each the first 12 bytes of its window (the rest ignored):
    /// `out[i]` = Toeplitz hash of `windows[i][..12]`.
    #[inline]
    pub fn hash8(&self, windows: &[&TupleWindow; BURST_TUPLES]) -> [u32; BURST_TUPLES] {
        let mut out = [0u32; BURST_TUPLES];
        let pointers: [*const u8; BURST_TUPLES] = windows.map(|w| w.as_ptr());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `self` exists only where `burst_available()` found AVX-512F/BW, GFNI and
        // VPCLMULQDQ with the OS saving the 512-bit state (type invariant); every pointer
        // comes from a `&[u8; 16]`, so the kernel's 16-byte reads stay inside live memory;
        // `out` is 32 writable bytes.
        unsafe {
            x86::hash8(&self.kappa, &pointers, &mut out);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = pointers;
            unreachable!("BurstToeplitz is never built off x86-64")
        }
        out
    }

    /// The hashes of up to eight tuples: `out[i]` for `windows[i]`, for `i` below the shorter
    /// length (at most [`BURST_TUPLES`]); the rest of `out` is left as it was. One kernel
    /// call whatever the count.
    #[inline]
    pub fn hash_up_to_8(&self, windows: &[&TupleWindow], out: &mut [u32]) {
        let mut full = [&ZERO_WINDOW; BURST_TUPLES];
        for (slot, w) in full.iter_mut().zip(windows) {
            *slot = w;
        }
        let hashes = self.hash8(&full);
        for (o, h) in out
            .iter_mut()
            .zip(windows.iter().zip(hashes).map(|(_, h)| h))
        {
            *o = h;
        }
    }

    /// The hashes of contiguous 12-byte tuples: `out[i]` for `tuples[i]`, for `i` below the
    /// shorter length; the rest of `out` is left as it was.
    pub fn hash_tuples(&self, tuples: &[[u8; 12]], out: &mut [u32]) {
        let n = tuples.len().min(out.len());
        let flat = tuples.as_flattened();
        let mut done = 0;
        // Eight tuples read straight from the slice while 4 bytes follow them (the kernel
        // reads 16 bytes per tuple).
        for (chunk, dst) in flat
            .windows(STRIDED_READ_BYTES)
            .step_by(12 * BURST_TUPLES)
            .zip(out.chunks_exact_mut(BURST_TUPLES))
            .take(n / BURST_TUPLES)
        {
            let mut hashes = [0u32; BURST_TUPLES];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the type invariant guarantees the instructions (as in `hash8`); `chunk`
            // is `STRIDED_READ_BYTES` bytes of the slice.
            unsafe {
                x86::hash8_contiguous(&self.kappa, chunk.as_ptr(), &mut hashes);
            }
            dst.copy_from_slice(&hashes);
            done += BURST_TUPLES;
        }
        // The rest (at most eight: the last chunk, when nothing follows it) through padded
        // windows.
        while done < n {
            let rest = tuples.get(done..n).unwrap_or(&[]);
            let mut windows = [[0u8; WINDOW_BYTES]; BURST_TUPLES];
            for (w, t) in windows.iter_mut().zip(rest) {
                if let Some(head) = w.get_mut(..12) {
                    head.copy_from_slice(t);
                }
            }
            let hashes = self.hash8(&core::array::from_fn(|j| &windows[j]));
            let taken = rest.len().min(BURST_TUPLES);
            for (o, h) in out.iter_mut().skip(done).take(taken).zip(hashes) {
                *o = h;
            }
            done += taken;
        }
    }
}

/// Bytes the contiguous kernel reads for eight 12-byte tuples: up to byte 16 of the last.
const STRIDED_READ_BYTES: usize = 12 * (BURST_TUPLES - 1) + WINDOW_BYTES;

/// Whether the eight-tuple kernel can run here: AVX-512F and AVX-512BW with the OS saving
/// their state (std's detection checks XCR0), GFNI and VPCLMULQDQ (CPUID leaf 7 ECX bits 8
/// and 10, read directly: the workspace's MSRV predates their names in
/// `is_x86_feature_detected!`). Checked once per process.
pub fn burst_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && x86::cpu_has_gfni_and_vpclmulqdq()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

#[cfg(target_arch = "x86_64")]
// Before Rust 1.87 (the MSRV is 1.85) `__cpuid` is an `unsafe fn`; from 1.87 it is safe.
#[allow(unused_unsafe)]
mod x86 {
    use core::arch::asm;
    use core::arch::x86_64::{__cpuid, __cpuid_count};

    use super::BURST_TUPLES;

    /// CPUID leaf 7 (subleaf 0) ECX bit 8 (GFNI) and bit 10 (VPCLMULQDQ).
    pub(super) fn cpu_has_gfni_and_vpclmulqdq() -> bool {
        const BITS: u32 = (1 << 8) | (1 << 10);
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only when the maximum
        // basic leaf (leaf 0's EAX) includes it.
        unsafe { __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ecx & BITS == BITS }
    }

    /// Per 128-bit lane: keep the 12 tuple bytes, clear the 4 after them.
    static LANE_MASK: [u64; 2] = [u64::MAX, 0x0000_0000_ffff_ffff];
    /// The GFNI matrix whose row `i` selects bit `7 − i`: each byte's bits reversed.
    static BIT_REVERSE: u64 = 0x8040_2010_0804_0201;
    /// `VPERMT2D` indices: dword 1 of each lane of the first register (1, 5, 9, 13), then of
    /// the second (16 + 1, …).
    static GATHER: [u32; 8] = [1, 5, 9, 13, 17, 21, 25, 29];

    /// The kernel after the loads: tuples 0–3 in zmm3, 4–7 in zmm4 (one per 128-bit lane,
    /// bytes 12..16 of each lane arbitrary), the constants' addresses in `{kappa}`, `{mask}`,
    /// `{rev}`, `{gather}`; stores the eight hashes at `{out}`.
    macro_rules! hash8_after_loads {
        () => {
            concat!(
                "vbroadcasti32x4 zmm0, xmmword ptr [{kappa}]\n",
                "vbroadcasti32x4 zmm1, xmmword ptr [{mask}]\n",
                "vpbroadcastq zmm2, qword ptr [{rev}]\n",
                // Clear bytes 12..16 of each lane, reverse every byte's bits (β).
                "vpandq zmm3, zmm3, zmm1\n",
                "vpandq zmm4, zmm4, zmm1\n",
                "vgf2p8affineqb zmm3, zmm3, zmm2, 0\n",
                "vgf2p8affineqb zmm4, zmm4, zmm2, 0\n",
                // κ0·β1, κ1·β0, κ0·β0 per lane (imm bit 0: κ's word, bit 4: β's word).
                "vpclmulqdq zmm5, zmm0, zmm3, 0x10\n",
                "vpclmulqdq zmm6, zmm0, zmm3, 0x01\n",
                "vpclmulqdq zmm7, zmm0, zmm3, 0x00\n",
                "vpclmulqdq zmm8, zmm0, zmm4, 0x10\n",
                "vpclmulqdq zmm9, zmm0, zmm4, 0x01\n",
                "vpclmulqdq zmm10, zmm0, zmm4, 0x00\n",
                // hi(κ0·β0) down to the low word, then the XOR of the three.
                "vpsrldq zmm7, zmm7, 8\n",
                "vpsrldq zmm10, zmm10, 8\n",
                "vpternlogq zmm5, zmm6, zmm7, 0x96\n",
                "vpternlogq zmm8, zmm9, zmm10, 0x96\n",
                // Dword 1 of every lane, eight of them, in tuple order.
                "vmovdqu ymm11, ymmword ptr [{gather}]\n",
                "vpermt2d zmm5, zmm11, zmm8\n",
                "vmovdqu ymmword ptr [{out}], ymm5\n",
                "vzeroupper\n",
            )
        };
    }

    /// Writes the hashes of the 12-byte tuples at `pointers[i]` to `out[i]`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX-512BW, GFNI and VPCLMULQDQ, with the OS saving the
    /// 512-bit state; each pointer must have 16 readable bytes.
    #[inline(never)]
    pub(super) unsafe fn hash8(
        kappa: &[u64; 2],
        pointers: &[*const u8; BURST_TUPLES],
        out: &mut [u32; BURST_TUPLES],
    ) {
        // SAFETY: the caller guarantees the instructions and the 16 readable bytes behind each
        // pointer; `kappa`, the statics and `out` are valid for the sizes read and written
        // (16, 16, 8, 32 and 32 bytes). The vector registers used are declared clobbered
        // (`clobber_abi("sysv64")`: every vector register is caller-saved in that ABI, on any
        // OS — the Windows ABI's callee-saved xmm6–15 are clobbered too), which also covers the
        // final `vzeroupper` (it clears the upper halves of zmm0–15 only); `rax` is an
        // early-clobbered output, so no input shares it.
        unsafe {
            asm!(
                // Four tuples per register, one per 128-bit lane.
                "mov rax, qword ptr [{p}]",
                "vmovdqu xmm3, xmmword ptr [rax]",
                "mov rax, qword ptr [{p} + 8]",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [rax], 1",
                "mov rax, qword ptr [{p} + 16]",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [rax], 2",
                "mov rax, qword ptr [{p} + 24]",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [rax], 3",
                "mov rax, qword ptr [{p} + 32]",
                "vmovdqu xmm4, xmmword ptr [rax]",
                "mov rax, qword ptr [{p} + 40]",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [rax], 1",
                "mov rax, qword ptr [{p} + 48]",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [rax], 2",
                "mov rax, qword ptr [{p} + 56]",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [rax], 3",
                hash8_after_loads!(),
                kappa = in(reg) kappa.as_ptr(),
                mask = in(reg) LANE_MASK.as_ptr(),
                rev = in(reg) &BIT_REVERSE,
                gather = in(reg) GATHER.as_ptr(),
                p = in(reg) pointers.as_ptr(),
                out = in(reg) out.as_mut_ptr(),
                out("rax") _,
                clobber_abi("sysv64"),
                options(nostack, preserves_flags),
            );
        }
    }

    /// Writes the hashes of eight contiguous 12-byte tuples starting at `tuples` to `out`.
    ///
    /// # Safety
    /// As [`hash8`]; `tuples` must have [`super::STRIDED_READ_BYTES`] readable bytes.
    #[inline(never)]
    pub(super) unsafe fn hash8_contiguous(
        kappa: &[u64; 2],
        tuples: *const u8,
        out: &mut [u32; BURST_TUPLES],
    ) {
        // SAFETY: as in `hash8`; the loads read bytes `12·i .. 12·i + 16` for `i` in 0..8,
        // all below `STRIDED_READ_BYTES` (100), which the caller guarantees readable.
        unsafe {
            asm!(
                "vmovdqu xmm3, xmmword ptr [{p}]",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [{p} + 12], 1",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [{p} + 24], 2",
                "vinserti32x4 zmm3, zmm3, xmmword ptr [{p} + 36], 3",
                "vmovdqu xmm4, xmmword ptr [{p} + 48]",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [{p} + 60], 1",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [{p} + 72], 2",
                "vinserti32x4 zmm4, zmm4, xmmword ptr [{p} + 84], 3",
                hash8_after_loads!(),
                kappa = in(reg) kappa.as_ptr(),
                mask = in(reg) LANE_MASK.as_ptr(),
                rev = in(reg) &BIT_REVERSE,
                gather = in(reg) GATHER.as_ptr(),
                p = in(reg) tuples,
                out = in(reg) out.as_mut_ptr(),
                clobber_abi("sysv64"),
                options(nostack, preserves_flags),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's verification key.
    const KEY: [u8; KEY_BYTES] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// The specification's bit-serial form, kept independent of the kernel.
    fn reference(key: &[u8; KEY_BYTES], input: &[u8]) -> u32 {
        let bit = |i: usize| {
            key.get(i / 8)
                .map_or(0, |b| u32::from((b >> (7 - i % 8)) & 1))
        };
        let mut result = 0u32;
        for (n, byte) in input.iter().enumerate() {
            for j in 0..8 {
                if byte >> (7 - j) & 1 == 1 {
                    let at = 8 * n + j;
                    result ^= (0..32).fold(0u32, |w, k| (w << 1) | bit(at + k));
                }
            }
        }
        result
    }

    /// Source, destination, source port, destination port, hash.
    type Vector = ([u8; 4], [u8; 4], u16, u16, u32);

    /// Microsoft's IPv4 TCP verification vectors.
    const MICROSOFT_V4_TCP: [Vector; 5] = [
        (
            [66, 9, 149, 187],
            [161, 142, 100, 80],
            2794,
            1766,
            0x51cc_c178,
        ),
        (
            [199, 92, 111, 2],
            [65, 69, 140, 83],
            14230,
            4739,
            0xc626_b0ea,
        ),
        (
            [24, 19, 198, 95],
            [12, 22, 207, 184],
            12898,
            38024,
            0x5c2b_394a,
        ),
        (
            [38, 27, 205, 30],
            [209, 142, 163, 6],
            48228,
            2217,
            0xafc7_327f,
        ),
        (
            [153, 39, 163, 191],
            [202, 188, 127, 2],
            44251,
            1303,
            0x10e8_28a2,
        ),
    ];

    /// Vector `i` (mod 5) as a window with non-zero bytes after the tuple (ignored), and its
    /// hash.
    fn vector_window(i: usize) -> (TupleWindow, u32) {
        let (src, dst, sport, dport, hash) = MICROSOFT_V4_TCP[i % MICROSOFT_V4_TCP.len()];
        let mut w = [0xa5u8; WINDOW_BYTES];
        w[..4].copy_from_slice(&src);
        w[4..8].copy_from_slice(&dst);
        w[8..10].copy_from_slice(&sport.to_be_bytes());
        w[10..12].copy_from_slice(&dport.to_be_bytes());
        (w, hash)
    }

    #[test]
    fn microsoft_vectors_match_in_every_lane_where_the_cpu_has_the_kernel() {
        let Some(h) = BurstToeplitz::new(&KEY) else {
            assert!(!burst_available());
            return;
        };
        // Every vector in every lane.
        for shift in 0..BURST_TUPLES {
            let windows: Vec<(TupleWindow, u32)> = (0..BURST_TUPLES)
                .map(|i| vector_window(i + shift))
                .collect();
            let refs: [&TupleWindow; BURST_TUPLES] = core::array::from_fn(|i| &windows[i].0);
            let hashes = h.hash8(&refs);
            for (i, (got, (_, want))) in hashes.iter().zip(&windows).enumerate() {
                assert_eq!(got, want, "lane {i}, shift {shift}");
            }
        }
    }

    #[test]
    fn every_count_from_0_to_40_matches_the_bit_serial_reference_for_random_keys() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..8 {
            let key: [u8; KEY_BYTES] = core::array::from_fn(|_| next() as u8);
            let Some(h) = BurstToeplitz::new(&key) else {
                return;
            };
            for n in 0..=40usize {
                let tuples: Vec<[u8; 12]> = (0..n)
                    .map(|_| core::array::from_fn(|_| next() as u8))
                    .collect();
                let mut out = vec![0xdead_beefu32; n + 3];
                h.hash_tuples(&tuples, &mut out);
                for (i, t) in tuples.iter().enumerate() {
                    assert_eq!(out[i], reference(&key, t), "count {n}, tuple {i}");
                }
                // Past the tuples, `out` is untouched.
                assert!(out[n..].iter().all(|&o| o == 0xdead_beef));
                // Up to eight through `hash_up_to_8`, any count.
                let windows: Vec<TupleWindow> = tuples
                    .iter()
                    .take(BURST_TUPLES)
                    .map(|t| {
                        let mut w = [0xffu8; WINDOW_BYTES];
                        w[..12].copy_from_slice(t);
                        w
                    })
                    .collect();
                let refs: Vec<&TupleWindow> = windows.iter().collect();
                let mut few = [0u32; BURST_TUPLES];
                h.hash_up_to_8(&refs, &mut few);
                for (i, t) in tuples.iter().take(BURST_TUPLES).enumerate() {
                    assert_eq!(few[i], reference(&key, t), "up to 8: count {n}, tuple {i}");
                }
            }
        }
    }
}
