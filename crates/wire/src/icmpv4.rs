//! ICMPv4 (RFC 792): echo, destination unreachable (incl. fragmentation needed with the
//! next-hop MTU of RFC 1191 §4) and time exceeded.
//!
//! `type(1) code(1) checksum(2) rest-of-header(4) data`

use crate::checksum::{self, ChecksumCaps};
use crate::error::{Error, Result};

pub mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Echo identifier / unused / (frag needed) unused(2) + next-hop MTU(2).
    pub const REST_HI: Range<usize> = 4..6;
    pub const REST_LO: Range<usize> = 6..8;
    pub const HEADER_LEN: usize = 8;
}

/// ICMPv4 message types handled here.
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

/// Destination-unreachable code for "fragmentation needed and DF set" (RFC 792, RFC 1191).
pub const CODE_FRAG_NEEDED: u8 = 4;
/// Highest destination-unreachable code defined (RFC 1812 §5.2.7.1).
pub const MAX_DST_UNREACHABLE_CODE: u8 = 15;

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

/// Checked view of an ICMPv4 message; after `new_checked` the buffer holds ≥ 8 bytes.
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// `Truncated` below 8 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.b().len() < field::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn msg_type(&self) -> u8 {
        self.b().get(field::TYPE).copied().unwrap_or(0)
    }
    pub fn msg_code(&self) -> u8 {
        self.b().get(field::CODE).copied().unwrap_or(0)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    /// Echo identifier (first half of the rest-of-header word).
    pub fn echo_ident(&self) -> u16 {
        be16(self.b(), field::REST_HI)
    }
    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.b(), field::REST_LO)
    }
    /// Next-hop MTU of a fragmentation-needed message (RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.b(), field::REST_LO)
    }
    pub fn data(&self) -> &[u8] {
        self.b().get(field::HEADER_LEN..).unwrap_or(&[])
    }
    /// The checksum covers the whole message (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.b()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    pub fn fill_checksum(&mut self) {
        self.put(field::CHECKSUM, &[0, 0]);
        let c = checksum::finish(checksum::sum(self.b()));
        self.put(field::CHECKSUM, &c.to_be_bytes());
    }
}

/// The ICMPv4 messages this crate understands.
///
/// Invariants: `DstUnreachable::code` ≤ 15 and ≠ 4 (code 4 is `FragNeeded`);
/// `TimeExceeded::code` ≤ 1. `data` is the invoking packet's header and leading bytes for
/// errors, the echo payload for echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    DstUnreachable {
        code: u8,
        data: &'a [u8],
    },
    /// Type 3 code 4 with the next-hop MTU (0 from a pre-RFC 1191 router).
    FragNeeded {
        next_hop_mtu: u16,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Errors: `Truncated`, `BadChecksum` (when `caps.verify_rx`), `BadCode` for an
    /// unreachable code > 15 or time-exceeded code > 1, `Unsupported` for other types.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        caps: ChecksumCaps,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if caps.verify_rx && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let buf: &'a T = packet.buffer;
        let data: &'a [u8] = buf.as_ref().get(field::HEADER_LEN..).unwrap_or(&[]);
        let code = packet.msg_code();
        match packet.msg_type() {
            msg_type::ECHO_REQUEST => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::ECHO_REPLY => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::DST_UNREACHABLE if code == CODE_FRAG_NEEDED => Ok(Icmpv4Repr::FragNeeded {
                next_hop_mtu: packet.next_hop_mtu(),
                data,
            }),
            msg_type::DST_UNREACHABLE if code <= MAX_DST_UNREACHABLE_CODE => {
                Ok(Icmpv4Repr::DstUnreachable { code, data })
            }
            msg_type::TIME_EXCEEDED if code <= 1 => Ok(Icmpv4Repr::TimeExceeded { code, data }),
            msg_type::DST_UNREACHABLE | msg_type::TIME_EXCEEDED => Err(Error::BadCode),
            _ => Err(Error::Unsupported),
        }
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::FragNeeded { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. } => data,
        }
    }

    pub fn buffer_len(&self) -> usize {
        field::HEADER_LEN + self.data().len()
    }

    /// Writes the message; `BufferTooSmall` if the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv4Packet<T>,
        caps: ChecksumCaps,
    ) -> Result<()> {
        if packet.b().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        let (t, code, hi, lo) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => {
                (msg_type::ECHO_REQUEST, 0, ident, seq_no)
            }
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => (msg_type::ECHO_REPLY, 0, ident, seq_no),
            Icmpv4Repr::DstUnreachable { code, .. } => (msg_type::DST_UNREACHABLE, code, 0, 0),
            Icmpv4Repr::FragNeeded { next_hop_mtu, .. } => {
                (msg_type::DST_UNREACHABLE, CODE_FRAG_NEEDED, 0, next_hop_mtu)
            }
            Icmpv4Repr::TimeExceeded { code, .. } => (msg_type::TIME_EXCEEDED, code, 0, 0),
        };
        packet.put(field::TYPE..field::CODE + 1, &[t, code]);
        packet.put(field::REST_HI, &hi.to_be_bytes());
        packet.put(field::REST_LO, &lo.to_be_bytes());
        let data = self.data();
        packet.put(field::HEADER_LEN..field::HEADER_LEN + data.len(), data);
        if caps.fill_tx {
            packet.fill_checksum();
        } else {
            packet.put(field::CHECKSUM, &[0, 0]);
        }
        Ok(())
    }
}

/// The flow an ICMPv4 error (`data` of `DstUnreachable`, `FragNeeded`, `TimeExceeded`) is
/// about, from the quoted IPv4 header and the first 8 bytes after it (RFC 792).
///
/// Errors: `Truncated`, `BadVersion`, `BadIhl` for a bad quoted header; `Unsupported` for a
/// protocol other than TCP/UDP or a non-first fragment (which carries no ports).
pub fn quoted_flow(data: &[u8]) -> Result<crate::ip::QuotedFlow> {
    use crate::ipv4::{Ipv4Packet, field as ip_field};
    if data.len() < ip_field::HEADER_LEN {
        return Err(Error::Truncated);
    }
    // The quoted header's total length covers bytes that were not quoted: no `new_checked`.
    let ip = Ipv4Packet::new_unchecked(data);
    if ip.version() != 4 {
        return Err(Error::BadVersion);
    }
    if ip.header_len() < ip_field::HEADER_LEN {
        return Err(Error::BadIhl);
    }
    if ip.frag_offset_bytes() != 0 {
        return Err(Error::Unsupported);
    }
    let addrs = crate::ip::IpPair::V4 {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
    };
    crate::ip::QuotedFlow::from_transport(addrs, ip.protocol(), data, ip.header_len())
}
