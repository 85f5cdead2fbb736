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
