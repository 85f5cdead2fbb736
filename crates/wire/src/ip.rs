//! Things shared by IPv4 and IPv6: protocol numbers and the address pair of a pseudo-header.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;

/// An IP protocol number / IPv6 next-header value (IANA "Assigned Internet Protocol Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    pub const ICMP: IpProtocol = IpProtocol(1);
    pub const TCP: IpProtocol = IpProtocol(6);
    pub const UDP: IpProtocol = IpProtocol(17);
    pub const IPV6_ROUTE: IpProtocol = IpProtocol(43);
    pub const IPV6_FRAG: IpProtocol = IpProtocol(44);
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    pub const IPV6_NO_NXT: IpProtocol = IpProtocol(59);
    pub const IPV6_OPTS: IpProtocol = IpProtocol(60);
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IpProtocol::TCP => f.write_str("tcp"),
            IpProtocol::UDP => f.write_str("udp"),
            IpProtocol::ICMP => f.write_str("icmp"),
            IpProtocol::ICMPV6 => f.write_str("icmpv6"),
            IpProtocol(n) => write!(f, "proto-{n}"),
        }
    }
}

/// The ECN field of an IP header (RFC 3168 §5): the two low bits of the IPv4 TOS byte or
/// the IPv6 traffic class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Ecn {
    /// 00: the sender does not take part in ECN.
    #[default]
    NotEct = 0,
    /// 01: ECN-capable transport, codepoint 1.
    Ect1 = 1,
    /// 10: ECN-capable transport, codepoint 0 (what RFC 3168 senders use).
    Ect0 = 2,
    /// 11: congestion experienced, set by a router instead of dropping.
    Ce = 3,
}

impl Ecn {
    /// The codepoint of the two low bits of `tos` (IPv4 TOS byte or IPv6 traffic class).
    pub fn from_bits(tos: u8) -> Ecn {
        match tos & 0x03 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two bits, for `Ipv4Repr::ecn` or the low bits of a traffic class.
    pub fn bits(self) -> u8 {
        self as u8
    }

    /// Either ECT codepoint (not CE, not Not-ECT).
    pub fn is_ect(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// Source and destination addresses of the IP packet carrying a transport segment: what the
/// transport checksum's pseudo-header needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    V4 { src: Ipv4Addr, dst: Ipv4Addr },
    V6 { src: Ipv6Addr, dst: Ipv6Addr },
}

impl IpPair {
    /// Folded sum of the pseudo-header for `protocol` carrying `length_bytes` of upper-layer
    /// data (RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6).
    pub fn pseudo_header_sum(&self, protocol: IpProtocol, length_bytes: u32) -> u16 {
        match *self {
            IpPair::V4 { src, dst } => {
                checksum::pseudo_header_v4(src, dst, protocol.0, length_bytes)
            }
            IpPair::V6 { src, dst } => {
                checksum::pseudo_header_v6(src, dst, protocol.0, length_bytes)
            }
        }
    }

    /// True for IPv6, where a transport checksum is mandatory (RFC 8200 §8.1).
    pub fn is_ipv6(&self) -> bool {
        matches!(self, IpPair::V6 { .. })
    }
}

/// The flow an ICMP error is about, read from the invoking packet it quotes (RFC 792: the IP
/// header plus the first 64 bits of its data; RFC 4443 §2.4(c): as much as fits). Addresses and
/// ports are as the invoking packet carried them, so for a packet we sent `src` is ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotedFlow {
    pub addrs: IpPair,
    pub protocol: IpProtocol,
    pub src_port: u16,
    pub dst_port: u16,
    /// The quoted TCP segment's sequence number, for the RFC 5927 §4.1 in-window check.
    pub tcp_seq: Option<crate::tcp::SeqNumber>,
}

impl QuotedFlow {
    /// Reads ports (and a TCP sequence number) at `offset` of `quoted`. `Unsupported` unless the
    /// protocol is TCP or UDP, `Truncated` if the ports are not there.
    pub(crate) fn from_transport(
        addrs: IpPair,
        protocol: IpProtocol,
        quoted: &[u8],
        offset: usize,
    ) -> crate::Result<QuotedFlow> {
        if protocol != IpProtocol::TCP && protocol != IpProtocol::UDP {
            return Err(crate::Error::Unsupported);
        }
        let ports = match quoted.get(offset..offset + 4) {
            Some(&[a, b, c, d]) => (u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d])),
            _ => return Err(crate::Error::Truncated),
        };
        let tcp_seq = match quoted.get(offset + 4..offset + 8) {
            Some(&[a, b, c, d]) if protocol == IpProtocol::TCP => {
                Some(crate::tcp::SeqNumber(u32::from_be_bytes([a, b, c, d])))
            }
            _ => None,
        };
        Ok(QuotedFlow {
            addrs,
            protocol,
            src_port: ports.0,
            dst_port: ports.1,
            tcp_seq,
        })
    }
}
