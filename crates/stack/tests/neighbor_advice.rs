//! Negative advice from TCP to the neighbour cache (RFC 1122 §2.3.2.1 "higher-layer advice",
//! §4.2.3.5): a connection whose SYN keeps timing out makes the stack re-validate the next
//! hop's link-layer address with a broadcast request, so a wrong entry — here an ARP reply
//! with one bit of its sender MAC flipped, what the simulator's seeds 1005159, 1007149,
//! 1007254, 1008864 and 1013914 met — stops blackholing the connection long before the entry
//! would expire (30 s).
mod common;

use common::*;
use core::net::IpAddr;
use stack::{RxMeta, SocketEvent, Stack};
use tcp::State;
use wire::EthernetAddress;

/// Offset of the sender hardware address's fifth byte in an ARP frame.
const ARP_SHA_BYTE_4: usize = ETH + 8 + 4;

fn drain_events(s: &mut Stack) -> Vec<SocketEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn a_corrupted_arp_reply_is_revalidated_after_two_syn_timeouts_and_the_connection_opens() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    // A's ARP request reaches B; B's reply reaches A with one bit of its sender MAC flipped.
    let req = p.a.poll_transmit(p.now).expect("arp request");
    p.b.receive(p.now, &req, &RxMeta::NONE);
    let mut reply = p.b.poll_transmit(p.now).expect("arp reply");
    reply[ARP_SHA_BYTE_4] ^= 0x40;
    p.a.receive(p.now, &reply, &RxMeta::NONE);
    let wrong = EthernetAddress([0x02, 0, 0, 0, 0x40, 0x0b]);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(wrong));

    // The SYN and its first retransmission go to a MAC nobody has.
    p.advance(1_500 * MS);
    assert_eq!(p.a.tcp_state(c), Some(State::SynSent));
    assert!(p.b.counters().rx_drop_other_mac >= 2);
    assert_eq!(
        p.a.counters().neighbor_revalidations,
        0,
        "one timeout is not yet doubt"
    );

    // The second timeout (3 s) gives negative advice: a broadcast request, answered rightly.
    p.advance(2 * S);
    assert_eq!(p.a.counters().neighbor_revalidations, 1);
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(MAC_B));

    // The next retransmission (7 s) opens the connection, far before the entry's 30 s expiry.
    p.advance(4 * S);
    assert_eq!(p.a.tcp_state(c), Some(State::Established));
    drain_events(&mut p.b);
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    p.a.tcp_send(c, b"hello").expect("send");
    p.advance(100 * MS);
    let mut buf = [0u8; 16];
    let n = p.b.tcp_recv(s, &mut buf).expect("recv");
    assert_eq!(&buf[..n], b"hello");
}

#[test]
fn negative_advice_from_many_connections_sends_one_request_per_retry_interval() {
    let mut p = Pair::new();
    resolve(&mut p);
    let sent_before = p.a.counters().arp_requests_sent;
    // Twenty SYNs into a path that swallows everything A sends: their timeouts coincide.
    p.capture_a = true;
    for _ in 0..20 {
        p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    }
    p.advance(20 * S);
    // Timeouts at 1, 3, 7 and 15 s; advice from the second on: 3, 7 and 15 s, one request
    // each however many connections advised.
    assert_eq!(p.a.counters().neighbor_revalidations, 3);
    assert_eq!(p.a.counters().arp_requests_sent - sent_before, 3);
    // The entry stayed in use meanwhile: nothing waited behind a resolution.
    assert_eq!(p.a.counters().arp_pending_queue_full, 0);
}
