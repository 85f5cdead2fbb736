//! ICMP errors the router originates: well formed (checksums valid from scratch, addresses,
//! MACs, type/code, the quote is the offending packet as received), suppressed where the
//! RFCs forbid them, and rate limited.
mod common;

use core::net::{IpAddr, Ipv4Addr};

use common::*;
use forward::{DropReason, ForwarderConfig, SliceFrame, Verdict};
use wire::{
    ChecksumCaps, EthernetFrame, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol,
    Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
};

/// Checks the frame is an ICMPv4 error from `PORT0_V4` to host A and returns it parsed with
/// its quote.
fn parse_v4_error(frame: &[u8]) -> (Ipv4Repr, Icmpv4Repr<'_>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.dst_addr(), HOST_A_MAC);
    assert_eq!(eth.src_addr(), PORT0_MAC);
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert!(ip.verify_checksum());
    let ip_repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).unwrap();
    assert_eq!(ip_repr.src_addr, PORT0_V4);
    assert_eq!(ip_repr.dst_addr, HOST_A_V4);
    assert_eq!(ip_repr.protocol, IpProtocol::ICMP);
    assert_eq!(ip_repr.hop_limit, 64);
    assert_eq!(
        frame.len(),
        14 + 20 + ip_repr.payload_len,
        "no trailing bytes"
    );
    let icmp = Icmpv4Packet::new_checked(&frame[34..]).unwrap();
    assert!(icmp.verify_checksum(), "ICMP checksum valid from scratch");
    let repr = Icmpv4Repr::parse(
        &Icmpv4Packet::new_unchecked(&frame[34..]),
        ChecksumCaps::ALL,
    )
    .unwrap();
    (ip_repr, repr)
}

#[test]
fn ttl_one_gets_icmp_time_exceeded_quoting_the_packet_as_received() {
    let (mut f, mut n) = router();
    let orig = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 100, false);
    let mut frame = dup(&orig);
    let v = f.process(0, 0, &mut frame, &mut n);
    assert_eq!(
        v,
        Verdict::IcmpError {
            port: 0,
            reason: DropReason::TtlExceeded
        }
    );
    let (_, repr) = parse_v4_error(&frame);
    let Icmpv4Repr::TimeExceeded { code: 0, data } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(
        data,
        &orig[14..],
        "the whole packet (under 548 bytes), TTL 1 as received"
    );
    let c = f.counters();
    assert_eq!((c.drop_ttl_exceeded, c.icmp_time_exceeded_sent), (1, 1));
}

#[test]
fn no_route_gets_icmp_net_unreachable_and_the_quote_stops_at_576_bytes() {
    let (mut f, mut n) = router();
    let orig = udp_v4(
        PORT0_MAC,
        HOST_A_V4,
        Ipv4Addr::new(172, 16, 0, 1),
        64,
        1000,
        true,
    );
    let mut frame = dup(&orig);
    let v = f.process(0, 0, &mut frame, &mut n);
    assert_eq!(
        v,
        Verdict::IcmpError {
            port: 0,
            reason: DropReason::NoRoute
        }
    );
    let (ip, repr) = parse_v4_error(&frame);
    assert_eq!(
        ip.buffer_len(),
        576,
        "RFC 1812 §4.3.2.3: as much as fits in 576 bytes"
    );
    let Icmpv4Repr::DstUnreachable { code: 0, data } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(data, &orig[14..14 + 548]);
}

#[test]
fn df_too_big_gets_frag_needed_with_the_next_hop_mtu() {
    let (mut f, mut n) = router_with(&config(1280));
    let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 1300, true);
    assert!(matches!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::IcmpError { port: 0, .. }
    ));
    let (_, repr) = parse_v4_error(&frame);
    assert!(
        matches!(
            repr,
            Icmpv4Repr::FragNeeded {
                next_hop_mtu: 1280,
                ..
            }
        ),
        "{repr:?}"
    );
}

fn parse_v6_error(frame: &[u8]) -> (Ipv6Repr, Icmpv6Repr<'_>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.dst_addr(), HOST_A_MAC);
    assert_eq!(eth.src_addr(), PORT0_MAC);
    let ip = Ipv6Packet::new_checked(&frame[14..]).unwrap();
    let ip_repr = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!(
        ip_repr.src_addr,
        v6("fd00:1::1"),
        "a global address of the egress port"
    );
    assert_eq!(ip_repr.dst_addr, v6("fd00:1::10"));
    assert_eq!(ip_repr.next_header, IpProtocol::ICMPV6);
    assert_eq!(frame.len(), 14 + 40 + ip_repr.payload_len);
    let icmp = Icmpv6Packet::new_checked(&frame[54..]).unwrap();
    assert!(icmp.verify_checksum(ip_repr.src_addr, ip_repr.dst_addr));
    let repr = Icmpv6Repr::parse(
        &Icmpv6Packet::new_unchecked(&frame[54..]),
        ip_repr.src_addr,
        ip_repr.dst_addr,
        ChecksumCaps::ALL,
    )
    .unwrap();
    (ip_repr, repr)
}

#[test]
fn hop_limit_one_gets_icmpv6_time_exceeded_well_formed() {
    let (mut f, mut n) = router();
    let orig = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 1, 64);
    let mut frame = dup(&orig);
    assert!(matches!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::IcmpError {
            port: 0,
            reason: DropReason::TtlExceeded
        }
    ));
    let (_, repr) = parse_v6_error(&frame);
    let Icmpv6Repr::TimeExceeded { code: 0, data } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(data, &orig[14..]);
}

#[test]
fn ipv6_no_route_and_packet_too_big_are_well_formed_and_capped_at_1280() {
    let (mut f, mut n) = router_with(&config(1400));
    let orig = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("3fff::1"), 64, 1400);
    let mut frame = dup(&orig);
    assert!(matches!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::IcmpError {
            reason: DropReason::NoRoute,
            ..
        }
    ));
    let (ip, repr) = parse_v6_error(&frame);
    assert_eq!(ip.buffer_len(), 1280, "RFC 4443 §2.4(c)");
    let Icmpv6Repr::DstUnreachable { code: 0, data } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(data, &orig[14..14 + 1232]);
    let mut frame = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 64, 1400);
    assert!(matches!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::IcmpError {
            reason: DropReason::TooBig,
            ..
        }
    ));
    let (_, repr) = parse_v6_error(&frame);
    assert!(
        matches!(repr, Icmpv6Repr::PacketTooBig { mtu: 1400, .. }),
        "{repr:?}"
    );
}

#[test]
fn icmp_errors_are_rate_limited_and_counted_when_suppressed() {
    let cfg = ForwarderConfig {
        icmp_errors_per_s_max: 10,
        icmp_errors_burst_max: 5,
        ..config(1500)
    };
    let (mut f, mut n) = router_with(&cfg);
    let mut sent = 0;
    for _ in 0..20 {
        let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 10, false);
        if matches!(
            f.process(0, 0, &mut frame, &mut n),
            Verdict::IcmpError { .. }
        ) {
            sent += 1;
        }
    }
    assert_eq!(sent, 5, "the burst");
    let c = f.counters();
    assert_eq!((c.icmp_time_exceeded_sent, c.icmp_rate_limited), (5, 15));
    assert_eq!(
        c.drop_ttl_exceeded, 20,
        "every expired packet is counted either way"
    );
    // 0.5 s later: 5 more tokens at 10/s.
    sent = 0;
    for _ in 0..20 {
        let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 10, false);
        if matches!(
            f.process(500_000_000, 0, &mut frame, &mut n),
            Verdict::IcmpError { .. }
        ) {
            sent += 1;
        }
    }
    assert_eq!(sent, 5);
}

#[test]
fn no_icmp_error_about_an_icmp_error_or_a_non_first_fragment() {
    let (mut f, mut n) = router();
    // An ICMP time exceeded (type 11) with TTL 1.
    let mut err = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 10, false);
    err[23] = IpProtocol::ICMP.0;
    err[34] = 11;
    Ipv4Packet::new_unchecked(&mut err[14..]).fill_checksum();
    assert_eq!(
        f.process(0, 0, &mut err, &mut n),
        Verdict::Drop(DropReason::TtlExceeded)
    );
    // An echo request with TTL 1 does get one.
    let mut echo = dup(&err);
    echo[34] = 8;
    assert!(matches!(
        f.process(0, 0, &mut echo, &mut n),
        Verdict::IcmpError { .. }
    ));
    let mut frag = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 10, false);
    Ipv4Packet::new_unchecked(&mut frag[14..]).set_frag(false, false, 64);
    Ipv4Packet::new_unchecked(&mut frag[14..]).fill_checksum();
    assert_eq!(
        f.process(0, 0, &mut frag, &mut n),
        Verdict::Drop(DropReason::TtlExceeded)
    );
    let mut err6 = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 1, 10);
    err6[20] = IpProtocol::ICMPV6.0;
    err6[54] = 1; // destination unreachable
    assert_eq!(
        f.process(0, 0, &mut err6, &mut n),
        Verdict::Drop(DropReason::TtlExceeded)
    );
    assert_eq!(f.counters().icmp_suppressed, 3);
}

#[test]
fn icmp_error_with_an_unresolved_route_back_is_counted_and_requested() {
    let (mut f, mut n) = router();
    let stranger = Ipv4Addr::new(10, 0, 1, 77);
    let mut frame = udp_v4(PORT0_MAC, stranger, HOST_B_V4, 1, 10, false);
    assert_eq!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::Drop(DropReason::TtlExceeded)
    );
    assert_eq!(f.counters().icmp_no_neighbour, 1);
    assert_eq!(n.requests(), &[(0, IpAddr::V4(stranger))]);
}

#[test]
fn icmp_error_fits_a_tight_fixed_buffer_or_is_counted() {
    let (mut f, mut n) = router();
    let orig = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 100, false);
    // A fixed buffer exactly the frame's size (142 bytes): the quote shrinks to what fits
    // after the new 42 bytes of headers.
    let mut slot = orig.clone();
    let mut frame = SliceFrame::new(&mut slot, orig.len());
    assert!(matches!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::IcmpError { .. }
    ));
    let (_, repr) = parse_v4_error(forward::FrameBuf::frame(&frame));
    let Icmpv4Repr::TimeExceeded { data, .. } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(
        data,
        &orig[14..orig.len() - 28],
        "142 bytes of buffer: 100 of quote"
    );
    // A 42-byte frame in a 42-byte buffer: no room for the header and 8 bytes of quote.
    let mut small = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 0, false);
    let len = small.len();
    let mut frame = SliceFrame::new(&mut small, len);
    assert_eq!(
        f.process(0, 0, &mut frame, &mut n),
        Verdict::Drop(DropReason::TtlExceeded)
    );
    assert_eq!(f.counters().icmp_no_buffer, 1);
}
