//! Every command of seed 002 Figures 4 and 5, sent through the host's offload layer or the
//! engine, with its effect on a live connection checked (not only its encoding).

mod common;

use common::Net;
use offload::{EngineConfig, HostConfig, OffloadError};
use shard::handoff::{Limits, ResourceKind};
use stack::{SocketError, SocketOption};

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ salt).collect()
}

/// Sends all of `data` from `from` on `stack`, settling the net between chunks.
fn send_all(net: &mut Net, client_side: bool, h: stack::SocketHandle, data: &[u8]) {
    let mut off = 0;
    for _ in 0..10_000 {
        if off == data.len() {
            return;
        }
        let stack = if client_side {
            &mut net.client
        } else {
            &mut net.host
        };
        match stack.tcp_send(h, &data[off..]) {
            Ok(n) => off += n,
            Err(SocketError::WouldBlock) => {}
            Err(e) => panic!("send: {e}"),
        }
        net.advance(1_000_000);
    }
    panic!("could not send");
}

fn net() -> Net {
    Net::new(EngineConfig::default(), HostConfig::default())
}

#[test]
fn handoff_then_recv_delivers_peer_data_to_the_same_handle() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    assert_eq!(n.filters.len(), 1, "the NIC steers the flow to the engine");
    let data = pattern(5000, 1);
    send_all(&mut n, true, c, &data);
    n.advance(10_000_000);
    assert_eq!(Net::read_all(&mut n.host, h), data);
    assert!(n.off.counters().cmds_recv_in > 0);
    assert!(n.engine_frames > 0, "the engine, not the host, answered");
}

#[test]
fn send_then_ack_drains_the_hosts_send_buffer() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    // Three send buffers' worth: only fits if the engine's `Ack`s free the host's buffer.
    let buffer = n.host.tcp_send_buffer_bytes(h).expect("buffer") as usize;
    let data = pattern(3 * buffer, 2);
    let mut got = Vec::new();
    let mut off = 0;
    for _ in 0..3000 {
        if let Ok(k) = n.host.tcp_send(h, &data[off..]) {
            off += k;
        }
        n.advance(1_000_000);
        got.extend(Net::read_all(&mut n.client, c));
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got, data);
    // The client's last (delayed) ACK.
    n.advance(500_000_000);
    assert!(n.off.counters().cmds_ack_in > 0);
    assert_eq!(n.engine.counters().acked_bytes, data.len() as u64);
    // Everything acknowledged: the whole buffer is free again.
    let r = n.host.tcp_readiness(h).expect("readiness");
    assert!(r.contains(stack::Readiness::WRITABLE));
}

#[test]
fn recvd_opens_the_engines_window() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    // Three receive buffers' worth: only arrives if reads are reported back.
    let size = 3 * n.host.config().tcp.recv_buffer_bytes as usize;
    let data = pattern(size, 3);
    let mut got = Vec::new();
    let mut off = 0;
    for _ in 0..2000 {
        if let Ok(k) = n.client.tcp_send(c, &data[off..]) {
            off += k;
        }
        n.advance(1_000_000);
        got.extend(Net::read_all(&mut n.host, h));
        if got.len() == size {
            break;
        }
    }
    assert_eq!(got.len(), size);
    assert_eq!(got, data);
    assert!(n.off.counters().cmds_recvd > 0);
}

#[test]
fn ctrl_cork_holds_data_until_uncorked() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.host
        .set_option(h, SocketOption::Cork(true))
        .expect("cork");
    n.host.tcp_send(h, b"corked").expect("send");
    n.advance(5_000_000);
    assert!(
        Net::read_all(&mut n.client, c).is_empty(),
        "held by the cork"
    );
    n.host
        .set_option(h, SocketOption::Cork(false))
        .expect("uncork");
    n.advance(5_000_000);
    assert_eq!(Net::read_all(&mut n.client, c), b"corked");
}

#[test]
fn ctrl_shutdown_then_peer_fin_returns_time_wait_to_the_host() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.host.tcp_shutdown(h).expect("shutdown");
    n.advance(5_000_000);
    let mut buf = [0u8; 16];
    assert_eq!(n.client.tcp_recv(c, &mut buf), Err(SocketError::Finished));
    n.client.tcp_shutdown(c).expect("client shutdown");
    n.advance(5_000_000);
    // Active close on the engine: TIME_WAIT goes back to the host (invariant 8).
    assert_eq!(n.off.counters().restored_time_wait, 1);
    assert_eq!(n.engine.counters().restores_time_wait, 1);
    assert!(!n.host.tcp_offloaded(h));
    assert_eq!(n.host.tcp_state(h), Some(tcp::State::TimeWait));
    assert_eq!(n.host.tcp_recv(h, &mut buf), Err(SocketError::Finished));
    assert_eq!(n.engine.connections(), 0);
    assert!(n.filters.is_empty());
    n.host.close(n.now, h).expect("close");
}

#[test]
fn ctrl_close_after_peer_fin_ends_on_the_engine_with_deallocated() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.client.tcp_shutdown(c).expect("client shutdown");
    n.advance(5_000_000);
    // PeerFin: the host's reader sees the end.
    let mut buf = [0u8; 16];
    assert_eq!(n.host.tcp_recv(h, &mut buf), Err(SocketError::Finished));
    assert!(
        n.host
            .tcp_readiness(h)
            .expect("r")
            .contains(stack::Readiness::PEER_CLOSED)
    );
    n.host.close(n.now, h).expect("close");
    n.advance(100_000_000);
    // Passive close: LAST-ACK ends on the engine, which frees the connection.
    assert_eq!(n.client.tcp_recv(c, &mut buf), Err(SocketError::Finished));
    assert_eq!(n.off.counters().deallocated, 1);
    assert_eq!(n.engine.connections(), 0);
    assert_eq!(n.off.offloaded(), 0);
    assert!(n.filters.is_empty(), "the filter went with the connection");
    assert_eq!(n.host.tcp_connection_count(), 0);
}

#[test]
fn ctrl_abort_resets_the_peer() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.host.tcp_abort(h).expect("abort");
    n.advance(5_000_000);
    let mut buf = [0u8; 16];
    assert_eq!(n.client.tcp_recv(c, &mut buf), Err(SocketError::Reset));
}

#[test]
fn engine_ctrl_reset_reaches_the_host_application() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.client.tcp_abort(c).expect("abort");
    n.advance(5_000_000);
    let mut buf = [0u8; 16];
    assert_eq!(n.host.tcp_recv(h, &mut buf), Err(SocketError::Reset));
    assert!(
        n.host
            .tcp_readiness(h)
            .expect("r")
            .contains(stack::Readiness::ERROR)
    );
}

#[test]
fn forward_carries_frames_that_reach_the_host_after_the_handoff() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    // The NIC lost its filter (or never had one): every frame reaches the host.
    n.filters.clear();
    let data = pattern(20_000, 4);
    send_all(&mut n, true, c, &data);
    n.advance(10_000_000);
    n.filters.clear();
    assert_eq!(Net::read_all(&mut n.host, h), data);
    assert!(n.off.counters().cmds_forward > 0);
    assert_eq!(
        n.host.counters().tcp_rx_no_listener_rst_sent,
        0,
        "never a RST"
    );
}

#[test]
fn post_limits_delivery_to_posted_room() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    assert!(n.off.post(h, 10));
    n.settle();
    n.client.tcp_send(c, &pattern(100, 5)).expect("send");
    n.advance(5_000_000);
    assert_eq!(
        Net::read_all(&mut n.host, h).len(),
        10,
        "only the posted room"
    );
    assert!(n.off.post(h, 90));
    n.advance(5_000_000);
    assert_eq!(Net::read_all(&mut n.host, h).len(), 90);
    assert_eq!(n.engine.counters().posted_bytes, 100);
}

#[test]
fn host_restore_brings_the_connection_back_under_the_same_handle() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    n.client.tcp_send(c, b"before").expect("send");
    n.advance(2_000_000);
    assert!(n.off.restore(h));
    n.advance(2_000_000);
    assert!(!n.host.tcp_offloaded(h), "back on the host");
    assert_eq!(n.engine.connections(), 0);
    assert!(n.filters.is_empty());
    assert_eq!(n.off.counters().restored_requested, 1);
    n.client.tcp_send(c, b" after").expect("send");
    n.advance(2_000_000);
    assert_eq!(Net::read_all(&mut n.host, h), b"before after");
}

#[test]
fn writes_crossing_a_restore_are_not_lost() {
    let mut n = net();
    let (c, h) = n.connect();
    n.offload(h);
    assert!(n.off.restore(h));
    // Written after the restore was asked, before the engine's answer.
    let data = pattern(30_000, 6);
    let k = n.host.tcp_send(h, &data).expect("send");
    n.advance(20_000_000);
    let mut got = Net::read_all(&mut n.client, c);
    let mut off = k;
    for _ in 0..100 {
        if off < data.len() {
            if let Ok(m) = n.host.tcp_send(h, &data[off..]) {
                off += m;
            }
        }
        n.advance(2_000_000);
        got.extend(Net::read_all(&mut n.client, c));
    }
    assert_eq!(got, data);
}

#[test]
fn resource_advertisements_bound_the_host_and_refuse_beyond() {
    let limits = Limits {
        connections_max: 1,
        ..Limits::default()
    };
    // The host is configured with the default maxima (8,192 connections): only the engine's
    // advertisement tells it there is one slot.
    let mut n = Net::with_engine_limits(limits);
    let (_, a) = n.connect();
    assert_eq!(n.off.advertised(ResourceKind::Connections), Some(1));
    let (c2, b) = n.connect();
    n.offload(a);
    assert_eq!(n.off.advertised(ResourceKind::Connections), Some(0));
    let r = n.off.offload(n.now, &mut n.host, b);
    assert_eq!(r, Err(OffloadError::NoResource));
    assert_eq!(n.off.counters().handoffs_no_resource, 1);
    // `b` stays on the host, untouched.
    n.client.tcp_send(c2, b"still here").expect("send");
    n.advance(2_000_000);
    assert_eq!(Net::read_all(&mut n.host, b), b"still here");
}

#[test]
fn engine_refuses_a_handoff_beyond_its_buffer_memory_and_the_host_keeps_it() {
    let limits = Limits {
        buffer_bytes_max: 1000,
        ..Limits::default()
    };
    let mut n = Net::with_engine_limits(limits);
    let (c, h) = n.connect();
    // 5,000 unread bytes: more than the engine's memory.
    n.client.tcp_send(c, &pattern(5000, 7)).expect("send");
    n.advance(2_000_000);
    n.off.offload(n.now, &mut n.host, h).expect("sent");
    n.advance(2_000_000);
    assert_eq!(n.engine.counters().refused_no_buffer, 1);
    assert_eq!(n.off.counters().handoffs_refused, 1);
    assert!(!n.host.tcp_offloaded(h));
    n.client.tcp_send(c, &pattern(10, 8)).expect("send");
    n.advance(2_000_000);
    let got = Net::read_all(&mut n.host, h);
    assert_eq!(got.len(), 5010);
    assert_eq!(&got[..5000], &pattern(5000, 7)[..]);
}

/// Writes "a", lets it reach the client (whose ACK is delayed), writes "b"; returns what the
/// client has before any timer runs.
fn two_small_writes(n: &mut Net, c: stack::SocketHandle, h: stack::SocketHandle) -> Vec<u8> {
    n.host.tcp_send(h, b"a").expect("send");
    n.settle();
    n.host.tcp_send(h, b"b").expect("send");
    n.settle();
    Net::read_all(&mut n.client, c)
}

#[test]
fn ctrl_nodelay_sends_a_small_write_while_one_is_unacknowledged() {
    let mut n = net();
    let (c1, nagle) = n.connect();
    let (c2, nodelay) = n.connect();
    n.offload(nagle);
    n.offload(nodelay);
    n.host
        .set_option(nodelay, SocketOption::NoDelay(true))
        .expect("nodelay");
    n.settle();
    assert!(n.off.counters().cmds_ctrl >= 1);
    // Nagle (the default) holds "b" until "a" is acknowledged; TCP_NODELAY sends it.
    assert_eq!(two_small_writes(&mut n, c1, nagle), b"a");
    assert_eq!(two_small_writes(&mut n, c2, nodelay), b"ab");
    n.advance(500_000_000);
    assert_eq!(Net::read_all(&mut n.client, c1), b"b");
}

/// The engine's connection for `h`'s 4-tuple.
fn engine_handle(n: &Net, h: stack::SocketHandle) -> stack::SocketHandle {
    let mut tuples = Vec::new();
    n.engine.tuples(&mut tuples);
    let peer = n.host.peer_addr(h).expect("peer");
    let tuple = tuples
        .into_iter()
        .find(|t| t.remote == peer)
        .expect("on the engine");
    match n.engine.stack().tcp_move_class(tuple) {
        Some(stack::MoveClass::Owned { handle, .. }) => handle,
        other => panic!("not a connection of the engine: {other:?}"),
    }
}

#[test]
fn ctrl_send_buffer_sets_the_engines_connection_buffer() {
    let mut n = net();
    let (_, h) = n.connect();
    n.offload(h);
    let e = engine_handle(&n, h);
    let before = n.engine.stack().tcp_send_buffer_bytes(e).expect("buffer");
    let want = 8 * 1460;
    assert_ne!(before, want);
    n.host
        .set_option(h, SocketOption::SendBufferBytes(want))
        .expect("send buffer");
    n.settle();
    assert_eq!(n.engine.stack().tcp_send_buffer_bytes(e), Ok(want));
}

#[test]
fn ctrl_keepalive_on_a_silent_peer_ends_in_engine_ctrl_timed_out() {
    let mut n = net();
    let (_, h) = n.connect();
    n.offload(h);
    n.host
        .set_option(h, SocketOption::KeepaliveIdleNs(Some(1_000_000_000)))
        .expect("keepalive");
    n.settle();
    n.client_dead = true;
    // Idle 1 s, then 9 unanswered probes 75 s apart (the defaults beside the idle time).
    n.advance(700_000_000_000);
    let mut buf = [0u8; 16];
    assert_eq!(n.host.tcp_recv(h, &mut buf), Err(SocketError::TimedOut));
    assert!(
        n.host
            .tcp_readiness(h)
            .expect("r")
            .contains(stack::Readiness::ERROR)
    );
    assert_eq!(
        n.off.counters().engine_failures,
        0,
        "the engine itself is fine"
    );
}

/// A refused handoff brings back every byte the export had — unacknowledged and unsent send
/// bytes, unread received bytes — although the host keeps its own snapshot without them (the
/// bypass socket holds them): reads and writes the application made while the handoff was
/// unanswered are reconciled, and both directions deliver every byte once, in order.
#[test]
fn a_refused_handoff_takes_back_unacked_unsent_and_unread_bytes_and_the_crossed_calls() {
    let limits = Limits {
        buffer_bytes_max: 1000,
        ..Limits::default()
    };
    let mut n = Net::with_engine_limits(limits);
    let (c, h) = n.connect();
    // 3,000 unread bytes on the host: beyond the engine's memory, so it refuses.
    n.client.tcp_send(c, &pattern(3000, 3)).expect("send");
    n.advance(2_000_000);
    // The client goes silent: what the host sends now stays unacknowledged (in flight) or
    // unsent (beyond the window).
    n.client_dead = true;
    let out = pattern(40_000, 5);
    let mut sent = 0;
    while sent < out.len() {
        match n.host.tcp_send(h, &out[sent..]) {
            Ok(k) if k > 0 => sent += k,
            _ => break,
        }
        n.settle();
    }
    assert!(sent > 20_000, "the send buffer took {sent} bytes");
    n.off.offload(n.now, &mut n.host, h).expect("sent");
    assert!(n.host.tcp_offloaded(h));
    // Before the engine answers: the application reads some and writes more.
    let mut first = [0u8; 1000];
    assert_eq!(n.host.tcp_recv(h, &mut first), Ok(1000));
    let more = pattern(700, 9);
    assert_eq!(n.host.tcp_send(h, &more), Ok(700));
    n.settle();
    assert_eq!(n.engine.counters().refused_no_buffer, 1);
    assert_eq!(n.off.counters().handoffs_refused, 1);
    assert_eq!(n.off.counters().restore_failed, 0);
    assert_eq!(n.host.counters().tcp_bypass_restore_mismatch, 0);
    assert!(!n.host.tcp_offloaded(h));
    // Everything arrives once, in order, both ways.
    n.client_dead = false;
    n.advance(3_000_000_000);
    let mut got_in = first.to_vec();
    got_in.extend(Net::read_all(&mut n.host, h));
    assert_eq!(got_in, pattern(3000, 3));
    let got_out = Net::read_all(&mut n.client, c);
    let mut want = out[..sent].to_vec();
    want.extend_from_slice(&more);
    assert_eq!(got_out.len(), want.len());
    assert!(
        got_out == want,
        "the client's bytes differ from what the host wrote"
    );
}
