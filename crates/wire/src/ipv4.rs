//! IPv4 header (RFC 791 §3.1). Options are length-checked and skipped; fragment fields are
//! exposed.
//!
//! ```text
//!  0       4       8              16    19             31
//! |version| IHL   | DSCP/ECN     | total length          |
//! | identification               |flags| fragment offset |
//! | TTL           | protocol     | header checksum       |
//! | source address                                       |
//! | destination address                                  |
//! | options (IHL*4 - 20 bytes)                           |
//! ```

use core::net::Ipv4Addr;

use crate::checksum::{self, ChecksumCaps};
use crate::error::{Error, Result};
use crate::ip::IpProtocol;

pub mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    /// Header length without options.
    pub const HEADER_LEN: usize = 20;
    /// Largest header (IHL = 15).
    pub const MAX_HEADER_LEN: usize = 60;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// Checked view of an IPv4 packet.
///
/// After `new_checked`: buffer ≥ total length ≥ header length ≥ 20, version 4.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
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
fn addr(b: &[u8], r: core::ops::Range<usize>) -> Ipv4Addr {
    match b.get(r) {
        Some(&[a, b, c, d]) => Ipv4Addr::new(a, b, c, d),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Validates once; afterwards no accessor panics and `payload()` is exactly the bytes the
    /// total length covers after the header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` (< 20 bytes), `BadVersion`, `BadIhl` (IHL < 5 or header past the total
    /// length), `BadTotalLength` (total length past the buffer).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < field::HEADER_LEN {
            return Err(Error::BadIhl);
        }
        let total_len = usize::from(self.total_len());
        if header_len > total_len {
            return Err(Error::BadIhl);
        }
        if total_len > len {
            return Err(Error::BadTotalLength);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.b().get(field::VER_IHL).map_or(0, |v| v >> 4)
    }
    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        self.b()
            .get(field::VER_IHL)
            .map_or(0, |v| usize::from(v & 0x0f) * 4)
    }
    pub fn dscp(&self) -> u8 {
        self.b().get(field::DSCP_ECN).map_or(0, |v| v >> 2)
    }
    pub fn ecn(&self) -> u8 {
        self.b().get(field::DSCP_ECN).map_or(0, |v| v & 0x03)
    }
    /// Total length in bytes, header included.
    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::TOTAL_LEN)
    }
    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT)
    }
    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.b(), field::FLAGS_FRAG) & FLAG_DF != 0
    }
    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        be16(self.b(), field::FLAGS_FRAG) & FLAG_MF != 0
    }
    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset_bytes(&self) -> u16 {
        (be16(self.b(), field::FLAGS_FRAG) & FRAG_OFFSET_MASK) << 3
    }
    /// True for any fragment (first, middle or last) of a fragmented datagram.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset_bytes() != 0
    }
    pub fn hop_limit(&self) -> u8 {
        self.b().get(field::TTL).copied().unwrap_or(0)
    }
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.b().get(field::PROTOCOL).copied().unwrap_or(0))
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    pub fn src_addr(&self) -> Ipv4Addr {
        addr(self.b(), field::SRC)
    }
    pub fn dst_addr(&self) -> Ipv4Addr {
        addr(self.b(), field::DST)
    }
    /// The options bytes (empty when IHL = 5).
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(field::HEADER_LEN..self.header_len())
            .unwrap_or(&[])
    }
    /// True when the header checksum verifies (RFC 791 §3.1: the sum over the header is 0xffff).
    pub fn verify_checksum(&self) -> bool {
        let len = self.header_len();
        if len == field::HEADER_LEN {
            // No options (nearly every datagram): the unrolled sum.
            if let Some(h) = self.b().first_chunk::<{ field::HEADER_LEN }>() {
                return checksum::sum_20(h) == 0xffff;
            }
        }
        self.b()
            .get(..len)
            .is_some_and(|h| checksum::sum(h) == 0xffff)
    }
    /// The payload the total length covers (Ethernet padding excluded).
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(self.header_len()..usize::from(self.total_len()))
            .unwrap_or(&[])
    }

    /// Walks the options (RFC 791 §3.1): EOL (0) ends the list, NOP (1) is one byte, any other
    /// option carries a length byte that must be ≥ 2 and stay inside the header.
    pub fn check_options(&self) -> Result<()> {
        let opts = self.options();
        let mut i = 0;
        while let Some(&kind) = opts.get(i) {
            match kind {
                0 => break,
                1 => i += 1,
                _ => {
                    let len = usize::from(*opts.get(i + 1).ok_or(Error::BadOptionLength)?);
                    if len < 2 || i + len > opts.len() {
                        return Err(Error::BadOptionLength);
                    }
                    i += len;
                }
            }
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    fn put8(&mut self, i: usize, v: u8) {
        if let Some(dst) = self.buffer.as_mut().get_mut(i) {
            *dst = v;
        }
    }
    /// Sets version and header length (`header_len` bytes, a multiple of 4 between 20 and 60).
    pub fn set_version_and_header_len(&mut self, version: u8, header_len: usize) {
        self.put8(
            field::VER_IHL,
            (version << 4) | ((header_len / 4) as u8 & 0x0f),
        );
    }
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.put8(field::DSCP_ECN, (dscp << 2) | (ecn & 0x03));
    }
    pub fn set_total_len(&mut self, v: u16) {
        self.put(field::TOTAL_LEN, &v.to_be_bytes());
    }
    pub fn set_ident(&mut self, v: u16) {
        self.put(field::IDENT, &v.to_be_bytes());
    }
    /// Sets DF, MF and the offset (`frag_offset_bytes` must be a multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, frag_offset_bytes: u16) {
        let mut v = (frag_offset_bytes >> 3) & FRAG_OFFSET_MASK;
        if dont_frag {
            v |= FLAG_DF;
        }
        if more_frags {
            v |= FLAG_MF;
        }
        self.put(field::FLAGS_FRAG, &v.to_be_bytes());
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.put8(field::TTL, v);
    }
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.put8(field::PROTOCOL, p.0);
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.put(field::CHECKSUM, &v.to_be_bytes());
    }
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.put(field::SRC, &a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.put(field::DST, &a.octets());
    }
    /// Recomputes the header checksum over the current header.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = self.b().get(..self.header_len()).map_or(0, checksum::sum);
        self.set_checksum(checksum::finish(c));
    }
    /// Decrements TTL and patches the checksum incrementally (RFC 1624 §3, as a router does).
    pub fn decrement_hop_limit(&mut self) {
        let ttl = self.hop_limit();
        let old = u16::from_be_bytes([ttl, self.protocol().0]);
        let new_ttl = ttl.saturating_sub(1);
        let new = u16::from_be_bytes([new_ttl, self.protocol().0]);
        self.set_hop_limit(new_ttl);
        let c = checksum::update(self.checksum(), old, new);
        self.set_checksum(c);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        self.buffer.as_mut().get_mut(h..t).unwrap_or(&mut [])
    }
}

/// The meaningful fields of an IPv4 header. Emit writes a 20-byte header (no options).
///
/// Invariants: `frag_offset_bytes` is a multiple of 8; `dscp` < 64, `ecn` < 4;
/// `20 + payload_len` ≤ 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Bytes of payload after the header (total length − header length).
    pub payload_len: usize,
    pub hop_limit: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    pub frag_offset_bytes: u16,
}

impl Ipv4Repr {
    /// Parses a checked view: options are length-checked and skipped; with
    /// `caps.verify_rx` a header checksum mismatch is `BadChecksum`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, caps: ChecksumCaps) -> Result<Ipv4Repr> {
        packet.check_len()?;
        packet.check_options()?;
        if caps.verify_rx && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset_bytes: packet.frag_offset_bytes(),
        })
    }

    pub fn header_len(&self) -> usize {
        field::HEADER_LEN
    }

    pub fn buffer_len(&self) -> usize {
        field::HEADER_LEN + self.payload_len
    }

    /// Writes the header (not the payload). `BufferTooSmall` if the packet cannot hold the
    /// header, `BadTotalLength` if the total length does not fit 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
        caps: ChecksumCaps,
    ) -> Result<()> {
        if packet.buffer.as_ref().len() < field::HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let total_len = u16::try_from(self.buffer_len()).map_err(|_| Error::BadTotalLength)?;
        packet.set_version_and_header_len(4, field::HEADER_LEN);
        packet.set_dscp_ecn(self.dscp, self.ecn);
        packet.set_total_len(total_len);
        packet.set_ident(self.ident);
        packet.set_frag(self.dont_frag, self.more_frags, self.frag_offset_bytes);
        packet.set_hop_limit(self.hop_limit);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        if caps.fill_tx {
            packet.fill_checksum();
        } else {
            packet.set_checksum(0);
        }
        Ok(())
    }
}

impl core::fmt::Display for Ipv4Repr {
    /// `10.0.0.1 > 10.0.0.2 tcp ttl 64 id 7 len 40 DF` (plus `MF`, `off N` for fragments).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} > {} {} ttl {} id {} len {}",
            self.src_addr,
            self.dst_addr,
            self.protocol,
            self.hop_limit,
            self.ident,
            self.payload_len
        )?;
        if self.dont_frag {
            f.write_str(" DF")?;
        }
        if self.more_frags {
            f.write_str(" MF")?;
        }
        if self.frag_offset_bytes != 0 {
            write!(f, " off {}", self.frag_offset_bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real IPv4 header (Wikipedia's checksum example): checksum 0xb861.
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn known_header_checksum_verifies_and_fields_parse() {
        let mut buf = [0u8; 0x73];
        buf[..20].copy_from_slice(&HEADER);
        let p = Ipv4Packet::new_checked(&buf[..]).expect("valid");
        let r = Ipv4Repr::parse(&p, ChecksumCaps::ALL).expect("checksum ok");
        assert!(r.dont_frag && !r.more_frags && r.frag_offset_bytes == 0);
        assert_eq!(r.protocol, IpProtocol::UDP);
        assert_eq!(r.payload_len, 0x73 - 20);
        assert_eq!(r.src_addr, Ipv4Addr::new(192, 168, 0, 1));
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut buf = [0u8; 0x73];
        buf[..20].copy_from_slice(&HEADER);
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).expect("valid");
        p.decrement_hop_limit();
        assert_eq!(p.hop_limit(), 0x3f);
        assert!(p.verify_checksum());
    }

    #[test]
    fn options_are_skipped_and_payload_starts_after_them() {
        let mut buf = [0u8; 32];
        buf[..20].copy_from_slice(&HEADER);
        buf[0] = 0x46; // IHL 6
        buf[2..4].copy_from_slice(&32u16.to_be_bytes());
        buf[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // router alert (RFC 2113)
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).expect("valid");
        p.fill_checksum();
        let r = Ipv4Repr::parse(&p, ChecksumCaps::ALL).expect("valid options");
        assert_eq!(r.payload_len, 8);
        assert_eq!(p.payload().len(), 8);
    }
}
