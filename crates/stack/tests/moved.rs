//! The moved marker `tcp_export` leaves behind (DESIGN handoff invariant 4): frames for a
//! connection caught mid-move are dropped before any processing or forwarded to the new
//! owner in arrival order (with the hash and checksum verdicts they arrived with), never
//! answered with RST; the marker keeps the handle for an import back, and it expires.
mod common;

use common::*;
use core::net::SocketAddr;
use stack::RxMeta;

use stack::{FourTuple, SocketError, SocketHandle, Stack};

/// Listener on B, connection from A, accepted: (client, server) handles.
fn establish(p: &mut Pair, server: SocketAddr) -> (SocketHandle, SocketHandle) {
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
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

/// Exports B's side and delivers what B flushed while exporting.
fn export_b(p: &mut Pair, s: SocketHandle) -> (FourTuple, tcp::ConnectionSnapshot) {
    let moved = p.b.tcp_export(p.now, s).expect("export");
    while let Some(f) = p.b.poll_transmit(p.now) {
        p.a.receive(p.now, &f, &RxMeta::NONE);
    }
    moved
}

/// Sends `data` from A and returns the frames A put on the wire (not delivered).
fn frames_from_a(p: &mut Pair, c: SocketHandle, data: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(p.a.tcp_send(c, data), Ok(data.len()));
    std::iter::from_fn(|| p.a.poll_transmit(p.now)).collect()
}

#[test]
fn a_frame_for_an_exported_connection_draws_no_rst_and_is_counted() {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p, v4(IP_B, 80));
    export_b(&mut p, s);
    assert_eq!(p.b.tcp_connection_count(), 0, "a marker is no connection");
    let frames = frames_from_a(&mut p, c, b"caught mid-move");
    assert_eq!(frames.len(), 1);
    p.b.receive(p.now, &frames[0], &RxMeta::NONE);
    assert_eq!(p.b.poll_transmit(p.now), None, "no RST, nothing at all");
    assert_eq!(p.b.poll_forward(), None, "no destination set");
    let counters = p.b.counters();
    assert_eq!(counters.tcp_drop_moved, 1);
    assert_eq!(counters.tcp_rx_no_listener_rst_sent, 0);
    // The old handle names nothing here any more.
    assert_eq!(p.b.tcp_state(s), None);
    assert_eq!(p.b.close(p.now, s), Err(SocketError::InvalidHandle));
}

#[test]
fn with_a_destination_frames_are_forwarded_in_order_and_the_new_owner_takes_them() {
    let mut cb = config_b();
    cb.limits.tcp_moved_forward_frames_max = 2;
    let mut p = Pair::with(config_a(), cb);
    let (c, s) = establish(&mut p, v4(IP_B, 80));
    let (tuple, snapshot) = export_b(&mut p, s);
    p.b.tcp_set_moved_forward(tuple, 7).expect("marker");
    let data: Vec<u8> = (0..4 * 1400u32).map(|i| (i % 251) as u8).collect();
    let frames = frames_from_a(&mut p, c, &data);
    assert!(frames.len() >= 3, "{} frames", frames.len());
    // The first frame's checksums come verified (the NIC's or the OS's word), the others not.
    let verified = stack::RxChecksum {
        ip: stack::CsumVerdict::Good,
        l4: stack::CsumVerdict::Good,
    };
    for (i, f) in frames.iter().enumerate() {
        let meta = RxMeta {
            hash: Some(0xabcd),
            csum: if i == 0 {
                verified
            } else {
                stack::RxChecksum::UNKNOWN
            },
            ..RxMeta::NONE
        };
        p.b.receive(p.now, f, &meta);
    }
    assert_eq!(p.b.poll_transmit(p.now), None, "no RST");
    let forwarded: Vec<_> = std::iter::from_fn(|| p.b.poll_forward()).collect();
    assert_eq!(forwarded.len(), 2, "bounded outbox");
    for (i, ((dest, frame, meta), sent)) in forwarded.iter().zip(&frames).enumerate() {
        assert_eq!((*dest, meta.hash), (7, Some(0xabcd)));
        // The same IP header and segment bytes: the verdicts still hold (no offsets kept).
        let want = if i == 0 {
            verified
        } else {
            stack::RxChecksum::UNKNOWN
        };
        assert_eq!(meta.csum, want, "frame {i}: the verdicts travel with it");
        assert_eq!((meta.l3_offset, meta.l4_offset), (None, None));
        assert_eq!(frame, sent, "the frame as received, in arrival order");
    }
    let counters = p.b.counters();
    assert_eq!(
        (
            counters.tcp_moved_forwarded,
            counters.tcp_moved_forward_full,
            counters.tcp_drop_moved
        ),
        (2, frames.len() as u64 - 2, 0)
    );
    // The new owner processes them before anything newer; the lost one is retransmitted.
    let mut b2 = Stack::new(config_b());
    let s2 = b2.tcp_import(p.now, tuple, &snapshot).expect("import");
    for (_, frame, meta) in forwarded {
        b2.receive(p.now, &frame, &meta);
    }
    p.b = b2;
    let mut got = read_all(&mut p.b, s2);
    for _ in 0..50 {
        p.advance(100 * MS);
        got.extend(read_all(&mut p.b, s2));
    }
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
}

#[test]
fn export_then_import_into_the_same_stack_keeps_the_handle() {
    let mut p = Pair::new();
    let (c, s) = establish(&mut p, v4(IP_B, 80));
    let (tuple, snapshot) = export_b(&mut p, s);
    let frames = frames_from_a(&mut p, c, b"while away");
    for f in &frames {
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    let back = p.b.tcp_import(p.now, tuple, &snapshot).expect("import");
    assert_eq!(back, s, "same handle after a move and back");
    assert_eq!(p.b.tcp_connection_count(), 1);
    assert_eq!(
        p.b.tcp_set_moved_forward(tuple, 1),
        Err(SocketError::InvalidState),
        "the import removed the marker"
    );
    // The segment dropped while away comes back by retransmission.
    p.advance(2 * S);
    assert_eq!(read_all(&mut p.b, s), b"while away");
    p.b.tcp_send(s, b"and back").expect("send");
    p.advance(100 * MS);
    assert_eq!(read_all(&mut p.a, c), b"and back");
    assert_eq!(p.b.counters().tcp_rx_no_listener_rst_sent, 0);
}

#[test]
fn markers_expire_and_can_be_released() {
    let mut p = Pair::new();
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let mut moved = Vec::new();
    for _ in 0..2 {
        let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
        p.exchange();
        let (s, _) = p.b.tcp_accept(l).expect("accept");
        moved.push((c, export_b(&mut p, s).0));
    }
    let (c0, t0) = moved[0];
    let (_, t1) = moved[1];
    // Released: the tuple is unknown again, so its segments draw a RST.
    p.b.tcp_release_moved(t0).expect("release");
    assert_eq!(p.b.tcp_release_moved(t0), Err(SocketError::InvalidState));
    for f in frames_from_a(&mut p, c0, b"x") {
        p.b.receive(p.now, &f, &RxMeta::NONE);
    }
    assert_eq!(p.b.counters().tcp_rx_no_listener_rst_sent, 1);
    // Expired: after `tcp_moved_marker_ns` the marker goes by itself.
    let lifetime = p.b.config().limits.tcp_moved_marker_ns;
    p.advance(lifetime - p.now - 1);
    assert_eq!(p.b.counters().tcp_moved_expired, 0);
    assert_eq!(p.b.tcp_set_moved_forward(t1, 1), Ok(()), "still there");
    p.advance(1);
    assert_eq!(p.b.counters().tcp_moved_expired, 1);
    assert_eq!(
        p.b.tcp_set_moved_forward(t1, 1),
        Err(SocketError::InvalidState)
    );
}
