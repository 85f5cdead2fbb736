//! ICMPv6 (RFC 4443): echo, destination unreachable, packet too big, time exceeded; and the
//! Neighbor Discovery messages (RFC 4861 §4.3, §4.4) neighbour solicitation and advertisement
//! with source/target link-layer address options (§4.6.1).
//!
//! `type(1) code(1) checksum(2) message body` — the checksum includes the IPv6 pseudo-header
//! (RFC 4443 §2.3).

use core::net::Ipv6Addr;

use crate::checksum::{self, ChecksumCaps};
use crate::error::{Error, Result};
use crate::ethernet::EthernetAddress;
use crate::ip::IpProtocol;

pub mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Echo identifier / PTB MTU (high half) / NA flags.
    pub const REST: Range<usize> = 4..8;
    pub const HEADER_LEN: usize = 8;
    /// NS/NA target address.
    pub const TARGET: Range<usize> = 8..24;
    pub const NDP_HEADER_LEN: usize = 24;
}

pub mod msg_type {
    pub const DST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// NDP option types (RFC 4861 §4.6).
pub mod ndp_option {
    pub const SOURCE_LLADDR: u8 = 1;
    pub const TARGET_LLADDR: u8 = 2;
}

const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

fn be32(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    match b.get(r) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// Checked view of an ICMPv6 message; after `new_checked` the buffer holds ≥ 8 bytes, and
/// ≥ 24 for NS/NA.
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// `Truncated` below 8 bytes, or below 24 for neighbour solicitation/advertisement.
    pub fn check_len(&self) -> Result<()> {
        let len = self.b().len();
        let need = match self.msg_type() {
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => field::NDP_HEADER_LEN,
            _ => field::HEADER_LEN,
        };
        if len < need {
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
    pub fn echo_ident(&self) -> u16 {
        be16(self.b(), 4..6)
    }
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.b(), 6..8)
    }
    /// The MTU of a packet-too-big message (RFC 4443 §3.2).
    pub fn mtu(&self) -> u32 {
        be32(self.b(), field::REST)
    }
    /// The target address of NS/NA.
    pub fn target_addr(&self) -> Ipv6Addr {
        self.b()
            .get(field::TARGET)
            .and_then(|s| <[u8; 16]>::try_from(s).ok())
            .map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from)
    }
    /// Bytes after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        self.b().get(field::HEADER_LEN..).unwrap_or(&[])
    }
    /// True when the checksum over pseudo-header + message verifies (RFC 4443 §2.3).
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let Ok(len) = u32::try_from(self.b().len()) else {
            return false;
        };
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6.0, len);
        checksum::combine(&[ph, checksum::sum(self.b())]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.put(field::CHECKSUM, &[0, 0]);
        let len = u32::try_from(self.b().len()).unwrap_or(u32::MAX);
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6.0, len);
        let c = checksum::finish(checksum::combine(&[ph, checksum::sum(self.b())]));
        self.put(field::CHECKSUM, &c.to_be_bytes());
    }
}

/// Walks NDP options (RFC 4861 §4.6) and returns the link-layer address carried by the option
/// of type `wanted` (Ethernet: length 1 = 8 bytes); other options are skipped by length.
/// `BadOptionLength` for a length of 0 (§4.6: "MUST silently discard") or an option that
/// overruns the message.
fn find_lladdr(mut opts: &[u8], wanted: u8) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    while let Some(&[t, l]) = opts.get(..2) {
        let len = usize::from(l) * 8;
        if len == 0 {
            return Err(Error::BadOptionLength);
        }
        let opt = opts.get(..len).ok_or(Error::BadOptionLength)?;
        if t == wanted && len == 8 {
            found = opt.get(2..8).and_then(EthernetAddress::from_bytes);
        }
        opts = opts.get(len..).unwrap_or(&[]);
    }
    if !opts.is_empty() {
        // A single trailing byte cannot hold an option header.
        return Err(Error::BadOptionLength);
    }
    Ok(found)
}

/// The ICMPv6 messages this crate understands.
///
/// Invariant: the NS/NA link-layer options are the only options carried (emit writes exactly
/// those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
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
    PacketTooBig {
        mtu: u32,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    NeighborSolicit {
        target_addr: Ipv6Addr,
        source_lladdr: Option<EthernetAddress>,
    },
    NeighborAdvert {
        router: bool,
        solicited: bool,
        override_: bool,
        target_addr: Ipv6Addr,
        target_lladdr: Option<EthernetAddress>,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Errors: `Truncated`, `BadChecksum` (when `caps.verify_rx`), `BadCode` for NS/NA with
    /// code ≠ 0 (RFC 4861 §7.1.1/§7.1.2), `BadOptionLength` for a malformed NDP option,
    /// `Unsupported` for other types.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        caps: ChecksumCaps,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if caps.verify_rx && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let buf: &'a T = packet.buffer;
        let bytes: &'a [u8] = buf.as_ref();
        let data = bytes.get(field::HEADER_LEN..).unwrap_or(&[]);
        let ndp_opts = bytes.get(field::NDP_HEADER_LEN..).unwrap_or(&[]);
        let code = packet.msg_code();
        match packet.msg_type() {
            msg_type::ECHO_REQUEST => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::ECHO_REPLY => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::DST_UNREACHABLE => Ok(Icmpv6Repr::DstUnreachable { code, data }),
            msg_type::PACKET_TOO_BIG => Ok(Icmpv6Repr::PacketTooBig {
                mtu: packet.mtu(),
                data,
            }),
            msg_type::TIME_EXCEEDED => Ok(Icmpv6Repr::TimeExceeded { code, data }),
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT if code != 0 => {
                Err(Error::BadCode)
            }
            msg_type::NEIGHBOR_SOLICIT => Ok(Icmpv6Repr::NeighborSolicit {
                target_addr: packet.target_addr(),
                source_lladdr: find_lladdr(ndp_opts, ndp_option::SOURCE_LLADDR)?,
            }),
            msg_type::NEIGHBOR_ADVERT => {
                let flags = bytes.get(4).copied().unwrap_or(0);
                Ok(Icmpv6Repr::NeighborAdvert {
                    router: flags & NA_ROUTER != 0,
                    solicited: flags & NA_SOLICITED != 0,
                    override_: flags & NA_OVERRIDE != 0,
                    target_addr: packet.target_addr(),
                    target_lladdr: find_lladdr(ndp_opts, ndp_option::TARGET_LLADDR)?,
                })
            }
            _ => Err(Error::Unsupported),
        }
    }

    pub fn buffer_len(&self) -> usize {
        match *self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. } => field::HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit {
                source_lladdr: ll, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_lladdr: ll, ..
            } => field::NDP_HEADER_LEN + if ll.is_some() { 8 } else { 0 },
        }
    }

    /// Writes the message into a buffer of exactly `buffer_len()` bytes (the checksum covers
    /// the whole buffer); `BufferTooSmall` if it is shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        caps: ChecksumCaps,
    ) -> Result<()> {
        let len = self.buffer_len();
        if packet.b().len() < len {
            return Err(Error::BufferTooSmall);
        }
        if let Some(b) = packet.buffer.as_mut().get_mut(..len) {
            b.fill(0);
        }
        let mut rest = [0u8; 4];
        let (t, code, body): (u8, u8, &[u8]) = match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                rest[..2].copy_from_slice(&ident.to_be_bytes());
                rest[2..].copy_from_slice(&seq_no.to_be_bytes());
                let t = if matches!(self, Icmpv6Repr::EchoRequest { .. }) {
                    msg_type::ECHO_REQUEST
                } else {
                    msg_type::ECHO_REPLY
                };
                (t, 0, data)
            }
            Icmpv6Repr::DstUnreachable { code, data } => (msg_type::DST_UNREACHABLE, code, data),
            Icmpv6Repr::PacketTooBig { mtu, data } => {
                rest = mtu.to_be_bytes();
                (msg_type::PACKET_TOO_BIG, 0, data)
            }
            Icmpv6Repr::TimeExceeded { code, data } => (msg_type::TIME_EXCEEDED, code, data),
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                packet.put(field::TARGET, &target_addr.octets());
                if let Some(ll) = source_lladdr {
                    packet.put(24..26, &[ndp_option::SOURCE_LLADDR, 1]);
                    packet.put(26..32, &ll.0);
                }
                (msg_type::NEIGHBOR_SOLICIT, 0, &[])
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                let mut f = 0;
                if router {
                    f |= NA_ROUTER;
                }
                if solicited {
                    f |= NA_SOLICITED;
                }
                if override_ {
                    f |= NA_OVERRIDE;
                }
                rest[0] = f;
                packet.put(field::TARGET, &target_addr.octets());
                if let Some(ll) = target_lladdr {
                    packet.put(24..26, &[ndp_option::TARGET_LLADDR, 1]);
                    packet.put(26..32, &ll.0);
                }
                (msg_type::NEIGHBOR_ADVERT, 0, &[])
            }
        };
        packet.put(field::TYPE..field::CODE + 1, &[t, code]);
        packet.put(field::REST, &rest);
        packet.put(field::HEADER_LEN..field::HEADER_LEN + body.len(), body);
        if caps.fill_tx {
            packet.fill_checksum(src, dst);
        }
        Ok(())
    }
}

/// The flow an ICMPv6 error (`data` of `DstUnreachable`, `PacketTooBig`, `TimeExceeded`) is
/// about, from the quoted IPv6 packet: fixed header, extension headers (bounded walk), then
/// the transport ports (RFC 4443 §2.4(c)).
///
/// Errors: `Truncated`, `BadVersion`, the walk's errors; `Unsupported` for a protocol other
/// than TCP/UDP or a non-first fragment.
pub fn quoted_flow(data: &[u8]) -> Result<crate::ip::QuotedFlow> {
    use crate::ipv6::{self, Ipv6Packet, field as ip_field};
    if data.len() < ip_field::HEADER_LEN {
        return Err(Error::Truncated);
    }
    // The quoted payload length covers bytes that were not quoted: no `new_checked`.
    let ip = Ipv6Packet::new_unchecked(data);
    if ip.version() != 6 {
        return Err(Error::BadVersion);
    }
    let rest = data.get(ip_field::HEADER_LEN..).unwrap_or(&[]);
    let walk = ipv6::walk_ext_headers(ip.next_header(), rest)?;
    if walk.fragment.is_some_and(|f| f.offset_bytes != 0) {
        return Err(Error::Unsupported);
    }
    let addrs = crate::ip::IpPair::V6 {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
    };
    crate::ip::QuotedFlow::from_transport(addrs, walk.upper_protocol, data, walk.upper_offset)
}
