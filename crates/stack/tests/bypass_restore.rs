//! Restoring an offloaded connection (`Stack::tcp_restore`): the engine's snapshot must fit
//! what the host's bypass socket kept — its send bytes the head of the host's retained ones,
//! its unread bytes the tail of what the host delivered — or the restore is refused and
//! counted (`tcp_bypass_restore_mismatch`); when it fits, writes and reads that crossed the
//! restore are reconciled and no byte is lost or repeated.
mod common;

use common::*;
use stack::{SocketError, SocketHandle, Stack};

/// Listener on B, connection from A, accepted: (client, server) handles.
fn establish(p: &mut Pair) -> (SocketHandle, SocketHandle) {
    let l = p.b.tcp_listen(v4(IP_B, 80), 8).expect("listen");
    let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
    p.exchange();
    while p.a.poll_event().is_some() {}
    while p.b.poll_event().is_some() {}
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    (c, s)
}

fn read_all(s: &mut Stack, h: SocketHandle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.tcp_recv(h, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn bytes(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ salt).collect()
}

/// A connection whose server side B holds unread bytes from A and has sent bytes A has not
/// acknowledged (A's ACKs are not delivered), offloaded: (client, server, snapshot, A's
/// bytes, B's bytes).
fn offloaded() -> (
    Pair,
    SocketHandle,
    SocketHandle,
    tcp::ConnectionSnapshot,
    Vec<u8>,
    Vec<u8>,
) {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p);
    let from_a = bytes(5_000, 1);
    assert_eq!(p.a.tcp_send(c, &from_a), Ok(from_a.len()));
    p.exchange();
    let from_b = bytes(7_000, 2);
    assert_eq!(p.b.tcp_send(s, &from_b), Ok(from_b.len()));
    let (_, snapshot) = p.b.tcp_offload(p.now, s).expect("offload");
    // B's segments are on the wire (or queued) but not acknowledged: drop them.
    while p.b.poll_transmit(p.now).is_some() {}
    assert!(!snapshot.recv_unread.is_empty());
    assert_eq!(
        snapshot.send_unacked.len() + snapshot.send_unsent.len(),
        from_b.len()
    );
    (p, c, s, snapshot, from_a, from_b)
}

#[test]
fn a_restore_that_fits_keeps_crossed_reads_and_writes_in_order() {
    let (mut p, c, s, snapshot, from_a, from_b) = offloaded();
    // The application reads part and writes more while the connection is away; the engine
    // (here: a refused handoff, the host's own snapshot) never saw either.
    let mut head = [0u8; 300];
    assert_eq!(p.b.tcp_recv(s, &mut head), Ok(300));
    assert_eq!(&head[..], &from_a[..300]);
    let more = bytes(2_000, 3);
    assert_eq!(p.b.tcp_send(s, &more), Ok(more.len()));
    p.b.tcp_restore(p.now, s, snapshot).expect("restore fits");
    assert!(!p.b.tcp_offloaded(s));
    assert_eq!(read_all(&mut p.b, s), &from_a[300..]);
    p.advance(2_000_000_000);
    let mut want = from_b;
    want.extend_from_slice(&more);
    assert_eq!(read_all(&mut p.a, c), want);
    assert_eq!(p.b.counters().tcp_bypass_restore_mismatch, 0);
}

#[test]
fn a_restore_whose_send_bytes_differ_from_the_retained_ones_is_refused_and_counted() {
    let (mut p, _, s, snapshot, _, _) = offloaded();
    for at in [0, 6_999] {
        let mut bad = snapshot.clone();
        let unacked = bad.send_unacked.len();
        match bad.send_unacked.get_mut(at) {
            Some(b) => *b ^= 0x40,
            None => bad.send_unsent[at - unacked] ^= 0x40,
        }
        assert_eq!(
            p.b.tcp_restore(p.now, s, bad),
            Err(SocketError::InvalidState)
        );
        assert!(p.b.tcp_offloaded(s), "the bypass socket stays");
    }
    // Fewer send bytes than the engine had: the host never retained a shorter head.
    let mut longer = snapshot.clone();
    longer.send_unsent.push(0);
    assert_eq!(
        p.b.tcp_restore(p.now, s, longer),
        Err(SocketError::InvalidState)
    );
    assert_eq!(p.b.counters().tcp_bypass_restore_mismatch, 3);
    p.b.tcp_restore(p.now, s, snapshot)
        .expect("the true one fits");
}

#[test]
fn a_restore_whose_unread_bytes_differ_from_the_delivered_ones_is_refused_and_counted() {
    let (mut p, _, s, snapshot, _, _) = offloaded();
    let last = snapshot.recv_unread.len() - 1;
    for at in [0, last] {
        let mut bad = snapshot.clone();
        bad.recv_unread[at] ^= 0x40;
        assert_eq!(
            p.b.tcp_restore(p.now, s, bad),
            Err(SocketError::InvalidState)
        );
    }
    assert_eq!(p.b.counters().tcp_bypass_restore_mismatch, 2);
    p.b.tcp_restore(p.now, s, snapshot)
        .expect("the true one fits");
}
