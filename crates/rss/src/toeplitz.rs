//! The Toeplitz hash: a bit-serial reference and a table-driven fast implementation.
//!
//! Definition (Microsoft, "RSS Hashing Functions"): for every bit of the input, most
//! significant bit of the first byte first, if the bit is set XOR the leftmost 32 bits of the
//! key into the result; then shift the key left by one bit. Equivalently, input bit `k`
//! (counted from the MSB of byte 0) contributes the key's 32-bit window starting at key bit
//! `k`. The hash is therefore linear over GF(2): `h(a ⊕ b) = h(a) ⊕ h(b)`.
//!
//! The fast form exploits that linearity per input byte: for every byte position `i` it
//! precomputes `table[i][v]` = XOR of the windows of the set bits of value `v` at position `i`,
//! so a hash is one table load and one XOR per input byte (12 for an IPv4 4-tuple, 36 for an
//! IPv6 4-tuple).

use core::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use platform::toeplitz::ClmulToeplitz;
use platform::toeplitz_burst::{BURST_TUPLES, BurstToeplitz, TupleWindow};

use crate::key::{KEY_LEN_BYTES, RssKey};

/// Number of byte positions with a table. Past byte 40 every key window is all zeroes (the key
/// has 320 bits), so those bytes contribute nothing and need no table.
pub const TABLE_POSITIONS: usize = KEY_LEN_BYTES;

/// Bytes of precomputed tables held by one [`Toeplitz`] (40 positions × 256 values × 4 bytes
/// = 40 KiB). The IPv4 4-tuple path touches only the first 12 positions (12 KiB).
pub const TABLE_BYTES: usize = TABLE_POSITIONS * 256 * 4;

/// Bit-serial Toeplitz hash, written as the specification states it.
///
/// Kept deliberately simple and independent of the fast path's window arithmetic: the property
/// tests compare the two. Key bits past the 320th read as zero, so any input length is
/// accepted (only the first 36 bytes get a full 32-bit key window).
pub fn toeplitz_reference(key: &RssKey, input: &[u8]) -> u32 {
    let key_bytes = key.as_bytes();
    let key_bit = |index_bits: usize| -> u32 {
        key_bytes
            .get(index_bits / 8)
            .map_or(0, |b| u32::from((b >> (7 - index_bits % 8)) & 1))
    };
    // The "leftmost 32 bits of the key", shifted left by one bit per input bit.
    let mut window: u32 = (0..32).fold(0, |acc, i| (acc << 1) | key_bit(i));
    let mut next_key_bit_index: usize = 32;
    let mut result: u32 = 0;
    for byte in input {
        for bit in (0..8).rev() {
            if (byte >> bit) & 1 == 1 {
                result ^= window;
            }
            window = (window << 1) | key_bit(next_key_bit_index);
            next_key_bit_index += 1;
        }
    }
    result
}

/// Table-driven Toeplitz hasher for one key.
///
/// Invariant: `tables[i][v]` is the XOR of the key windows `window_u32(8·i + b)` for every bit
/// `b` (0 = MSB) set in `v`; hence `hash(x) == toeplitz_reference(key, x)` for every `x`.
/// Building costs 40 × 256 XORs; the tables are immutable and shared: a clone is a
/// reference-count increment, and the tables of the default key are built once per process
/// (every NIC model and stack of a simulation starts from that key).
#[derive(Clone)]
pub struct Toeplitz {
    key: RssKey,
    tables: Arc<Tables>,
    /// The carry-less-multiply kernel, when asked for ([`Toeplitz::with_clmul`]) and the CPU
    /// has it: the IPv4 4-tuple hashes use it instead of the tables (same results;
    /// `platform::toeplitz` tests it against the reference, the property tests here compare
    /// every path).
    clmul: Option<ClmulToeplitz>,
    /// The eight-tuple AVX-512 kernel where the CPU has it (found by every constructor but
    /// [`Toeplitz::tables_only`]): the burst hashes ([`Toeplitz::hash_v4_tuples`],
    /// [`Toeplitz::hash_v4_windows8`]) use it, the one-tuple hashes never do.
    burst: Option<BurstToeplitz>,
}

/// Tuples one call of [`Toeplitz::hash_v4_windows8`] hashes: the kernel's width.
pub const HASH_BURST_TUPLES: usize = BURST_TUPLES;

type Tables = [[u32; 256]; TABLE_POSITIONS];

/// The default key's tables, built on first use.
static DEFAULT_KEY_TABLES: OnceLock<Arc<Tables>> = OnceLock::new();

impl core::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Toeplitz").field("key", &self.key).finish()
    }
}

impl Default for Toeplitz {
    fn default() -> Self {
        Self::new(&RssKey::default())
    }
}

impl Toeplitz {
    /// Precomputes the per-byte tables for `key` (or shares the default key's).
    pub fn new(key: &RssKey) -> Self {
        let tables = if *key == RssKey::default() {
            Arc::clone(DEFAULT_KEY_TABLES.get_or_init(|| build_tables(key)))
        } else {
            build_tables(key)
        };
        Self {
            key: *key,
            tables,
            clmul: None,
            burst: BurstToeplitz::new(key.as_bytes()),
        }
    }

    /// The hasher for `key` with the IPv4 4-tuple hashes on the GFNI + PCLMULQDQ kernel
    /// (`platform::toeplitz`) where the CPU has both, else exactly [`Toeplitz::new`].
    ///
    /// Not the default: measured on the AMD EPYC (Zen 4) this was written on, one 4-tuple
    /// costs 2.71 ns on the kernel against 2.58–2.77 ns on the tables (the kernel cannot be
    /// inlined into code compiled without the features, and three dependent multiplications
    /// are its floor); without GFNI the kernel must bit-reverse its result in scalar code and
    /// takes 5.2 ns. It is here for CPUs where that balance differs; many tuples at once go
    /// through the burst hashes ([`Toeplitz::hash_v4_tuples`], [`Toeplitz::hash_v4_windows8`]),
    /// eight per AVX-512 kernel call (~0.8 ns per tuple). `crates/bench/README.md` has the
    /// figures.
    pub fn with_clmul(key: &RssKey) -> Self {
        Self {
            clmul: ClmulToeplitz::new(key.as_bytes()).filter(ClmulToeplitz::uses_gfni),
            ..Self::new(key)
        }
    }

    /// The same hasher without the carry-less-multiply kernels, one-tuple or burst: tables
    /// only (for tests and side-by-side measurements).
    pub fn tables_only(&self) -> Self {
        Self {
            clmul: None,
            burst: None,
            ..self.clone()
        }
    }

    /// Whether the 4-tuple hashes run on the carry-less-multiply kernel on this CPU.
    pub fn uses_clmul(&self) -> bool {
        self.clmul.is_some()
    }

    /// Whether the burst hashes run on the eight-tuple AVX-512 kernel on this CPU.
    pub fn uses_burst_kernel(&self) -> bool {
        self.burst.is_some()
    }

    /// The key the tables were built from.
    pub fn key(&self) -> &RssKey {
        &self.key
    }

    /// Hash of an arbitrary byte string; equals [`toeplitz_reference`] for every input
    /// (bytes past the 40th contribute nothing in both).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        self.tables
            .iter()
            .zip(input)
            .fold(0, |acc, (table, &byte)| acc ^ table[usize::from(byte)])
    }

    /// Hash of a fixed-size input; the loop has a constant trip count and unrolls.
    #[inline(always)]
    fn hash_array<const N: usize>(&self, input: &[u8; N]) -> u32 {
        let mut acc = 0;
        for (table, &byte) in self.tables.iter().zip(input) {
            acc ^= table[usize::from(byte)];
        }
        acc
    }

    /// IPv4 address-only hash (NDIS `IPV4`): input = src ‖ dst, 8 bytes.
    #[inline]
    pub fn hash_v4_addrs(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        let s = src.octets();
        let d = dst.octets();
        self.hash_array(&[s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3]])
    }

    /// IPv4 4-tuple hash (NDIS `TCP_IPV4`, `UDP_IPV4`): input = src ‖ dst ‖ sport ‖ dport,
    /// 12 bytes, network byte order.
    #[inline]
    pub fn hash_v4(&self, src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> u32 {
        if let Some(k) = &self.clmul {
            return k.hash_v4(src.to_bits(), dst.to_bits(), src_port, dst_port);
        }
        let s = src.octets();
        let d = dst.octets();
        let sp = src_port.to_be_bytes();
        let dp = dst_port.to_be_bytes();
        self.hash_array(&[
            s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], sp[0], sp[1], dp[0], dp[1],
        ])
    }

    /// IPv4 4-tuple hash of the 12 input bytes `src ‖ dst ‖ sport ‖ dport` as they sit in a
    /// frame (network byte order): [`Toeplitz::hash_v4`] without unpacking them.
    #[inline]
    pub fn hash_v4_tuple(&self, tuple: &[u8; 12]) -> u32 {
        match &self.clmul {
            Some(k) => k.hash_v4_tuple(tuple),
            None => self.hash_array(tuple),
        }
    }

    /// IPv4 4-tuple hashes of many tuples: `out[i]` = [`Toeplitz::hash_v4_tuple`] of
    /// `tuples[i]`, for `i` below the shorter length (the rest of `out` is left as it was).
    /// Eight tuples per instruction sequence on the AVX-512 kernel where the CPU has it, else
    /// one at a time.
    pub fn hash_v4_tuples(&self, tuples: &[[u8; 12]], out: &mut [u32]) {
        match &self.burst {
            Some(k) => k.hash_tuples(tuples, out),
            None => {
                for (o, t) in out.iter_mut().zip(tuples) {
                    *o = self.hash_v4_tuple(t);
                }
            }
        }
    }

    /// IPv4 4-tuple hashes of [`HASH_BURST_TUPLES`] windows whose first 12 bytes are the
    /// input (`src ‖ dst ‖ sport ‖ dport`; the 4 bytes after them are ignored — in a frame,
    /// the next header's): hash `i` is [`Toeplitz::hash_v4_tuple`] of `windows[i][..12]`. One
    /// kernel call where the CPU has it ([`Toeplitz::uses_burst_kernel`]), else eight hashes
    /// on the tables.
    #[inline]
    pub fn hash_v4_windows8(
        &self,
        windows: &[&TupleWindow; HASH_BURST_TUPLES],
    ) -> [u32; HASH_BURST_TUPLES] {
        match &self.burst {
            Some(k) => k.hash8(windows),
            None => windows.map(|w| {
                let [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, ..] = *w;
                self.hash_v4_tuple(&[a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11])
            }),
        }
    }

    /// IPv6 address-only hash (NDIS `IPV6`): input = src ‖ dst, 32 bytes.
    #[inline]
    pub fn hash_v6_addrs(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let (src_tables, rest) = self.tables.split_at(16);
        let dst_tables = rest.get(..16).unwrap_or(&[]);
        xor_lookups(src_tables, &src.octets()) ^ xor_lookups(dst_tables, &dst.octets())
    }

    /// IPv6 4-tuple hash (NDIS `TCP_IPV6`, `UDP_IPV6`): input = src ‖ dst ‖ sport ‖ dport,
    /// 36 bytes, network byte order.
    #[inline]
    pub fn hash_v6(&self, src: Ipv6Addr, dst: Ipv6Addr, src_port: u16, dst_port: u16) -> u32 {
        let sp = src_port.to_be_bytes();
        let dp = dst_port.to_be_bytes();
        let port_tables = self.tables.get(32..36).unwrap_or(&[]);
        self.hash_v6_addrs(src, dst) ^ xor_lookups(port_tables, &[sp[0], sp[1], dp[0], dp[1]])
    }
}

/// XOR of `tables[i][bytes[i]]` over the shorter of the two.
#[inline(always)]
fn xor_lookups(tables: &[[u32; 256]], bytes: &[u8]) -> u32 {
    tables
        .iter()
        .zip(bytes)
        .fold(0, |acc, (table, &byte)| acc ^ table[usize::from(byte)])
}

/// The per-byte tables of `key` (see [`Toeplitz`]'s invariant).
///
/// Each table is built by doubling: with the entries for values below `2^j` done, the entries
/// `2^j..2^(j+1)` are those XOR the window of bit `2^j` — a straight-line loop over
/// contiguous entries that the compiler vectorises (about 40 × 256 / 8 vector XORs in all,
/// where building entry by entry from the value with its lowest bit cleared cost ~14
/// instructions per entry: ~150 k per key, paid by every simulated host with its own key).
fn build_tables(key: &RssKey) -> Arc<Tables> {
    let mut tables = Arc::new([[0u32; 256]; TABLE_POSITIONS]);
    // Just made: no other reference exists.
    let Some(all) = Arc::get_mut(&mut tables) else {
        unreachable!("a new Arc is unique")
    };
    for (position, table) in all.iter_mut().enumerate() {
        for j in 0..8 {
            // The bit of weight 2^j is bit `7 - j` counted from the byte's MSB.
            let window = key.window_u32(position * 8 + 7 - j);
            let half = 1usize << j;
            let (done, next) = table.split_at_mut(half);
            for (n, d) in next.iter_mut().zip(done.iter()) {
                *n = *d ^ window;
            }
        }
    }
    tables
}
