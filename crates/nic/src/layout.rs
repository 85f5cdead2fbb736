//! Where the headers of an Ethernet frame sit: what checksum offload, GRO and TSO need.
//!
//! Parsing goes through `wire`'s checked views; the result is a set of offsets that are
//! valid for the frame they came from (every accessor below uses `get`, never indexing, so a
//! stale layout cannot panic either).

use rss::{EthernetWalk, FlowFields, FrameError, SteerDecision, Steering};
use wire::checksum;
use wire::{CsumVerdict, RxChecksum};
use wire::{
    EtherType, EthernetFrame, IpPair, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket,
    VlanTag,
};

/// IP version of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum L3 {
    V4,
    V6,
}

/// Header offsets of an IP frame.
///
/// Invariants: `l3_off < l4_off <= ip_end <= frame.len()`; for IPv4, `l3_off + 20 <= l4_off`;
/// `ip_end` is where the IP packet ends (Ethernet padding after it is not part of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub l3: L3,
    pub l3_off: usize,
    pub l4_off: usize,
    pub ip_end: usize,
    /// Upper-layer protocol (IPv4 protocol, or IPv6 next header when no extension headers).
    pub protocol: IpProtocol,
    pub addrs: IpPair,
    /// IPv4 fragment, or IPv6 with extension headers: no L4 processing.
    pub l4_opaque: bool,
    /// IPv4 header has options (GRO does not coalesce those).
    pub ip_options: bool,
}

/// Why a frame has no IP layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayoutError {
    /// Not IPv4/IPv6 (ARP, LLDP, …): fine, just nothing to do.
    NotIp,
    /// Claims to be IP but is malformed.
    Malformed,
}

/// What the NIC's one parse of a received frame found: the steering decision (filters, then
/// the RSS hash of the flow fields `rss` extracts from the same checked views: computed once)
/// and the header layout checksum offload and coalescing use. Nothing else parses a received
/// frame's headers before the stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxParse {
    /// Filters → RSS → default queue; no hash for a non-IP frame (or more VLAN tags than
    /// walked).
    pub decision: SteerDecision,
    /// Header layout; `None` for a non-IP frame, and for IP behind an 802.1ad tag or two tags
    /// (the offloads handle one 802.1Q tag at most; such frames are still hashed).
    pub layout: Option<Layout>,
    /// The outer VLAN tag, when the frame has one (or two).
    pub vlan: Option<VlanTag>,
}

impl RxParse {
    /// Parses a received frame once. An error: truncated link layer, malformed IP, or a
    /// TCP/UDP non-fragment too short for its ports (the NIC drops it as malformed).
    #[inline]
    pub(crate) fn parse(frame: &[u8], steering: &Steering) -> Result<RxParse, FrameError> {
        let Some(walk) = EthernetWalk::parse(frame)? else {
            return Ok(RxParse {
                decision: steering.no_hash_decision(),
                layout: None,
                vlan: None,
            });
        };
        let vlan = walk.outer_tag.map(|(_, tci)| VlanTag::from_tci(tci));
        let offloads = walk.vlan_tags == 0
            || (walk.vlan_tags == 1
                && walk.outer_tag.map(|(tpid, _)| tpid) == Some(EtherType::VLAN.0));
        let l3_off = walk.l3_offset;
        let l3 = frame.get(l3_off..).unwrap_or(&[]);
        let (decision, layout) = if walk.ethertype == EtherType::IPV4.0 {
            let ip = Ipv4Packet::new_checked(l3).map_err(FrameError::Ipv4)?;
            let fields = FlowFields::from_ipv4(&ip)?;
            let layout = offloads.then(|| Layout::v4(l3_off, &ip));
            (steering.steer_fields(&fields), layout)
        } else if walk.ethertype == EtherType::IPV6.0 {
            let ip = Ipv6Packet::new_checked(l3).map_err(FrameError::Ipv6)?;
            let fields = FlowFields::from_ipv6(&ip)?;
            let layout = offloads.then(|| Layout::v6(l3_off, &ip));
            (steering.steer_fields(&fields), layout)
        } else {
            (steering.no_hash_decision(), None)
        };
        Ok(RxParse {
            decision,
            layout,
            vlan,
        })
    }
}

impl Layout {
    /// The layout of a frame to transmit (Ethernet with at most one 802.1Q tag).
    pub(crate) fn parse(frame: &[u8]) -> Result<Layout, LayoutError> {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| LayoutError::Malformed)?;
        let l3_off = eth.header_len();
        let ethertype = eth.ethertype();
        let l3_bytes = frame.get(l3_off..).ok_or(LayoutError::Malformed)?;
        if ethertype == EtherType::IPV4 {
            let ip = Ipv4Packet::new_checked(l3_bytes).map_err(|_| LayoutError::Malformed)?;
            Ok(Layout::v4(l3_off, &ip))
        } else if ethertype == EtherType::IPV6 {
            let ip = Ipv6Packet::new_checked(l3_bytes).map_err(|_| LayoutError::Malformed)?;
            Ok(Layout::v6(l3_off, &ip))
        } else {
            Err(LayoutError::NotIp)
        }
    }

    /// The layout of a checked IPv4 packet at `l3_off`.
    #[inline]
    fn v4(l3_off: usize, ip: &Ipv4Packet<&[u8]>) -> Layout {
        let hl = ip.header_len();
        let total = usize::from(ip.total_len());
        Layout {
            l3: L3::V4,
            l3_off,
            l4_off: l3_off + hl,
            ip_end: l3_off + total,
            protocol: ip.protocol(),
            addrs: IpPair::V4 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            },
            l4_opaque: ip.is_fragment(),
            ip_options: hl > 20,
        }
    }

    /// The layout of a checked IPv6 packet at `l3_off` (extension headers make it opaque).
    fn v6(l3_off: usize, ip: &Ipv6Packet<&[u8]>) -> Layout {
        let next = ip.next_header();
        let plain = next == IpProtocol::TCP || next == IpProtocol::UDP;
        Layout {
            l3: L3::V6,
            l3_off,
            l4_off: l3_off + 40,
            ip_end: l3_off + 40 + usize::from(ip.payload_len()),
            protocol: next,
            addrs: IpPair::V6 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            },
            l4_opaque: !plain,
            ip_options: !plain,
        }
    }

    /// The L4 segment (TCP/UDP header + payload), without Ethernet padding.
    pub(crate) fn l4<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        frame.get(self.l4_off..self.ip_end).unwrap_or(&[])
    }

    /// The TCP view of a frame, if it carries a well-formed, non-fragmented TCP segment.
    pub(crate) fn tcp<'a>(&self, frame: &'a [u8]) -> Option<TcpPacket<&'a [u8]>> {
        if self.l4_opaque || self.protocol != IpProtocol::TCP {
            return None;
        }
        TcpPacket::new_checked(self.l4(frame)).ok()
    }
}

/// Verifies the IPv4 header checksum and the TCP/UDP checksum, as a NIC with receive
/// checksum offload does (the verdicts the 82599 reports in IPCS/L4CS with IPE/TCPE). The second value is the folded sum of the TCP segment's bytes
/// (header and payload) when it was computed, so coalescing can reuse it instead of summing
/// the payload again.
pub(crate) fn verify_checksums(frame: &[u8], layout: &Layout) -> (RxChecksum, Option<u16>) {
    let mut out = RxChecksum::default();
    if layout.l3 == L3::V4 {
        let ip_bytes = frame.get(layout.l3_off..layout.ip_end).unwrap_or(&[]);
        out.ip = if Ipv4Packet::new_unchecked(ip_bytes).verify_checksum() {
            CsumVerdict::Good
        } else {
            CsumVerdict::Bad
        };
    }
    if layout.l4_opaque {
        return (out, None);
    }
    let l4 = layout.l4(frame);
    let mut tcp_sum = None;
    if layout.protocol == IpProtocol::TCP {
        if TcpPacket::new_checked(l4).is_ok() {
            // RFC 9293 §3.1: pseudo-header + segment sums to all ones when the checksum holds.
            let seg_sum = checksum::sum(l4);
            let len32 = u32::try_from(l4.len()).unwrap_or(u32::MAX);
            let ph = layout.addrs.pseudo_header_sum(IpProtocol::TCP, len32);
            out.l4 = status(checksum::combine(&[ph, seg_sum]) == 0xffff);
            tcp_sum = Some(seg_sum);
        }
    } else if layout.protocol == IpProtocol::UDP {
        if let Ok(udp) = UdpPacket::new_checked(l4) {
            // RFC 768: a zero checksum over IPv4 means "none computed".
            out.l4 = if udp.checksum() == 0 && layout.l3 == L3::V4 {
                CsumVerdict::Unknown
            } else {
                status(udp.verify_checksum(&layout.addrs))
            };
        }
    }
    (out, tcp_sum)
}

/// The verdicts for a frame whose TCP/UDP checksum the device below established: the IPv4
/// header verified here, the transport `Good` when it is TCP or UDP (`Unknown` otherwise, and
/// for a layout whose transport is opaque: a fragment, IPv6 extension headers).
pub(crate) fn l4_valid_checksums(frame: &[u8], layout: &Layout) -> RxChecksum {
    let mut out = RxChecksum::default();
    if layout.l3 == L3::V4 {
        let ip_bytes = frame.get(layout.l3_off..layout.ip_end).unwrap_or(&[]);
        out.ip = status(Ipv4Packet::new_unchecked(ip_bytes).verify_checksum());
    }
    if !layout.l4_opaque
        && (layout.protocol == IpProtocol::TCP || layout.protocol == IpProtocol::UDP)
    {
        out.l4 = CsumVerdict::Good;
    }
    out
}

fn status(ok: bool) -> CsumVerdict {
    if ok {
        CsumVerdict::Good
    } else {
        CsumVerdict::Bad
    }
}

/// Rewrites the IP length field for an IP packet that now ends at the end of `frame`, and
/// refreshes the IPv4 header checksum.
pub(crate) fn fix_ip_length(frame: &mut [u8], layout: &Layout) {
    let ip_len = frame.len().saturating_sub(layout.l3_off);
    let ip_len16 = u16::try_from(ip_len).unwrap_or(u16::MAX);
    if let Some(l3) = frame.get_mut(layout.l3_off..) {
        match layout.l3 {
            L3::V4 => {
                let mut ip = Ipv4Packet::new_unchecked(l3);
                ip.set_total_len(ip_len16);
                ip.fill_checksum();
            }
            L3::V6 => {
                let mut ip = Ipv6Packet::new_unchecked(l3);
                ip.set_payload_len(ip_len16.saturating_sub(40));
            }
        }
    }
}

/// Fills the TCP/UDP checksum of the segment at `frame[l4_off..end]` (checksum offload).
pub(crate) fn fill_l4_checksum(frame: &mut [u8], layout: &Layout, end: usize) {
    if layout.l4_opaque {
        return;
    }
    let Some(l4) = frame.get_mut(layout.l4_off..end) else {
        return;
    };
    if layout.protocol == IpProtocol::TCP {
        TcpPacket::new_unchecked(l4).fill_checksum(&layout.addrs);
    } else if layout.protocol == IpProtocol::UDP {
        UdpPacket::new_unchecked(l4).fill_checksum(&layout.addrs);
    }
}
