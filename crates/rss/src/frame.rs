//! Hash-field extraction straight from an Ethernet frame, the way a NIC parser does it.
//!
//! Walks Ethernet II → up to two VLAN tags (802.1Q `0x8100`, 802.1ad `0x88a8`) → IPv4 or
//! IPv6 (with its extension-header chain) → the first 4 bytes of TCP/UDP (the ports).
//! Every read is bounds-checked; malformed or truncated input yields a [`FrameError`].
//!
//! The IP layers go through `wire`'s checked views (`Ipv4Packet::new_checked`,
//! `Ipv6Packet::new_checked` + `walk_ext_headers`). The Ethernet/VLAN walk is our own small
//! bounds-checked loop because `wire::EthernetFrame` knows a single 802.1Q tag and no 802.1ad
//! (QinQ) outer tag, which NIC parsers do handle.
//!
//! Fragments: an IPv4 packet with MF set or a non-zero fragment offset (RFC 791 §3.1), and an
//! IPv6 packet carrying a Fragment header (RFC 8200 §4.5), get no ports, so they fall back to
//! the address-only hash — all fragments of a datagram then land on one queue.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::{Ipv4Packet, Ipv6Packet};

use crate::input::{HashInput, HashType, HashTypes, IpVersion, L4Kind, PortPair};

const ETHERTYPE_IPV4: u16 = wire::EtherType::IPV4.0;
const ETHERTYPE_IPV6: u16 = wire::EtherType::IPV6.0;
const ETHERTYPE_VLAN: u16 = wire::EtherType::VLAN.0;
const ETHERTYPE_QINQ: u16 = wire::EtherType::QINQ.0;
const ETHERNET_HEADER_BYTES: usize = 14;
const VLAN_TAG_BYTES: usize = 4;
/// Most VLAN tags walked (QinQ); a frame with more is treated as non-IP.
const VLAN_TAGS_MAX: usize = 2;
/// Fixed IPv6 header length (RFC 8200 §3).
const IPV6_HEADER_BYTES: usize = 40;

/// IANA protocol number of TCP.
pub const PROTO_TCP: u8 = wire::IpProtocol::TCP.0;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = wire::IpProtocol::UDP.0;

/// Why a frame could not be parsed for hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than an Ethernet header or a VLAN tag.
    TruncatedEthernet,
    /// The IPv4 header is malformed or truncated (`wire`'s reason).
    Ipv4(wire::Error),
    /// The IPv6 header or its extension-header chain is malformed or truncated.
    Ipv6(wire::Error),
    /// A non-fragment TCP/UDP packet with fewer than 4 bytes of transport header.
    TruncatedL4,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TruncatedEthernet => {
                f.write_str("frame shorter than its Ethernet/VLAN header")
            }
            FrameError::Ipv4(e) => write!(f, "IPv4: {e}"),
            FrameError::Ipv6(e) => write!(f, "IPv6: {e}"),
            FrameError::TruncatedL4 => f.write_str("TCP/UDP header too short for ports"),
        }
    }
}

impl core::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            FrameError::Ipv4(e) | FrameError::Ipv6(e) => Some(e),
            FrameError::TruncatedEthernet | FrameError::TruncatedL4 => None,
        }
    }
}

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
    /// Upper-layer protocol: the IPv4 protocol field, or the first IPv6 next header that is
    /// not a Hop-by-Hop, Routing, Fragment or Destination Options header (so 51 for AH and
    /// 50 for ESP: no ports are looked for behind them).
    pub protocol: u8,
    /// TCP/UDP ports of a non-fragment.
    pub ports: Option<PortPair>,
    /// The packet is an IP fragment (IPv4 MF or offset ≠ 0; IPv6 with a Fragment header).
    pub is_fragment: bool,
}

/// The link layer of an Ethernet frame as the NIC parser walks it: Ethernet II and up to two
/// VLAN tags (802.1Q `0x8100`, 802.1ad `0x88a8`, in any order).
///
/// For a parser that goes on to the IP layer itself (the NIC model parses each frame once
/// for steering, checksum offload and coalescing) and then takes the flow fields from its
/// checked IP view with [`FlowFields::from_ipv4`] / [`FlowFields::from_ipv6`];
/// [`FlowFields::from_frame`] is exactly that walk followed by those.
///
/// Invariant: `l3_offset == 14 + 4 * vlan_tags <= frame.len()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetWalk {
    /// The EtherType after the tags (the payload's).
    pub ethertype: u16,
    /// Where the payload (the IP header) starts.
    pub l3_offset: usize,
    /// VLAN tags walked: 0, 1 or 2.
    pub vlan_tags: u8,
    /// The outer tag's TPID (`0x8100` or `0x88a8`) and TCI, when tagged.
    pub outer_tag: Option<(u16, u16)>,
}

impl EthernetWalk {
    /// Walks `frame`'s link layer. `Ok(None)` when it has more tags than a NIC walks (the
    /// frame is then treated as non-IP); an error when the header or a tag is truncated.
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<Option<EthernetWalk>, FrameError> {
        let mut ethertype_at = ETHERNET_HEADER_BYTES - 2;
        let mut outer_tag = None;
        for tags in 0..=VLAN_TAGS_MAX {
            let ethertype = be16(frame, ethertype_at).ok_or(FrameError::TruncatedEthernet)?;
            if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
                if tags == 0 {
                    // A missing TCI is caught as a truncated EtherType on the next round.
                    outer_tag = be16(frame, ethertype_at + 2).map(|tci| (ethertype, tci));
                }
                ethertype_at += VLAN_TAG_BYTES;
                continue;
            }
            let l3_offset = ethertype_at + 2;
            if l3_offset > frame.len() {
                return Err(FrameError::TruncatedEthernet);
            }
            return Ok(Some(EthernetWalk {
                ethertype,
                l3_offset,
                vlan_tags: tags as u8,
                outer_tag,
            }));
        }
        Ok(None)
    }
}

impl FlowFields {
    /// Parses an Ethernet frame; `Ok(None)` for a non-IP frame (ARP, LLDP, …).
    pub fn from_frame(frame: &[u8]) -> Result<Option<FlowFields>, FrameError> {
        let Some(walk) = EthernetWalk::parse(frame)? else {
            return Ok(None);
        };
        let l3 = frame.get(walk.l3_offset..).unwrap_or(&[]);
        match walk.ethertype {
            ETHERTYPE_IPV4 => {
                let ip = Ipv4Packet::new_checked(l3).map_err(FrameError::Ipv4)?;
                FlowFields::from_ipv4(&ip).map(Some)
            }
            ETHERTYPE_IPV6 => {
                let ip = Ipv6Packet::new_checked(l3).map_err(FrameError::Ipv6)?;
                FlowFields::from_ipv6(&ip).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The flow fields of an IPv4 packet already checked by its parser (RFC 791 §3.1): the
    /// checked view guarantees version 4, IHL ≥ 5, header ≤ total length ≤ buffer; its
    /// payload stops at the total length, so link padding is never read as ports. A
    /// fragment (MF set or a non-zero offset) gets no ports.
    #[inline]
    pub fn from_ipv4(ip: &Ipv4Packet<&[u8]>) -> Result<FlowFields, FrameError> {
        let is_fragment = ip.is_fragment();
        let protocol = ip.protocol().0;
        let ports = if !is_fragment && is_tcp_or_udp(protocol) {
            Some(ports(ip.payload())?)
        } else {
            None
        };
        Ok(FlowFields {
            addrs: IpPair::V4(ip.src_addr(), ip.dst_addr()),
            protocol,
            ports,
            is_fragment,
        })
    }

    /// The flow fields of an IPv6 packet already checked by its parser: RFC 8200 §4
    /// extension-header chain walked (by `wire`, bounded at `wire::ipv6::MAX_EXT_HEADERS`)
    /// to the upper layer. Any Fragment header — even an atomic one (offset 0, M = 0) —
    /// makes the packet a fragment for hashing (RFC 8200 §4.5): no ports.
    pub fn from_ipv6(ip: &Ipv6Packet<&[u8]>) -> Result<FlowFields, FrameError> {
        let walk = ip.walk_ext_headers().map_err(FrameError::Ipv6)?;
        let is_fragment = walk.fragment.is_some();
        let protocol = walk.upper_protocol.0;
        let ports = if !is_fragment && is_tcp_or_udp(protocol) {
            // `upper_offset` counts from the start of the IPv6 header; the payload stops at
            // the payload length, so link padding is never read as ports.
            let l4 = walk
                .upper_offset
                .checked_sub(IPV6_HEADER_BYTES)
                .and_then(|o| ip.payload().get(o..))
                .unwrap_or(&[]);
            Some(ports(l4)?)
        } else {
            None
        };
        Ok(FlowFields {
            addrs: IpPair::V6(ip.src_addr(), ip.dst_addr()),
            protocol,
            ports,
            is_fragment,
        })
    }

    /// The flow fields of the common frame, read at fixed offsets: untagged Ethernet II,
    /// IPv4 with a 20-byte header (IHL 5) that `wire`'s checked view would accept (total
    /// length within the frame and at least the header), not a fragment, TCP or UDP with its
    /// ports inside the total length. `None` for every other frame (take
    /// [`FlowFields::from_frame`]); when `Some`, it equals what `from_frame` returns.
    #[inline]
    pub fn from_plain_ipv4_frame(frame: &[u8]) -> Option<FlowFields> {
        let (protocol, t) = plain_ipv4_tuple(frame)?;
        let at = |i: usize| [t[i], t[i + 1], t[i + 2], t[i + 3]];
        Some(FlowFields {
            addrs: IpPair::V4(Ipv4Addr::from(at(0)), Ipv4Addr::from(at(4))),
            protocol,
            ports: Some(PortPair {
                src: u16::from_be_bytes([t[8], t[9]]),
                dst: u16::from_be_bytes([t[10], t[11]]),
            }),
            is_fragment: false,
        })
    }

    /// The hash type a NIC with `enabled` types applies, and the ports it covers (`None` for
    /// an address-only type); `None` when no enabled type covers the packet. What
    /// [`FlowFields::hash_input`] selects, without building the input.
    #[inline]
    pub fn hash_type(&self, enabled: HashTypes) -> Option<(HashType, Option<PortPair>)> {
        let version = match self.addrs {
            IpPair::V4(..) => IpVersion::V4,
            IpPair::V6(..) => IpVersion::V6,
        };
        let is_fragment = self.is_fragment || self.ports.is_none();
        let hash_type = enabled.select(version, self.l4_kind(), is_fragment)?;
        let ports = if hash_type.includes_ports() {
            self.ports
        } else {
            None
        };
        Some((hash_type, ports))
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
        // A TCP/UDP non-fragment always has ports (invariant), so the port-less case can only
        // select the address-only type.
        let (hash_type, ports) = self.hash_type(enabled)?;
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

/// Ethernet header, a 20-byte IPv4 header and the 4 port bytes.
const PLAIN_IPV4_HEAD_BYTES: usize = ETHERNET_HEADER_BYTES + 20 + 4;

/// The protocol and the 12 bytes `src ‖ dst ‖ sport ‖ dport` of the frames
/// [`FlowFields::from_plain_ipv4_frame`] takes (see there), borrowed from the frame: in a
/// 20-byte IPv4 header the addresses end where the TCP/UDP header, and its ports, begin.
#[inline]
pub(crate) fn plain_ipv4_tuple(frame: &[u8]) -> Option<(u8, &[u8; 12])> {
    const L3: usize = ETHERNET_HEADER_BYTES;
    let head: &[u8; PLAIN_IPV4_HEAD_BYTES] = frame.get(..PLAIN_IPV4_HEAD_BYTES)?.try_into().ok()?;
    // Constant indices into a fixed-size array: checked at compile time.
    if u16::from_be_bytes([head[L3 - 2], head[L3 - 1]]) != ETHERTYPE_IPV4 || head[L3] != 0x45 {
        return None;
    }
    let total_len = usize::from(u16::from_be_bytes([head[L3 + 2], head[L3 + 3]]));
    let flags_offset = u16::from_be_bytes([head[L3 + 6], head[L3 + 7]]);
    let protocol = head[L3 + 9];
    // MF set or a non-zero offset: a fragment. The ports must lie within the total length,
    // which `wire`'s checked view requires to lie within the frame.
    if flags_offset & 0x3fff != 0
        || !is_tcp_or_udp(protocol)
        || total_len < PLAIN_IPV4_HEAD_BYTES - L3
        || total_len > frame.len() - L3
    {
        return None;
    }
    let tuple = head.get(L3 + 12..)?.try_into().ok()?;
    Some((protocol, tuple))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    match bytes.get(at..at.checked_add(2)?)? {
        &[hi, lo] => Some(u16::from_be_bytes([hi, lo])),
        _ => None,
    }
}

/// Reads source and destination ports from the start of a TCP/UDP header.
fn ports(l4: &[u8]) -> Result<PortPair, FrameError> {
    match (be16(l4, 0), be16(l4, 2)) {
        (Some(src), Some(dst)) => Ok(PortPair { src, dst }),
        _ => Err(FrameError::TruncatedL4),
    }
}

fn is_tcp_or_udp(protocol: u8) -> bool {
    protocol == PROTO_TCP || protocol == PROTO_UDP
}
