//! Hash-field extraction straight from an Ethernet frame, the way a NIC parser does it.
//!
//! Walks Ethernet II → up to two VLAN tags (802.1Q `0x8100`, 802.1ad `0x88a8`) → IPv4 or
//! IPv6 (with its extension-header chain) → the first 4 bytes of TCP/UDP (the ports).
//! Every read is bounds-checked; malformed or truncated input yields a [`FrameError`].
//!
//! Fragments: an IPv4 packet with MF set or a non-zero fragment offset (RFC 791 §3.1), and an
//! IPv6 packet carrying a Fragment header (RFC 8200 §4.5), get no ports, so they fall back to
//! the address-only hash — all fragments of a datagram then land on one queue.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::input::{HashInput, HashType, HashTypes, IpVersion, L4Kind, PortPair};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERNET_HEADER_BYTES: usize = 14;
const VLAN_TAG_BYTES: usize = 4;
/// Most VLAN tags walked (QinQ); a frame with more is treated as non-IP.
const VLAN_TAGS_MAX: usize = 2;
/// Most IPv6 extension headers walked before giving up on finding ports (bounded work).
const IPV6_EXT_HEADERS_MAX: usize = 8;

const IPV4_HEADER_MIN_BYTES: usize = 20;
const IPV6_HEADER_BYTES: usize = 40;

/// IANA protocol numbers used here.
pub const PROTO_TCP: u8 = 6;
/// UDP.
pub const PROTO_UDP: u8 = 17;
const PROTO_HOP_BY_HOP: u8 = 0;
const PROTO_ROUTING: u8 = 43;
const PROTO_FRAGMENT: u8 = 44;
const PROTO_AH: u8 = 51;
const PROTO_DEST_OPTS: u8 = 60;

/// Why a frame could not be parsed for hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than an Ethernet header or a VLAN tag.
    TruncatedEthernet,
    /// Shorter than the IPv4 header its IHL announces, or than its total length.
    TruncatedIpv4,
    /// IPv4 version field is not 4 (for EtherType 0x0800).
    BadIpv4Version,
    /// IHL < 5, or total length < header length.
    BadIpv4Length,
    /// Shorter than the fixed IPv6 header or than its payload length.
    TruncatedIpv6,
    /// IPv6 version field is not 6 (for EtherType 0x86dd).
    BadIpv6Version,
    /// An IPv6 extension header runs past the end of the packet.
    TruncatedIpv6ExtHeader,
    /// A non-fragment TCP/UDP packet with fewer than 4 bytes of transport header.
    TruncatedL4,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::TruncatedEthernet => "frame shorter than its Ethernet/VLAN header",
            FrameError::TruncatedIpv4 => "IPv4 packet truncated",
            FrameError::BadIpv4Version => "IPv4 version field is not 4",
            FrameError::BadIpv4Length => "IPv4 header or total length invalid",
            FrameError::TruncatedIpv6 => "IPv6 packet truncated",
            FrameError::BadIpv6Version => "IPv6 version field is not 6",
            FrameError::TruncatedIpv6ExtHeader => "IPv6 extension header truncated",
            FrameError::TruncatedL4 => "TCP/UDP header too short for ports",
        })
    }
}

impl core::error::Error for FrameError {}

/// Addresses of a parsed IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpPair {
    /// IPv4 source and destination.
    V4(Ipv4Addr, Ipv4Addr),
    /// IPv6 source and destination.
    V6(Ipv6Addr, Ipv6Addr),
}

/// What the steering path needs from one frame.
///
/// Invariant: `ports` is `Some` only when `protocol` is TCP or UDP and `is_fragment` is false.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowFields {
    /// Source and destination addresses.
    pub addrs: IpPair,
    /// Upper-layer protocol: IPv4 protocol field, or the IPv6 next header at the end of the
    /// walked extension chain (e.g. 44 when a fragment's payload is not inspected, 50 for ESP).
    pub protocol: u8,
    /// TCP/UDP ports of a non-fragment.
    pub ports: Option<PortPair>,
    /// The packet is an IP fragment.
    pub is_fragment: bool,
}

impl FlowFields {
    /// Parses an Ethernet frame; `Ok(None)` for a non-IP frame (ARP, LLDP, …).
    pub fn from_frame(frame: &[u8]) -> Result<Option<FlowFields>, FrameError> {
        let Some((ethertype, l3)) = ethernet_payload(frame)? else {
            return Ok(None);
        };
        match ethertype {
            ETHERTYPE_IPV4 => parse_ipv4(l3).map(Some),
            ETHERTYPE_IPV6 => parse_ipv6(l3).map(Some),
            _ => Ok(None),
        }
    }

    /// Transport class for hash-type selection.
    pub fn l4_kind(&self) -> L4Kind {
        match self.protocol {
            PROTO_TCP => L4Kind::Tcp,
            PROTO_UDP => L4Kind::Udp,
            _ => L4Kind::Other,
        }
    }

    /// The hash type a NIC with `enabled` types applies, and the matching input; `None` when
    /// no enabled type covers the packet.
    pub fn hash_input(&self, enabled: HashTypes) -> Option<(HashType, HashInput)> {
        let version = match self.addrs {
            IpPair::V4(..) => IpVersion::V4,
            IpPair::V6(..) => IpVersion::V6,
        };
        // A TCP/UDP non-fragment always has ports (invariant), so the port-less case can only
        // select the address-only type.
        let is_fragment = self.is_fragment || self.ports.is_none();
        let hash_type = enabled.select(version, self.l4_kind(), is_fragment)?;
        let ports = if hash_type.includes_ports() {
            self.ports
        } else {
            None
        };
        let input = match self.addrs {
            IpPair::V4(src, dst) => HashInput::V4 { src, dst, ports },
            IpPair::V6(src, dst) => HashInput::V6 { src, dst, ports },
        };
        Some((hash_type, input))
    }

    /// The exact-match 5-tuple, for TCP/UDP non-fragments only.
    pub fn five_tuple(&self) -> Option<crate::FiveTuple> {
        let ports = self.ports?;
        let (src, dst) = match self.addrs {
            IpPair::V4(s, d) => (IpAddr::V4(s), IpAddr::V4(d)),
            IpPair::V6(s, d) => (IpAddr::V6(s), IpAddr::V6(d)),
        };
        Some(crate::FiveTuple {
            protocol: self.protocol,
            src,
            dst,
            src_port: ports.src,
            dst_port: ports.dst,
        })
    }
}

impl HashInput {
    /// Extracts the hash type and input a NIC would use for `frame` (Ethernet II, optionally
    /// VLAN-tagged). `Ok(None)`: not IP, or no enabled hash type covers it.
    pub fn from_frame(
        frame: &[u8],
        enabled: HashTypes,
    ) -> Result<Option<(HashType, HashInput)>, FrameError> {
        Ok(FlowFields::from_frame(frame)?.and_then(|f| f.hash_input(enabled)))
    }
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*b.first()?, *b.get(1)?]))
}

fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// EtherType and L3 payload after the Ethernet header and up to two VLAN tags; `None` when
/// the frame has more tags than we walk.
fn ethernet_payload(frame: &[u8]) -> Result<Option<(u16, &[u8])>, FrameError> {
    let mut ethertype_at = ETHERNET_HEADER_BYTES - 2;
    for _ in 0..=VLAN_TAGS_MAX {
        let ethertype = be16(frame, ethertype_at).ok_or(FrameError::TruncatedEthernet)?;
        if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
            ethertype_at += VLAN_TAG_BYTES;
            continue;
        }
        let payload = frame
            .get(ethertype_at + 2..)
            .ok_or(FrameError::TruncatedEthernet)?;
        return Ok(Some((ethertype, payload)));
    }
    Ok(None)
}

/// Reads source and destination ports from the start of a TCP/UDP header.
fn ports(l4: &[u8]) -> Result<PortPair, FrameError> {
    match (be16(l4, 0), be16(l4, 2)) {
        (Some(src), Some(dst)) => Ok(PortPair { src, dst }),
        _ => Err(FrameError::TruncatedL4),
    }
}

/// RFC 791 §3.1 header layout.
fn parse_ipv4(packet: &[u8]) -> Result<FlowFields, FrameError> {
    let first = *packet.first().ok_or(FrameError::TruncatedIpv4)?;
    if first >> 4 != 4 {
        return Err(FrameError::BadIpv4Version);
    }
    let header_bytes = usize::from(first & 0x0f) * 4;
    if header_bytes < IPV4_HEADER_MIN_BYTES {
        return Err(FrameError::BadIpv4Length);
    }
    if packet.len() < header_bytes {
        return Err(FrameError::TruncatedIpv4);
    }
    let total_bytes = usize::from(be16(packet, 2).ok_or(FrameError::TruncatedIpv4)?);
    if total_bytes < header_bytes {
        return Err(FrameError::BadIpv4Length);
    }
    // Bytes past total length are link padding (short Ethernet frames), not payload.
    let packet = packet.get(..total_bytes).ok_or(FrameError::TruncatedIpv4)?;
    let flags_fragment = be16(packet, 6).ok_or(FrameError::TruncatedIpv4)?;
    let more_fragments = flags_fragment & 0x2000 != 0;
    let fragment_offset = flags_fragment & 0x1fff;
    let is_fragment = more_fragments || fragment_offset != 0;
    let protocol = *packet.get(9).ok_or(FrameError::TruncatedIpv4)?;
    let src = Ipv4Addr::from(array::<4>(packet, 12).ok_or(FrameError::TruncatedIpv4)?);
    let dst = Ipv4Addr::from(array::<4>(packet, 16).ok_or(FrameError::TruncatedIpv4)?);
    let l4 = packet
        .get(header_bytes..)
        .ok_or(FrameError::TruncatedIpv4)?;
    let ports = if !is_fragment && (protocol == PROTO_TCP || protocol == PROTO_UDP) {
        Some(ports(l4)?)
    } else {
        None
    };
    Ok(FlowFields {
        addrs: IpPair::V4(src, dst),
        protocol,
        ports,
        is_fragment,
    })
}

/// RFC 8200 §3 header, §4 extension-header chain.
fn parse_ipv6(packet: &[u8]) -> Result<FlowFields, FrameError> {
    let first = *packet.first().ok_or(FrameError::TruncatedIpv6)?;
    if first >> 4 != 6 {
        return Err(FrameError::BadIpv6Version);
    }
    let payload_bytes = usize::from(be16(packet, 4).ok_or(FrameError::TruncatedIpv6)?);
    let mut next_header = *packet.get(6).ok_or(FrameError::TruncatedIpv6)?;
    let src = Ipv6Addr::from(array::<16>(packet, 8).ok_or(FrameError::TruncatedIpv6)?);
    let dst = Ipv6Addr::from(array::<16>(packet, 24).ok_or(FrameError::TruncatedIpv6)?);
    let after_header = packet
        .get(IPV6_HEADER_BYTES..)
        .ok_or(FrameError::TruncatedIpv6)?;
    // Payload length 0 with a Hop-by-Hop header is a jumbogram (RFC 2675): the payload runs
    // to the end of the frame. Otherwise bytes past the payload are link padding.
    let mut rest = if payload_bytes == 0 {
        after_header
    } else {
        after_header
            .get(..payload_bytes)
            .ok_or(FrameError::TruncatedIpv6)?
    };
    let mut is_fragment = false;
    let mut walked_all = false;
    for _ in 0..IPV6_EXT_HEADERS_MAX {
        let header_bytes = match next_header {
            PROTO_HOP_BY_HOP | PROTO_ROUTING | PROTO_DEST_OPTS => {
                // RFC 8200 §4.3–4.6: Hdr Ext Len in 8-octet units, not counting the first 8.
                let len = *rest.get(1).ok_or(FrameError::TruncatedIpv6ExtHeader)?;
                (usize::from(len) + 1) * 8
            }
            PROTO_AH => {
                // RFC 4302 §2.2: Payload Len in 4-octet units, minus 2.
                let len = *rest.get(1).ok_or(FrameError::TruncatedIpv6ExtHeader)?;
                (usize::from(len) + 2) * 4
            }
            PROTO_FRAGMENT => {
                // RFC 8200 §4.5: any Fragment header makes this a fragment for hashing; the
                // payload (ports of a first fragment) is not inspected.
                if rest.len() < 8 {
                    return Err(FrameError::TruncatedIpv6ExtHeader);
                }
                is_fragment = true;
                walked_all = true;
                break;
            }
            _ => {
                walked_all = true;
                break;
            }
        };
        let following = *rest.first().ok_or(FrameError::TruncatedIpv6ExtHeader)?;
        rest = rest
            .get(header_bytes..)
            .ok_or(FrameError::TruncatedIpv6ExtHeader)?;
        next_header = following;
    }
    // Too long a chain: hash the addresses only (bounded work, no error: the packet may be
    // valid, we just do not look further).
    let protocol = next_header;
    let ports = if walked_all && !is_fragment && (protocol == PROTO_TCP || protocol == PROTO_UDP) {
        Some(ports(rest)?)
    } else {
        None
    };
    Ok(FlowFields {
        addrs: IpPair::V6(src, dst),
        protocol,
        ports,
        is_fragment,
    })
}
