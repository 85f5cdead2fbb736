//! TCP through two stacks: listen/accept/connect, data both ways, close, backlog bounds
//! (the RSS side of the connection table is in `tcp_rss.rs`).
mod common;

use common::*;
use core::net::SocketAddr;
use stack::RxMeta;

use stack::{Readiness, SocketError, SocketHandle, SocketOption, Stack};

fn connect_send_recv_close(server: SocketAddr) {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p, server);
    assert_eq!(p.a.tcp_send(c, b"GET / HTTP/1.1\r\n\r\n"), Ok(18));
    p.advance(100 * MS);
    let evs = events(&mut p.b);
    assert!(readiness_of(&evs, s).contains(Readiness::READABLE));
    assert_eq!(read_all(&mut p.b, s), b"GET / HTTP/1.1\r\n\r\n");
    p.b.tcp_send(s, b"HTTP/1.1 200 OK\r\n\r\n").expect("send");
    p.b.tcp_shutdown(s).expect("shutdown");
    p.advance(100 * MS);
    assert_eq!(read_all(&mut p.a, c), b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(p.a.tcp_recv(c, &mut [0u8; 8]), Err(SocketError::Finished));
    p.a.close(p.now, c).expect("close a");
    p.advance(100 * MS);
    // A closed second (LAST-ACK → CLOSED): gone from the table, and its slot with it.
    assert_eq!(p.a.tcp_connection_count(), 0);
    assert_eq!(p.a.tcp_state(c), None, "slot freed after close");
    // B closed first and sits in TIME-WAIT (RFC 9293 §3.6) until 2 MSL pass.
    assert_eq!(p.b.tcp_state(s), Some(tcp::State::TimeWait));
    p.b.close(p.now, s).expect("close b");
    assert_eq!(p.b.tcp_connection_count(), 1);
    p.advance(61 * S);
    assert_eq!(p.b.tcp_connection_count(), 0);
    assert_eq!(p.b.tcp_state(s), None);
    assert_eq!(p.a.counters().tcp_connections_closed, 1);
    assert_eq!(p.b.counters().tcp_connections_closed, 1);
    assert_eq!(p.b.counters().tcp_connections_established, 1);
}

#[test]
fn tcp_connect_accept_send_recv_close_v4() {
    connect_send_recv_close(v4(IP_B, 80));
}

#[test]
fn tcp_connect_accept_send_recv_close_v6() {
    connect_send_recv_close(v6(IP6_B, 80));
}

/// `Stack::tcp_counters` sums the engine counters of open connections and keeps those of
/// connections whose slots were freed, so a host's totals survive its connections.
#[test]
fn tcp_counters_sum_open_connections_and_keep_released_ones() {
    let mut p = Pair::new();
    let server = v4(IP_B, 80);
    let (c, s) = establish(&mut p, server);
    p.a.tcp_send(c, b"eighteen bytes....").expect("send");
    p.advance(100 * MS);
    assert_eq!(read_all(&mut p.b, s).len(), 18);
    assert_eq!(p.a.tcp_counters().tx_payload_bytes, 18, "open connection");
    assert_eq!(p.b.tcp_counters().rx_payload_bytes, 18);
    p.a.close(p.now, c).expect("close a");
    p.b.close(p.now, s).expect("close b");
    p.advance(61 * S);
    assert_eq!(
        (p.a.tcp_state(c), p.b.tcp_state(s)),
        (None, None),
        "slots freed"
    );
    assert_eq!(
        p.a.tcp_counters().tx_payload_bytes,
        18,
        "released connection"
    );
    // A second connection adds to the released totals.
    let c2 = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    p.advance(10 * MS);
    p.a.tcp_send(c2, b"seven..").expect("send");
    p.advance(100 * MS);
    let totals = p.a.tcp_counters();
    assert_eq!(totals.tx_payload_bytes, 25);
    assert!(totals.tx_segments >= 4, "{totals:?}");
    assert_eq!(totals.retransmitted_segments, 0);
}

#[test]
fn tcp_bulk_transfer_arrives_intact() {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p, v4(IP_B, 9));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    for _ in 0..10_000 {
        if sent < data.len() {
            if let Ok(n) = p.a.tcp_send(c, &data[sent..]) {
                sent += n;
            }
        }
        p.advance(MS);
        got.extend(read_all(&mut p.b, s));
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    assert_eq!(p.a.counters().tx_drop_queue_full, 0);
}

#[test]
fn tcp_connect_to_closed_port_reports_reset() {
    let mut p = Pair::new();
    let c = p.a.tcp_connect(p.now, v4(IP_B, 81), 0).expect("connect");
    p.exchange();
    let evs = events(&mut p.a);
    assert!(readiness_of(&evs, c).contains(Readiness::ERROR));
    assert_eq!(p.a.tcp_recv(c, &mut [0u8; 4]), Err(SocketError::Reset));
    assert_eq!(p.b.counters().tcp_rx_no_listener_rst_sent, 1);
    p.a.close(p.now, c).expect("close");
    assert_eq!(p.a.tcp_state(c), None);
}

#[test]
fn tcp_backlog_full_drops_syns_and_counts() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 1).expect("listen");
    let c1 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c1");
    p.exchange();
    let c2 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c2");
    p.exchange();
    assert_eq!(p.b.counters().tcp_listen_backlog_full, 1);
    assert_eq!(p.a.tcp_state(c2), Some(tcp::State::SynSent));
    // Accepting frees the slot; the retransmitted SYN then gets in.
    let (_s1, _) = p.b.tcp_accept(l).expect("accept c1");
    assert_eq!(p.a.tcp_state(c1), Some(tcp::State::Established));
    p.advance(2 * S);
    assert_eq!(p.a.tcp_state(c2), Some(tcp::State::Established));
    assert!(p.b.tcp_accept(l).is_ok());
    assert_eq!(p.b.tcp_accept(l), Err(SocketError::WouldBlock));
}

#[test]
fn tcp_listen_port_conflict_and_close_aborts_unaccepted_children() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(p.b.tcp_listen(v4(IP_B, 80), 4), Err(SocketError::AddrInUse));
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    assert_eq!(p.b.tcp_connection_count(), 1);
    p.b.close(p.now, l).expect("close listener");
    p.exchange();
    assert_eq!(p.b.tcp_connection_count(), 0);
    assert_eq!(p.a.tcp_recv(c, &mut [0u8; 1]), Err(SocketError::Reset));
}

#[test]
fn tcp_lost_syn_is_retransmitted_when_the_timer_fires() {
    let mut p = Pair::new();
    resolve(&mut p);
    let _l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    p.capture_a = true;
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    p.capture_a = false;
    assert_eq!(p.captured_a.len(), 1, "the SYN, lost");
    let deadline = p.a.poll_timeout().expect("retransmission timer armed");
    assert!(deadline > p.now);
    p.advance(deadline - p.now - 1);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::SynSent));
    p.advance(1);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::Established));
}

#[test]
fn many_connections_share_one_listener() {
    let mut ca = config_a();
    ca.limits.sockets_max = 300;
    let mut cb = config_b();
    cb.limits.sockets_max = 300;
    cb.limits.tcp_backlog_max = 256;
    let mut p = Pair::with(ca, cb);
    resolve(&mut p);
    let l = p.b.tcp_listen(v4(IP_B, 80), 256).expect("listen");
    let clients: Vec<_> = (0..200)
        .map(|_| p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect"))
        .collect();
    p.exchange();
    let mut servers = Vec::new();
    while let Ok((s, _)) = p.b.tcp_accept(l) {
        servers.push(s);
    }
    assert_eq!(servers.len(), 200);
    assert_eq!(p.b.tcp_connection_count(), 200);
    for (i, c) in clients.iter().enumerate() {
        p.a.tcp_send(*c, &(i as u32).to_be_bytes()).expect("send");
    }
    p.advance(100 * MS);
    let mut seen: Vec<u32> = servers
        .iter()
        .map(|&s| {
            let mut b = [0u8; 4];
            assert_eq!(p.b.tcp_recv(s, &mut b), Ok(4));
            u32::from_be_bytes(b)
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..200).collect::<Vec<_>>());
    for c in clients {
        p.a.close(p.now, c).expect("close");
    }
    for s in servers {
        p.b.close(p.now, s).expect("close");
    }
    p.advance(61 * S);
    assert_eq!(
        (p.a.tcp_connection_count(), p.b.tcp_connection_count()),
        (0, 0)
    );
    assert_eq!(p.a.poll_timeout(), None, "no timer left behind");
}

#[test]
fn syns_past_the_syn_backlog_get_cookies_and_still_connect() {
    let mut cb = config_b();
    cb.limits.tcp_syn_backlog_max = 1;
    let mut p = Pair::with(config_a(), cb);
    resolve(&mut p);
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let c1 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c1");
    let c2 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c2");
    p.exchange();
    let c = p.b.counters();
    assert_eq!((c.tcp_syn_cookies_sent, c.tcp_syn_cookies_accepted), (1, 1));
    assert_eq!(p.a.tcp_state(c1), Some(tcp::State::Established));
    assert_eq!(p.a.tcp_state(c2), Some(tcp::State::Established));
    let mut servers = Vec::new();
    while let Ok((s, peer)) = p.b.tcp_accept(l) {
        servers.push((s, peer));
    }
    assert_eq!(servers.len(), 2);
    // Data flows over the connection that was built from the cookie.
    let port2 = p.a.local_addr(c2).unwrap().port();
    let (s2, _) = servers
        .iter()
        .copied()
        .find(|(_, peer)| peer.port() == port2)
        .unwrap();
    p.a.tcp_send(c2, b"via cookie").unwrap();
    p.advance(100 * MS);
    assert_eq!(read_all(&mut p.b, s2), b"via cookie");
}

#[test]
fn syn_cookies_disabled_means_counted_drops() {
    let mut cb = config_b();
    cb.limits.tcp_syn_backlog_max = 1;
    cb.limits.tcp_syn_cookies = false;
    let mut p = Pair::with(config_a(), cb);
    resolve(&mut p);
    let _l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    // Capture B-bound SYNs so both arrive before any handshake completes.
    p.capture_a = true;
    p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c1");
    p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c2");
    p.exchange();
    p.capture_a = false;
    for f in std::mem::take(&mut p.captured_a) {
        p.b.receive(p.now, &f, &RxMeta::NONE);
    }
    let c = p.b.counters();
    assert_eq!((c.tcp_syn_cookies_sent, c.tcp_listen_backlog_full), (0, 1));
}

/// An ICMPv4 destination unreachable from B about the IP packet in `frame` (which A sent).
fn icmp_unreachable_about(frame: &[u8], code: u8) -> Vec<u8> {
    icmpv4_from_b_about(frame, |data| wire::icmpv4::Icmpv4Repr::DstUnreachable {
        code,
        data,
    })
}

#[test]
fn icmp_port_unreachable_aborts_a_connection_still_opening() {
    let mut p = Pair::new();
    resolve(&mut p);
    p.capture_a = true;
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let syn = p.captured_a.pop().expect("syn");
    // A forged error quoting a sequence number outside the window is ignored (RFC 5927 §4.1).
    let mut forged = syn.clone();
    forged[ETH + 20 + 4] ^= 0x80;
    p.a.receive(p.now, &icmp_unreachable_about(&forged, 3), &RxMeta::NONE);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::SynSent));
    assert_eq!(p.a.counters().tcp_icmp_out_of_window, 1);
    // The genuine one aborts the open.
    p.a.receive(p.now, &icmp_unreachable_about(&syn, 3), &RxMeta::NONE);
    let evs: Vec<_> = std::iter::from_fn(|| p.a.poll_event()).collect();
    assert!(readiness_of(&evs, c).contains(Readiness::ERROR));
    assert_eq!(p.a.take_error(c), Ok(Some(SocketError::Unreachable)));
    while p.a.poll_transmit(p.now).is_some() {}
    assert_eq!(p.a.tcp_connection_count(), 0);
}

#[test]
fn max_segment_caps_the_announced_mss_and_the_getter_reports_the_payload_per_segment() {
    // Linux TCP_MAXSEG: set on a listener (for its children) or before connect; the getter
    // gives the send MSS less the 12-byte timestamp option (Linux `mss_cache`).
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(p.b.set_option(l, SocketOption::MaxSegment(1100)), Ok(()));
    assert_eq!(p.b.tcp_max_segment(l), Ok(1100));
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.a.tcp_max_segment(c), Ok(1100 - 12), "B announced 1100");
    assert_eq!(p.b.tcp_max_segment(s), Ok(1100 - 12), "B's own cap");
    assert_eq!(
        p.a.set_option(c, SocketOption::MaxSegment(500)),
        Err(SocketError::InvalidState),
        "too late once the SYN left"
    );
    // Before the SYN leaves, the cap lowers what the SYN announces, so both ends use it.
    let c2 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    assert_eq!(p.a.set_option(c2, SocketOption::MaxSegment(1000)), Ok(()));
    assert_eq!(p.a.tcp_max_segment(c2), Ok(1000));
    p.exchange();
    let (s2, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.a.tcp_max_segment(c2), Ok(1000 - 12));
    assert_eq!(p.b.tcp_max_segment(s2), Ok(1000 - 12));
}

#[test]
fn send_buffer_option_resizes_a_live_connections_send_buffer() {
    // Linux SO_SNDBUF on an accepted socket: writes take no more than the new capacity.
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(
        p.b.set_option(s, SocketOption::SendBufferBytes(5000)),
        Ok(())
    );
    assert_eq!(p.b.tcp_send(s, &[1u8; 20_000]), Ok(5000));
    assert_eq!(
        p.a.set_option(c, SocketOption::SendBufferBytes(30_000)),
        Ok(())
    );
    assert_eq!(p.a.tcp_send(c, &[1u8; 40_000]), Ok(30_000));
}

#[test]
fn send_buffer_size_reads_back_from_listeners_and_connections() {
    // Linux getsockopt(SO_SNDBUF): the capacity in force, which accepted sockets inherit from
    // their listener and a later setsockopt changes.
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(
        p.b.set_option(l, SocketOption::SendBufferBytes(7000)),
        Ok(())
    );
    assert_eq!(p.b.tcp_send_buffer_bytes(l), Ok(7000));
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.b.tcp_send_buffer_bytes(s), Ok(7000));
    assert_eq!(
        p.b.set_option(s, SocketOption::SendBufferBytes(9000)),
        Ok(())
    );
    assert_eq!(p.b.tcp_send_buffer_bytes(s), Ok(9000));
    // The engine keeps at least one segment's worth (the configured MSS, 1460 here).
    assert_eq!(p.a.set_option(c, SocketOption::SendBufferBytes(1)), Ok(()));
    assert_eq!(p.a.tcp_send_buffer_bytes(c), Ok(1460));
    let u = p.a.udp_bind(v4(IP_A, 53)).expect("udp bind");
    assert_eq!(
        p.a.tcp_send_buffer_bytes(u),
        Err(SocketError::WrongSocketType)
    );
}

#[test]
fn readiness_reports_the_level_of_listeners_and_connections() {
    use stack::Readiness;
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(p.b.tcp_readiness(l), Ok(Readiness::NONE));
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    assert_eq!(
        p.b.tcp_readiness(l),
        Ok(Readiness::READABLE),
        "a connection to accept"
    );
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.b.tcp_readiness(l), Ok(Readiness::NONE));
    assert_eq!(p.b.tcp_readiness(s), Ok(Readiness::WRITABLE));
    p.a.tcp_send(c, b"ping").expect("send");
    p.exchange();
    assert_eq!(
        p.b.tcp_readiness(s),
        Ok(Readiness::WRITABLE | Readiness::READABLE)
    );
    // Reading the data clears READABLE; polling again changes nothing (level, not edge).
    let mut buf = [0u8; 8];
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(4));
    assert_eq!(p.b.tcp_readiness(s), Ok(Readiness::WRITABLE));
    assert_eq!(p.b.tcp_readiness(s), Ok(Readiness::WRITABLE));
    // The peer's FIN: readable (the read returns the end) and peer-closed.
    p.a.tcp_shutdown(c).expect("shutdown");
    p.exchange();
    assert_eq!(
        p.b.tcp_readiness(s),
        Ok(Readiness::WRITABLE | Readiness::READABLE | Readiness::PEER_CLOSED)
    );
    // A reset ends it with an error.
    p.a.tcp_abort(c).expect("abort");
    p.exchange();
    let r = p.b.tcp_readiness(s).expect("still a socket until closed");
    assert!(r.contains(Readiness::ERROR), "{r:?}");
    let u = p.a.udp_bind(v4(IP_A, 53)).expect("udp bind");
    assert_eq!(p.a.tcp_readiness(u), Err(SocketError::WrongSocketType));
}

#[test]
fn options_apply_to_listeners_and_nodelay_to_live_connections() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(
        p.b.set_option(l, stack::SocketOption::NoDelay(true)),
        Ok(())
    );
    assert_eq!(
        p.b.set_option(l, stack::SocketOption::KeepaliveIdleNs(Some(S))),
        Ok(())
    );
    assert_eq!(
        p.b.set_option(l, stack::SocketOption::UdpRxQueueDatagrams(1)),
        Err(SocketError::WrongSocketType)
    );
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(
        p.a.set_option(c, stack::SocketOption::NoDelay(true)),
        Ok(())
    );
    // The user timeout applies to a live connection too (Linux `TCP_USER_TIMEOUT`); keepalive
    // on one goes through `tcp_set_keepalive`.
    assert_eq!(
        p.a.set_option(c, stack::SocketOption::UserTimeoutNs(None)),
        Ok(())
    );
    assert_eq!(
        p.a.set_option(c, stack::SocketOption::KeepaliveIdleNs(Some(S))),
        Err(SocketError::InvalidState)
    );
    // The child inherited the listener's keepalive: the idle connection gets probed (and
    // answered), where an idle connection without keepalive sends nothing.
    p.advance(100 * MS);
    let (b_tx, a_tx) = (p.b.counters().tx_frames, p.a.counters().tx_frames);
    p.advance(3 * S);
    assert!(p.b.counters().tx_frames > b_tx, "keepalive probe sent");
    assert!(p.a.counters().tx_frames > a_tx, "probe answered");
    assert_eq!(p.b.tcp_state(s), Some(tcp::State::Established));
}

#[test]
fn cork_option_and_send_more_hold_small_writes_until_pushed() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    assert_eq!(
        p.b.set_option(l, SocketOption::Cork(true)),
        Err(SocketError::InvalidState)
    );
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let mut buf = [0u8; 256];
    assert_eq!(p.a.set_option(c, SocketOption::Cork(true)), Ok(()));
    assert_eq!(p.a.tcp_send(c, &[1u8; 40]), Ok(40));
    p.advance(50 * MS);
    assert_eq!(p.b.tcp_recv(s, &mut buf), Err(SocketError::WouldBlock));
    assert_eq!(p.a.set_option(c, SocketOption::Cork(false)), Ok(()));
    p.advance(50 * MS);
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(40));

    assert_eq!(p.a.tcp_send_more(c, &[2u8; 40]), Ok(40));
    p.advance(50 * MS);
    assert_eq!(p.b.tcp_recv(s, &mut buf), Err(SocketError::WouldBlock));
    assert_eq!(p.a.tcp_send(c, &[3u8; 10]), Ok(10));
    p.advance(50 * MS);
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(50));
}

#[test]
fn tcp_segments_fit_a_small_mtu_without_fragmenting() {
    let mut ca = config_a();
    ca.interface.mtu_bytes = 1280;
    let mut cb = config_b();
    cb.interface.mtu_bytes = 1280;
    let mut p = Pair::with(ca, cb);
    let (c, s) = establish(&mut p, v6(IP6_B, 9));
    let data = vec![0x5a; 50_000];
    let mut sent = 0;
    let mut got = Vec::new();
    for _ in 0..1000 {
        if let Ok(n) = p.a.tcp_send(c, &data[sent..]) {
            sent += n;
        }
        p.advance(MS);
        got.extend(read_all(&mut p.b, s));
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got, data);
    let ca = p.a.counters();
    assert_eq!((ca.tx_drop_too_big, ca.tx_fragments), (0, 0));
}

#[test]
fn full_send_buffer_blocks_then_reports_writable() {
    let mut ca = config_a();
    ca.tcp.send_buffer_bytes = 16 * 1024;
    let mut p = Pair::with(ca, config_b());
    let (c, s) = establish(&mut p, v4(IP_B, 9));
    let chunk = vec![1u8; 4096];
    let mut queued = 0;
    loop {
        match p.a.tcp_send(c, &chunk) {
            Ok(n) => queued += n,
            Err(SocketError::WouldBlock) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(queued >= 16 * 1024);
    while p.a.poll_event().is_some() {}
    p.advance(100 * MS);
    let _ = read_all(&mut p.b, s);
    p.advance(100 * MS);
    let evs = events(&mut p.a);
    assert!(readiness_of(&evs, c).contains(Readiness::WRITABLE));
    assert!(p.a.tcp_send(c, &chunk).is_ok());
}

#[test]
fn exported_connection_resumes_on_another_stack_without_losing_a_byte() {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p, v4(IP_B, 9));
    let up: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
    assert_eq!(p.a.tcp_send(c, &up[..8000]), Ok(8000));
    p.advance(100 * MS);
    // B reads part of it, and queues a reply that is not yet acknowledged at the move.
    let mut head = vec![0u8; 3000];
    assert_eq!(p.b.tcp_recv(s, &mut head), Ok(3000));
    p.b.tcp_send(s, b"reply-before-move").unwrap();
    let (tuple, snapshot) = p.b.tcp_export(p.now, s).expect("export");
    assert_eq!(tuple.local, v4(IP_B, 9));
    assert_eq!(p.b.tcp_connection_count(), 0);
    assert_eq!(p.b.tcp_state(s), None, "the old owner let go");
    // Whatever B flushed while exporting is on the wire.
    while let Some(f) = p.b.poll_transmit(p.now) {
        p.a.receive(p.now, &f, &RxMeta::NONE);
    }
    // The new owner: another shard of the same host (same addresses).
    p.b = Stack::new(config_b());
    let s2 = p.b.tcp_import(p.now, tuple, &snapshot).expect("import");
    assert!(readiness_of(&events(&mut p.b), s2).contains(Readiness::READABLE));
    assert_eq!(p.a.tcp_send(c, &up[8000..]), Ok(12_000));
    p.b.tcp_send(s2, b"+reply-after-move").unwrap();
    let mut got = head;
    let mut back = Vec::new();
    for _ in 0..100 {
        p.advance(10 * MS);
        got.extend(read_all(&mut p.b, s2));
        back.extend(read_all(&mut p.a, c));
    }
    assert!(got == up, "upstream bytes: {} of {}", got.len(), up.len());
    assert_eq!(back, b"reply-before-move+reply-after-move");
    assert_eq!(p.b.counters().tcp_connections_imported, 1);
}

#[test]
fn export_refuses_a_connection_still_opening() {
    let mut p = Pair::new();
    let c = p.a.tcp_connect(p.now, v4(IP_B, 9), 0).expect("connect");
    assert_eq!(
        p.a.tcp_export(p.now, c).err(),
        Some(SocketError::InvalidState)
    );
    assert_eq!(
        p.a.tcp_state(c),
        Some(tcp::State::SynSent),
        "still owned here"
    );
}

#[test]
fn small_transmit_queue_is_shared_round_robin_without_drops() {
    let mut ca = config_a();
    ca.limits.tx_queue_frames_max = 4;
    let mut p = Pair::with(ca, config_b());
    resolve(&mut p);
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let c1 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c1");
    let c2 = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("c2");
    p.exchange();
    let s1 = p.b.tcp_accept(l).expect("s1").0;
    let s2 = p.b.tcp_accept(l).expect("s2").0;
    let data = vec![9u8; 30_000];
    assert_eq!(p.a.tcp_send(c1, &data), Ok(30_000));
    assert_eq!(p.a.tcp_send(c2, &data), Ok(30_000));
    // Take four frames at a time, as a NIC with four descriptors would: the second batch
    // already serves the other connection (each has a 10-segment initial window, so without
    // round-robin the first would fill both batches).
    let mut by_port = std::collections::BTreeMap::new();
    for _ in 0..2 {
        for _ in 0..4 {
            let Some(f) = p.a.poll_transmit(p.now) else {
                break;
            };
            let ip = wire::Ipv4Packet::new_checked(&f[ETH..]).unwrap();
            let sport = u16::from_be_bytes([ip.payload()[0], ip.payload()[1]]);
            *by_port.entry(sport).or_insert(0) += 1;
            p.b.receive(p.now, &f, &RxMeta::NONE);
        }
    }
    assert_eq!(
        by_port.len(),
        2,
        "both connections transmitted: {by_port:?}"
    );
    let (mut g1, mut g2) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        p.advance(MS);
        g1.extend(read_all(&mut p.b, s1));
        g2.extend(read_all(&mut p.b, s2));
    }
    assert_eq!((g1.len(), g2.len()), (30_000, 30_000));
    assert_eq!(p.a.counters().tx_drop_queue_full, 0);
}

#[test]
fn tcp_info_queue_sizes_and_peek_report_without_consuming() {
    // Linux TCP_INFO, SIOCINQ, SIOCOUTQ and MSG_PEEK: read-only views of a connection.
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let info = p.a.tcp_info(p.now, c).expect("tcp_info");
    assert_eq!(info.state, 1, "TCP_ESTABLISHED");
    assert_eq!(p.b.tcp_info(p.now, l), Err(SocketError::WrongSocketType));
    let mut buf = [0u8; 8];
    assert_eq!(p.b.tcp_peek(s, &mut buf), Err(SocketError::WouldBlock));
    assert_eq!(p.a.tcp_send(c, b"hello"), Ok(5));
    assert_eq!(p.a.tcp_send_queue_bytes(c), Ok(5));
    p.exchange();
    assert_eq!(p.b.tcp_recv_queue_bytes(s), Ok(5));
    // The delayed ACK (40 ms by default at most) empties A's queue.
    p.advance(500_000_000);
    assert_eq!(p.a.tcp_send_queue_bytes(c), Ok(0), "acknowledged");
    assert_eq!(p.b.tcp_peek(s, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(p.b.tcp_recv_queue_bytes(s), Ok(5), "peek consumed nothing");
    assert_eq!(p.b.tcp_info(p.now, s).map(|i| i.bytes_received), Ok(5));
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(5));
    assert_eq!(p.b.tcp_recv_queue_bytes(s), Ok(0));
}

#[test]
fn keepalive_and_user_timeout_apply_to_live_connections() {
    // Linux SO_KEEPALIVE/TCP_KEEPIDLE/... and TCP_USER_TIMEOUT on an accepted socket.
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(
        p.b.set_option(s, SocketOption::UserTimeoutNs(Some(3_000_000_000))),
        Ok(())
    );
    let ka = tcp::KeepaliveConfig {
        idle_ns: 1_000_000_000,
        interval_ns: 1_000_000_000,
        probes_max: 2,
    };
    assert_eq!(p.a.tcp_set_keepalive(p.now, c, Some(ka)), Ok(()));
    assert_eq!(
        p.b.tcp_set_keepalive(p.now, l, Some(ka)),
        Err(SocketError::WrongSocketType)
    );
    p.advance(1_500_000_000);
    assert_eq!(p.a.tcp_counters().keepalive_probes_sent, 1);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::Established));
}

#[test]
fn keepalive_in_fin_wait_2_finds_a_peer_that_forgot_the_connection() {
    // Simulator seed 1011357 through the stack: A sent its request and FIN and waits, half
    // closed, for the answer; B lost the connection without a word reaching A (there a user
    // timeout whose RST was lost; here B's host restarts). A has nothing outstanding, so only
    // keepalive can find out: its probe in FIN-WAIT-2 draws B's RST. Before, A stopped
    // probing on leaving ESTABLISHED and waited for ever.
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let ka = tcp::KeepaliveConfig {
        idle_ns: 1_000_000_000,
        interval_ns: 1_000_000_000,
        probes_max: 2,
    };
    assert_eq!(p.a.tcp_set_keepalive(p.now, c, Some(ka)), Ok(()));
    assert_eq!(p.a.tcp_send(c, b"request"), Ok(7));
    assert_eq!(p.a.tcp_shutdown(c), Ok(()));
    p.advance(100 * MS);
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::FinWait2));
    assert_eq!(p.b.tcp_state(s), Some(tcp::State::CloseWait));

    p.b = Stack::new(config_b());
    p.advance(1_500 * MS);
    assert_eq!(p.a.tcp_counters().keepalive_probes_sent, 1);
    assert!(p.b.counters().tcp_rx_no_listener_rst_sent >= 1);
    let mut buf = [0u8; 16];
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Reset));
}

/// A connection B has reset after sending data, as A's application sees it.
fn reset_after_data() -> (Pair, SocketHandle) {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.b.tcp_send(s, b"hello"), Ok(5));
    p.exchange();
    p.b.tcp_abort(s).expect("abort");
    p.exchange();
    assert_eq!(p.a.tcp_state(c), Some(tcp::State::Closed));
    (p, c)
}

#[test]
fn tcp_reset_is_reported_once_after_the_data_then_reads_end_the_stream() {
    let (mut p, c) = reset_after_data();
    assert!(p.a.tcp_readiness(c).unwrap().contains(Readiness::ERROR));
    let mut buf = [0u8; 16];
    assert_eq!(
        p.a.tcp_recv(c, &mut buf),
        Ok(5),
        "data before the reset first"
    );
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Reset));
    // Taken: no longer pending; reads see the end of the stream, writes a closed socket.
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Finished));
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Finished));
    assert_eq!(p.a.tcp_send(c, b"x"), Err(SocketError::Closed));
    assert_eq!(p.a.take_error(c), Ok(None));
    let r = p.a.tcp_readiness(c).unwrap();
    assert!(!r.contains(Readiness::ERROR) && r.contains(Readiness::READABLE));
}

#[test]
fn tcp_reset_is_taken_by_the_first_call_that_meets_it() {
    let (mut p, c) = reset_after_data();
    // A write meets it first (Linux `tcp_sendmsg` checks `sk_err`); the data is still read.
    assert_eq!(p.a.tcp_send(c, b"x"), Err(SocketError::Reset));
    assert_eq!(p.a.tcp_send(c, b"x"), Err(SocketError::Closed));
    let mut buf = [0u8; 16];
    assert_eq!(p.a.tcp_recv(c, &mut buf), Ok(5));
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Finished));
    // `getsockopt(SO_ERROR)` takes it too.
    let (mut p, c) = reset_after_data();
    assert_eq!(p.a.take_error(c), Ok(Some(SocketError::Reset)));
    assert_eq!(p.a.take_error(c), Ok(None));
    assert_eq!(p.a.tcp_send(c, b"x"), Err(SocketError::Closed));
}

#[test]
fn tcp_inq_hint_counts_ready_bytes_then_one_after_the_peers_fin() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 4).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    assert_eq!(p.b.tcp_send(s, b"hello"), Ok(5));
    p.exchange();
    assert_eq!(p.a.tcp_inq_hint(c), Ok(5));
    let mut buf = [0u8; 2];
    assert_eq!(p.a.tcp_recv(c, &mut buf), Ok(2));
    assert_eq!(p.a.tcp_inq_hint(c), Ok(3));
    assert_eq!(p.a.tcp_recv(c, &mut [0u8; 8]), Ok(3));
    assert_eq!(p.a.tcp_inq_hint(c), Ok(0), "open stream, nothing queued");
    p.b.tcp_shutdown(s).expect("shutdown");
    p.exchange();
    // Linux `tcp_inq_hint`: 1 once the FIN arrived, so the reader reads on to the end.
    assert_eq!(p.a.tcp_inq_hint(c), Ok(1));
    assert_eq!(p.a.tcp_recv(c, &mut buf), Err(SocketError::Finished));
}

/// Issue 17 item 2: connections opened with the same configuration hold one copy of it
/// (`tcp_config_share`), a socket option that changes it gives that connection a copy of its
/// own (and one that changes nothing copies nothing), and an exported connection imported
/// again shares the configuration once more.
#[test]
fn connections_share_one_configuration_until_an_option_changes_one() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let cs: Vec<_> = (0..3)
        .map(|_| p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect"))
        .collect();
    p.exchange();
    let ss: Vec<_> = (0..3)
        .map(|_| p.b.tcp_accept(l).expect("accept").0)
        .collect();
    assert_eq!(p.a.tcp_configs_held().0, 1, "active opens share");
    assert_eq!(p.b.tcp_configs_held().0, 1, "a listener's children share");
    p.a.set_option(cs[1], SocketOption::NoDelay(false))
        .expect("no change");
    assert_eq!(
        p.a.tcp_configs_held().0,
        1,
        "an option that changes nothing"
    );
    p.a.set_option(cs[0], SocketOption::NoDelay(true))
        .expect("nodelay");
    assert_eq!(p.a.tcp_configs_held().0, 2, "the changed one has its own");
    // Every connection still carries data both ways with its own setting.
    for (&c, &s) in cs.iter().zip(&ss) {
        assert_eq!(p.a.tcp_send(c, b"ping"), Ok(4));
        p.exchange();
        assert_eq!(read_all(&mut p.b, s), b"ping");
        assert_eq!(p.b.tcp_send(s, b"pong"), Ok(4));
        p.exchange();
        assert_eq!(read_all(&mut p.a, c), b"pong");
    }
    // Exported and imported back: the snapshot carries the whole configuration, and the
    // import shares the stack's copy again.
    let (tuple, snapshot) = p.b.tcp_export(p.now, ss[2]).expect("export");
    assert_eq!(p.b.tcp_configs_held().0, 1);
    assert!(!snapshot.config.nodelay);
    let back = p.b.tcp_import(p.now, tuple, &snapshot).expect("import");
    assert_eq!(back, ss[2]);
    assert_eq!(p.b.tcp_configs_held().0, 1, "the imported one shares again");
    let (n, bytes) = p.b.tcp_configs_held();
    assert_eq!(bytes, n * (core::mem::size_of::<tcp::Config>() + 16));
}
