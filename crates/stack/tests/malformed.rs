//! Hostile input: every malformed frame is a counted drop, never a panic.
mod common;

use common::*;
use core::net::IpAddr;
use stack::RxMeta;

use proptest::prelude::*;
use stack::{Counters, Stack};

/// Sum of every counter whose name says it is a drop.
fn drops(c: &Counters) -> u64 {
    c.named()
        .iter()
        .filter(|(n, _)| n.contains("drop") || n.ends_with("_full") || n.contains("no_socket"))
        .map(|(_, v)| v)
        .sum()
}

/// Valid frames A sends to B (after resolution): UDP v4/v6, ping v4/v6, a fragmented datagram,
/// and an ARP request.
fn valid_frames() -> Vec<Vec<u8>> {
    let mut p = Pair::new();
    let mut frames = Vec::new();
    p.capture_a = true;
    p.a.send_ping(0, IpAddr::V4(IP_B), 1, 1, b"x").unwrap();
    p.exchange();
    frames.append(&mut p.captured_a);
    let mut p = Pair::new();
    resolve(&mut p);
    p.capture_a = true;
    let s4 = p.a.udp_bind(v4(IP_A, 0)).unwrap();
    let s6 = p.a.udp_bind(v6(IP6_A, 0)).unwrap();
    p.a.udp_send_to(0, s4, v4(IP_B, 9), b"hello").unwrap();
    p.a.udp_send_to(0, s6, v6(IP6_B, 9), b"hello").unwrap();
    p.a.udp_send_to(0, s4, v4(IP_B, 9), &[7; 3000]).unwrap();
    p.a.send_ping(0, IpAddr::V4(IP_B), 1, 2, b"x").unwrap();
    p.a.send_ping(0, IpAddr::V6(IP6_B), 1, 2, b"x").unwrap();
    p.exchange();
    frames.append(&mut p.captured_a);
    frames
}

/// Reads one counter out of a snapshot.
type CounterOf = fn(&Counters) -> u64;

fn fresh_b() -> Stack {
    Stack::new(config_b())
}

#[test]
fn each_malformation_bumps_its_named_counter() {
    let frames = valid_frames();
    let arp = &frames[0];
    let udp4 = &frames[1];
    let udp6 = &frames[2];
    let cases: Vec<(&str, Vec<u8>, CounterOf)> = vec![
        ("short frame", vec![0xff; 10], |c| c.rx_drop_malformed_eth),
        ("truncated arp", arp[..20].to_vec(), |c| {
            c.rx_drop_malformed_arp
        }),
        (
            "ipv4 ihl 3",
            {
                let mut f = udp4.clone();
                f[ETH] = 0x43;
                f
            },
            |c| c.rx_drop_ipv4_malformed,
        ),
        (
            "ipv4 total length past the frame",
            {
                let mut f = udp4.clone();
                f[ETH + 2] = 0x0f;
                f
            },
            |c| c.rx_drop_ipv4_malformed,
        ),
        (
            "udp length 3",
            {
                let mut f = udp4.clone();
                f[ETH + 20 + 4..ETH + 20 + 6].copy_from_slice(&3u16.to_be_bytes());
                f
            },
            |c| c.rx_drop_udp_malformed,
        ),
        (
            "udp v6 payload corrupted (checksum)",
            {
                let mut f = udp6.clone();
                let n = f.len();
                f[n - 1] ^= 0xff;
                f
            },
            |c| c.rx_drop_udp_malformed,
        ),
        (
            "ipv6 payload length past the frame",
            {
                let mut f = udp6.clone();
                f[ETH + 4] = 0x7f;
                f
            },
            |c| c.rx_drop_ipv6_malformed,
        ),
        (
            "unknown ethertype",
            {
                let mut f = udp4.clone();
                f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                f
            },
            |c| c.rx_drop_unknown_ethertype,
        ),
        (
            "icmp timestamp request (unsupported type)",
            {
                let mut f = frames[frames.len() - 2].clone();
                let ihl = usize::from(f[ETH] & 0x0f) * 4;
                f[ETH + ihl] = 13;
                let mut icmp = wire::Icmpv4Packet::new_checked(&mut f[ETH + ihl..]).unwrap();
                icmp.fill_checksum();
                f
            },
            |c| c.rx_drop_icmp_unsupported,
        ),
        (
            "icmp bad checksum",
            {
                let mut f = frames[frames.len() - 2].clone();
                let n = f.len();
                f[n - 1] ^= 0x55;
                f
            },
            |c| c.rx_drop_icmp_malformed,
        ),
        (
            "udp v4 checksum wrong",
            {
                let mut f = udp4.clone();
                let n = f.len();
                f[n - 1] ^= 0x01;
                f
            },
            |c| c.rx_drop_udp_malformed,
        ),
        (
            "unknown ip protocol",
            {
                let mut f = udp4.clone();
                let mut ip = wire::Ipv4Packet::new_checked(&mut f[ETH..]).unwrap();
                ip.set_protocol(wire::IpProtocol(253));
                ip.fill_checksum();
                f
            },
            |c| c.rx_drop_unknown_protocol,
        ),
    ];
    for (name, frame, counter) in cases {
        let mut b = fresh_b();
        b.receive(0, &frame, &RxMeta::NONE);
        assert_eq!(counter(&b.counters()), 1, "{name}");
        assert_eq!(drops(&b.counters()), 1, "{name}: exactly one drop counted");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_and_are_counted(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = fresh_b();
        b.receive(0, &bytes, &RxMeta::NONE);
        let c = b.counters();
        prop_assert_eq!(c.rx_frames, 1);
        // Random bytes are never addressed to us in a valid way: one drop, nothing sent.
        prop_assert_eq!(drops(&c), 1);
        b.handle_timeout(u64::MAX / 2);
        while b.poll_transmit(0).is_some() {}
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        which in 0usize..8,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let frames = valid_frames();
        let mut f = frames[which % frames.len()].clone();
        for (at, x) in flips {
            let n = f.len();
            f[at % n] ^= x;
        }
        f.truncate(14 + cut % f.len().max(1));
        let mut b = fresh_b();
        let _ = b.udp_bind(v4(IP_B, 9));
        b.receive(0, &f, &RxMeta::NONE);
        b.handle_timeout(1);
        // Whatever goes out is a well-formed Ethernet frame from B.
        while let Some(out) = b.poll_transmit(0) {
            let view = wire::EthernetFrame::new_checked(&out[..]).unwrap();
            prop_assert_eq!(view.src_addr(), MAC_B);
        }
    }
}

/// A checksummed TCP/IPv4 frame from A to B with arbitrary header fields.
#[allow(clippy::too_many_arguments)]
fn tcp_from_a(
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    mss: Option<u16>,
    payload: &[u8],
) -> Vec<u8> {
    use wire::{SeqNumber, TcpFlags, TcpRepr};
    let seg = TcpRepr {
        max_seg_size: mss,
        payload,
        ..TcpRepr::bare(
            sport,
            dport,
            SeqNumber(seq),
            SeqNumber(ack),
            TcpFlags(flags),
            window,
        )
    };
    tcp_v4_frame((MAC_A, IP_A), (MAC_B, IP_B), &seg)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_tcp_segments_never_panic_and_replies_stay_well_formed(
        segs in proptest::collection::vec(
            (any::<bool>(), any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(),
             proptest::option::of(any::<u16>()), proptest::collection::vec(any::<u8>(), 0..64),
             0u64..50_000_000),
            1..20),
    ) {
        let mut p = Pair::new();
        let l = p.b.tcp_listen(v4(IP_B, 80), 2).unwrap();
        let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).unwrap();
        p.exchange();
        let sport = p.a.local_addr(c).unwrap().port();
        let _ = p.b.tcp_accept(l);
        for (to_conn, seq, ack, flags, window, mss, payload, dt) in segs {
            let sp = if to_conn { sport } else { 1000 + (seq % 7) as u16 };
            let f = tcp_from_a(sp, 80, seq, ack, flags, window, mss, &payload);
            p.b.receive(p.now, &f, &RxMeta::NONE);
            p.now += dt;
            p.b.handle_timeout(p.now);
            while let Some(out) = p.b.poll_transmit(p.now) {
                let eth = wire::EthernetFrame::new_checked(&out[..]).unwrap();
                prop_assert_eq!(eth.src_addr(), MAC_B);
                if eth.ethertype() == wire::EtherType::IPV4 {
                    let ip = wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
                    prop_assert!(ip.verify_checksum());
                    prop_assert!(ip.total_len() as usize <= 1500);
                }
            }
            while p.b.poll_event().is_some() {}
        }
        let c = p.b.counters();
        prop_assert!(c.tcp_connections_established >= 1);
    }
}
