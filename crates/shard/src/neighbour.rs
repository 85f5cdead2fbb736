//! Which received frames every shard must see.
//!
//! All shards of a host share its addresses, but a frame reaches one shard only. Neighbour
//! resolution frames (ARP, IPv6 neighbour discovery) teach a neighbour cache, and every shard
//! keeps its own: the shard that polls one processes it and copies it to the others
//! ([`crate::ShardConfig::copy_neighbour`]).

use wire::{ArpOperation, ArpPacket, EtherType, EthernetFrame, IpProtocol};

/// ICMPv6 types of neighbour discovery (RFC 4861 §4): Router Solicitation (133) through
/// Redirect (137).
const ND_TYPES: core::ops::RangeInclusive<u8> = 133..=137;
/// Bytes of the fixed IPv6 header.
const IPV6_HDR_BYTES: usize = 40;
/// Offset of the Next Header field in the IPv6 header.
const IPV6_NEXT_HEADER: usize = 6;

/// Frames every shard's neighbour state needs: ARP (requests and replies), IPv6 neighbour
/// discovery (ICMPv6 types 133..=137 directly after a fixed IPv6 header), and any other frame
/// that is neither IPv4 nor IPv6 (it carries no RSS hash, so no shard owns it). Frames too
/// short for an Ethernet header are nobody's.
pub fn is_neighbour_frame(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    match eth.ethertype() {
        EtherType::ARP => true,
        EtherType::IPV4 => false,
        EtherType::IPV6 => {
            let ip = eth.payload();
            ip.get(IPV6_NEXT_HEADER) == Some(&IpProtocol::ICMPV6.0)
                && ip.get(IPV6_HDR_BYTES).is_some_and(|t| ND_TYPES.contains(t))
        }
        _ => true,
    }
}

/// An ARP reply: the frame a host's NIC hands to every shard (RFC 826: the target of a reply
/// learns the sender), so each shard's neighbour cache learns a peer one shard asked for.
pub fn is_arp_reply(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    eth.ethertype() == EtherType::ARP
        && ArpPacket::new_checked(eth.payload()).is_ok_and(|a| a.operation() == ArpOperation::REPLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ethertype: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    }

    #[test]
    fn arp_and_neighbor_discovery_are_neighbour_frames_tcp_is_not() {
        assert!(is_neighbour_frame(&frame(0x0806, 42)));
        let mut tcp = frame(0x0800, 54);
        tcp[14] = 0x45;
        tcp[14 + 9] = 6;
        assert!(!is_neighbour_frame(&tcp));
        let mut ns = frame(0x86dd, 14 + 40 + 24);
        ns[14] = 0x60;
        ns[14 + 6] = 58;
        for (ty, nd) in [
            (135u8, true),
            (136, true),
            (133, true),
            (137, true),
            (138, false),
            (128, false),
            (1, false),
        ] {
            ns[54] = ty;
            assert_eq!(is_neighbour_frame(&ns), nd, "icmpv6 type {ty}");
        }
        assert!(is_neighbour_frame(&frame(0x88cc, 60)), "LLDP has no owner");
        assert!(!is_neighbour_frame(&[0u8; 5]), "a runt is nobody's");
    }
}
