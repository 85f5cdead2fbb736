//! The Toeplitz (RSS) hash by carry-less multiplication: x86-64 `PCLMULQDQ`, detected at run
//! time, behind a safe API. Here because it needs `unsafe` (calling a `#[target_feature]`
//! function); `rss` uses it when [`ClmulToeplitz::new`] finds the instruction and its own
//! tables otherwise, and tests it against the bit-serial reference.
//!
//! Why a product: input bit `b` (MSB of byte 0 first) contributes the key's 32-bit window at
//! bit `b`, so hash bit `k` (MSB first) is `XOR_b x_b · K[b + k]` — a correlation of the input
//! with the key, i.e. a carry-less product with one operand reversed. Take the key with its
//! bit `a` at weight `2^a` (`ρ`, reversed once per key) and the `N`-bit input as a big-endian
//! number `I`; then in `C = ρ ⊗ I` (carry-less) coefficient `N − 1 + k` is hash bit `k`, and
//! the hash is the 32 bits of `C` from bit `N − 1` up, bit-reversed. For a TCP/IPv4 4-tuple
//! (`N` = 96) that is three 64×64 multiplications.

/// Key bytes the kernel reads: the RSS key (320 bits covers a 36-byte input plus its window).
pub const KEY_BYTES: usize = 40;
/// Input bytes past this contribute nothing (their key windows lie past the key).
const INPUT_BYTES_MAX: usize = KEY_BYTES;
/// 64-bit words of the reversed key, one zero word past its end.
const KEY_WORDS: usize = KEY_BYTES / 8 + 1;

/// A Toeplitz hasher for one key that exists only where the CPU has `PCLMULQDQ`.
///
/// Invariant: a value exists only after the run-time check found the instruction, so its
/// methods may call the kernels compiled for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClmulToeplitz {
    /// `rho[j]` bit `t` = key bit `64·j + t` (bit 0 = MSB of key byte 0); `rho[5] = 0`.
    rho: [u64; KEY_WORDS],
    /// The first 128 key bits as a big-endian number, low word first (for the 4-tuple kernel,
    /// which reverses the input instead of the key).
    kappa: [u64; 2],
    /// The CPU also has GFNI: the 4-tuple kernel reverses the input's bits with one
    /// `GF2P8AFFINEQB` and needs no reversal of the result.
    gfni: bool,
}

impl ClmulToeplitz {
    /// The hasher for `key`, or `None` when this CPU (or target) has no carry-less multiply.
    pub fn new(key: &[u8; KEY_BYTES]) -> Option<Self> {
        if !clmul_available() {
            return None;
        }
        let mut rho = [0u64; KEY_WORDS];
        for (word, bytes) in rho.iter_mut().zip(key.chunks_exact(8)) {
            let be = bytes.try_into().map(u64::from_be_bytes).unwrap_or_default();
            *word = be.reverse_bits();
        }
        let be = |i: usize| {
            key.get(i..i + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or_default()
        };
        Some(ClmulToeplitz {
            rho,
            kappa: [be(8), be(0)],
            gfni: gfni_available(),
        })
    }

    /// Whether the 4-tuple kernel uses GFNI on this CPU (else a scalar bit reversal).
    pub fn uses_gfni(&self) -> bool {
        self.gfni
    }

    /// Hash of the 12-byte TCP/UDP-over-IPv4 input `src ‖ dst ‖ sport ‖ dport` (network
    /// order).
    #[inline]
    pub fn hash_v4_tuple(&self, tuple: &[u8; 12]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            if self.gfni {
                let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11] = *tuple;
                let low = u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
                let high = u64::from(u32::from_le_bytes([b8, b9, b10, b11]));
                // SAFETY: `gfni` is set only where `gfni_available()` found GFNI, and `self`
                // exists only where `clmul_available()` found PCLMULQDQ (type invariant).
                return unsafe { x86::hash96_gfni(self.kappa, low, high) };
            }
        }
        let [a0, a1, a2, a3, rest @ ..] = *tuple;
        let high = u64::from(u32::from_be_bytes([a0, a1, a2, a3]));
        let low = u64::from_be_bytes(rest);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `self` exists only where `clmul_available()` returned true (type
            // invariant), so the CPU executes the instructions `x86::hash96` is compiled for.
            unsafe { x86::hash96(self.rho[0], self.rho[1], low, high) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (low, high);
            unreachable!("ClmulToeplitz is never built off x86-64")
        }
    }

    /// Hash of the TCP/UDP-over-IPv4 input from its fields as numbers (`Ipv4Addr::to_bits`,
    /// host-order ports): the same as [`ClmulToeplitz::hash_v4_tuple`] of their network-order
    /// bytes, without a round trip through memory.
    #[inline]
    pub fn hash_v4(&self, src: u32, dst: u32, src_port: u16, dst_port: u16) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            if self.gfni {
                // Input bytes in order, as little-endian words.
                let low = u64::from(src.swap_bytes()) | (u64::from(dst.swap_bytes()) << 32);
                let high =
                    u64::from(src_port.swap_bytes()) | (u64::from(dst_port.swap_bytes()) << 16);
                // SAFETY: as in `hash_v4_tuple`.
                return unsafe { x86::hash96_gfni(self.kappa, low, high) };
            }
        }
        let low = (u64::from(dst) << 32) | (u64::from(src_port) << 16) | u64::from(dst_port);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in `hash_v4_tuple`.
            unsafe { x86::hash96(self.rho[0], self.rho[1], low, u64::from(src)) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = low;
            unreachable!("ClmulToeplitz is never built off x86-64")
        }
    }

    /// Hash of any input (bytes past the 40th contribute nothing, as in the reference).
    pub fn hash(&self, input: &[u8]) -> u32 {
        let input = input.get(..INPUT_BYTES_MAX).unwrap_or(input);
        if input.is_empty() {
            return 0;
        }
        // The input as a big-endian number, in 64-bit words, least significant first.
        let mut padded = [0u8; KEY_WORDS * 8];
        let start = padded.len() - input.len();
        if let Some(dst) = padded.get_mut(start..) {
            dst.copy_from_slice(input);
        }
        let mut words = [0u64; KEY_WORDS];
        for (w, bytes) in words.iter_mut().zip(padded.rchunks_exact(8)) {
            *w = bytes.try_into().map(u64::from_be_bytes).unwrap_or_default();
        }
        let input_bits = 8 * input.len();
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in `hash_v4_tuple`: the type invariant guarantees the instruction.
            unsafe { x86::hash_words(&self.rho, &words, input_bits) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (words, input_bits);
            unreachable!("ClmulToeplitz is never built off x86-64")
        }
    }
}

/// Whether the carry-less multiply kernels can run here (checked once, then cached by std).
pub fn clmul_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has GFNI (CPUID leaf 7, ECX bit 8; read directly, since the workspace's
/// MSRV predates `is_x86_feature_detected!("gfni")`). Valgrind does not report it, so code
/// under callgrind takes the other path.
pub fn gfni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86::cpu_has_gfni()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
// Before Rust 1.87 (the workspace's MSRV is 1.85) the intrinsics are `unsafe fn`s and need
// the blocks below; from 1.87 they are safe inside `#[target_feature]` code.
#[allow(unused_unsafe)]
mod x86 {
    use core::arch::asm;
    use core::arch::x86_64::{
        __cpuid, __cpuid_count, __m128i, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x,
        _mm_set1_epi64x, _mm_unpackhi_epi64, _mm_xor_si128,
    };

    /// CPUID leaf 7 (subleaf 0) ECX bit 8.
    pub(super) fn cpu_has_gfni() -> bool {
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only when the maximum
        // basic leaf (leaf 0's EAX) includes it.
        unsafe { __cpuid(0).eax >= 7 && (__cpuid_count(7, 0).ecx >> 8) & 1 == 1 }
    }

    /// The hash of the 12-byte input whose bytes, in order, are `low`'s and then `high`'s
    /// little-endian bytes, under `kappa` (the key's first 128 bits as a big-endian number,
    /// low word first). One `GF2P8AFFINEQB` reverses the bits of every input byte, which makes
    /// the input a number `β` with input bit `b` at weight `2^b`; then bits 96..128 of
    /// `κ ⊗ β` are the hash, no reversal: word 1's top half, `lo(κ0·β1) ⊕ lo(κ1·β0) ⊕
    /// hi(κ0·β0)`.
    ///
    /// # Safety
    /// The CPU must have `PCLMULQDQ` and GFNI.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn hash96_gfni(kappa: [u64; 2], low: u64, high: u64) -> u32 {
        // The GFNI matrix whose row `i` selects bit `7 − i`: each byte's bits reversed.
        const BIT_REVERSE: u64 = 0x8040_2010_0804_0201;
        // SAFETY: register-only intrinsics and one register-only instruction; the caller
        // guarantees PCLMULQDQ and GFNI.
        unsafe {
            let mut beta: __m128i = _mm_set_epi64x(high as i64, low as i64);
            asm!(
                "gf2p8affineqb {x}, {m}, 0",
                x = inout(xmm_reg) beta,
                m = in(xmm_reg) _mm_set1_epi64x(BIT_REVERSE as i64),
                options(pure, nomem, nostack, preserves_flags),
            );
            let k: __m128i = _mm_set_epi64x(kappa[1] as i64, kappa[0] as i64);
            let a = _mm_clmulepi64_si128(k, beta, 0x10); // κ0 · β1
            let b = _mm_clmulepi64_si128(k, beta, 0x01); // κ1 · β0
            let c = _mm_clmulepi64_si128(k, beta, 0x00); // κ0 · β0
            let word1 = (_mm_cvtsi128_si64(_mm_xor_si128(a, b)) as u64)
                ^ (_mm_cvtsi128_si64(_mm_unpackhi_epi64(c, c)) as u64);
            (word1 >> 32) as u32
        }
    }

    /// Low and high 64 bits of the carry-less product `a ⊗ b`.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn clmul(a: u64, b: u64) -> (u64, u64) {
        // SAFETY: register-only intrinsics; the caller's `target_feature` enables them.
        unsafe {
            let p = _mm_clmulepi64_si128(
                _mm_set_epi64x(0, a as i64),
                _mm_set_epi64x(0, b as i64),
                0x00,
            );
            (
                _mm_cvtsi128_si64(p) as u64,
                _mm_cvtsi128_si64(_mm_unpackhi_epi64(p, p)) as u64,
            )
        }
    }

    /// The hash of a 96-bit input `high:low` (big-endian number: `high` its top 32 bits) under
    /// the reversed key words `rho0`, `rho1`: bits 95..127 of `ρ ⊗ I` are word 1 of the product,
    /// `lo(ρ0·I1) ⊕ lo(ρ1·I0) ⊕ hi(ρ0·I0)`, from its bit 31.
    ///
    /// # Safety
    /// The CPU must have `PCLMULQDQ`.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn hash96(rho0: u64, rho1: u64, low: u64, high: u64) -> u32 {
        // SAFETY: register-only intrinsics; this function's `target_feature` enables them.
        unsafe {
            let rho: __m128i = _mm_set_epi64x(rho1 as i64, rho0 as i64);
            let input: __m128i = _mm_set_epi64x(high as i64, low as i64);
            // imm8 bit 0 picks `rho`'s word, bit 4 `input`'s.
            let a = _mm_clmulepi64_si128(rho, input, 0x10); // ρ0 · I1
            let b = _mm_clmulepi64_si128(rho, input, 0x01); // ρ1 · I0
            let c = _mm_clmulepi64_si128(rho, input, 0x00); // ρ0 · I0
            let word1 = (_mm_cvtsi128_si64(_mm_xor_si128(a, b)) as u64)
                ^ (_mm_cvtsi128_si64(_mm_unpackhi_epi64(c, c)) as u64);
            ((word1 >> 31) as u32).reverse_bits()
        }
    }

    /// The hash of an `input_bits`-bit input (1..=320) given as a big-endian number in words,
    /// least significant first: the words of `ρ ⊗ I` that hold bits `input_bits − 1 ..
    /// input_bits + 31`, shifted down and bit-reversed.
    ///
    /// # Safety
    /// The CPU must have `PCLMULQDQ`.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn hash_words(
        rho: &[u64; super::KEY_WORDS],
        input: &[u64; super::KEY_WORDS],
        input_bits: usize,
    ) -> u32 {
        let first_bit = input_bits - 1;
        let (w0, shift) = (first_bit / 64, first_bit % 64);
        // Word `w` of the product: low halves of ρ_i·I_m with i + m = w, high halves with
        // i + m = w − 1.
        let product_word = |w: usize| -> u64 {
            let mut acc = 0u64;
            for (i, &r) in rho.iter().enumerate() {
                for (m, &x) in input.iter().enumerate() {
                    if i + m == w || i + m + 1 == w {
                        // SAFETY: this function's `target_feature` enables `clmul`'s.
                        let (lo, hi) = unsafe { clmul(r, x) };
                        acc ^= if i + m == w { lo } else { hi };
                    }
                }
            }
            acc
        };
        let low = product_word(w0);
        let window = if shift == 0 {
            low
        } else {
            (low >> shift) | (product_word(w0 + 1) << (64 - shift))
        };
        (window as u32).reverse_bits()
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

    #[test]
    fn microsoft_ipv4_tcp_vector_matches_where_the_cpu_has_clmul() {
        let Some(h) = ClmulToeplitz::new(&KEY) else {
            assert!(!clmul_available());
            return;
        };
        // 66.9.149.187:2794 → 161.142.100.80:1766 hashes to 0x51ccc178.
        let tuple = [66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6];
        assert_eq!(h.hash_v4_tuple(&tuple), 0x51cc_c178);
        assert_eq!(h.hash(&tuple), 0x51cc_c178);
        assert_eq!(h.hash(&tuple[..8]), 0x323e_8fc2);
    }

    #[test]
    fn every_length_and_pattern_matches_the_bit_serial_reference() {
        let Some(h) = ClmulToeplitz::new(&KEY) else {
            return;
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=44usize {
            for _ in 0..64 {
                let input: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                assert_eq!(h.hash(&input), reference(&KEY, &input), "len {len}");
                if let Ok(t) = <[u8; 12]>::try_from(input.as_slice()) {
                    assert_eq!(h.hash_v4_tuple(&t), reference(&KEY, &input));
                    let scalar_reversal = ClmulToeplitz { gfni: false, ..h };
                    assert_eq!(scalar_reversal.hash_v4_tuple(&t), reference(&KEY, &input));
                    let word = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
                    let (sp, dp) = ((word(8) >> 16) as u16, word(8) as u16);
                    for k in [h, scalar_reversal] {
                        assert_eq!(k.hash_v4(word(0), word(4), sp, dp), reference(&KEY, &input));
                    }
                }
            }
        }
    }
}
