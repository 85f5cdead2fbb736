//! Completing a TCP or UDP checksum a sender left to offload (Linux `CHECKSUM_PARTIAL`).
//!
//! A Linux sender that expects the NIC to checksum writes only the pseudo-header sum into the
//! TCP/UDP checksum field. A frame read from a packet socket on the same host (AF_PACKET with
//! `TP_STATUS_CSUMNOTREADY`, AF_XDP on a veth) arrives that way; a receiving port completes it
//! before the frame enters the NIC model, as the hardware on a real wire would have.
//!
//! Parsing goes through the checked views ([`EthernetFrame`], [`Ipv4Packet`], [`Ipv6Packet`]):
//! Ethernet (an 802.1Q tag allowed) + IPv4 of any header length that is not a fragment, or
//! IPv6 without extension headers, carrying TCP or UDP. Anything else is left unchanged.

use crate::checksum::{combine, finish, pseudo_header_v4, pseudo_header_v6, sum};
use crate::ethernet::{EtherType, EthernetFrame};
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::Ipv6Packet;

/// Offset of the checksum field in a TCP header (RFC 9293 §3.1) and a UDP header (RFC 768).
const TCP_CHECKSUM_OFFSET: usize = 16;
const UDP_CHECKSUM_OFFSET: usize = 6;
/// Bytes of the fixed IPv6 header (RFC 8200 §3).
const IPV6_HEADER_BYTES: usize = 40;
/// Shortest headers that hold the checksum field.
const TCP_HEADER_MIN_BYTES: usize = 20;
const UDP_HEADER_BYTES: usize = 8;

/// Where a frame's transport checksum lives. Invariant: `seg_off + seg_len <= frame.len()` and
/// `field + 2 <= seg_len` for the frame it was found in.
struct Span {
    seg_off: usize,
    seg_len: usize,
    field: usize,
    pseudo: u16,
    udp: bool,
}

/// Finds the TCP/UDP segment of `frame` and its checksum field; `None` for anything this
/// module does not complete (see the module docs) or when the lengths do not fit the frame.
fn span(frame: &[u8]) -> Option<Span> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let l3_off = eth.header_len();
    let (l4_rel, seg_len, proto, pseudo) = match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            if ip.is_fragment() {
                return None;
            }
            let hdr = ip.header_len();
            let len = usize::from(ip.total_len()).checked_sub(hdr)?;
            let proto = ip.protocol();
            let pseudo = pseudo_header_v4(ip.src_addr(), ip.dst_addr(), proto.0, len as u32);
            (hdr, len, proto, pseudo)
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            let len = usize::from(ip.payload_len());
            let proto = ip.next_header();
            let pseudo = pseudo_header_v6(ip.src_addr(), ip.dst_addr(), proto.0, len as u32);
            (IPV6_HEADER_BYTES, len, proto, pseudo)
        }
        _ => return None,
    };
    let (field, udp) = match proto {
        IpProtocol::TCP if seg_len >= TCP_HEADER_MIN_BYTES => (TCP_CHECKSUM_OFFSET, false),
        IpProtocol::UDP if seg_len >= UDP_HEADER_BYTES => (UDP_CHECKSUM_OFFSET, true),
        _ => return None,
    };
    let seg_off = l3_off + l4_rel;
    (seg_off.checked_add(seg_len)? <= frame.len()).then_some(Span {
        seg_off,
        seg_len,
        field,
        pseudo,
        udp,
    })
}

/// Writes the full checksum into the segment `sp` names.
fn complete(frame: &mut [u8], sp: &Span) -> bool {
    let Some(seg) = frame.get_mut(sp.seg_off..sp.seg_off + sp.seg_len) else {
        return false;
    };
    let Some(field) = seg.get_mut(sp.field..sp.field + 2) else {
        return false;
    };
    field.copy_from_slice(&[0, 0]);
    let mut c = finish(combine(&[sp.pseudo, sum(seg)]));
    if sp.udp && c == 0 {
        // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
        c = 0xffff;
    }
    if let Some(field) = seg.get_mut(sp.field..sp.field + 2) {
        field.copy_from_slice(&c.to_be_bytes());
    }
    true
}

/// Completes the TCP or UDP checksum of a frame whose sender left it to offload (the field
/// holds the pseudo-header sum only): recomputes it over the pseudo-header and the whole
/// segment. Returns `false`, leaving the frame unchanged, for frames it does not handle (see
/// the module docs) or whose lengths do not fit.
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    match span(frame) {
        Some(sp) => complete(frame, &sp),
        None => false,
    }
}

/// For ports that cannot tell whether the sender left the checksum to offload (AF_XDP on a
/// veth gives the program the frame with no such flag): when the TCP/UDP checksum field holds
/// exactly the pseudo-header sum — what Linux writes before offload — complete it and return
/// `true`. Completing is idempotent, so a frame whose correct checksum happens to equal that
/// sum is unchanged; the only frames accepted that would otherwise fail are corrupted ones
/// whose field happens to hold that one value (a 2⁻¹⁶ chance per corrupted frame).
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Some(sp) = span(frame) else {
        return false;
    };
    let at = sp.seg_off + sp.field;
    let field = frame
        .get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]));
    field == Some(sp.pseudo) && complete(frame, &sp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame (20-byte headers) with `payload`, checksums correct.
    fn tcp_v4_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = (40 + payload.len()) as u16;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18;
        f.extend_from_slice(payload);
        assert!(complete_l4_checksum(&mut f));
        f
    }

    #[test]
    fn a_pseudo_header_only_checksum_is_completed_to_the_full_one() {
        let good = tcp_v4_frame(b"hello, offload");
        // What a sender with checksum offload puts in the field: the pseudo-header sum.
        let mut partial = good.clone();
        let pseudo = crate::checksum::pseudo_header_v4(
            core::net::Ipv4Addr::new(10, 0, 0, 2),
            core::net::Ipv4Addr::new(10, 0, 0, 1),
            6,
            (20 + 14) as u32,
        );
        partial[34 + 16..34 + 18].copy_from_slice(&pseudo.to_be_bytes());
        assert_ne!(partial, good);
        assert!(complete_l4_checksum(&mut partial));
        assert_eq!(partial, good);
        // The completed segment verifies: its sum with the pseudo-header is all ones.
        let seg = &good[34..];
        assert_eq!(
            crate::checksum::combine(&[pseudo, crate::checksum::sum(seg)]),
            0xffff
        );
    }

    #[test]
    fn only_a_field_holding_the_pseudo_header_sum_is_taken_for_partial() {
        let good = tcp_v4_frame(b"xdp on a veth");
        let mut same = good.clone();
        assert!(
            !complete_if_partial(&mut same),
            "a correct checksum is not partial"
        );
        assert_eq!(same, good);
        let pseudo = crate::checksum::pseudo_header_v4(
            core::net::Ipv4Addr::new(10, 0, 0, 2),
            core::net::Ipv4Addr::new(10, 0, 0, 1),
            6,
            (20 + 13) as u32,
        );
        let mut partial = good.clone();
        partial[34 + 16..34 + 18].copy_from_slice(&pseudo.to_be_bytes());
        assert!(complete_if_partial(&mut partial));
        assert_eq!(partial, good);
        let mut corrupt = good.clone();
        corrupt[34 + 16] ^= 0x40;
        let before = corrupt.clone();
        assert!(
            !complete_if_partial(&mut corrupt),
            "other bad checksums stay bad"
        );
        assert_eq!(corrupt, before);
    }

    #[test]
    fn frames_that_cannot_be_completed_are_left_alone() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let before = arp.clone();
        assert!(!complete_l4_checksum(&mut arp));
        assert_eq!(arp, before);
        // An IPv4 total length beyond the frame.
        let mut f = tcp_v4_frame(b"x");
        f.truncate(50);
        let before = f.clone();
        assert!(!complete_l4_checksum(&mut f));
        assert_eq!(f, before);
        assert!(!complete_l4_checksum(&mut []));
    }

    #[test]
    fn udp_over_ipv6_behind_a_vlan_tag_is_completed_and_a_zero_sum_goes_out_as_all_ones() {
        use core::net::Ipv6Addr;
        let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        let payload = b"v6 over 802.1Q";
        let udp_len = 8 + payload.len();
        let mut f = vec![0u8; 18 + 40];
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[14..16].copy_from_slice(&7u16.to_be_bytes());
        f[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
        let ip = &mut f[18..58];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        ip[6] = 17;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&src.octets());
        ip[24..40].copy_from_slice(&dst.octets());
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&5353u16.to_be_bytes());
        udp[2..4].copy_from_slice(&9u16.to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        f.extend_from_slice(&udp);
        f.extend_from_slice(payload);
        let pseudo = crate::checksum::pseudo_header_v6(src, dst, 17, udp_len as u32);
        f[58 + 6..58 + 8].copy_from_slice(&pseudo.to_be_bytes());
        assert!(complete_if_partial(&mut f));
        let field = u16::from_be_bytes([f[58 + 6], f[58 + 7]]);
        assert_ne!(field, 0, "zero means no checksum in UDP");
        let total = crate::checksum::combine(&[pseudo, crate::checksum::sum(&f[58..])]);
        assert_eq!(total, 0xffff, "the completed datagram verifies");
    }
}
