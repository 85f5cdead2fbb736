//! UDP (RFC 768; IPv6 rules from RFC 8200 §8.1).
//!
//! `src port(2) dst port(2) length(2) checksum(2) data`

use crate::checksum::{self, ChecksumCaps};
use crate::error::{Error, Result};
use crate::ip::{IpPair, IpProtocol};

pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const HEADER_LEN: usize = 8;
}

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

/// Checked view of a UDP datagram.
///
/// After `new_checked`: 8 ≤ length field ≤ buffer length.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` (< 8 bytes), `BadUdpLength` (length field < 8 or past the buffer).
    pub fn check_len(&self) -> Result<()> {
        let len = self.b().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(self.len());
        if l < field::HEADER_LEN || l > len {
            return Err(Error::BadUdpLength);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT)
    }
    /// The length field: header plus data, in bytes.
    pub fn len(&self) -> u16 {
        be16(self.b(), field::LENGTH)
    }
    /// True when the length field is zero (always malformed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    /// The data the length field covers.
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(field::HEADER_LEN..usize::from(self.len()))
            .unwrap_or(&[])
    }
    /// True when the checksum verifies. A zero checksum means "not computed" and passes over
    /// IPv4 (RFC 768) but fails over IPv6, where it is mandatory (RFC 8200 §8.1).
    pub fn verify_checksum(&self, addrs: &IpPair) -> bool {
        if self.checksum() == 0 {
            return !addrs.is_ipv6();
        }
        let len = self.len();
        let ph = addrs.pseudo_header_sum(IpProtocol::UDP, u32::from(len));
        let data = self.b().get(..usize::from(len)).unwrap_or(&[]);
        checksum::combine(&[ph, checksum::sum(data)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: u16) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(&v.to_be_bytes());
        }
    }
    pub fn set_src_port(&mut self, v: u16) {
        self.put(field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        self.put(field::DST_PORT, v);
    }
    pub fn set_len(&mut self, v: u16) {
        self.put(field::LENGTH, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.put(field::CHECKSUM, v);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        self.buffer
            .as_mut()
            .get_mut(field::HEADER_LEN..l)
            .unwrap_or(&mut [])
    }
    /// Computes the checksum over the length the header announces; a computed zero is sent as
    /// 0xffff (RFC 768).
    pub fn fill_checksum(&mut self, addrs: &IpPair) {
        self.set_checksum(0);
        let len = self.len();
        let ph = addrs.pseudo_header_sum(IpProtocol::UDP, u32::from(len));
        let data = self.b().get(..usize::from(len)).unwrap_or(&[]);
        let c = checksum::finish(checksum::combine(&[ph, checksum::sum(data)]));
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

/// The meaningful fields of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: &'a [u8],
}

impl<'a> UdpRepr<'a> {
    /// Errors: the view's length errors, `BadChecksum` when `caps.verify_rx` and it fails
    /// (including a zero checksum over IPv6).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&'a T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) -> Result<UdpRepr<'a>> {
        packet.check_len()?;
        if caps.verify_rx && !packet.verify_checksum(addrs) {
            return Err(Error::BadChecksum);
        }
        let buf: &'a T = packet.buffer;
        let bytes: &'a [u8] = buf.as_ref();
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload: bytes
                .get(field::HEADER_LEN..usize::from(packet.len()))
                .unwrap_or(&[]),
        })
    }

    pub fn header_len(&self) -> usize {
        field::HEADER_LEN
    }

    pub fn buffer_len(&self) -> usize {
        field::HEADER_LEN + self.payload.len()
    }

    /// Writes header and payload. `BufferTooSmall` if the buffer is shorter than
    /// `buffer_len()`, `BadUdpLength` if the datagram exceeds 65535 bytes. Without
    /// `caps.fill_tx` the checksum field holds the pseudo-header sum (partial offload).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
    ) -> Result<()> {
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::BadUdpLength)?;
        if packet.b().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.payload_mut().copy_from_slice(self.payload);
        if caps.fill_tx {
            packet.fill_checksum(addrs);
        } else {
            packet.set_checksum(addrs.pseudo_header_sum(IpProtocol::UDP, u32::from(len)));
        }
        Ok(())
    }
}

impl core::fmt::Display for UdpRepr<'_> {
    /// `53 > 5353 udp len 3` (payload bytes).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} > {} udp len {}",
            self.src_port,
            self.dst_port,
            self.payload.len()
        )
    }
}
