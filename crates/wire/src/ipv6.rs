//! IPv6 header (RFC 8200 §3) and a bounded walk over the extension headers the stack must see
//! through: hop-by-hop options (0), routing (43), fragment (44) and destination options (60).
//!
//! ```text
//! |version(4)| traffic class(8) | flow label(20)          |
//! | payload length(16)          | next header | hop limit |
//! | source address (16 bytes)                             |
//! | destination address (16 bytes)                        |
//! ```
//!
//! The walk stops at the first next-header value that is not one of the four above (the upper
//! layer: TCP, UDP, ICMPv6, no-next-header, or anything else such as AH/ESP, which are not
//! walked). More than [`MAX_EXT_HEADERS`] extension headers is `ExtHeaderChainTooLong`.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::ip::IpProtocol;

/// Upper bound on the extension headers walked before giving up (RFC 8200 §4.1 recommends each
/// appear at most once, destination options at most twice, so a legitimate chain has ≤ 6).
pub const MAX_EXT_HEADERS: usize = 8;

pub mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
    pub const HEADER_LEN: usize = 40;
    /// Size of the fragment extension header (RFC 8200 §4.5).
    pub const FRAG_HEADER_LEN: usize = 8;
}

/// The fields of a fragment header (RFC 8200 §4.5).
///
/// Invariant: `offset_bytes` is a multiple of 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentHeader {
    /// Offset of this fragment's data in the original packet, in bytes.
    pub offset_bytes: u16,
    /// The M flag: more fragments follow.
    pub more_frags: bool,
    pub ident: u32,
}

/// One extension header as the Repr carries it. Option/routing data bytes are not kept:
/// emit writes them as zeros (Pad1 options, RFC 8200 §4.2).
///
/// Invariant: `len_bytes` is a multiple of 8 in 8..=2048 (emit rounds it into that range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6ExtHeader {
    HopByHop {
        len_bytes: u16,
    },
    Routing {
        routing_type: u8,
        segments_left: u8,
        len_bytes: u16,
    },
    Fragment(Ipv6FragmentHeader),
    DestinationOptions {
        len_bytes: u16,
    },
}

impl Ipv6ExtHeader {
    /// Its next-header value.
    pub fn protocol(&self) -> IpProtocol {
        match self {
            Ipv6ExtHeader::HopByHop { .. } => IpProtocol::HOP_BY_HOP,
            Ipv6ExtHeader::Routing { .. } => IpProtocol::IPV6_ROUTE,
            Ipv6ExtHeader::Fragment(_) => IpProtocol::IPV6_FRAG,
            Ipv6ExtHeader::DestinationOptions { .. } => IpProtocol::IPV6_OPTS,
        }
    }

    /// Its length on the wire in bytes (a multiple of 8).
    pub fn wire_len(&self) -> usize {
        let round = |l: u16| usize::from(l / 8).clamp(1, 256) * 8;
        match *self {
            Ipv6ExtHeader::HopByHop { len_bytes }
            | Ipv6ExtHeader::Routing { len_bytes, .. }
            | Ipv6ExtHeader::DestinationOptions { len_bytes } => round(len_bytes),
            Ipv6ExtHeader::Fragment(_) => field::FRAG_HEADER_LEN,
        }
    }

    fn is_ext(p: IpProtocol) -> bool {
        matches!(
            p,
            IpProtocol::HOP_BY_HOP
                | IpProtocol::IPV6_ROUTE
                | IpProtocol::IPV6_FRAG
                | IpProtocol::IPV6_OPTS
        )
    }
}

/// The result of walking the extension-header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Walk {
    /// The first next-header value that is not a walked extension header.
    pub upper_protocol: IpProtocol,
    /// Offset of the upper-layer header from the start of the IPv6 header. For a non-first
    /// fragment (offset ≠ 0) this is where the fragment data starts, not a transport header.
    pub upper_offset: usize,
    /// The (first) fragment header, if one was present.
    pub fragment: Option<Ipv6FragmentHeader>,
    /// The headers walked, in order, filled from index 0 with no gaps.
    pub headers: [Option<Ipv6ExtHeader>; MAX_EXT_HEADERS],
}

/// Checked view of an IPv6 packet.
///
/// After `new_checked`: buffer ≥ 40 + payload length, version 6.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

#[inline]
fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

#[inline]
fn addr(b: &[u8], r: core::ops::Range<usize>) -> Ipv6Addr {
    b.get(r)
        .and_then(|s| <[u8; 16]>::try_from(s).ok())
        .map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from)
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` (< 40 bytes), `BadVersion`, `BadPayloadLength` (payload past the buffer).
    pub fn check_len(&self) -> Result<()> {
        let len = self.b().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if field::HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::BadPayloadLength);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn word0(&self) -> u32 {
        match self.b().get(field::VER_TC_FLOW) {
            Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
            _ => 0,
        }
    }
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }
    /// Payload length in bytes (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), field::PAYLOAD_LEN)
    }
    /// The next header of the fixed header (first extension header or upper layer).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.b().get(field::NEXT_HEADER).copied().unwrap_or(0))
    }
    pub fn hop_limit(&self) -> u8 {
        self.b().get(field::HOP_LIMIT).copied().unwrap_or(0)
    }
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(self.b(), field::SRC)
    }
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(self.b(), field::DST)
    }
    /// Everything the payload length covers after the fixed header (extension headers
    /// included; trailing link padding excluded).
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(field::HEADER_LEN..field::HEADER_LEN + usize::from(self.payload_len()))
            .unwrap_or(&[])
    }

    /// Walks the extension headers (RFC 8200 §4) up to [`MAX_EXT_HEADERS`].
    ///
    /// Errors: `Truncated` when a header runs past the payload length, `BadExtHeaderOrder` for
    /// a hop-by-hop header that is not first (RFC 8200 §4.1), `ExtHeaderChainTooLong` past the
    /// bound.
    pub fn walk_ext_headers(&self) -> Result<Ipv6Walk> {
        walk_ext_headers(self.next_header(), self.payload())
    }
}

/// Walks the extension-header chain that starts with next-header value `first` at the start of
/// `payload` (the bytes after the fixed IPv6 header); see [`Ipv6Packet::walk_ext_headers`].
/// Usable on a truncated packet, e.g. the one quoted in an ICMPv6 error.
pub fn walk_ext_headers(first: IpProtocol, payload: &[u8]) -> Result<Ipv6Walk> {
    let mut walk = Ipv6Walk {
        upper_protocol: first,
        upper_offset: field::HEADER_LEN,
        fragment: None,
        headers: [None; MAX_EXT_HEADERS],
    };
    let mut nh = first;
    let mut off = 0usize;
    let mut count = 0usize;
    while Ipv6ExtHeader::is_ext(nh) {
        if count == MAX_EXT_HEADERS {
            return Err(Error::ExtHeaderChainTooLong);
        }
        if nh == IpProtocol::HOP_BY_HOP && count != 0 {
            return Err(Error::BadExtHeaderOrder);
        }
        let (next, hdr_ext_len) = match payload.get(off..off + 2) {
            Some(&[a, b]) => (a, b),
            _ => return Err(Error::Truncated),
        };
        let len = if nh == IpProtocol::IPV6_FRAG {
            field::FRAG_HEADER_LEN
        } else {
            // RFC 8200 §4.3: length in 8-octet units, not counting the first 8 octets.
            (usize::from(hdr_ext_len) + 1) * 8
        };
        let hdr = payload.get(off..off + len).ok_or(Error::Truncated)?;
        let header = match nh {
            IpProtocol::HOP_BY_HOP => Ipv6ExtHeader::HopByHop {
                len_bytes: len as u16,
            },
            IpProtocol::IPV6_OPTS => Ipv6ExtHeader::DestinationOptions {
                len_bytes: len as u16,
            },
            IpProtocol::IPV6_ROUTE => Ipv6ExtHeader::Routing {
                routing_type: hdr.get(2).copied().unwrap_or(0),
                segments_left: hdr.get(3).copied().unwrap_or(0),
                len_bytes: len as u16,
            },
            _ => {
                let frag = match hdr {
                    &[_, _, o0, o1, i0, i1, i2, i3] => {
                        let v = u16::from_be_bytes([o0, o1]);
                        Ipv6FragmentHeader {
                            offset_bytes: v & 0xfff8,
                            more_frags: v & 0x0001 != 0,
                            ident: u32::from_be_bytes([i0, i1, i2, i3]),
                        }
                    }
                    _ => return Err(Error::Truncated),
                };
                // A chain should hold one fragment header; report the first.
                walk.fragment.get_or_insert(frag);
                Ipv6ExtHeader::Fragment(frag)
            }
        };
        if let Some(slot) = walk.headers.get_mut(count) {
            *slot = Some(header);
        }
        count += 1;
        off += len;
        nh = IpProtocol(next);
    }
    walk.upper_protocol = nh;
    walk.upper_offset = field::HEADER_LEN + off;
    Ok(walk)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    /// Writes version 6 with the traffic class and the (20-bit) flow label.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        self.put(field::VER_TC_FLOW, &w.to_be_bytes());
    }
    pub fn set_payload_len(&mut self, v: u16) {
        self.put(field::PAYLOAD_LEN, &v.to_be_bytes());
    }
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.put(field::NEXT_HEADER..field::NEXT_HEADER + 1, &[p.0]);
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.put(field::HOP_LIMIT..field::HOP_LIMIT + 1, &[v]);
    }
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.put(field::SRC, &a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.put(field::DST, &a.octets());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = field::HEADER_LEN + usize::from(self.payload_len());
        self.buffer
            .as_mut()
            .get_mut(field::HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

/// The meaningful fields of an IPv6 header and its extension-header chain.
///
/// Invariants: `ext_headers` filled from index 0 with no gaps, a hop-by-hop header only at
/// index 0; `flow_label` < 2^20; `header_len() - 40 + payload_len` ≤ 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The upper-layer protocol, after the extension headers.
    pub next_header: IpProtocol,
    /// Bytes of upper-layer payload after the extension headers.
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub ext_headers: [Option<Ipv6ExtHeader>; MAX_EXT_HEADERS],
}

impl Ipv6Repr {
    /// Parses a checked view and walks its extension headers.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        let walk = packet.walk_ext_headers()?;
        let end = field::HEADER_LEN + usize::from(packet.payload_len());
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: walk.upper_protocol,
            payload_len: end.saturating_sub(walk.upper_offset),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
            ext_headers: walk.headers,
        })
    }

    /// The fragment header, if the chain has one.
    pub fn fragment(&self) -> Option<Ipv6FragmentHeader> {
        self.ext_headers.iter().flatten().find_map(|h| match h {
            Ipv6ExtHeader::Fragment(f) => Some(*f),
            _ => None,
        })
    }

    /// Fixed header plus extension headers, in bytes.
    pub fn header_len(&self) -> usize {
        field::HEADER_LEN
            + self
                .ext_headers
                .iter()
                .flatten()
                .map(Ipv6ExtHeader::wire_len)
                .sum::<usize>()
    }

    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the fixed header and the extension headers (not the upper-layer payload).
    /// `BufferTooSmall` if they do not fit, `BadPayloadLength` if the payload length overflows
    /// 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) -> Result<()> {
        let header_len = self.header_len();
        if packet.buffer.as_ref().len() < header_len {
            return Err(Error::BufferTooSmall);
        }
        let payload_len = u16::try_from(self.buffer_len() - field::HEADER_LEN)
            .map_err(|_| Error::BadPayloadLength)?;
        packet.set_version_tc_flow(self.traffic_class, self.flow_label);
        packet.set_payload_len(payload_len);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        let headers: &[Option<Ipv6ExtHeader>] = &self.ext_headers;
        let first = headers
            .iter()
            .flatten()
            .next()
            .map_or(self.next_header, |h| h.protocol());
        packet.set_next_header(first);
        let buf = packet.buffer.as_mut();
        let mut off = field::HEADER_LEN;
        let mut chain = headers.iter().flatten().peekable();
        while let Some(h) = chain.next() {
            let next = chain.peek().map_or(self.next_header, |n| n.protocol());
            let len = h.wire_len();
            let Some(dst) = buf.get_mut(off..off + len) else {
                return Err(Error::BufferTooSmall);
            };
            dst.fill(0);
            if let Some(b) = dst.get_mut(0) {
                *b = next.0;
            }
            match *h {
                Ipv6ExtHeader::Fragment(f) => {
                    let v = (f.offset_bytes & 0xfff8) | u16::from(f.more_frags);
                    if let Some(d) = dst.get_mut(2..8) {
                        d[..2].copy_from_slice(&v.to_be_bytes());
                        d[2..].copy_from_slice(&f.ident.to_be_bytes());
                    }
                }
                Ipv6ExtHeader::Routing {
                    routing_type,
                    segments_left,
                    ..
                } => {
                    if let Some(d) = dst.get_mut(1..4) {
                        d.copy_from_slice(&[(len / 8 - 1) as u8, routing_type, segments_left]);
                    }
                }
                Ipv6ExtHeader::HopByHop { .. } | Ipv6ExtHeader::DestinationOptions { .. } => {
                    if let Some(d) = dst.get_mut(1) {
                        *d = (len / 8 - 1) as u8;
                    }
                }
            }
            off += len;
        }
        Ok(())
    }
}

impl core::fmt::Display for Ipv6Repr {
    /// `2001:db8::1 > 2001:db8::2 tcp hlim 64 len 20` plus the extension headers walked.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} > {} {} hlim {} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.hop_limit, self.payload_len
        )?;
        for h in self.ext_headers.iter().flatten() {
            match h {
                Ipv6ExtHeader::HopByHop { .. } => f.write_str(" +hbh")?,
                Ipv6ExtHeader::Routing { routing_type, .. } => write!(f, " +rt{routing_type}")?,
                Ipv6ExtHeader::Fragment(fr) => write!(
                    f,
                    " +frag(id {} off {}{})",
                    fr.ident,
                    fr.offset_bytes,
                    if fr.more_frags { " M" } else { "" }
                )?,
                Ipv6ExtHeader::DestinationOptions { .. } => f.write_str(" +dst")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet_with_chain(chain: &[(u8, &[u8])], upper: u8, upper_len: usize) -> std::vec::Vec<u8> {
        let mut v = std::vec![0u8; 40];
        v[0] = 0x60;
        v[6] = chain.first().map_or(upper, |c| c.0);
        for (i, (_, body)) in chain.iter().enumerate() {
            let next = chain.get(i + 1).map_or(upper, |c| c.0);
            let mut h = body.to_vec();
            h[0] = next;
            v.extend_from_slice(&h);
        }
        v.extend(std::iter::repeat_n(0u8, upper_len));
        let pl = (v.len() - 40) as u16;
        v[4..6].copy_from_slice(&pl.to_be_bytes());
        v
    }

    #[test]
    fn walk_reports_upper_layer_offset_and_fragment_fields() {
        let hbh = [0u8; 8];
        let frag = [0, 0, 0x05, 0x39, 0xde, 0xad, 0xbe, 0xef]; // offset 167*8, M=1
        let v = packet_with_chain(&[(0, &hbh), (44, &frag)], 6, 20);
        let p = Ipv6Packet::new_checked(&v[..]).expect("valid");
        let w = p.walk_ext_headers().expect("walk");
        assert_eq!(w.upper_protocol, IpProtocol::TCP);
        assert_eq!(w.upper_offset, 56);
        assert_eq!(
            w.fragment,
            Some(Ipv6FragmentHeader {
                offset_bytes: 0x0538,
                more_frags: true,
                ident: 0xdead_beef
            })
        );
        let r = Ipv6Repr::parse(&p).expect("parse");
        assert_eq!(r.payload_len, 20);
        assert_eq!(r.header_len(), 56);
    }

    #[test]
    fn chain_longer_than_bound_is_rejected() {
        let d = [0u8; 8];
        let chain: std::vec::Vec<(u8, &[u8])> =
            (0..=MAX_EXT_HEADERS).map(|_| (60u8, &d[..])).collect();
        let v = packet_with_chain(&chain, 17, 8);
        let p = Ipv6Packet::new_checked(&v[..]).expect("valid");
        assert_eq!(
            p.walk_ext_headers().err(),
            Some(Error::ExtHeaderChainTooLong)
        );
        let ok = packet_with_chain(&chain[..MAX_EXT_HEADERS], 17, 8);
        let p = Ipv6Packet::new_checked(&ok[..]).expect("valid");
        assert_eq!(
            p.walk_ext_headers().map(|w| w.upper_protocol),
            Ok(IpProtocol::UDP)
        );
    }
}
