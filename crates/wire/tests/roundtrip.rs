//! Round-trip property tests: for every Repr, emit → parse gives back an equal Repr (with
//! checksums filled on emit and verified on parse).

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use wire::ipv6::{Ipv6ExtHeader, Ipv6FragmentHeader, MAX_EXT_HEADERS};
use wire::tcp::FastOpenOption;
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr, SackBlock, SeqNumber, TcpFlags, TcpPacket, TcpRepr, TcpTimestamp, UdpPacket, UdpRepr,
    VlanTag,
};

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn ip_pair() -> impl Strategy<Value = IpPair> {
    prop_oneof![
        (v4(), v4()).prop_map(|(src, dst)| IpPair::V4 { src, dst }),
        (v6(), v6()).prop_map(|(src, dst)| IpPair::V6 { src, dst }),
    ]
}

fn payload(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn ethertype() -> impl Strategy<Value = EtherType> {
    (0x0600u16..=0xffff)
        .prop_filter("single tag only", |t| *t != 0x8100 && *t != 0x88a8)
        .prop_map(EtherType)
}

fn vlan() -> impl Strategy<Value = Option<VlanTag>> {
    proptest::option::of(
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
    )
}

fn ext_header(first: bool) -> BoxedStrategy<Ipv6ExtHeader> {
    let len = (1u16..=8).prop_map(|u| u * 8);
    let routing = (any::<u8>(), any::<u8>(), len.clone()).prop_map(
        |(routing_type, segments_left, len_bytes)| Ipv6ExtHeader::Routing {
            routing_type,
            segments_left,
            len_bytes,
        },
    );
    let frag = (
        (0u16..8192).prop_map(|o| o * 8),
        any::<bool>(),
        any::<u32>(),
    )
        .prop_map(|(offset_bytes, more_frags, ident)| {
            Ipv6ExtHeader::Fragment(Ipv6FragmentHeader {
                offset_bytes,
                more_frags,
                ident,
            })
        });
    let dst = len
        .clone()
        .prop_map(|len_bytes| Ipv6ExtHeader::DestinationOptions { len_bytes });
    if first {
        let hbh = len.prop_map(|len_bytes| Ipv6ExtHeader::HopByHop { len_bytes });
        prop_oneof![hbh, routing, frag, dst].boxed()
    } else {
        prop_oneof![routing, frag, dst].boxed()
    }
}

fn ext_chain() -> impl Strategy<Value = [Option<Ipv6ExtHeader>; MAX_EXT_HEADERS]> {
    (
        proptest::option::of(ext_header(true)),
        proptest::collection::vec(ext_header(false), 0..MAX_EXT_HEADERS),
    )
        .prop_map(|(first, rest)| {
            let mut chain = [None; MAX_EXT_HEADERS];
            for (slot, h) in chain.iter_mut().zip(first.into_iter().chain(rest)) {
                *slot = Some(h);
            }
            chain
        })
}

fn upper_protocol() -> impl Strategy<Value = IpProtocol> {
    any::<u8>()
        .prop_filter("not a walked extension header", |p| {
            !matches!(p, 0 | 43 | 44 | 60)
        })
        .prop_map(IpProtocol)
}

fn sack_blocks() -> impl Strategy<Value = [Option<SackBlock>; 4]> {
    proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=4).prop_map(|v| {
        let mut blocks = [None; 4];
        for (slot, (l, r)) in blocks.iter_mut().zip(v) {
            *slot = Some(SackBlock {
                left: SeqNumber(l),
                right: SeqNumber(r),
            });
        }
        blocks
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ethernet_repr_round_trips(src in mac(), dst in mac(), vlan in vlan(), et in ethertype(), body in payload(64)) {
        let repr = EthernetRepr { src_addr: src, dst_addr: dst, vlan, ethertype: et };
        let mut buf = vec![0u8; repr.header_len() + body.len()];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        repr.emit(&mut f).expect("fits");
        f.payload_mut().copy_from_slice(&body);
        let f = EthernetFrame::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(EthernetRepr::parse(&f), Ok(repr));
        prop_assert_eq!(f.payload(), &body[..]);
    }

    #[test]
    fn arp_repr_round_trips(op in 1u16..=2, sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let repr = ArpRepr {
            operation: ArpOperation(op),
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).expect("fits");
        let p = ArpPacket::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(ArpRepr::parse(&p), Ok(repr));
    }

    #[test]
    fn ipv4_repr_round_trips(
        src in v4(), dst in v4(), proto in any::<u8>(), payload_len in 0usize..1500,
        hop_limit in any::<u8>(), dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(),
        dont_frag in any::<bool>(), more_frags in any::<bool>(), frag_units in 0u16..8192,
    ) {
        let repr = Ipv4Repr {
            src_addr: src, dst_addr: dst, protocol: IpProtocol(proto), payload_len, hop_limit,
            dscp, ecn, ident, dont_frag, more_frags, frag_offset_bytes: frag_units * 8,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), ChecksumCaps::ALL).expect("fits");
        let p = Ipv4Packet::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(Ipv4Repr::parse(&p, ChecksumCaps::ALL), Ok(repr));
        prop_assert_eq!(p.payload().len(), payload_len);
    }

    #[test]
    fn ipv6_repr_with_ext_headers_round_trips(
        src in v6(), dst in v6(), nh in upper_protocol(), payload_len in 0usize..600,
        hop_limit in any::<u8>(), tc in any::<u8>(), flow in 0u32..(1 << 20), chain in ext_chain(),
    ) {
        let repr = Ipv6Repr {
            src_addr: src, dst_addr: dst, next_header: nh, payload_len, hop_limit,
            traffic_class: tc, flow_label: flow, ext_headers: chain,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..])).expect("fits");
        let p = Ipv6Packet::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(Ipv6Repr::parse(&p), Ok(repr));
        let walk = p.walk_ext_headers().expect("walk");
        prop_assert_eq!(walk.upper_offset, repr.header_len());
        prop_assert_eq!(walk.fragment, repr.fragment());
    }

    #[test]
    fn udp_repr_round_trips(addrs in ip_pair(), sp in any::<u16>(), dp in any::<u16>(), data in payload(300)) {
        let repr = UdpRepr { src_port: sp, dst_port: dp, payload: &data };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &addrs, ChecksumCaps::ALL).expect("fits");
        let p = UdpPacket::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(UdpRepr::parse(&p, &addrs, ChecksumCaps::ALL), Ok(repr));
    }

    #[test]
    fn tcp_repr_with_random_options_round_trips(
        addrs in ip_pair(), sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(),
        ack in any::<u32>(), flags in any::<u8>(), win in any::<u16>(), urg in any::<u16>(),
        mss in proptest::option::of(any::<u16>()), ws in proptest::option::of(0u8..=14),
        sack_permitted in any::<bool>(), sack in sack_blocks(),
        ts in proptest::option::of((any::<u32>(), any::<u32>())), data in payload(200),
        fo in proptest::option::of((0usize..=8, any::<[u8; 16]>(), any::<bool>())),
    ) {
        // Fast Open cookies: empty (a request) or an even length from 4 to 16.
        let fast_open = fo.and_then(|(half, cookie, exp)| {
            let n = if half < 2 { 0 } else { 2 * half };
            FastOpenOption::with_cookie(&cookie[..n], exp)
        });
        let repr = TcpRepr {
            src_port: sp, dst_port: dp, seq_number: SeqNumber(seq), ack_number: SeqNumber(ack),
            flags: TcpFlags(flags), window_len: win, urgent_pointer: urg, max_seg_size: mss,
            window_scale: ws, sack_permitted, sack_blocks: sack,
            timestamp: ts.map(|(tsval, tsecr)| TcpTimestamp { tsval, tsecr }), fast_open,
            payload: &data,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        let res = repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &addrs, ChecksumCaps::ALL);
        if repr.options_len() > 40 {
            prop_assert_eq!(res, Err(wire::Error::OptionsTooLong));
        } else {
            prop_assert_eq!(res, Ok(()));
            let p = TcpPacket::new_checked(&buf[..]).expect("valid");
            prop_assert_eq!(p.header_len() % 4, 0);
            prop_assert_eq!(TcpRepr::parse(&p, &addrs, ChecksumCaps::ALL), Ok(repr));
        }
    }

    #[test]
    fn icmpv4_repr_round_trips(kind in 0u8..5, a in any::<u16>(), b in any::<u16>(), code in 0u8..16, data in payload(100)) {
        let repr = match kind {
            0 => Icmpv4Repr::EchoRequest { ident: a, seq_no: b, data: &data },
            1 => Icmpv4Repr::EchoReply { ident: a, seq_no: b, data: &data },
            2 => Icmpv4Repr::DstUnreachable { code: if code == 4 { 3 } else { code }, data: &data },
            3 => Icmpv4Repr::FragNeeded { next_hop_mtu: a, data: &data },
            _ => Icmpv4Repr::TimeExceeded { code: code & 1, data: &data },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), ChecksumCaps::ALL).expect("fits");
        let p = Icmpv4Packet::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(Icmpv4Repr::parse(&p, ChecksumCaps::ALL), Ok(repr));
    }

    #[test]
    fn icmpv6_repr_incl_ndp_round_trips(
        kind in 0u8..7, src in v6(), dst in v6(), a in any::<u16>(), b in any::<u16>(),
        mtu in any::<u32>(), code in any::<u8>(), target in v6(), ll in proptest::option::of(mac()),
        flags in any::<[bool; 3]>(), data in payload(100),
    ) {
        let repr = match kind {
            0 => Icmpv6Repr::EchoRequest { ident: a, seq_no: b, data: &data },
            1 => Icmpv6Repr::EchoReply { ident: a, seq_no: b, data: &data },
            2 => Icmpv6Repr::DstUnreachable { code, data: &data },
            3 => Icmpv6Repr::PacketTooBig { mtu, data: &data },
            4 => Icmpv6Repr::TimeExceeded { code, data: &data },
            5 => Icmpv6Repr::NeighborSolicit { target_addr: target, source_lladdr: ll },
            _ => Icmpv6Repr::NeighborAdvert {
                router: flags[0], solicited: flags[1], override_: flags[2],
                target_addr: target, target_lladdr: ll,
            },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst, ChecksumCaps::ALL).expect("fits");
        let p = Icmpv6Packet::new_checked(&buf[..]).expect("valid");
        prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumCaps::ALL), Ok(repr));
    }
}
