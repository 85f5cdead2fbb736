//! The forwarding path: TTL/hop limit and checksums after forwarding, MAC rewriting, route
//! choices, local delivery, neighbour misses and the drop reasons.
mod common;

use core::net::{IpAddr, Ipv4Addr};

use common::*;
use forward::{DropReason, NextHop, Route, Verdict};
use proptest::prelude::*;
use wire::{EtherType, EthernetAddress, EthernetFrame, Ipv4Packet, Ipv6Packet};

fn one(
    f: &mut forward::Forwarder,
    n: &mut forward::NeighbourTable,
    port: u16,
    frame: &mut Vec<u8>,
) -> Verdict {
    f.process(0, port, frame, n)
}

#[test]
fn ipv4_forwarded_with_ttl_decremented_and_checksum_valid_from_scratch() {
    let (mut f, mut n) = router();
    let orig = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 100, true);
    let mut frame = dup(&orig);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(eth.dst_addr(), HOST_B_MAC);
    assert_eq!(eth.src_addr(), PORT1_MAC);
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.hop_limit(), 63);
    assert!(
        ip.verify_checksum(),
        "the header sums to 0xffff from scratch"
    );
    let mut recomputed = frame[14..34].to_vec();
    Ipv4Packet::new_unchecked(&mut recomputed[..]).fill_checksum();
    assert_eq!(
        &recomputed[..],
        &frame[14..34],
        "incremental = full recompute"
    );
    // Nothing but TTL and checksum changed in the IP packet.
    assert_eq!(frame[14..22], orig[14..22]);
    assert_eq!(frame[23], orig[23]);
    assert_eq!(frame[26..], orig[26..]);
    let c = f.counters();
    assert_eq!((c.rx_frames, c.forwarded), (1, 1));
}

proptest! {
    /// RFC 1624 eqn. 3 gives exactly the checksum a full recomputation does, for every TTL
    /// and any header contents (including the 0x0000/0xffff corner cases).
    #[test]
    fn ttl_decrement_checksum_matches_full_recompute_for_random_headers(
        ttl in 2u8..=255, header in any::<[u8; 20]>(), src in any::<u32>()
    ) {
        let (mut f, mut n) = router();
        let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, ttl, 8, false);
        // Randomise the fields the forwarder does not look at: DSCP/ECN, ident, the
        // protocol; the source stays a routable unicast address.
        frame[15] = header[1];
        frame[18..20].copy_from_slice(&header[4..6]);
        frame[23] = header[9];
        let s = Ipv4Addr::from((src & 0x00ff_ffff) | 0x0b00_0000);
        frame[26..30].copy_from_slice(&s.octets());
        Ipv4Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        prop_assert_eq!(one(&mut f, &mut n, 0, &mut frame), Verdict::Forward { port: 1 });
        let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
        prop_assert_eq!(ip.hop_limit(), ttl - 1);
        prop_assert!(ip.verify_checksum());
        let mut recomputed = frame[14..34].to_vec();
        Ipv4Packet::new_unchecked(&mut recomputed[..]).fill_checksum();
        prop_assert_eq!(&recomputed[..], &frame[14..34]);
    }
}

#[test]
fn ipv6_forwarded_with_hop_limit_decremented() {
    let (mut f, mut n) = router();
    let orig = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 2, 100);
    let mut frame = dup(&orig);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(eth.dst_addr(), HOST_B_MAC);
    assert_eq!(eth.src_addr(), PORT1_MAC);
    let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.hop_limit(), 1);
    assert_eq!(frame[14..21], orig[14..21]);
    assert_eq!(frame[22..], orig[22..]);
    assert_eq!(f.counters().forwarded_v6, 1);
}

#[test]
fn ethernet_padding_is_trimmed_on_forward() {
    let (mut f, mut n) = router();
    let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 0, false);
    let ip_end = frame.len();
    frame.resize(60, 0xee);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
    assert_eq!(frame.len(), ip_end);
}

#[test]
fn gateway_route_resolves_the_gateway_not_the_destination() {
    let (mut f, mut n) = router();
    let mut frame = udp_v4(
        PORT0_MAC,
        HOST_A_V4,
        Ipv4Addr::new(192, 168, 5, 5),
        64,
        10,
        false,
    );
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        GW_MAC
    );
    let mut frame = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("2001:db8:7::1"), 64, 10);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        GW_MAC
    );
}

#[test]
fn longest_prefix_chooses_among_overlapping_routes() {
    let (mut f, mut n) = router();
    let other_gw = Ipv4Addr::new(10, 0, 1, 254);
    let other_mac = EthernetAddress([0x02, 0xdd, 0, 0, 0, 0x0d]);
    n.insert(0, IpAddr::V4(other_gw), other_mac);
    f.add_route_via("192.168.5.0/24".parse().unwrap(), IpAddr::V4(other_gw))
        .unwrap();
    f.add_route(Route {
        prefix: "192.168.5.7/32".parse().unwrap(),
        next_hop: NextHop::Gateway {
            port: 1,
            gateway: IpAddr::V4(GW_V4),
        },
    })
    .unwrap();
    f.add_route_via("0.0.0.0/0".parse().unwrap(), IpAddr::V4(other_gw))
        .unwrap();
    let cases = [
        ([192, 168, 5, 5], 0, other_mac),
        ([192, 168, 5, 7], 1, GW_MAC),
        ([192, 168, 6, 1], 1, GW_MAC),
        ([8, 8, 8, 8], 0, other_mac),
    ];
    for (dst, port, mac) in cases {
        let mut frame = udp_v4(PORT1_MAC, HOST_B_V4, Ipv4Addr::from(dst), 64, 10, false);
        assert_eq!(
            one(&mut f, &mut n, 1, &mut frame),
            Verdict::Forward { port },
            "{dst:?}"
        );
        assert_eq!(
            EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
            mac
        );
    }
    assert!(f.remove_route("192.168.5.0/24".parse().unwrap()).is_some());
    let mut frame = udp_v4(
        PORT1_MAC,
        HOST_B_V4,
        Ipv4Addr::new(192, 168, 5, 5),
        64,
        10,
        false,
    );
    assert_eq!(
        one(&mut f, &mut n, 1, &mut frame),
        Verdict::Forward { port: 1 }
    );
}

#[test]
fn packets_for_the_router_go_local_untouched() {
    let (mut f, mut n) = router();
    let mut frames = vec![
        udp_v4(PORT0_MAC, HOST_A_V4, PORT0_V4, 1, 10, false),
        udp_v4(PORT0_MAC, HOST_A_V4, PORT1_V4, 1, 10, false),
        udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(10, 0, 1, 255),
            64,
            10,
            false,
        ),
        udp_v4(
            EthernetAddress::BROADCAST,
            HOST_A_V4,
            Ipv4Addr::BROADCAST,
            64,
            10,
            false,
        ),
        udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(224, 0, 0, 5),
            1,
            10,
            false,
        ),
        udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:1::1"), 64, 10),
        udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::1"), 64, 10),
        udp_v6(PORT0_MAC, v6("fe80::10"), v6("fe80::1"), 255, 10),
        udp_v6(PORT0_MAC, v6("fe80::10"), v6("ff02::1"), 255, 10),
    ];
    let mut arp = udp_v4(
        EthernetAddress::BROADCAST,
        HOST_A_V4,
        PORT0_V4,
        64,
        10,
        false,
    );
    EthernetFrame::new_unchecked(&mut arp[..]).set_ethertype(EtherType::ARP);
    frames.push(arp);
    let orig = frames.clone();
    let mut verdicts = vec![Verdict::Drop(DropReason::Malformed); frames.len()];
    let done = f.process_burst(0, 0, &mut frames, &mut verdicts, &mut n);
    assert_eq!(done, frames.len());
    assert!(
        verdicts.iter().all(|v| *v == Verdict::Local),
        "{verdicts:?}"
    );
    assert_eq!(frames, orig, "local frames are handed over untouched");
    assert_eq!(f.counters().local, frames.len() as u64);
}

#[test]
fn unresolved_neighbour_is_dropped_counted_and_requested_once_per_neighbour() {
    let (mut f, mut n) = router();
    let unknown = Ipv4Addr::new(10, 0, 2, 99);
    for _ in 0..1000 {
        let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, unknown, 64, 10, false);
        assert_eq!(
            one(&mut f, &mut n, 0, &mut frame),
            Verdict::Drop(DropReason::NoNeighbour)
        );
    }
    let c = f.counters();
    assert_eq!((c.drop_no_neighbour, c.neighbour_requests), (1000, 1000));
    assert_eq!(n.requests(), &[(1, IpAddr::V4(unknown))]);
    assert_eq!(
        n.requests_dropped(),
        999,
        "the table deduplicates requests in flight"
    );
    n.insert(1, IpAddr::V4(unknown), HOST_B_MAC);
    let mut frame = udp_v4(PORT0_MAC, HOST_A_V4, unknown, 64, 10, false);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut frame),
        Verdict::Forward { port: 1 }
    );
}

#[test]
fn every_drop_reason_is_counted_by_name() {
    let (mut f, mut n) = router();
    let mut cases: Vec<(Vec<u8>, DropReason)> = Vec::new();
    cases.push((vec![0u8; 10], DropReason::Malformed));
    let mut short = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 10, false);
    short.truncate(30);
    cases.push((short, DropReason::Malformed));
    let mut bad_sum = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 10, false);
    bad_sum[24] ^= 0xff;
    cases.push((bad_sum, DropReason::BadChecksum));
    let other = EthernetAddress([0x02, 0x99, 0, 0, 0, 0x99]);
    cases.push((
        udp_v4(other, HOST_A_V4, HOST_B_V4, 64, 10, false),
        DropReason::NotForUs,
    ));
    let mut tagged = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 10, false);
    tagged[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    cases.push((tagged, DropReason::Vlan));
    let loopback = Ipv4Addr::new(127, 0, 0, 1);
    cases.push((
        udp_v4(PORT0_MAC, loopback, HOST_B_V4, 64, 10, false),
        DropReason::Martian,
    ));
    let zero_net = Ipv4Addr::new(0, 1, 2, 3);
    cases.push((
        udp_v4(PORT0_MAC, HOST_A_V4, zero_net, 64, 10, false),
        DropReason::Martian,
    ));
    let ll = udp_v6(PORT0_MAC, v6("fe80::10"), v6("fd00:2::20"), 64, 10);
    cases.push((ll, DropReason::Martian));
    // IHL 6 with a NOP option word, checksum refilled.
    let mut opts = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 10, false);
    opts.splice(34..34, [1u8, 1, 1, 0]);
    opts[14] = 0x46;
    let total = u16::from_be_bytes([opts[16], opts[17]]) + 4;
    opts[16..18].copy_from_slice(&total.to_be_bytes());
    Ipv4Packet::new_unchecked(&mut opts[14..]).fill_checksum();
    cases.push((opts, DropReason::IpOptions));
    let mut hbh = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 64, 10);
    hbh[20] = 0; // next header: hop-by-hop
    cases.push((hbh, DropReason::IpOptions));
    let far = Ipv4Addr::new(172, 16, 0, 1);
    cases.push((
        udp_v4(PORT0_MAC, HOST_A_V4, far, 64, 10, false),
        DropReason::NoRoute,
    ));
    let unknown = Ipv4Addr::new(10, 0, 2, 99);
    cases.push((
        udp_v4(PORT0_MAC, HOST_A_V4, unknown, 64, 10, false),
        DropReason::NoNeighbour,
    ));
    let ttl0 = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 0, 10, false);
    cases.push((ttl0, DropReason::TtlExceeded));
    for (frame, reason) in &mut cases {
        let v = one(&mut f, &mut n, 0, frame);
        let got = match v {
            Verdict::Drop(r) | Verdict::IcmpError { reason: r, .. } => r,
            other => panic!("{reason}: {other:?}"),
        };
        assert_eq!(got, *reason);
    }
    let c = f.counters();
    for reason in DropReason::ALL {
        let expected = cases.iter().filter(|(_, r)| *r == reason).count() as u64;
        assert_eq!(c.drops(reason), expected, "{reason}");
    }
    assert_eq!(c.rx_frames, c.forwarded + c.local + c.drops_total());
}

#[test]
fn too_big_packets_get_frag_needed_or_are_dropped_when_df_is_clear() {
    let (mut f, mut n) = router_with(&config(1400));
    let mut df = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 1400, true);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut df),
        Verdict::IcmpError {
            port: 0,
            reason: DropReason::TooBig
        }
    );
    let mut no_df = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 1400, false);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut no_df),
        Verdict::Drop(DropReason::NeedsFragmentation)
    );
    let mut fits = udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 1400 - 28, true);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut fits),
        Verdict::Forward { port: 1 }
    );
    let mut big6 = udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 64, 1400);
    assert_eq!(
        one(&mut f, &mut n, 0, &mut big6),
        Verdict::IcmpError {
            port: 0,
            reason: DropReason::TooBig
        }
    );
    assert_eq!(f.counters().icmp_too_big_sent, 2);
}

#[test]
fn burst_of_64_mixed_frames_gets_one_verdict_each() {
    let (mut f, mut n) = router();
    let mut frames: Vec<Vec<u8>> = (0..forward::BURST_MAX)
        .map(|i| match i % 4 {
            0 => udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 18, false),
            1 => udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 64, 10),
            2 => udp_v4(PORT0_MAC, HOST_A_V4, PORT0_V4, 64, 18, false),
            _ => udp_v4(
                PORT0_MAC,
                HOST_A_V4,
                Ipv4Addr::new(10, 0, 2, 99),
                64,
                18,
                false,
            ),
        })
        .collect();
    let mut verdicts = [Verdict::Local; forward::BURST_MAX];
    assert_eq!(
        f.process_burst(0, 0, &mut frames, &mut verdicts, &mut n),
        64
    );
    for (i, v) in verdicts.iter().enumerate() {
        let want = match i % 4 {
            0 | 1 => Verdict::Forward { port: 1 },
            2 => Verdict::Local,
            _ => Verdict::Drop(DropReason::NoNeighbour),
        };
        assert_eq!(*v, want, "frame {i}");
    }
    let c = f.counters();
    assert_eq!((c.forwarded, c.local, c.drop_no_neighbour), (32, 16, 16));
}
