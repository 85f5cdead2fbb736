//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! `htype(2)=1 ptype(2)=0x0800 hlen(1)=6 plen(1)=4 oper(2) sha(6) spa(4) tha(6) tpa(4)`

use core::net::Ipv4Addr;

use crate::error::{Error, Result};
use crate::ethernet::{EtherType, EthernetAddress};

pub mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const PACKET_LEN: usize = 28;
}

/// ARP hardware type for Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    pub const REQUEST: ArpOperation = ArpOperation(1);
    pub const REPLY: ArpOperation = ArpOperation(2);
}

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

fn ip(b: &[u8], r: core::ops::Range<usize>) -> Ipv4Addr {
    match b.get(r) {
        Some(&[a, b, c, d]) => Ipv4Addr::new(a, b, c, d),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

/// Checked view of an ARP packet. After `new_checked` the buffer holds the 8-byte fixed part
/// and the four addresses its hlen/plen announce.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the fixed part or the addresses it announces do not fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.b().len();
        if len < 8 {
            return Err(Error::Truncated);
        }
        let addrs = 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()));
        if len < 8 + addrs {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn hardware_type(&self) -> u16 {
        be16(self.b(), field::HTYPE)
    }
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.b(), field::PTYPE))
    }
    pub fn hardware_len(&self) -> u8 {
        self.b().get(field::HLEN).copied().unwrap_or(0)
    }
    pub fn protocol_len(&self) -> u8 {
        self.b().get(field::PLEN).copied().unwrap_or(0)
    }
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(be16(self.b(), field::OPER))
    }
    /// The following accessors assume the Ethernet/IPv4 layout (hlen 6, plen 4).
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        self.b()
            .get(field::SHA)
            .and_then(EthernetAddress::from_bytes)
            .unwrap_or_default()
    }
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        ip(self.b(), field::SPA)
    }
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        self.b()
            .get(field::THA)
            .and_then(EthernetAddress::from_bytes)
            .unwrap_or_default()
    }
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        ip(self.b(), field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
}

/// An ARP packet for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    pub operation: ArpOperation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// `Unsupported` unless htype 1 / ptype 0x0800 / hlen 6 / plen 4 and operation 1 or 2.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        packet.check_len()?;
        let op = packet.operation();
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
            || !(op == ArpOperation::REQUEST || op == ArpOperation::REPLY)
        {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: op,
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::PACKET_LEN
    }

    /// `BufferTooSmall` if the buffer is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) -> Result<()> {
        if packet.b().len() < field::PACKET_LEN {
            return Err(Error::BufferTooSmall);
        }
        packet.put(field::HTYPE, &HTYPE_ETHERNET.to_be_bytes());
        packet.put(field::PTYPE, &EtherType::IPV4.0.to_be_bytes());
        packet.put(field::HLEN..field::PLEN + 1, &[6, 4]);
        packet.put(field::OPER, &self.operation.0.to_be_bytes());
        packet.put(field::SHA, &self.source_hardware_addr.0);
        packet.put(field::SPA, &self.source_protocol_addr.octets());
        packet.put(field::THA, &self.target_hardware_addr.0);
        packet.put(field::TPA, &self.target_protocol_addr.octets());
        Ok(())
    }
}
