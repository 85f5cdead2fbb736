//! A child of a listener that dies before the application accepts it gives its backlog slot
//! back (issue 20 finding 6): reset while half-open (SYN-RECEIVED, holding a SYN-backlog
//! slot) or once established (holding an accept-backlog slot), the next client is served at
//! once, and accept never hands out the dead one.
mod common;

use common::*;
use stack::{RxMeta, SocketError, StackConfig};
use tcp::State;
use wire::{
    ChecksumCaps, EthernetFrame, IpPair, Ipv4Packet, Ipv4Repr, SeqNumber, TcpFlags, TcpPacket,
    TcpRepr,
};

/// B with an accept backlog of 1, a SYN backlog of 1 and no cookies: one slot each, so a
/// slot not given back refuses the next client.
fn pair() -> Pair {
    let mut b: StackConfig = config_b();
    b.limits.tcp_syn_backlog_max = 1;
    b.limits.tcp_syn_cookies = false;
    let mut p = Pair::with(config_a(), b);
    resolve(&mut p);
    p
}

/// `frame` (an Ethernet/IPv4/TCP frame from A) turned into an RST at the SYN's sequence
/// number plus one, checksums recomputed.
fn rst_after_syn(frame: &[u8]) -> Vec<u8> {
    let ip = Ipv4Packet::new_checked(&frame[ETH..]).expect("ipv4");
    let ip_repr = Ipv4Repr::parse(&ip, ChecksumCaps::ALL).expect("ipv4 parses");
    let pair = IpPair::V4 {
        src: ip_repr.src_addr,
        dst: ip_repr.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
    let syn = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL).expect("tcp parses");
    assert_eq!(syn.flags, TcpFlags::SYN);
    let rst = TcpRepr {
        seq_number: syn.seq_number + 1,
        ack_number: SeqNumber(0),
        flags: TcpFlags::RST,
        window_len: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [None; 4],
        timestamp: None,
        payload: &[],
        ..syn
    };
    let ip_out = Ipv4Repr {
        payload_len: rst.buffer_len(),
        ..ip_repr
    };
    let mut f = frame[..ETH + 20 + rst.buffer_len()].to_vec();
    ip_out
        .emit(
            &mut Ipv4Packet::new_unchecked(&mut f[ETH..]),
            ChecksumCaps::ALL,
        )
        .expect("ip header");
    rst.emit(
        &mut TcpPacket::new_unchecked(&mut f[ETH + 20..]),
        &pair,
        ChecksumCaps::ALL,
    )
    .expect("tcp header");
    assert!(EthernetFrame::new_checked(&f[..]).is_ok());
    f
}

/// A second client connects and must be served within the exchange, with no retransmitted
/// SYN: B accepts exactly it, then nothing more.
fn next_client_is_served_at_once(p: &mut Pair, l: stack::SocketHandle) {
    let c2 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    assert_eq!(p.a.tcp_state(c2), Some(State::Established));
    let (s, peer) =
        p.b.tcp_accept(l)
            .expect("the second client waits in the backlog");
    assert_eq!(peer, p.a.local_addr(c2).expect("bound"));
    assert_eq!(p.b.tcp_state(s), Some(State::Established));
    assert_eq!(p.b.tcp_accept(l).err(), Some(SocketError::WouldBlock));
    assert_eq!(p.b.counters().tcp_listen_backlog_full, 0);
}

#[test]
fn an_established_child_reset_before_accept_gives_its_backlog_slot_back() {
    let mut p = pair();
    let l = p.b.tcp_listen(v4(IP_B, 80), 1).expect("listen");
    let c1 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    assert_eq!(p.a.tcp_state(c1), Some(State::Established));
    // Never accepted: the client resets it.
    p.a.tcp_abort(c1).expect("abort");
    p.exchange();
    assert_eq!(p.b.tcp_connection_count(), 0);
    next_client_is_served_at_once(&mut p, l);
}

#[test]
fn a_half_open_child_reset_in_syn_received_gives_its_syn_backlog_slot_back() {
    let mut p = pair();
    let l = p.b.tcp_listen(v4(IP_B, 80), 1).expect("listen");
    // A's SYN reaches B; B's SYN-ACK is lost; A gives up and its RST arrives instead.
    p.capture_a = true;
    let c1 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    p.capture_a = false;
    let syn = p.captured_a.pop().expect("A's SYN");
    p.a.tcp_abort(c1).expect("abort");
    let now = p.now;
    p.b.receive(now, &syn, &RxMeta::NONE);
    while p.b.poll_transmit(now).is_some() {}
    assert_eq!(p.b.tcp_connection_count(), 1, "the half-open child");
    p.b.receive(now, &rst_after_syn(&syn), &RxMeta::NONE);
    // The dead child is released on the stack's next turn (its deferred work).
    p.b.handle_timeout(now);
    while p.b.poll_transmit(now).is_some() {}
    assert_eq!(p.b.tcp_connection_count(), 0, "the RST removed it");
    next_client_is_served_at_once(&mut p, l);
}
