//! Checked views over packet bytes and plain `Repr` structs for the protocols rsstack speaks.
//!
//! Each protocol module has two layers (the smoltcp habit):
//! - a *view* (`Packet<T: AsRef<[u8]>>`) whose `new_checked` validates lengths once, after which
//!   no accessor can panic;
//! - a *Repr*, a plain struct of the meaningful fields, with `parse(&view) -> Result<Repr, Error>`
//!   and `emit(&self, &mut view)`.
//!
//! Protocol logic works on Reprs; only this crate touches bytes. Malformed input always yields a
//! typed [`Error`], never a panic. Even `new_unchecked` views never panic: accessors on a short
//! buffer return zeros.
//!
//! Parsing a frame layer by layer (each `payload()` feeds the next view):
//!
//! ```
//! use wire::{ChecksumCaps, EthernetFrame, EthernetRepr, EtherType, IpPair, IpProtocol};
//! use wire::{Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr};
//!
//! fn tcp_ports(frame: &[u8]) -> Result<Option<(u16, u16)>, wire::Error> {
//!     let eth = EthernetFrame::new_checked(frame)?;
//!     if EthernetRepr::parse(&eth)?.ethertype != EtherType::IPV4 {
//!         return Ok(None);
//!     }
//!     let ip = Ipv4Packet::new_checked(eth.payload())?;
//!     let ip_repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL)?;
//!     if ip_repr.protocol != IpProtocol::TCP || ip.is_fragment() {
//!         return Ok(None);
//!     }
//!     let addrs = IpPair::V4 { src: ip_repr.src_addr, dst: ip_repr.dst_addr };
//!     let tcp = TcpPacket::new_checked(ip.payload())?;
//!     let seg = TcpRepr::parse(&tcp, &addrs, ChecksumCaps::ALL)?;
//!     Ok(Some((seg.src_port, seg.dst_port)))
//! }
//!
//! assert_eq!(tcp_ports(&[0u8; 10]), Err(wire::Error::Truncated));
//! ```
//!
//! Checksums: [`ChecksumCaps`] says whether `parse` verifies and whether `emit` fills them
//! (or leaves the pseudo-header sum for partial offload). The RFC 1071 sum, pseudo-headers and
//! the RFC 1624 incremental update live in [`checksum`].
#![deny(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod meta;
pub mod partial;
pub mod tcp;
pub mod tcp_fast_open;
pub mod tcp_fixed;
pub mod tcp_option_layout;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::ChecksumCaps;
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanTag};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr};
pub use ip::{Ecn, IpPair, IpProtocol, QuotedFlow};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{
    Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6Packet, Ipv6Repr, Ipv6Walk, MAX_EXT_HEADERS,
};
pub use meta::{CsumVerdict, RssHashType, RxChecksum, RxMeta, TxMeta};
pub use tcp::{
    SackBlock, SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpParseReport, TcpRepr,
    TcpTimestamp,
};
pub use tcp_option_layout::TcpOptionLayout;
pub use udp::{UdpPacket, UdpRepr};
