//! Receive metadata: what the receive path learnt about a frame before the stack sees it.
//!
//! A NIC parses every received frame once (steering needs the flow fields, checksum offload
//! and receive coalescing need the header offsets) and writes what it found into the receive
//! descriptor. [`RxMeta`] is that descriptor's content as a plain `Copy` value, produced by
//! the NIC model (`nic`) and consumed by the stack (`stack::Stack::receive`), so the stack
//! neither hashes the flow again (DESIGN principle 4, "hash once") nor verifies a checksum the
//! NIC has verified.
//!
//! Trust: a [`CsumVerdict::Good`] or [`CsumVerdict::Bad`] is the NIC's word and is believed
//! as given, as a kernel believes `CHECKSUM_UNNECESSARY` from a driver; a producer must only
//! claim what it verified over the exact bytes it hands on. [`RxMeta::NONE`] claims nothing.

use crate::ethernet::VlanTag;

/// One checksum's state as the receive path reports it (the 82599's IPCS/L4CS with IPE/TCPE
/// bits; Linux `CHECKSUM_NONE` / `CHECKSUM_UNNECESSARY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CsumVerdict {
    /// Not verified by the NIC (offload off, not IP, the IPv6 header which has no checksum,
    /// an IP fragment, IPv6 with extension headers, a protocol other than TCP/UDP, a UDP/IPv4
    /// datagram sent without a checksum, or no NIC at all): the stack verifies it itself.
    #[default]
    Unknown,
    /// Verified correct by the NIC: the stack does not verify it again.
    Good,
    /// Verified wrong by the NIC: the stack drops the frame (counted as its own failed
    /// verification would be).
    Bad,
}

/// The checksum verdicts for one frame, per layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RxChecksum {
    /// The IPv4 header checksum (always [`CsumVerdict::Unknown`] for IPv6).
    pub ip: CsumVerdict,
    /// The TCP or UDP checksum of the frame's own transport segment (never of a datagram
    /// reassembled from several frames).
    pub l4: CsumVerdict,
}

impl RxChecksum {
    /// Nothing verified.
    pub const UNKNOWN: RxChecksum = RxChecksum {
        ip: CsumVerdict::Unknown,
        l4: CsumVerdict::Unknown,
    };
}

/// The RSS hash type a hash was computed with (the six NDIS types; `rss::HashType` converts
/// to and from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RssHashType {
    /// IPv4 source and destination addresses.
    Ipv4,
    /// IPv4 addresses and TCP ports.
    TcpIpv4,
    /// IPv4 addresses and UDP ports.
    UdpIpv4,
    /// IPv6 source and destination addresses.
    Ipv6,
    /// IPv6 addresses and TCP ports.
    TcpIpv6,
    /// IPv6 addresses and UDP ports.
    UdpIpv6,
}

/// What the NIC learnt about one received frame, parsed once (see the module docs).
///
/// Invariants (for a producer; a consumer must still bounds-check, the offsets are hints):
/// `l3_offset < l4_offset <= frame.len()` when both are set; `coalesced_segments >= 1`;
/// `gro_mss_bytes == 0` when `coalesced_segments == 1`; `hash_type.is_some() ==
/// hash.is_some()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxMeta {
    /// The RSS hash, whenever an enabled hash type covers the packet (also when a filter
    /// chose the queue): the stack's connection table reuses it.
    pub hash: Option<u32>,
    /// The hash type `hash` was computed with.
    pub hash_type: Option<RssHashType>,
    /// Checksum verdicts (see [`CsumVerdict`] for what the stack does with each).
    pub csum: RxChecksum,
    /// The (outer) VLAN tag, if the frame carries one.
    pub vlan: Option<VlanTag>,
    /// Offset of the IP header in the frame, for an IP frame.
    pub l3_offset: Option<u16>,
    /// Offset of the transport header, for an unfragmented IP packet whose transport header
    /// the NIC found.
    pub l4_offset: Option<u16>,
    /// Wire segments in this frame: 1, or more for a frame the NIC coalesced (GRO/RSC).
    pub coalesced_segments: u16,
    /// Payload bytes of each segment but the last of a coalesced frame (Linux `gso_size`);
    /// 0 when `coalesced_segments == 1`.
    pub gro_mss_bytes: u16,
}

impl RxMeta {
    /// Nothing known: no hash (the stack computes its own when it needs one), every checksum
    /// [`CsumVerdict::Unknown`] (the stack verifies everything), no VLAN, no offsets, one
    /// segment. For callers without a NIC: tests, conformance, bare-stack harnesses.
    pub const NONE: RxMeta = RxMeta {
        hash: None,
        hash_type: None,
        csum: RxChecksum::UNKNOWN,
        vlan: None,
        l3_offset: None,
        l4_offset: None,
        coalesced_segments: 1,
        gro_mss_bytes: 0,
    };

    /// Only the hash (and its type) kept: for a frame rebuilt from a received one (a
    /// reassembled datagram, a frame forwarded to another shard), whose bytes the NIC's
    /// verdicts and offsets no longer describe.
    pub fn hash_only(&self) -> RxMeta {
        RxMeta {
            hash: self.hash,
            hash_type: self.hash_type,
            ..RxMeta::NONE
        }
    }
}

impl Default for RxMeta {
    fn default() -> Self {
        RxMeta::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_claims_nothing() {
        let m = RxMeta::NONE;
        assert_eq!(m.hash, None);
        assert_eq!(m.csum, RxChecksum::default());
        assert_eq!(m.coalesced_segments, 1);
        assert_eq!(RxMeta::default(), m);
    }

    #[test]
    fn hash_only_drops_verdicts_and_offsets() {
        let m = RxMeta {
            hash: Some(7),
            hash_type: Some(RssHashType::TcpIpv4),
            csum: RxChecksum {
                ip: CsumVerdict::Good,
                l4: CsumVerdict::Good,
            },
            l3_offset: Some(14),
            l4_offset: Some(34),
            ..RxMeta::NONE
        };
        let h = m.hash_only();
        assert_eq!((h.hash, h.hash_type), (m.hash, m.hash_type));
        assert_eq!(h.csum, RxChecksum::UNKNOWN);
        assert_eq!((h.l3_offset, h.l4_offset), (None, None));
    }
}

/// Transmit metadata: what one frame asks of the device below it (Linux's skb `gso_size` and
/// `CHECKSUM_PARTIAL`), produced by the stack beside each frame when its port offers the
/// offloads, read by the NIC model (software TSO/checksums) or by a port that hands them to
/// the kernel (a virtio-net header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxMeta {
    /// Nonzero: the frame is a TCP segment whose payload the device cuts into segments of
    /// this many payload bytes (the last may be shorter), copying the headers (TSO/GSO).
    pub gso_size_bytes: u16,
    /// The TCP/UDP checksum field holds only the folded pseudo-header sum (over the whole
    /// frame's length): the device completes the checksum of every segment it sends. The
    /// IPv4 header checksum is always filled.
    pub l4_csum_partial: bool,
}

impl TxMeta {
    /// Nothing asked: the frame is whole and fully checksummed.
    pub const NONE: TxMeta = TxMeta {
        gso_size_bytes: 0,
        l4_csum_partial: false,
    };
}
