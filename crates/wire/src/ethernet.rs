//! Ethernet II frames (IEEE 802.3 §3.2 with the EtherType interpretation) with an optional
//! IEEE 802.1Q VLAN tag.
//!
//! Layout without a tag: `dst(6) src(6) ethertype(2) payload`. With a tag the EtherType field
//! holds 0x8100 (TPID), followed by the TCI (`pcp:3 dei:1 vid:12`) and the inner EtherType.

use core::fmt;

use crate::error::{Error, Result};

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Builds an address from the first 6 bytes of `bytes`; `None` if there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        let b: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(b))
    }

    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit (I/G) set: multicast or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The IPv6 multicast MAC for `addr` (RFC 2464 §7): 33:33 followed by its last 32 bits.
    pub fn ipv6_multicast(addr: core::net::Ipv6Addr) -> EthernetAddress {
        let o = addr.octets();
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// An EtherType value (IEEE Registration Authority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    pub const IPV4: EtherType = EtherType(0x0800);
    pub const ARP: EtherType = EtherType(0x0806);
    pub const VLAN: EtherType = EtherType(0x8100);
    pub const IPV6: EtherType = EtherType(0x86dd);
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// Values below this are IEEE 802.3 length fields, not EtherTypes.
    pub const MIN: u16 = 0x0600;
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}

/// An IEEE 802.1Q tag control information field.
///
/// Invariants: `pcp` ≤ 7, `vid` ≤ 4095 (emit masks wider values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point (802.1p), 3 bits.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 12 bits.
    pub vid: u16,
}

impl VlanTag {
    pub fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    pub fn to_tci(self) -> u16 {
        (u16::from(self.pcp & 0x7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

pub mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Tag control information, present only when ETHERTYPE is 0x8100.
    pub const VLAN_TCI: Range<usize> = 14..16;
    pub const VLAN_ETHERTYPE: Range<usize> = 16..18;
    pub const HEADER_LEN: usize = 14;
    pub const VLAN_HEADER_LEN: usize = 18;
}

/// Checked view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

#[inline]
fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    match b.get(r) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    }
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps without checking; accessors may return garbage (never panic) on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps and validates the lengths once: `Truncated` if the header (incl. a VLAN tag when
    /// the TPID says there is one) does not fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(self.buffer.as_ref().get(field::DST).unwrap_or(&[0; 6]))
            .unwrap_or_default()
    }

    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(self.buffer.as_ref().get(field::SRC).unwrap_or(&[0; 6]))
            .unwrap_or_default()
    }

    /// The outer EtherType field (0x8100 when tagged).
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// True when an 802.1Q tag follows the source address.
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::VLAN
    }

    /// The 802.1Q tag, if any.
    pub fn vlan_tag(&self) -> Option<VlanTag> {
        self.is_tagged()
            .then(|| VlanTag::from_tci(be16(self.buffer.as_ref(), field::VLAN_TCI)))
    }

    /// The EtherType of the payload (the inner one when tagged).
    pub fn ethertype(&self) -> EtherType {
        if self.is_tagged() {
            EtherType(be16(self.buffer.as_ref(), field::VLAN_ETHERTYPE))
        } else {
            self.outer_ethertype()
        }
    }

    /// 14, or 18 with a VLAN tag.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            field::VLAN_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// The bytes after the header (may include trailing Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(self.header_len()..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(r) {
            dst.copy_from_slice(v);
        }
    }
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.put(field::DST, &a.0);
    }
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.put(field::SRC, &a.0);
    }
    /// Writes the outer EtherType field (0x8100 makes the frame tagged).
    pub fn set_outer_ethertype(&mut self, t: EtherType) {
        self.put(field::ETHERTYPE, &t.0.to_be_bytes());
    }
    /// Writes TPID + TCI; the frame must be large enough for the tagged header.
    pub fn set_vlan_tag(&mut self, tag: VlanTag) {
        self.set_outer_ethertype(EtherType::VLAN);
        self.put(field::VLAN_TCI, &tag.to_tci().to_be_bytes());
    }
    /// Writes the payload EtherType (the inner field when the frame is tagged).
    pub fn set_ethertype(&mut self, t: EtherType) {
        if self.is_tagged() {
            self.put(field::VLAN_ETHERTYPE, &t.0.to_be_bytes());
        } else {
            self.set_outer_ethertype(t);
        }
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        self.buffer.as_mut().get_mut(h..).unwrap_or(&mut [])
    }
}

/// The meaningful fields of an Ethernet II header.
///
/// Invariant: `ethertype` ≥ 0x0600 and is neither 0x8100 nor 0x88a8 (only one tag is carried).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub vlan: Option<VlanTag>,
    /// The EtherType of the payload (inner one when tagged).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// `Unsupported` for 802.3 length fields (< 0x0600) and stacked tags (Q-in-Q).
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        let ethertype = frame.ethertype();
        if ethertype.0 < EtherType::MIN
            || ethertype == EtherType::VLAN
            || ethertype == EtherType::QINQ
            || frame.outer_ethertype() == EtherType::QINQ
        {
            return Err(Error::Unsupported);
        }
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: frame.vlan_tag(),
            ethertype,
        })
    }

    pub fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            field::VLAN_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// Writes the header; `BufferTooSmall` if the frame cannot hold it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        if frame.buffer.as_ref().len() < self.header_len() {
            return Err(Error::BufferTooSmall);
        }
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        match self.vlan {
            Some(tag) => {
                frame.set_vlan_tag(tag);
                frame.put(field::VLAN_ETHERTYPE, &self.ethertype.0.to_be_bytes());
            }
            None => frame.set_outer_ethertype(self.ethertype),
        }
        Ok(())
    }
}

impl fmt::Display for EthernetRepr {
    /// `02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff type 0x0806` plus `vlan N` when tagged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} > {}", self.src_addr, self.dst_addr)?;
        if let Some(tag) = self.vlan {
            write!(f, " vlan {} pcp {}", tag.vid, tag.pcp)?;
        }
        write!(f, " type {}", self.ethertype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_frame_exposes_tag_and_inner_ethertype() {
        let mut b = [0u8; 22];
        b[12..14].copy_from_slice(&[0x81, 0x00]);
        b[14..16].copy_from_slice(&[0xa0, 0x64]); // pcp 5, dei 0, vid 100
        b[16..18].copy_from_slice(&[0x86, 0xdd]);
        let f = EthernetFrame::new_checked(&b[..]).expect("valid");
        assert_eq!(
            f.vlan_tag(),
            Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(f.ethertype(), EtherType::IPV6);
        assert_eq!(f.payload().len(), 4);
    }

    #[test]
    fn tagged_frame_shorter_than_tag_is_truncated() {
        let mut b = [0u8; 16];
        b[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(
            EthernetFrame::new_checked(&b[..]).err(),
            Some(Error::Truncated)
        );
    }
}
