//! ICMP errors about TCP connections still opening: the RFC 1122 §4.2.3.9 rules the stack
//! keeps by default (only hard errors end an open), and Linux's, behind
//! `StackConfig::tcp_icmp_errors_abort_opening` (`tcp_v4_err`, `tcp_req_err`) and
//! `StackConfig::tcp_syn_mss_follows_path_mtu` (`tcp_advertise_mss`).

mod common;

use common::*;
use stack::{RxMeta, SocketError, StackConfig};
use wire::icmpv4::Icmpv4Repr;

const HOST_UNREACHABLE: u8 = 1;
const S: u64 = 1_000_000_000;

fn linux_rules(mut cfg: StackConfig) -> StackConfig {
    cfg.tcp_icmp_errors_abort_opening = true;
    cfg
}

fn host_unreachable_about(frame: &[u8]) -> Vec<u8> {
    icmpv4_from_b_about(frame, |data| Icmpv4Repr::DstUnreachable {
        code: HOST_UNREACHABLE,
        data,
    })
}

/// A's SYN to B, captured (not delivered), and A's connection.
fn syn_sent(a: StackConfig) -> (Pair, stack::SocketHandle, Vec<u8>) {
    let mut p = Pair::with(a, config_b());
    resolve(&mut p);
    p.capture_a = true;
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let syn = p.captured_a.pop().expect("syn");
    (p, c, syn)
}

#[test]
fn host_unreachable_is_soft_in_syn_sent_unless_linux_rules_end_the_open() {
    // RFC 1122 §4.2.3.9: net/host unreachable are soft errors, the open goes on.
    let (mut p, c, syn) = syn_sent(config_a());
    p.a.receive(p.now, &host_unreachable_about(&syn), &RxMeta::NONE);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::SynSent));
    assert_eq!(p.a.counters().tcp_icmp_soft_errors, 1);
    assert_eq!(p.a.take_error(c), Ok(None));

    // Linux `tcp_v4_err`: in SYN-SENT every unreachable ends the connection with its error,
    // and nothing is sent (no RST for a connection the peer never saw).
    let (mut p, c, syn) = syn_sent(linux_rules(config_a()));
    p.a.receive(p.now, &host_unreachable_about(&syn), &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_icmp_opens_aborted, 1);
    assert_eq!(p.a.take_error(c), Ok(Some(SocketError::Unreachable)));
    p.exchange();
    assert!(p.captured_a.is_empty(), "nothing sent after the error");
}

#[test]
fn an_error_quoting_no_segment_in_flight_is_dropped_and_counted() {
    let (mut p, c, syn) = syn_sent(linux_rules(config_a()));
    let mut forged = syn.clone();
    forged[ETH + 20 + 4] ^= 0x80;
    p.a.receive(p.now, &host_unreachable_about(&forged), &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_icmp_out_of_window, 1);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::SynSent));
}

/// A listens, B connects; A's SYN-ACK is captured, so A's child stays in SYN-RECEIVED.
fn child_in_syn_received(a: StackConfig) -> (Pair, Vec<u8>) {
    let mut p = Pair::with(a, config_b());
    resolve(&mut p);
    let _l = p.a.tcp_listen(v4(IP_A, 80), 4).expect("listen");
    p.capture_a = true;
    p.b.tcp_connect(p.now, v4(IP_A, 80), 0).expect("connect");
    p.exchange();
    let synack = p.captured_a.pop().expect("syn-ack");
    assert_eq!(p.a.tcp_connection_count(), 1);
    (p, synack)
}

#[test]
fn host_unreachable_about_a_syn_ack_drops_the_child_only_with_linux_rules() {
    let (mut p, synack) = child_in_syn_received(config_a());
    p.a.receive(p.now, &host_unreachable_about(&synack), &RxMeta::NONE);
    p.exchange();
    assert_eq!(
        p.a.tcp_connection_count(),
        1,
        "a soft error: the child stays"
    );
    assert_eq!(p.a.counters().tcp_icmp_requests_dropped, 0);

    // Linux `tcp_req_err`: net/host unreachable quoting the SYN-ACK's ISN drops the request.
    let (mut p, synack) = child_in_syn_received(linux_rules(config_a()));
    p.a.receive(p.now, &host_unreachable_about(&synack), &RxMeta::NONE);
    p.exchange();
    assert_eq!(p.a.counters().tcp_icmp_requests_dropped, 1);
    assert_eq!(p.a.tcp_connection_count(), 0);
    assert!(p.captured_a.is_empty(), "dropped without a word");
}

/// The MSS option of a SYN frame A sent.
fn announced_mss(frame: &[u8]) -> Option<u16> {
    let ip = wire::Ipv4Packet::new_checked(&frame[ETH..]).expect("ipv4");
    let tcp = wire::TcpPacket::new_checked(ip.payload()).expect("tcp");
    let pair = wire::IpPair::V4 {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
    };
    wire::TcpRepr::parse(&tcp, &pair, wire::ChecksumCaps::ALL)
        .expect("parses")
        .max_seg_size
}

fn syn_after_frag_needed(a: StackConfig) -> Option<u16> {
    let (mut p, _c, syn) = syn_sent(a);
    let icmp = icmpv4_from_b_about(&syn, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 1_000,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    // A bare SYN is not resent at once; the retransmission timer resends it.
    p.exchange();
    assert!(p.captured_a.is_empty());
    p.advance(2 * S);
    announced_mss(p.captured_a.first().expect("the SYN again"))
}

#[test]
fn a_syn_after_frag_needed_announces_the_path_mss_only_when_it_follows_the_path_mtu() {
    // RFC 1191 §3.1: the MSS option comes from the interface (1,500 − 40).
    assert_eq!(syn_after_frag_needed(config_a()), Some(1460));
    // Linux: the route's MSS, which the path MTU lowered (1,000 − 40).
    let mut cfg = config_a();
    cfg.tcp_syn_mss_follows_path_mtu = true;
    assert_eq!(syn_after_frag_needed(cfg), Some(960));
}
