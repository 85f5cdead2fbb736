//! Path MTU discovery (RFC 1191, RFC 8201): an ICMP "fragmentation needed" about a segment in
//! flight lowers the connection's segment size and resends at once; forged or out-of-window
//! errors, and MTUs below the floor, cannot shrink it further.

mod common;

use common::*;
use stack::RxMeta;
use wire::icmpv4::Icmpv4Repr;

/// TCP payload of an IPv4/TCP frame A sent (with the timestamp option's 12 bytes).
fn payload_len(frame: &[u8]) -> usize {
    let ip_len = usize::from(u16::from_be_bytes([frame[ETH + 2], frame[ETH + 3]]));
    let tcp_hl = usize::from(frame[ETH + 20 + 12] >> 4) * 4;
    ip_len - 20 - tcp_hl
}

fn seq_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes([
        frame[ETH + 24],
        frame[ETH + 25],
        frame[ETH + 26],
        frame[ETH + 27],
    ])
}

/// A connected pair with A's segments captured, and the first full-size data segment A sent.
fn sending() -> (Pair, stack::SocketHandle, Vec<u8>) {
    let mut p = Pair::new();
    resolve(&mut p);
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    p.b.tcp_accept(l).expect("accept");
    p.capture_a = true;
    let n = p.a.tcp_send(c, &vec![7u8; 8_000]).expect("send");
    assert!(n > 0);
    p.exchange();
    let first = p
        .captured_a
        .iter()
        .find(|f| payload_len(f) > 1_000)
        .cloned()
        .expect("a full-size segment");
    p.captured_a.clear();
    (p, c, first)
}

#[test]
fn frag_needed_for_a_segment_in_flight_lowers_the_mss_and_resends_at_once() {
    let (mut p, c, seg) = sending();
    let before = p.a.tcp_max_segment(c).expect("mss");
    let icmp = icmpv4_from_b_about(&seg, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 1_000,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_path_mtu_reductions, 1);
    // 1,000 - 20 (IP) - 20 (TCP) = 960 of MSS, 948 of payload with timestamps.
    let after = p.a.tcp_max_segment(c).expect("mss");
    assert!(after < before && after == 948, "{before} -> {after}");
    p.exchange();
    let resent = p
        .captured_a
        .first()
        .expect("a retransmission at once, no timer");
    assert_eq!(
        seq_of(resent),
        seq_of(&seg),
        "the first unacknowledged segment again"
    );
    assert!(
        p.captured_a.iter().all(|f| payload_len(f) <= 948),
        "every later segment fits the path"
    );
}

#[test]
fn forged_or_tiny_mtu_errors_cannot_shrink_segments_below_the_floor() {
    let (mut p, c, seg) = sending();
    // A quote whose sequence number is not in flight is not acted on (RFC 5927 §4.1).
    let mut forged = seg.clone();
    forged[ETH + 24] ^= 0x80;
    let icmp = icmpv4_from_b_about(&forged, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 600,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_path_mtu_reductions, 0);
    // A genuine error naming 68 bytes is floored at 576 (RFC 791): MSS 536, payload 524.
    let icmp = icmpv4_from_b_about(&seg, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 68,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    assert_eq!(p.a.tcp_max_segment(c), Ok(524));
    // Once the segments are in flight again, a second error that would go no lower changes
    // nothing and is counted as such.
    p.exchange();
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    let k = p.a.counters();
    assert_eq!((k.tcp_path_mtu_reductions, k.tcp_path_mtu_ignored), (1, 1));
}

/// The IPv4 header's TOS byte and DF bit of a frame.
fn tos_and_df(frame: &[u8]) -> (u8, bool) {
    (frame[ETH + 1], frame[ETH + 6] & 0x40 != 0)
}

/// Lets A's data in flight (lost while captured) be resent and acknowledged, then sends `n`
/// bytes from A and returns the (captured) frame that carried them.
fn next_segment(p: &mut Pair, c: stack::SocketHandle, n: usize) -> Vec<u8> {
    p.captured_a.clear();
    p.capture_a = false;
    p.advance(5_000 * MS);
    p.exchange();
    p.capture_a = true;
    p.a.tcp_send(c, &vec![1; n]).expect("send");
    p.exchange();
    p.captured_a
        .iter()
        .rev()
        .find(|f| payload_len(f) == n)
        .cloned()
        .expect("the segment")
}

#[test]
fn ip_tos_marks_outbound_segments_and_tcp_keeps_the_ecn_bits() {
    let (mut p, c, seg) = sending();
    assert_eq!(tos_and_df(&seg), (0, true), "TOS 0 and DF by default");
    // 0x2b: DSCP 10 (AF11) and ECN bits 11, which are TCP's to set, not the socket's.
    p.a.set_option(c, stack::SocketOption::IpTos(0x2b))
        .expect("IP_TOS");
    assert_eq!(p.a.tcp_socket_options(c).expect("options").tos, 0x28);
    let f = next_segment(&mut p, c, 100);
    assert_eq!(tos_and_df(&f), (0x28, true));
}

#[test]
fn pmtu_discovery_off_clears_df_and_ignores_frag_needed() {
    let (mut p, c, seg) = sending();
    p.a.set_option(
        c,
        stack::SocketOption::PathMtuDiscovery(stack::PathMtuDiscovery::Dont),
    )
    .expect("IP_MTU_DISCOVER");
    let before = p.a.tcp_max_segment(c).expect("mss");
    let icmp = icmpv4_from_b_about(&seg, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 1_000,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_path_mtu_reductions, 0);
    assert_eq!(p.a.counters().tcp_path_mtu_ignored, 1);
    assert_eq!(p.a.tcp_max_segment(c).expect("mss"), before);
    let f = next_segment(&mut p, c, 100);
    assert_eq!(tos_and_df(&f), (0, false), "no DF");
    // Back to the default: DF again, and errors count.
    p.a.set_option(
        c,
        stack::SocketOption::PathMtuDiscovery(stack::PathMtuDiscovery::Want),
    )
    .expect("IP_MTU_DISCOVER");
    let icmp = icmpv4_from_b_about(&f, |data| Icmpv4Repr::FragNeeded {
        next_hop_mtu: 1_000,
        data,
    });
    p.a.receive(p.now, &icmp, &RxMeta::NONE);
    assert_eq!(p.a.counters().tcp_path_mtu_reductions, 1);
}
