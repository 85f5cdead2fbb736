//! The shard core on its own, driven by hand: what leaves a shard as messages, what stays, and
//! the bounds and deadlines a driver relies on.

use core::net::Ipv4Addr;

use app::{App, Ctx, ShardInfo};
use nic::{Nic, NicConfig};
use rss::Reta;
use shard::{Msg, MsgKind, Shard, ShardConfig};
use stack::{InterfaceConfig, Ipv4Cidr, SocketEvent, Stack, StackConfig};
use wire::{
    ChecksumCaps, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpPair, IpProtocol,
    Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
};

const HOST_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Later than any moderation delay of the default NIC: the queue has fired by then.
const LATER_NS: u64 = 1_000_000;

/// An application that does nothing.
struct Idle;

impl App for Idle {
    fn start(&mut self, _: &mut Ctx<'_>) {}
    fn poll(&mut self, _: &mut Ctx<'_>, _: &[SocketEvent]) {}
}

fn shard(cfg: ShardConfig) -> Shard<Idle> {
    let iface = InterfaceConfig::new(HOST_MAC, Ipv4Cidr::new(HOST_IP, 24));
    let nic = Nic::new(NicConfig {
        queues: 1,
        ..NicConfig::default()
    })
    .expect("nic");
    let mut s = Shard::new(cfg, nic, Stack::new(StackConfig::new(iface)), Idle);
    s.start(0);
    s
}

fn info(shard: u16, shards: u16) -> ShardInfo {
    ShardInfo {
        shard,
        shards,
        numa_node: 0,
    }
}

/// A UDP/IPv4 datagram from the peer to the host, source port `sport`.
fn udp_frame(sport: u16) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: sport,
        dst_port: 9,
        payload: b"hello",
    };
    let udp_len = udp.buffer_len();
    let mut buf = vec![0u8; 14 + 20 + udp_len];
    EthernetRepr {
        src_addr: PEER_MAC,
        dst_addr: HOST_MAC,
        vlan: None,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))
    .expect("eth");
    Ipv4Repr {
        src_addr: PEER_IP,
        dst_addr: HOST_IP,
        protocol: IpProtocol::UDP,
        payload_len: udp_len,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: false,
        more_frags: false,
        frag_offset_bytes: 0,
    }
    .emit(
        &mut Ipv4Packet::new_unchecked(&mut buf[14..]),
        ChecksumCaps::ALL,
    )
    .expect("ipv4");
    let addrs = IpPair::V4 {
        src: PEER_IP,
        dst: HOST_IP,
    };
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut buf[34..]),
        &addrs,
        ChecksumCaps::ALL,
    )
    .expect("udp");
    buf
}

/// An ARP request from the peer for the host's address.
fn arp_request() -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&PEER_MAC.0);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&PEER_MAC.0);
    f[28..32].copy_from_slice(&PEER_IP.octets());
    f[38..42].copy_from_slice(&HOST_IP.octets());
    f
}

fn drain_msgs(s: &mut Shard<Idle>) -> Vec<(u16, MsgKind)> {
    std::iter::from_fn(|| s.poll_msg())
        .map(|(to, m)| (to, m.kind()))
        .collect()
}

#[test]
fn frames_of_flows_owned_elsewhere_leave_as_messages_to_their_owner() {
    let everything_to_shard_1 = Reta::from_entries(&[1; 128]).expect("reta");
    let mut s = shard(ShardConfig {
        sw_reta: Some(everything_to_shard_1),
        ..ShardConfig::new(info(0, 2))
    });
    s.handle_rx(0, [udp_frame(4000), udp_frame(4001)]);
    s.handle_timeout(LATER_NS);
    assert_eq!(
        drain_msgs(&mut s),
        vec![(1, MsgKind::Frame), (1, MsgKind::Frame)]
    );
    let c = s.counters();
    assert_eq!((c.msgs.frames_tx, c.rx_packets), (2, 0), "{c:?}");
    assert_eq!(
        s.stack().counters().rx_frames,
        0,
        "no frame reached this stack"
    );
}

#[test]
fn frames_of_this_shards_flows_reach_its_stack_and_no_message_leaves() {
    let everything_here = Reta::from_entries(&[0; 128]).expect("reta");
    let mut s = shard(ShardConfig {
        sw_reta: Some(everything_here),
        ..ShardConfig::new(info(0, 2))
    });
    s.handle_rx(0, [udp_frame(4000)]);
    s.handle_timeout(LATER_NS);
    assert!(drain_msgs(&mut s).is_empty());
    assert_eq!(s.counters().rx_packets, 1);
    assert_eq!(s.stack().counters().rx_frames, 1);
}

#[test]
fn neighbour_frames_are_processed_here_and_copied_to_every_other_shard() {
    let mut s = shard(ShardConfig {
        copy_neighbour: true,
        ..ShardConfig::new(info(1, 3))
    });
    s.handle_rx(0, [arp_request()]);
    s.handle_timeout(LATER_NS);
    assert_eq!(
        drain_msgs(&mut s),
        vec![(0, MsgKind::Neighbour), (2, MsgKind::Neighbour)]
    );
    assert_eq!(s.counters().rx_packets, 1, "processed here too");
    // The stack answered the request: the reply is ready for the port.
    assert!(s.poll_tx().is_some(), "ARP reply transmitted");
}

#[test]
fn a_full_outbox_drops_the_message_and_counts_it() {
    let everything_to_shard_1 = Reta::from_entries(&[1; 128]).expect("reta");
    let mut s = shard(ShardConfig {
        sw_reta: Some(everything_to_shard_1),
        outbox_msgs_max: 1,
        ..ShardConfig::new(info(0, 2))
    });
    s.handle_rx(0, [udp_frame(4000), udp_frame(4001), udp_frame(4002)]);
    s.handle_timeout(LATER_NS);
    assert_eq!(drain_msgs(&mut s).len(), 1);
    let c = s.counters().msgs;
    assert_eq!((c.frames_tx, c.drop_outbox_full), (1, 2), "{c:?}");
}

#[test]
fn a_forwarded_frame_is_handed_to_this_shards_stack() {
    let mut s = shard(ShardConfig::new(info(1, 2)));
    s.handle_msg(
        LATER_NS,
        Msg::Frame(shard::FrameMsg {
            frame: udp_frame(4000),
            meta: stack::RxMeta::NONE,
        }),
    );
    let c = s.counters();
    assert_eq!((c.msgs.frames_rx, c.rx_packets), (1, 1));
    assert_eq!(s.stack().counters().rx_frames, 1);
}

#[test]
fn the_shard_asks_to_run_again_at_once_while_its_poll_is_unfinished() {
    let mut s = shard(ShardConfig {
        budget_packets: 1,
        ..ShardConfig::new(info(0, 1))
    });
    s.handle_rx(0, [udp_frame(4000), udp_frame(4001), udp_frame(4002)]);
    s.handle_timeout(LATER_NS);
    assert_eq!(s.counters().rx_packets, 1, "one descriptor per poll");
    assert_eq!(s.poll_timeout(), Some(LATER_NS), "more descriptors wait");
    // A driver runs it again while it asks for now, draining its output each time; it must
    // come to rest (the stack's answers — ICMP port unreachable — leave one per budget too).
    let mut iterations = 1;
    while s.poll_timeout().is_some_and(|t| t <= LATER_NS) {
        assert!(iterations < 20, "the shard never comes to rest");
        s.handle_timeout(LATER_NS);
        while s.poll_tx().is_some() {}
        iterations += 1;
    }
    assert_eq!(s.counters().rx_packets, 3);
    assert!(iterations >= 3, "three polls of one descriptor at least");
}

#[test]
fn a_message_to_a_shard_the_host_lacks_is_dropped_and_counted() {
    let reta = Reta::from_entries(&[5; 128]).expect("reta");
    let mut s = shard(ShardConfig {
        sw_reta: Some(reta),
        ..ShardConfig::new(info(0, 2))
    });
    s.handle_rx(0, [udp_frame(4000)]);
    s.handle_timeout(LATER_NS);
    assert!(drain_msgs(&mut s).is_empty());
    assert_eq!(s.counters().msgs.drop_no_such_shard, 1);
}

#[test]
fn the_stack_trusts_the_nics_checksum_verdicts_and_drops_what_it_found_bad() {
    let mut s = shard(ShardConfig::new(info(0, 1)));
    let mut bad = udp_frame(4001);
    let last = bad.len() - 1;
    bad[last] ^= 0xff; // payload byte: the UDP checksum no longer holds
    s.handle_rx(LATER_NS, [udp_frame(4000), bad, udp_frame(4002)]);
    s.handle_timeout(LATER_NS);
    let nic = s.nic().counters_total();
    assert_eq!(nic.rx_csum_bad_l4, 1);
    let c = s.stack().counters();
    assert_eq!(c.rx_frames, 3);
    assert_eq!(
        c.rx_ipv4_csum_trusted, 3,
        "every IPv4 header verified by the NIC"
    );
    assert_eq!(c.rx_csum_trusted, 2, "the good datagrams' checksums");
    assert_eq!(
        c.rx_drop_udp_malformed, 1,
        "the NIC's bad verdict, counted as before"
    );
}

#[test]
fn a_frame_forwarded_between_shards_keeps_the_nics_verdicts() {
    let everything_to_shard_1 = Reta::from_entries(&[1; 128]).expect("reta");
    let mut cfg = ShardConfig::new(info(0, 2));
    cfg.sw_reta = Some(everything_to_shard_1);
    let mut s0 = shard(cfg);
    let mut s1 = shard(ShardConfig::new(info(1, 2)));
    s0.handle_rx(LATER_NS, [udp_frame(4000)]);
    s0.handle_timeout(LATER_NS);
    let (to, msg) = s0.poll_msg().expect("forwarded");
    assert_eq!(to, 1);
    let Msg::Frame(f) = &msg else {
        panic!("a frame message")
    };
    assert!(f.meta.hash.is_some());
    assert_eq!(f.meta.csum.l4, stack::CsumVerdict::Good);
    s1.handle_msg(LATER_NS, msg);
    let c = s1.stack().counters();
    assert_eq!((c.rx_frames, c.rx_csum_trusted), (1, 1));
}
