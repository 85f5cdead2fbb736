//! IP input and output between two stacks: echo, fragmentation and reassembly, ICMP errors,
//! UDP, RST for closed TCP ports.
mod common;

use common::*;
use core::net::{IpAddr, Ipv4Addr};
use stack::RxMeta;

use wire::icmpv4::Icmpv4Repr;
use wire::icmpv6::Icmpv6Repr;
use wire::{
    ChecksumCaps, Icmpv4Packet, Icmpv6Packet, IpPair, IpProtocol, Ipv4Packet, Ipv6Packet,
    SeqNumber, TcpFlags, TcpPacket, TcpRepr,
};

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

#[test]
fn ping_v4_gets_an_echo_reply() {
    let mut p = Pair::new();
    p.a.send_ping(p.now, IpAddr::V4(IP_B), 0x1234, 9, b"ping-data")
        .expect("ping");
    p.exchange();
    let r = p.a.poll_echo_reply().expect("reply");
    assert_eq!(
        (r.from, r.ident, r.seq_no, r.data_len_bytes),
        (IpAddr::V4(IP_B), 0x1234, 9, 9)
    );
    assert_eq!(p.b.counters().icmp_echo_replies_sent, 1);
}

#[test]
fn ping_v6_gets_an_echo_reply() {
    let mut p = Pair::new();
    p.a.send_ping(p.now, IpAddr::V6(IP6_B), 5, 6, &[0xaa; 100])
        .expect("ping");
    p.exchange();
    let r = p.a.poll_echo_reply().expect("reply");
    assert_eq!(
        (r.from, r.ident, r.seq_no, r.data_len_bytes),
        (IpAddr::V6(IP6_B), 5, 6, 100)
    );
}

#[test]
fn udp_round_trip_v4_and_v6() {
    let mut p = Pair::new();
    for (local_b, local_a) in [
        (v4(IP_B, 5353), v4(IP_A, 0)),
        (v6(IP6_B, 5353), v6(IP6_A, 0)),
    ] {
        let srv = p.b.udp_bind(local_b).expect("bind b");
        let cli = p.a.udp_bind(local_a).expect("bind a");
        p.a.udp_send_to(p.now, cli, local_b, b"question")
            .expect("send");
        p.exchange();
        let ev = p.b.poll_event().expect("readable event");
        assert_eq!(ev.handle, srv);
        assert!(ev.readiness.contains(stack::Readiness::READABLE));
        let q = p.b.udp_recv_from(srv).expect("question");
        assert_eq!(q.payload, b"question");
        p.b.udp_send_to(p.now, srv, q.src, b"answer")
            .expect("reply");
        p.exchange();
        let a = p.a.udp_recv_from(cli).expect("answer");
        assert_eq!((a.src, a.payload.as_slice()), (local_b, &b"answer"[..]));
        assert_eq!(p.a.udp_recv_from(cli), Err(stack::SocketError::WouldBlock));
    }
}

#[test]
fn udp_bind_conflicts_and_wildcard_delivery() {
    let mut p = Pair::new();
    let any =
        p.b.udp_bind(v4(Ipv4Addr::UNSPECIFIED, 9))
            .expect("wildcard");
    assert_eq!(
        p.b.udp_bind(v4(IP_B, 9)),
        Err(stack::SocketError::AddrInUse)
    );
    assert_eq!(
        p.b.udp_bind(v4(Ipv4Addr::new(192, 0, 2, 1), 10)),
        Err(stack::SocketError::AddrNotAvailable)
    );
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, cli, v4(IP_B, 9), b"x")
        .expect("send");
    p.exchange();
    assert_eq!(p.b.udp_recv_from(any).map(|d| d.payload), Ok(b"x".to_vec()));
    p.b.close(p.now, any).expect("close");
    assert_eq!(
        p.b.udp_recv_from(any),
        Err(stack::SocketError::InvalidHandle)
    );
}

#[test]
fn udp_receive_queue_is_bounded_and_counts_drops() {
    let mut cb = config_b();
    cb.limits.udp_rx_queue_datagrams_max = 3;
    let mut p = Pair::with(config_a(), cb);
    let srv = p.b.udp_bind(v4(IP_B, 9)).expect("bind");
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    resolve(&mut p);
    for i in 0..5u8 {
        p.a.udp_send_to(p.now, cli, v4(IP_B, 9), &[i])
            .expect("send");
    }
    p.exchange();
    assert_eq!(p.b.counters().udp_rx_socket_full, 2);
    assert_eq!(p.b.udp_recv_from(srv).map(|d| d.payload), Ok(vec![0]));
}

/// Sends one datagram of `len` bytes from A to B with A's frames captured (not delivered).
fn captured_fragments(p: &mut Pair, dst: core::net::SocketAddr, len: usize) -> Vec<Vec<u8>> {
    let cli =
        p.a.udp_bind(if dst.is_ipv4() {
            v4(IP_A, 0)
        } else {
            v6(IP6_A, 0)
        })
        .expect("bind");
    p.capture_a = true;
    p.a.udp_send_to(p.now, cli, dst, &payload(len))
        .expect("send");
    p.exchange();
    p.capture_a = false;
    std::mem::take(&mut p.captured_a)
}

#[test]
fn v4_fragments_reassemble_in_any_order() {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v4(IP_B, 9)).expect("bind");
    let frags = captured_fragments(&mut p, v4(IP_B, 9), 4000);
    assert_eq!(frags.len(), 3);
    assert_eq!(p.a.counters().tx_fragments, 3);
    for order in [[2, 0, 1], [1, 2, 0], [0, 1, 2]] {
        for i in order {
            p.b.receive(p.now, &frags[i], &RxMeta::NONE);
        }
        let d = p.b.udp_recv_from(srv).expect("reassembled");
        assert_eq!(d.payload, payload(4000));
    }
    assert_eq!(p.b.counters().rx_reassembled, 3);
    assert_eq!(p.b.reassembly_in_progress(), 0);
}

#[test]
fn v6_fragments_reassemble_in_any_order() {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v6(IP6_B, 9)).expect("bind");
    let frags = captured_fragments(&mut p, v6(IP6_B, 9), 3000);
    assert_eq!(frags.len(), 3);
    for i in [2, 1, 0] {
        p.b.receive(p.now, &frags[i], &RxMeta::NONE);
    }
    assert_eq!(p.b.udp_recv_from(srv).map(|d| d.payload), Ok(payload(3000)));
}

#[test]
fn overlapping_v4_fragment_drops_the_datagram() {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v4(IP_B, 9)).expect("bind");
    let mut frags = captured_fragments(&mut p, v4(IP_B, 9), 4000);
    let (off1, _) = v4_frag(&frags[1]);
    v4_set_frag_offset(&mut frags[1], off1 - 8);
    for f in &frags {
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    assert_eq!(p.b.udp_recv_from(srv), Err(stack::SocketError::WouldBlock));
    assert_eq!(p.b.counters().rx_drop_reasm_overlap, 1);
    // The fragment after the overlap belongs to a condemned datagram.
    assert_eq!(p.b.counters().rx_drop_reasm_condemned, 1);
    // The condemned datagram is gone once its timer runs out, and is not counted twice.
    p.advance(31 * S);
    assert_eq!(p.b.reassembly_in_progress(), 0);
    assert_eq!(p.b.counters().rx_drop_reasm_timeout, 0);
}

#[test]
fn overlapping_v6_fragment_drops_the_datagram() {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v6(IP6_B, 9)).expect("bind");
    let mut frags = captured_fragments(&mut p, v6(IP6_B, 9), 3000);
    v6_set_frag_offset(&mut frags[1], 1440);
    for f in &frags {
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    assert_eq!(p.b.udp_recv_from(srv), Err(stack::SocketError::WouldBlock));
    assert_eq!(p.b.counters().rx_drop_reasm_overlap, 1);
}

#[test]
fn incomplete_datagram_times_out_and_is_counted() {
    let mut p = Pair::new();
    resolve(&mut p);
    let frags = captured_fragments(&mut p, v4(IP_B, 9), 4000);
    p.b.receive(p.now, &frags[0], &RxMeta::NONE);
    p.b.receive(p.now, &frags[2], &RxMeta::NONE);
    assert_eq!(p.b.reassembly_in_progress(), 1);
    p.advance(p.b.config().limits.reasm_timeout_ns + 1);
    assert_eq!(p.b.counters().rx_drop_reasm_timeout, 1);
    assert_eq!(p.b.reassembly_in_progress(), 0);
}

#[test]
fn full_reassembly_table_evicts_the_oldest_and_counts_it() {
    let mut cb = config_b();
    cb.limits.reasm_datagrams_max = 2;
    let mut p = Pair::with(config_a(), cb);
    resolve(&mut p);
    for _ in 0..3 {
        let frags = captured_fragments(&mut p, v4(IP_B, 9), 2000);
        p.b.receive(p.now, &frags[0], &RxMeta::NONE);
    }
    assert_eq!(p.b.counters().rx_reasm_evicted_table, 1);
    assert_eq!(p.b.counters().rx_drop_reasm_table_full, 0);
    assert_eq!(p.b.reassembly_in_progress(), 2);
}

#[test]
fn datagram_over_the_byte_limit_is_dropped() {
    let mut cb = config_b();
    cb.limits.reasm_bytes_max = 2000;
    let mut p = Pair::with(config_a(), cb);
    resolve(&mut p);
    let frags = captured_fragments(&mut p, v4(IP_B, 9), 4000);
    for f in &frags {
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    assert!(p.b.counters().rx_drop_reasm_too_big >= 1);
    assert_eq!(p.b.counters().rx_reassembled, 0);
}

#[test]
fn closed_udp_port_gets_icmp_port_unreachable_quoting_the_datagram() {
    let mut p = Pair::new();
    resolve(&mut p);
    let cli = p.a.udp_bind(v4(IP_A, 4444)).expect("bind");
    p.a.udp_send_to(p.now, cli, v4(IP_B, 9999), &[1; 1000])
        .expect("send");
    p.log_b.clear();
    p.exchange();
    assert_eq!(p.b.counters().udp_rx_no_socket, 1);
    assert_eq!(p.a.counters().icmp_errors_received, 1);
    // The error reaches the socket that sent the datagram (RFC 1122 §4.1.3.3).
    let evs: Vec<_> = std::iter::from_fn(|| p.a.poll_event()).collect();
    assert!(
        evs.iter()
            .any(|e| e.handle == cli && e.readiness.contains(stack::Readiness::ERROR))
    );
    assert_eq!(
        p.a.take_error(cli),
        Ok(Some(stack::SocketError::Unreachable))
    );
    assert_eq!(p.a.take_error(cli), Ok(None));
    assert_eq!(p.a.counters().icmp_errors_to_sockets, 1);
    let f = p.log_b.last().expect("icmp frame");
    let ip = Ipv4Packet::new_checked(&f[ETH..]).unwrap();
    assert_eq!(ip.protocol(), IpProtocol::ICMP);
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    match Icmpv4Repr::parse(&icmp, ChecksumCaps::ALL).unwrap() {
        Icmpv4Repr::DstUnreachable { code, data } => {
            assert_eq!(code, 3);
            // RFC 1812 §4.3.2.3: the whole error stays within 576 bytes.
            assert_eq!(20 + 8 + data.len(), 576);
            let quoted = Ipv4Packet::new_unchecked(data);
            assert_eq!((quoted.src_addr(), quoted.dst_addr()), (IP_A, IP_B));
            assert_eq!(&data[20..22], &4444u16.to_be_bytes());
        }
        other => panic!("not a port unreachable: {other:?}"),
    }
}

#[test]
fn closed_udp_port_v6_gets_icmpv6_port_unreachable() {
    let mut p = Pair::new();
    resolve(&mut p);
    let cli = p.a.udp_bind(v6(IP6_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, cli, v6(IP6_B, 9999), b"x")
        .expect("send");
    p.log_b.clear();
    p.exchange();
    let f = p.log_b.last().expect("icmp frame");
    let ip = Ipv6Packet::new_checked(&f[ETH..]).unwrap();
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    let repr = Icmpv6Repr::parse(&icmp, ip.src_addr(), ip.dst_addr(), ChecksumCaps::ALL).unwrap();
    assert!(matches!(repr, Icmpv6Repr::DstUnreachable { code: 4, .. }));
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut p = Pair::new();
    resolve(&mut p);
    let burst = u64::from(p.b.config().limits.icmp_errors_burst_max);
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    for _ in 0..burst + 5 {
        p.a.udp_send_to(p.now, cli, v4(IP_B, 9999), b"x")
            .expect("send");
    }
    p.exchange();
    let c = p.b.counters();
    assert_eq!((c.icmp_errors_sent, c.icmp_errors_rate_limited), (burst, 5));
    // Tokens come back with time.
    p.advance(S);
    p.a.udp_send_to(p.now, cli, v4(IP_B, 9999), b"x")
        .expect("send");
    p.exchange();
    assert_eq!(p.b.counters().icmp_errors_sent, burst + 1);
}

#[test]
fn broadcast_to_closed_port_gets_no_icmp_error() {
    let mut p = Pair::new();
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, cli, v4(Ipv4Addr::new(10, 0, 0, 255), 9999), b"x")
        .expect("send");
    p.exchange();
    let c = p.b.counters();
    assert_eq!(
        (
            c.udp_rx_no_socket,
            c.icmp_errors_sent,
            c.icmp_errors_suppressed
        ),
        (1, 0, 1)
    );
}

/// A TCP segment from A to B, as a frame.
fn tcp_frame(flags: TcpFlags, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let seg = TcpRepr {
        payload,
        ..TcpRepr::bare(40000, 80, SeqNumber(seq), SeqNumber(ack), flags, 1000)
    };
    tcp_v4_frame((MAC_A, IP_A), (MAC_B, IP_B), &seg)
}

fn only_tcp_reply(p: &mut Pair) -> (TcpFlags, u32, u32) {
    let f = p.b.poll_transmit(p.now).expect("a reply");
    assert!(p.b.poll_transmit(p.now).is_none());
    let ip = Ipv4Packet::new_checked(&f[ETH..]).unwrap();
    assert!(ip.dont_frag());
    let pair = IpPair::V4 {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
    };
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    let r = TcpRepr::parse(&tcp, &pair, ChecksumCaps::ALL).unwrap();
    assert_eq!((r.src_port, r.dst_port), (80, 40000));
    (r.flags, r.seq_number.0, r.ack_number.0)
}

#[test]
fn closed_tcp_port_syn_gets_rst_ack_acknowledging_the_syn() {
    let mut p = Pair::new();
    resolve(&mut p);
    // RFC 9293 §3.10.7.1: no ACK → <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>; SYN counts 1.
    p.b.receive(
        p.now,
        &tcp_frame(TcpFlags::SYN, 1000, 0, &[]),
        &RxMeta::NONE,
    );
    assert_eq!(
        only_tcp_reply(&mut p),
        (TcpFlags::RST | TcpFlags::ACK, 0, 1001)
    );
    p.b.receive(
        p.now,
        &tcp_frame(TcpFlags::SYN | TcpFlags::FIN, 0xffff_fff0, 0, b"abcd"),
        &RxMeta::NONE,
    );
    assert_eq!(
        only_tcp_reply(&mut p),
        (TcpFlags::RST | TcpFlags::ACK, 0, 0xffff_fff6)
    );
    assert_eq!(p.b.counters().tcp_rx_no_listener_rst_sent, 2);
}

#[test]
fn closed_tcp_port_ack_gets_rst_with_seq_from_the_ack() {
    let mut p = Pair::new();
    resolve(&mut p);
    // RFC 9293 §3.10.7.1: ACK set → <SEQ=SEG.ACK><CTL=RST>.
    p.b.receive(
        p.now,
        &tcp_frame(TcpFlags::ACK | TcpFlags::PSH, 5, 777_777, b"data"),
        &RxMeta::NONE,
    );
    assert_eq!(only_tcp_reply(&mut p), (TcpFlags::RST, 777_777, 0));
}

#[test]
fn closed_tcp_port_rst_is_not_answered() {
    let mut p = Pair::new();
    resolve(&mut p);
    p.b.receive(p.now, &tcp_frame(TcpFlags::RST, 5, 0, &[]), &RxMeta::NONE);
    assert!(p.b.poll_transmit(p.now).is_none());
    assert_eq!(p.b.counters().tcp_rx_no_listener_rst_ignored, 1);
}

#[test]
fn corrupted_ipv4_header_checksum_is_a_counted_drop() {
    let mut p = Pair::new();
    resolve(&mut p);
    let mut f = tcp_frame(TcpFlags::SYN, 1, 0, &[]);
    f[ETH + 8] ^= 0x01; // TTL changed, checksum not fixed
    p.b.receive(p.now, &f, &RxMeta::NONE);
    assert_eq!(p.b.counters().rx_drop_ipv4_bad_checksum, 1);
    assert!(p.b.poll_transmit(p.now).is_none());
}

#[test]
fn packets_for_other_hosts_are_counted_drops() {
    let mut p = Pair::new();
    resolve(&mut p);
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.capture_a = true;
    p.a.udp_send_to(p.now, cli, v4(IP_B, 9), b"x")
        .expect("send");
    p.exchange();
    let mut f = p.captured_a.pop().expect("frame");
    f[0..6].copy_from_slice(&[0x02, 9, 9, 9, 9, 9]);
    p.b.receive(p.now, &f, &RxMeta::NONE);
    assert_eq!(p.b.counters().rx_drop_other_mac, 1);
}

#[test]
fn atomic_v6_fragment_bypasses_reassembly() {
    let mut cb = config_b();
    cb.limits.reasm_datagrams_max = 0; // any real reassembly would be refused
    let mut p = Pair::with(config_a(), cb);
    resolve(&mut p);
    let srv = p.b.udp_bind(v6(IP6_B, 9)).expect("bind");
    let mut f = captured_fragments(&mut p, v6(IP6_B, 9), 40)
        .pop()
        .expect("frame");
    // Insert a fragment header with offset 0 and M = 0 (RFC 6946) after the fixed header.
    let nh = f[ETH + 6];
    f[ETH + 6] = 44;
    let pl = u16::from_be_bytes([f[ETH + 4], f[ETH + 5]]) + 8;
    f[ETH + 4..ETH + 6].copy_from_slice(&pl.to_be_bytes());
    let at = ETH + 40;
    f.splice(at..at, [nh, 0, 0, 0, 0xca, 0xfe, 0, 1]);
    p.b.receive(p.now, &f, &RxMeta::NONE);
    assert_eq!(p.b.udp_recv_from(srv).map(|d| d.payload), Ok(payload(40)));
    assert_eq!(p.b.counters().rx_drop_reasm_table_full, 0);
}

#[test]
fn traffic_to_our_own_address_is_a_counted_drop() {
    let mut p = Pair::new();
    let s = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, s, v4(IP_A, 9), b"me").expect("send");
    assert!(p.a.poll_transmit(p.now).is_none());
    assert_eq!(p.a.counters().tx_drop_loopback, 1);
}

#[test]
fn our_own_frames_looped_back_are_dropped() {
    let mut p = Pair::new();
    p.a.send_ping(p.now, IpAddr::V4(IP_B), 1, 1, b"")
        .expect("ping");
    let arp = p.a.poll_transmit(p.now).expect("arp request");
    p.a.receive(p.now, &arp, &RxMeta::NONE);
    assert_eq!(p.a.counters().rx_drop_bad_src_mac, 1);
    assert_eq!(p.a.counters().arp_rx_conflict, 0);
}

/// Runs a fixed conversation and returns every frame both sides sent, in order.
fn conversation_trace() -> Vec<Vec<u8>> {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    let u = p.a.udp_bind(v6(IP6_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, u, v6(IP6_B, 7), &payload(3000))
        .expect("send");
    let mut trace = Vec::new();
    for step in 0..50u64 {
        while let Some(f) = p.a.poll_transmit(p.now) {
            trace.push(f.clone());
            p.b.receive(p.now, &f, &RxMeta::NONE);
        }
        while let Some(f) = p.b.poll_transmit(p.now) {
            trace.push(f.clone());
            p.a.receive(p.now, &f, &RxMeta::NONE);
        }
        if let Ok((s, _)) = p.b.tcp_accept(l) {
            let _ = p.b.tcp_send(s, &payload(5000));
        }
        if step == 3 {
            let _ = p.a.tcp_send(c, b"hello");
        }
        p.now += 10 * MS;
        p.a.handle_timeout(p.now);
        p.b.handle_timeout(p.now);
    }
    trace
}

#[test]
fn identical_runs_emit_identical_frames() {
    let one = conversation_trace();
    assert!(one.len() > 10);
    assert_eq!(one, conversation_trace());
}

#[test]
fn socket_table_is_bounded_and_stale_handles_stay_invalid() {
    let mut cb = config_b();
    cb.limits.sockets_max = 2;
    let mut b = stack::Stack::new(cb);
    let s1 = b.udp_bind(v4(IP_B, 1)).expect("1");
    let _s2 = b.udp_bind(v4(IP_B, 2)).expect("2");
    assert_eq!(
        b.udp_bind(v4(IP_B, 3)),
        Err(stack::SocketError::TooManySockets)
    );
    b.close(0, s1).expect("close");
    let s3 = b.udp_bind(v4(IP_B, 3)).expect("slot reused");
    assert_eq!(b.local_addr(s1), Err(stack::SocketError::InvalidHandle));
    assert_eq!(b.local_addr(s3), Ok(v4(IP_B, 3)));
    // Port 1 is free again.
    assert!(b.udp_bind(v4(IP_B, 1)).is_err(), "table still full");
    b.close(0, s3).expect("close");
    assert!(b.udp_bind(v4(IP_B, 1)).is_ok());
}

#[test]
fn off_link_destinations_go_to_the_gateway_or_are_counted_drops() {
    let mut ca = config_a();
    ca.interface.gateway_v4 = Some(IP_B);
    let mut p = Pair::with(ca, config_b());
    let far = Ipv4Addr::new(192, 0, 2, 1);
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.a.udp_send_to(p.now, cli, v4(far, 9), b"x").expect("send");
    p.exchange();
    // Resolved the gateway (not the far host) and handed it the packet, which B, a host,
    // does not forward.
    assert_eq!(p.a.neighbor(p.now, IpAddr::V4(IP_B)), Some(MAC_B));
    assert_eq!(p.b.counters().rx_drop_not_for_us, 1);
    // Without a gateway (IPv6 here) the packet has nowhere to go.
    let cli6 = p.a.udp_bind(v6(IP6_A, 0)).expect("bind");
    let far6: core::net::Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    p.a.udp_send_to(p.now, cli6, v6(far6, 9), b"x")
        .expect("send");
    assert_eq!(p.a.counters().tx_drop_no_route, 1);
}

#[test]
fn ipv4_options_are_skipped_and_the_datagram_delivered() {
    let mut p = Pair::new();
    resolve(&mut p);
    let srv = p.b.udp_bind(v4(IP_B, 9)).expect("bind");
    let mut f = captured_fragments(&mut p, v4(IP_B, 9), 10)
        .pop()
        .expect("frame");
    // Insert a 4-byte option list (router alert, RFC 2113) after the 20-byte header.
    f.splice(ETH + 20..ETH + 20, [0x94, 0x04, 0x00, 0x00]);
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut f[ETH..]);
        ip.set_version_and_header_len(4, 24);
        let total = ip.total_len() + 4;
        ip.set_total_len(total);
        ip.fill_checksum();
    }
    p.b.receive(p.now, &f, &RxMeta::NONE);
    assert_eq!(p.b.udp_recv_from(srv).map(|d| d.payload), Ok(payload(10)));
}

#[test]
fn tcp_segment_with_bad_checksum_is_dropped_without_reply() {
    let mut p = Pair::new();
    resolve(&mut p);
    let mut f = tcp_frame(TcpFlags::SYN, 1, 0, b"data");
    let n = f.len();
    f[n - 1] ^= 0x20;
    p.b.receive(p.now, &f, &RxMeta::NONE);
    assert_eq!(p.b.counters().rx_drop_tcp_malformed, 1);
    assert!(
        p.b.poll_transmit(p.now).is_none(),
        "no RST for a corrupt segment"
    );
}
