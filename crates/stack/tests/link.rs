//! ARP and IPv6 neighbour discovery between two stacks.
mod common;

use common::*;
use core::net::{IpAddr, Ipv6Addr};
use stack::RxMeta;

use stack::Stack;
use wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetFrame, EthernetRepr};

#[test]
fn arp_resolution_then_queued_packet_is_delivered() {
    let mut p = Pair::new();
    let rx = p.b.udp_bind(v4(IP_B, 7000)).expect("bind");
    let tx = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, tx, v4(IP_B, 7000), b"hello")
        .expect("send");
    // The datagram waits; the only frame out is a broadcast ARP request.
    let req = p.a.poll_transmit(p.now).expect("arp request");
    assert!(p.a.poll_transmit(p.now).is_none());
    let eth = EthernetRepr::parse(&EthernetFrame::new_checked(&req[..]).unwrap()).unwrap();
    assert_eq!(eth.ethertype, EtherType::ARP);
    assert!(eth.dst_addr.is_broadcast());
    p.b.receive(p.now, &req, &RxMeta::NONE);
    p.exchange();
    let d =
        p.b.udp_recv_from(rx)
            .expect("datagram delivered after resolution");
    assert_eq!(d.payload, b"hello");
    assert_eq!(d.src, v4(IP_A, p.a.local_addr(tx).unwrap().port()));
    assert_eq!(p.a.counters().arp_requests_sent, 1);
    assert_eq!(p.b.counters().arp_requests_answered, 1);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(MAC_B));
    // B learnt A from the request aimed at it (RFC 826), so B needed no request of its own.
    assert_eq!(p.b.neighbor(p.now, IpAddr::V4(IP_A)), Some(MAC_A));
    assert_eq!(p.b.counters().arp_requests_sent, 0);
}

#[test]
fn pending_queue_cap_drops_and_counts() {
    let mut p = Pair::new();
    let cap = p.a.config().limits.neighbor_pending_packets_max;
    let tx = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    for i in 0..cap + 3 {
        p.a.udp_send_to(p.now, tx, v4(IP_SILENT, 9), &[i as u8])
            .expect("send");
    }
    assert_eq!(p.a.counters().arp_pending_queue_full, 3);
    assert_eq!(p.a.counters().arp_requests_sent, 1);
}

#[test]
fn unanswered_arp_retries_to_the_limit_then_drops_the_queue() {
    let mut p = Pair::new();
    let tx = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, tx, v4(IP_SILENT, 9), b"x")
        .expect("send");
    p.a.udp_send_to(p.now, tx, v4(IP_SILENT, 9), b"y")
        .expect("send");
    p.advance(10 * S);
    let c = p.a.counters();
    assert_eq!(
        c.arp_requests_sent,
        u64::from(p.a.config().limits.neighbor_requests_max)
    );
    assert_eq!(c.arp_resolution_failed, 2);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn arp_entry_expires_after_reachable_time() {
    let mut p = Pair::new();
    resolve(&mut p);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(MAC_B));
    let reachable = p.a.config().limits.neighbor_reachable_ns;
    p.advance(reachable + 1);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), None);
    assert!(p.a.counters().neighbor_expired >= 1);
}

#[test]
fn gratuitous_arp_updates_an_existing_entry_only() {
    let mut p = Pair::new();
    resolve(&mut p);
    let new_mac = wire::EthernetAddress([0x02, 0, 0, 0, 0, 0x0c]);
    let garp = |spa| {
        let arp = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: new_mac,
            source_protocol_addr: spa,
            target_hardware_addr: wire::EthernetAddress([0; 6]),
            target_protocol_addr: spa,
        };
        let mut f = vec![0u8; 14 + 28];
        EthernetRepr {
            src_addr: new_mac,
            dst_addr: wire::EthernetAddress::BROADCAST,
            vlan: None,
            ethertype: EtherType::ARP,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
        .unwrap();
        arp.emit(&mut ArpPacket::new_unchecked(&mut f[14..]))
            .unwrap();
        f
    };
    p.a.receive(p.now, &garp(IP_B), &RxMeta::NONE);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(new_mac));
    // A gratuitous ARP for a stranger creates nothing.
    p.a.receive(p.now, &garp(IP_SILENT), &RxMeta::NONE);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_SILENT)), None);
    assert_eq!(p.a.counters().arp_rx_other_target, 1);
    // Someone claiming our own address is a counted conflict, not a cache update.
    p.a.receive(p.now, &garp(IP_A), &RxMeta::NONE);
    assert_eq!(p.a.counters().arp_rx_conflict, 1);
}

#[test]
fn neighbor_discovery_resolves_and_delivers_queued_ping() {
    let mut p = Pair::new();
    p.a.send_ping(p.now, IpAddr::V6(IP6_B), 7, 3, b"abc")
        .expect("ping");
    let ns = p.a.poll_transmit(p.now).expect("ns");
    let eth = EthernetRepr::parse(&EthernetFrame::new_checked(&ns[..]).unwrap()).unwrap();
    // RFC 4861 §7.2.2: to the solicited-node multicast group of the target.
    assert_eq!(eth.dst_addr.0, [0x33, 0x33, 0xff, 0, 0, 2]);
    p.b.receive(p.now, &ns, &RxMeta::NONE);
    p.exchange();
    let r = p.a.poll_echo_reply().expect("echo reply");
    assert_eq!(
        (r.from, r.ident, r.seq_no, r.data_len_bytes),
        (IpAddr::V6(IP6_B), 7, 3, 3)
    );
    assert_eq!(p.a.counters().nd_solicits_sent, 1);
    assert_eq!(p.b.counters().nd_solicits_answered, 1);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V6(IP6_B)), Some(MAC_B));
}

#[test]
fn neighbor_discovery_works_for_link_local_addresses() {
    let mut p = Pair::new();
    let ll_b: Ipv6Addr = p.b.config().interface.ipv6[0].addr;
    p.a.send_ping(p.now, IpAddr::V6(ll_b), 1, 1, b"")
        .expect("ping");
    p.exchange();
    assert!(p.a.poll_echo_reply().is_some());
}

#[test]
fn nd_entry_expires_and_unanswered_solicits_give_up() {
    let mut p = Pair::new();
    resolve(&mut p);
    let reachable = p.a.config().limits.neighbor_reachable_ns;
    p.advance(reachable + 1);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V6(IP6_B)), None);
    let silent: Ipv6Addr = "2001:db8::99".parse().unwrap();
    let sent_before = p.a.counters().nd_solicits_sent;
    p.a.send_ping(p.now, IpAddr::V6(silent), 1, 1, b"")
        .expect("ping");
    p.advance(10 * S);
    let c = p.a.counters();
    assert_eq!(c.nd_resolution_failed, 1);
    assert_eq!(
        c.nd_solicits_sent - sent_before,
        u64::from(p.a.config().limits.neighbor_requests_max)
    );
}

#[test]
fn neighbor_cache_is_bounded() {
    let mut cfg = config_a();
    cfg.limits.neighbor_entries_max = 2;
    let mut a = Stack::new(cfg);
    for host in 10..14u8 {
        a.send_ping(
            0,
            IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 0, host)),
            1,
            1,
            b"",
        )
        .expect("ping");
    }
    assert_eq!(a.counters().neighbor_cache_full, 2);
}

#[test]
fn neighbours_in_use_are_refreshed_before_they_expire() {
    let mut p = Pair::new();
    let reachable = p.a.config().limits.neighbor_reachable_ns;
    // One ping a second, v4 and v6, for four reachable times.
    for seq in 0..(4 * reachable / S) {
        p.a.send_ping(p.now, IpAddr::V4(IP_B), 1, seq as u16, b"")
            .expect("ping");
        p.a.send_ping(p.now, IpAddr::V6(IP6_B), 1, seq as u16, b"")
            .expect("ping");
        p.advance(S);
        assert_eq!(
            std::iter::from_fn(|| p.a.poll_echo_reply()).count(),
            2,
            "both replies within the second {seq}"
        );
    }
    let c = p.a.counters();
    // Never fell back to queue-and-resolve: the entries were refreshed, not expired.
    assert_eq!(c.neighbor_expired, 0);
    assert!(
        c.arp_requests_sent >= 4 && c.arp_requests_sent <= 6,
        "{}",
        c.arp_requests_sent
    );
    assert!(
        c.nd_solicits_sent >= 4 && c.nd_solicits_sent <= 6,
        "{}",
        c.nd_solicits_sent
    );
}
