//! The zero-window limit (`Limits::tcp_zero_window_max_ns`): a peer that never reads cannot
//! pin a connection's send buffer for ever, and a slow reader that makes progress is left
//! alone.
mod common;

use common::*;
use stack::{SocketHandle, StackConfig};
use tcp::State;

const LIMIT_NS: u64 = 10 * S;

fn pair() -> Pair {
    let mut a: StackConfig = config_a();
    a.limits.tcp_zero_window_max_ns = Some(LIMIT_NS);
    let mut b = config_b();
    b.tcp.recv_buffer_bytes = 8192;
    Pair::with(a, b)
}

/// A connection from A to B, accepted, with A's send buffer filled: (client, server).
fn stalled(p: &mut Pair) -> (SocketHandle, SocketHandle) {
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.advance(10 * MS);
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let chunk = [0x5a; 4096];
    while p.a.tcp_send(c, &chunk).is_ok_and(|n| n > 0) {}
    p.advance(MS);
    (c, s)
}

#[test]
fn a_peer_that_never_reads_is_aborted_past_the_zero_window_limit() {
    let mut p = pair();
    let (c, s) = stalled(&mut p);
    p.advance(LIMIT_NS / 2);
    assert_eq!(p.a.tcp_state(c), Some(State::Established));
    assert_eq!(p.a.counters().tcp_zero_window_aborts, 0);
    // The first persist probe past the limit aborts: probes back off from the 200 ms RTO
    // (0.2, 0.6, 1.4, 3.0, 6.2, 12.6 s), so by 13 s of stalling.
    p.advance(LIMIT_NS);
    assert_eq!(p.a.counters().tcp_zero_window_aborts, 1);
    assert_ne!(p.a.tcp_state(c), Some(State::Established));
    // The peer got the RST.
    assert_ne!(p.b.tcp_state(s), Some(State::Established));
    assert!(p.a.tcp_counters().resets_sent >= 1);
}

#[test]
fn a_slow_reader_at_zero_window_is_left_alone() {
    let mut p = pair();
    let (c, s) = stalled(&mut p);
    let mut buf = [0u8; 2048];
    for _ in 0..20 {
        p.advance(3 * S);
        let _ = p.b.tcp_recv(s, &mut buf);
    }
    // A minute at a mostly closed window, every stall shorter than the limit.
    assert_eq!(p.a.tcp_state(c), Some(State::Established));
    assert_eq!(p.a.counters().tcp_zero_window_aborts, 0);
}

#[test]
fn the_zero_window_limit_can_be_turned_off() {
    let mut a = config_a();
    a.limits.tcp_zero_window_max_ns = None;
    let mut b = config_b();
    b.tcp.recv_buffer_bytes = 8192;
    let mut p = Pair::with(a, b);
    let (c, _) = stalled(&mut p);
    p.advance(10 * LIMIT_NS);
    assert_eq!(p.a.tcp_state(c), Some(State::Established));
    assert_eq!(p.a.counters().tcp_zero_window_aborts, 0);
}
