//! ECN (RFC 3168) through the stack's IP layer, over IPv4 and IPv6 frames: the codepoint the
//! engine chooses reaches the IPv4 TOS byte and the IPv6 traffic class, and a CE mark a
//! router sets on a received frame reaches the engine, which echoes it.

mod common;

use common::*;
use core::net::SocketAddr;
use stack::{SocketHandle, Stack};
use tcp::{EcnMode, tcpi_opt};
use wire::{Ecn, EthernetFrame, Ipv4Packet, Ipv6Packet, RxMeta};

const ECE: u8 = 0x40;
const CWR: u8 = 0x80;

/// A frame's IP codepoint, TCP flags and payload length; `None` for anything but TCP.
fn tcp_of(frame: &[u8]) -> Option<(Ecn, u8, usize)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let (ecn, tcp) = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            (ip.protocol() == wire::IpProtocol::TCP).then_some(())?;
            (Ecn::from_bits(ip.ecn()), ip.payload().to_vec())
        }
        0x86dd => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            (ip.next_header() == wire::IpProtocol::TCP).then_some(())?;
            (Ecn::from_bits(ip.traffic_class()), ip.payload().to_vec())
        }
        _ => return None,
    };
    let data_at = usize::from(tcp.get(12)? >> 4) * 4;
    Some((ecn, *tcp.get(13)?, tcp.len().saturating_sub(data_at)))
}

/// Sets a frame's ECN codepoint as a router would (the IPv4 header checksum follows).
fn mark(frame: &mut [u8], ecn: Ecn) {
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => {
            let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH..]);
            let dscp = ip.dscp();
            ip.set_dscp_ecn(dscp, ecn.bits());
            ip.fill_checksum();
        }
        _ => {
            // Traffic class: the low 4 bits of byte 0 and the high 4 of byte 1.
            let b = &mut frame[ETH + 1];
            *b = (*b & !0x30) | (ecn.bits() << 4);
        }
    }
}

fn drain(s: &mut Stack, now: u64) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

fn deliver(s: &mut Stack, now: u64, frames: &[Vec<u8>]) {
    for f in frames {
        s.receive(now, f, &RxMeta::NONE);
    }
}

fn open(server: SocketAddr) -> (Pair, SocketHandle, SocketHandle) {
    let mut p = Pair::new();
    p.a.tcp_set_ecn(EcnMode::On);
    p.b.tcp_set_ecn(EcnMode::Accept);
    resolve(&mut p);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    let syn = drain(&mut p.a, p.now);
    let (_, flags, _) = tcp_of(&syn[0]).unwrap();
    assert_eq!(flags & (ECE | CWR), ECE | CWR, "ECN-setup SYN");
    deliver(&mut p.b, p.now, &syn);
    let syn_ack = drain(&mut p.b, p.now);
    let (ecn, flags, _) = tcp_of(&syn_ack[0]).unwrap();
    assert_eq!(
        (ecn, flags & (ECE | CWR)),
        (Ecn::NotEct, ECE),
        "ECN-setup SYN-ACK"
    );
    deliver(&mut p.a, p.now, &syn_ack);
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    (p, c, s)
}

fn ce_echoed_and_answered_with_cwr(server: SocketAddr) {
    let (mut p, c, s) = open(server);
    let now = p.now;
    assert_eq!(
        p.a.tcp_info(now, c).unwrap().options & tcpi_opt::ECN,
        tcpi_opt::ECN
    );
    p.a.tcp_send(c, &[7u8; 3000]).unwrap();
    let mut data = drain(&mut p.a, now);
    let seen: Vec<_> = data.iter().filter_map(|f| tcp_of(f)).collect();
    assert!(
        seen.iter().all(|&(e, _, n)| n > 0 && e == Ecn::Ect0),
        "{seen:?}"
    );
    // A router on the way marks the first segment.
    mark(&mut data[0], Ecn::Ce);
    deliver(&mut p.b, now, &data);
    let acks = drain(&mut p.b, now);
    let acks_seen: Vec<_> = acks.iter().filter_map(|f| tcp_of(f)).collect();
    assert!(!acks_seen.is_empty());
    assert!(
        acks_seen
            .iter()
            .all(|&(e, f, n)| n == 0 && e == Ecn::NotEct && f & ECE != 0),
        "pure ACKs, not ECN-capable, echoing CE: {acks_seen:?}"
    );
    let info = p.b.tcp_info(now, s).unwrap();
    assert_eq!(info.options & tcpi_opt::ECN_SEEN, tcpi_opt::ECN_SEEN);
    deliver(&mut p.a, now, &acks);
    // The sender reduced its window: its next new data carries CWR, still ECT(0).
    p.a.tcp_send(c, &[8u8; 100]).unwrap();
    let more = drain(&mut p.a, now);
    let (e, f, n) = tcp_of(&more[0]).unwrap();
    assert_eq!((e, f & CWR), (Ecn::Ect0, CWR));
    assert!(n > 0);
    deliver(&mut p.b, now, &more);
    p.exchange();
    let mut buf = [0u8; 4096];
    let mut got = 0;
    while let Ok(k @ 1..) = p.b.tcp_recv(s, &mut buf) {
        got += k;
    }
    assert_eq!(got, 3100, "every byte arrived");
}

#[test]
fn ecn_over_ipv4_marks_new_data_ect0_and_echoes_a_ce_mark_until_cwr() {
    ce_echoed_and_answered_with_cwr(v4(IP_B, 80));
}

#[test]
fn ecn_over_ipv6_marks_new_data_ect0_and_echoes_a_ce_mark_until_cwr() {
    ce_echoed_and_answered_with_cwr(v6(IP6_B, 80));
}

#[test]
fn ecn_off_by_default_sends_nothing_ecn_capable() {
    let mut p = Pair::new();
    resolve(&mut p);
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let _ = p.b.tcp_accept(l).expect("accept");
    p.a.tcp_send(c, &[1u8; 2000]).unwrap();
    let frames = drain(&mut p.a, p.now);
    assert!(!frames.is_empty());
    assert!(
        frames
            .iter()
            .filter_map(|f| tcp_of(f))
            .all(|(e, f, _)| e == Ecn::NotEct && f & (ECE | CWR) == 0)
    );
}
