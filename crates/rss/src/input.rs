//! What gets hashed: hash types, the enabled set, the hash input tuple and symmetric modes.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::key::RssKey;
use crate::toeplitz::Toeplitz;

/// The six NDIS hash types (NDIS_HASH_IPV4, NDIS_HASH_TCP_IPV4, NDIS_HASH_UDP_IPV4,
/// NDIS_HASH_IPV6, NDIS_HASH_TCP_IPV6, NDIS_HASH_UDP_IPV6). The `_EX` variants (IPv6 home
/// address / routing header addresses) are not supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HashType {
    /// src ‖ dst IPv4 addresses (8 bytes).
    Ipv4,
    /// src ‖ dst ‖ sport ‖ dport of TCP over IPv4 (12 bytes).
    TcpIpv4,
    /// src ‖ dst ‖ sport ‖ dport of UDP over IPv4 (12 bytes).
    UdpIpv4,
    /// src ‖ dst IPv6 addresses (32 bytes).
    Ipv6,
    /// src ‖ dst ‖ sport ‖ dport of TCP over IPv6 (36 bytes).
    TcpIpv6,
    /// src ‖ dst ‖ sport ‖ dport of UDP over IPv6 (36 bytes).
    UdpIpv6,
}

impl HashType {
    /// Every hash type, in declaration order.
    pub const ALL: [HashType; 6] = [
        HashType::Ipv4,
        HashType::TcpIpv4,
        HashType::UdpIpv4,
        HashType::Ipv6,
        HashType::TcpIpv6,
        HashType::UdpIpv6,
    ];

    /// Whether this type hashes the ports too.
    pub const fn includes_ports(self) -> bool {
        matches!(
            self,
            HashType::TcpIpv4 | HashType::UdpIpv4 | HashType::TcpIpv6 | HashType::UdpIpv6
        )
    }

    const fn bit(self) -> u8 {
        match self {
            HashType::Ipv4 => 1 << 0,
            HashType::TcpIpv4 => 1 << 1,
            HashType::UdpIpv4 => 1 << 2,
            HashType::Ipv6 => 1 << 3,
            HashType::TcpIpv6 => 1 << 4,
            HashType::UdpIpv6 => 1 << 5,
        }
    }
}

/// The descriptor's copy of the hash type ([`wire::RxMeta::hash_type`]).
impl From<HashType> for wire::RssHashType {
    fn from(t: HashType) -> Self {
        match t {
            HashType::Ipv4 => wire::RssHashType::Ipv4,
            HashType::TcpIpv4 => wire::RssHashType::TcpIpv4,
            HashType::UdpIpv4 => wire::RssHashType::UdpIpv4,
            HashType::Ipv6 => wire::RssHashType::Ipv6,
            HashType::TcpIpv6 => wire::RssHashType::TcpIpv6,
            HashType::UdpIpv6 => wire::RssHashType::UdpIpv6,
        }
    }
}

impl From<wire::RssHashType> for HashType {
    fn from(t: wire::RssHashType) -> Self {
        match t {
            wire::RssHashType::Ipv4 => HashType::Ipv4,
            wire::RssHashType::TcpIpv4 => HashType::TcpIpv4,
            wire::RssHashType::UdpIpv4 => HashType::UdpIpv4,
            wire::RssHashType::Ipv6 => HashType::Ipv6,
            wire::RssHashType::TcpIpv6 => HashType::TcpIpv6,
            wire::RssHashType::UdpIpv6 => HashType::UdpIpv6,
        }
    }
}

impl fmt::Display for HashType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashType::Ipv4 => "ipv4",
            HashType::TcpIpv4 => "tcp-ipv4",
            HashType::UdpIpv4 => "udp-ipv4",
            HashType::Ipv6 => "ipv6",
            HashType::TcpIpv6 => "tcp-ipv6",
            HashType::UdpIpv6 => "udp-ipv6",
        })
    }
}

/// A hash type name that [`HashType::from_str`](core::str::FromStr) did not recognise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownHashType;

impl fmt::Display for UnknownHashType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "unknown hash type (expected ipv4, tcp-ipv4, udp-ipv4, ipv6, tcp-ipv6, udp-ipv6)",
        )
    }
}

impl core::error::Error for UnknownHashType {}

impl core::str::FromStr for HashType {
    type Err = UnknownHashType;

    /// Parses the names [`HashType`]'s `Display` prints (`tcp-ipv4`, …), case-insensitively.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HashType::ALL
            .into_iter()
            .find(|t| t.to_string().eq_ignore_ascii_case(s.trim()))
            .ok_or(UnknownHashType)
    }
}

/// The set of enabled hash types (NDIS `HashInformation` type bits; Linux
/// `ethtool -N rx-flow-hash`).
///
/// `Default` enables `Ipv4`, `TcpIpv4`, `Ipv6`, `TcpIpv6` — the NDIS hash types and the
/// common NIC default (e.g. Intel 82599: TCP on the 4-tuple, UDP on addresses only). UDP
/// 4-tuple hashing is off by default because the non-first fragments of a UDP datagram carry
/// no ports and fall back to the address-only hash while the flow's unfragmented datagrams get
/// the 4-tuple hash: one UDP flow would then be split over two queues and reordered. (TCP
/// avoids IP fragmentation through MSS and path-MTU discovery.) Enable UDP with
/// [`HashTypes::all`] or [`HashTypes::with`] when the traffic is known not to fragment.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashTypes {
    bits: u8,
}

impl Default for HashTypes {
    fn default() -> Self {
        Self::NONE
            .with(HashType::Ipv4)
            .with(HashType::TcpIpv4)
            .with(HashType::Ipv6)
            .with(HashType::TcpIpv6)
    }
}

impl fmt::Debug for HashTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(HashType::ALL.iter().filter(|t| self.contains(**t)))
            .finish()
    }
}

impl HashTypes {
    /// No hashing at all: every packet gets [`crate::SteerHow::NoHash`].
    pub const NONE: HashTypes = HashTypes { bits: 0 };

    /// All six hash types.
    pub const fn all() -> Self {
        HashTypes { bits: 0x3f }
    }

    /// This set plus `t`.
    pub const fn with(self, t: HashType) -> Self {
        HashTypes {
            bits: self.bits | t.bit(),
        }
    }

    /// This set minus `t`.
    pub const fn without(self, t: HashType) -> Self {
        HashTypes {
            bits: self.bits & !t.bit(),
        }
    }

    /// Whether `t` is enabled.
    pub const fn contains(self, t: HashType) -> bool {
        self.bits & t.bit() != 0
    }

    /// The hash type a NIC would apply to a packet, as NDIS specifies it: the L4 type if the
    /// packet is TCP/UDP, not a fragment, and that type is enabled; otherwise the address-only
    /// type of its IP version if enabled; otherwise no hash.
    pub const fn select(self, ip: IpVersion, l4: L4Kind, is_fragment: bool) -> Option<HashType> {
        let (l3_type, l4_type) = match (ip, l4) {
            (IpVersion::V4, L4Kind::Tcp) => (HashType::Ipv4, Some(HashType::TcpIpv4)),
            (IpVersion::V4, L4Kind::Udp) => (HashType::Ipv4, Some(HashType::UdpIpv4)),
            (IpVersion::V4, L4Kind::Other) => (HashType::Ipv4, None),
            (IpVersion::V6, L4Kind::Tcp) => (HashType::Ipv6, Some(HashType::TcpIpv6)),
            (IpVersion::V6, L4Kind::Udp) => (HashType::Ipv6, Some(HashType::UdpIpv6)),
            (IpVersion::V6, L4Kind::Other) => (HashType::Ipv6, None),
        };
        if let Some(t) = l4_type {
            if !is_fragment && self.contains(t) {
                return Some(t);
            }
        }
        if self.contains(l3_type) {
            Some(l3_type)
        } else {
            None
        }
    }
}

/// IP version of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Transport protocol class that matters for hash-type selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4Kind {
    /// TCP (protocol 6).
    Tcp,
    /// UDP (protocol 17).
    Udp,
    /// Anything else (ICMP, ESP, SCTP, …): address-only hash.
    Other,
}

/// Source and destination ports as the packet carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortPair {
    /// Source port.
    pub src: u16,
    /// Destination port.
    pub dst: u16,
}

/// The fields a Toeplitz hash covers, "src" and "dst" as the packet carries them.
///
/// `ports` is `Some` exactly for the 4-tuple hash types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashInput {
    /// IPv4 addresses, optionally with ports.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Ports for a TCP/UDP 4-tuple hash, `None` for the address-only hash.
        ports: Option<PortPair>,
    },
    /// IPv6 addresses, optionally with ports.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
        /// Ports for a TCP/UDP 4-tuple hash, `None` for the address-only hash.
        ports: Option<PortPair>,
    },
}

/// Longest hash input in bytes (TCP/IPv6 4-tuple).
pub const HASH_INPUT_MAX_BYTES: usize = 36;

impl HashInput {
    /// The same flow seen in the other direction (addresses and ports swapped).
    pub fn reversed(&self) -> Self {
        let swap = |p: Option<PortPair>| {
            p.map(|p| PortPair {
                src: p.dst,
                dst: p.src,
            })
        };
        match *self {
            HashInput::V4 { src, dst, ports } => HashInput::V4 {
                src: dst,
                dst: src,
                ports: swap(ports),
            },
            HashInput::V6 { src, dst, ports } => HashInput::V6 {
                src: dst,
                dst: src,
                ports: swap(ports),
            },
        }
    }

    /// The input as the bytes the hash consumes (src ‖ dst [‖ sport ‖ dport], network byte
    /// order): a buffer and the number of valid leading bytes (8, 12, 32 or 36).
    pub fn to_bytes(&self) -> ([u8; HASH_INPUT_MAX_BYTES], usize) {
        let mut buf = [0u8; HASH_INPUT_MAX_BYTES];
        let mut len = 0;
        let mut push = |bytes: &[u8]| {
            for &b in bytes {
                if let Some(slot) = buf.get_mut(len) {
                    *slot = b;
                    len += 1;
                }
            }
        };
        let ports = match self {
            HashInput::V4 { src, dst, ports } => {
                push(&src.octets());
                push(&dst.octets());
                ports
            }
            HashInput::V6 { src, dst, ports } => {
                push(&src.octets());
                push(&dst.octets());
                ports
            }
        };
        if let Some(p) = ports {
            push(&p.src.to_be_bytes());
            push(&p.dst.to_be_bytes());
        }
        (buf, len)
    }

    /// The XOR-folded input of [`SymmetricMode::XorFold`]: both addresses replaced by
    /// `src ⊕ dst`, both ports by `sport ⊕ dport`. Symmetric by construction.
    pub fn xor_folded(&self) -> Self {
        let fold = |p: Option<PortPair>| {
            p.map(|p| PortPair {
                src: p.src ^ p.dst,
                dst: p.src ^ p.dst,
            })
        };
        match *self {
            HashInput::V4 { src, dst, ports } => {
                let x = Ipv4Addr::from_bits(src.to_bits() ^ dst.to_bits());
                HashInput::V4 {
                    src: x,
                    dst: x,
                    ports: fold(ports),
                }
            }
            HashInput::V6 { src, dst, ports } => {
                let x = Ipv6Addr::from_bits(src.to_bits() ^ dst.to_bits());
                HashInput::V6 {
                    src: x,
                    dst: x,
                    ports: fold(ports),
                }
            }
        }
    }
}

/// How (and whether) the hash is made symmetric, so both directions of a connection land on
/// the same queue.
///
/// - `RepeatedKey` (Woo & Park 2012): the key is one 16-bit word repeated (`0x6d5a` for the
///   default key). Every 32-bit key window then depends only on its bit offset modulo 16, so
///   the hash is a linear function of the XOR of the input's 16-bit words. Swapping src and
///   dst (whole 16-bit words) does not change that XOR, hence the symmetry — but the hash can
///   take at most 2^16 = 65,536 distinct values, and many unrelated flows collide (any two
///   whose 16-bit word XOR-sums agree). With RETA sizes ≤ 2048 the low bits are still spread,
///   but the hash is a poor connection-table key. Works with the standard input; needs no
///   NIC support beyond a programmable key.
/// - `XorFold` (DPDK `RTE_ETH_HASH_FUNCTION_SYMMETRIC_TOEPLITZ`, Intel E810 "symmetric-xor"):
///   the hashed input is `(src⊕dst) ‖ (src⊕dst) ‖ (sport⊕dport) ‖ (sport⊕dport)` (see
///   [`HashInput::xor_folded`]), same length and layout as the plain input. Works with any
///   key and keeps the full 32-bit range, but every flow whose `src⊕dst` and `sport⊕dport`
///   agree shares a hash (e.g. 10.0.0.1→10.0.0.2 and 10.0.0.5→10.0.0.6), which an attacker can
///   exploit to pile flows onto one queue. Never combine it with a 16-bit-periodic key such as
///   [`RssKey::symmetric`]: every flow then hashes alike ([`RssHasher::is_degenerate`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SymmetricMode {
    /// Plain Toeplitz over the input as the packet carries it (not symmetric).
    #[default]
    None,
    /// Plain Toeplitz with a 16-bit-periodic key.
    RepeatedKey,
    /// Toeplitz over the XOR-folded input.
    XorFold,
}

/// A Toeplitz hasher with a symmetric mode: what a NIC's RSS engine computes per packet.
#[derive(Clone, Debug)]
pub struct RssHasher {
    toeplitz: Toeplitz,
    mode: SymmetricMode,
}

impl Default for RssHasher {
    fn default() -> Self {
        Self::new(&RssKey::default(), SymmetricMode::None)
    }
}

impl RssHasher {
    /// A hasher for `key` in `mode`.
    ///
    /// With [`SymmetricMode::RepeatedKey`] the key actually used is the first 16 bits of `key`
    /// repeated ([`RssKey::repeated_u16`]); for the default key that is `0x6d5a` repeated,
    /// i.e. [`RssKey::symmetric`]. [`RssHasher::key`] reports the key in use.
    pub fn new(key: &RssKey, mode: SymmetricMode) -> Self {
        let effective = match mode {
            SymmetricMode::RepeatedKey => {
                let [a, b, ..] = *key.as_bytes();
                RssKey::repeated_u16(u16::from_be_bytes([a, b]))
            }
            SymmetricMode::None | SymmetricMode::XorFold => *key,
        };
        Self {
            toeplitz: Toeplitz::new(&effective),
            mode,
        }
    }

    /// The key in use.
    pub fn key(&self) -> &RssKey {
        self.toeplitz.key()
    }

    /// The symmetric mode.
    pub fn mode(&self) -> SymmetricMode {
        self.mode
    }

    /// True when every input hashes to the same value: [`SymmetricMode::XorFold`] under a
    /// 16-bit-periodic key. The folded input repeats each 16-bit word an even number of times
    /// and such a key makes the hash a function of the XOR of those words, which is then 0.
    /// Use XorFold with a non-periodic key (the default key works).
    pub fn is_degenerate(&self) -> bool {
        self.mode == SymmetricMode::XorFold && self.key().is_16bit_periodic()
    }

    /// The underlying table-driven hasher.
    pub fn toeplitz(&self) -> &Toeplitz {
        &self.toeplitz
    }

    /// The same hasher on tables only, without the carry-less-multiply kernels
    /// ([`Toeplitz::tables_only`]): for tests and side-by-side measurements.
    pub fn tables_only(&self) -> Self {
        Self {
            toeplitz: self.toeplitz.tables_only(),
            mode: self.mode,
        }
    }

    /// The RSS hash of `input` under this hasher's key and mode.
    #[inline]
    pub fn hash(&self, input: &HashInput) -> u32 {
        match self.mode {
            SymmetricMode::None | SymmetricMode::RepeatedKey => self.hash_plain(input),
            SymmetricMode::XorFold => self.hash_plain(&input.xor_folded()),
        }
    }

    /// The RSS hash of parsed addresses and the ports the hash type covers (`None`:
    /// address-only): [`RssHasher::hash`] of the matching [`HashInput`], without building it
    /// in the plain modes.
    #[inline]
    pub fn hash_fields(&self, addrs: &crate::IpPair, ports: Option<PortPair>) -> u32 {
        let t = &self.toeplitz;
        match (self.mode, addrs) {
            (SymmetricMode::XorFold, _) => {
                let input = match *addrs {
                    crate::IpPair::V4(src, dst) => HashInput::V4 { src, dst, ports },
                    crate::IpPair::V6(src, dst) => HashInput::V6 { src, dst, ports },
                };
                self.hash_plain(&input.xor_folded())
            }
            (_, crate::IpPair::V4(src, dst)) => match ports {
                Some(p) => t.hash_v4(*src, *dst, p.src, p.dst),
                None => t.hash_v4_addrs(*src, *dst),
            },
            (_, crate::IpPair::V6(src, dst)) => match ports {
                Some(p) => t.hash_v6(*src, *dst, p.src, p.dst),
                None => t.hash_v6_addrs(*src, *dst),
            },
        }
    }

    #[inline(always)]
    fn hash_plain(&self, input: &HashInput) -> u32 {
        let t = &self.toeplitz;
        match input {
            HashInput::V4 { src, dst, ports } => match ports {
                Some(p) => t.hash_v4(*src, *dst, p.src, p.dst),
                None => t.hash_v4_addrs(*src, *dst),
            },
            HashInput::V6 { src, dst, ports } => match ports {
                Some(p) => t.hash_v6(*src, *dst, p.src, p.dst),
                None => t.hash_v6_addrs(*src, *dst),
            },
        }
    }
}

#[cfg(test)]
mod degenerate_tests {
    use super::*;

    #[test]
    fn xor_fold_under_a_periodic_key_hashes_every_flow_alike_and_says_so() {
        let bad = RssHasher::new(&RssKey::symmetric(), SymmetricMode::XorFold);
        assert!(bad.is_degenerate());
        let flows = [
            HashInput::V4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                ports: Some(PortPair { src: 1234, dst: 80 }),
            },
            HashInput::V4 {
                src: Ipv4Addr::new(192, 0, 2, 7),
                dst: Ipv4Addr::new(198, 51, 100, 9),
                ports: Some(PortPair {
                    src: 40000,
                    dst: 443,
                }),
            },
        ];
        assert_eq!(bad.hash(&flows[0]), bad.hash(&flows[1]));
        let good = RssHasher::new(&RssKey::default(), SymmetricMode::XorFold);
        assert!(!good.is_degenerate());
        assert_ne!(good.hash(&flows[0]), good.hash(&flows[1]));
        assert!(!RssHasher::new(&RssKey::symmetric(), SymmetricMode::RepeatedKey).is_degenerate());
    }
}
