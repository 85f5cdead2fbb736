//! The last-flow record in front of the connection lookup (`conn_table::LastFlow`): it
//! answers only what the table would. A segment for a 4-tuple whose connection is gone —
//! and whose socket slot another connection took in between — is never handed to the slot
//! the record named; a change of the table (a new connection) leaves the cached flow
//! reachable. (In debug builds every hit is also checked against the table's own lookup.)
mod common;

use common::*;
use stack::SocketHandle;

/// The slot index a handle names (`#index.generation`).
fn slot_of(h: SocketHandle) -> String {
    let s = format!("{h}");
    s.split('.').next().unwrap_or_default().to_owned()
}

/// One data segment from A's connection `c`, captured (not delivered).
fn captured_segment(p: &mut Pair, c: SocketHandle, data: &[u8]) -> Vec<u8> {
    p.captured_a.clear();
    p.a.tcp_send(c, data).expect("send");
    p.exchange();
    assert_eq!(p.captured_a.len(), 1, "one segment");
    p.captured_a.remove(0)
}

/// One connection from A to B's listener on port 80: its first data segment ("one")
/// delivered and read, so B's last-flow record names its slot; its second ("two")
/// captured, not delivered, with A still capturing. Returns the pair, the server's
/// address, the listener, B's socket and the captured frame.
fn flow_with_a_captured_segment() -> (
    Pair,
    core::net::SocketAddr,
    SocketHandle,
    SocketHandle,
    Vec<u8>,
) {
    let mut p = Pair::new();
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c1 = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s1, _) = p.b.tcp_accept(l).expect("accept");
    p.capture_a = true;
    let f1 = captured_segment(&mut p, c1, b"one");
    p.b.receive(p.now, &f1, &stack::RxMeta::NONE);
    assert_eq!(read_all(&mut p.b, s1), b"one");
    p.capture_a = false;
    p.exchange();
    p.capture_a = true;
    let f2 = captured_segment(&mut p, c1, b"two");
    (p, server, l, s1, f2)
}

#[test]
fn a_segment_for_a_closed_connection_whose_slot_was_reused_is_not_given_to_the_new_owner() {
    let (mut p, _, _, s1, f2) = flow_with_a_captured_segment();
    // s1 goes and its slot is freed (A's frames stay captured: B receives nothing more, so
    // no lookup replaces the record)...
    p.b.tcp_abort(s1).expect("abort");
    let _ = p.b.close(p.now, s1);
    p.exchange();
    // ... and B's own active open takes the slot, before any frame of it comes back.
    let s2 =
        p.b.tcp_connect(p.now, v4(IP_A, 9000), 0)
            .expect("connect from B");
    assert_eq!(
        slot_of(s2),
        slot_of(s1),
        "the new connection reuses the slot"
    );
    // The old flow's segment: no connection has its tuple, so the listener answers it
    // (an ACK draws a RST) and the new connection sees nothing.
    let before = p.b.counters();
    p.b.receive(p.now, &f2, &stack::RxMeta::NONE);
    let after = p.b.counters();
    assert_eq!(
        after.tcp_listen_bad_segment,
        before.tcp_listen_bad_segment + 1,
        "handled as a segment for no connection"
    );
    assert_eq!(
        after.tcp_rx_no_listener_rst_sent,
        before.tcp_rx_no_listener_rst_sent + 1,
        "answered with a RST"
    );
    assert!(
        read_all(&mut p.b, s2).is_empty(),
        "nothing for the new owner"
    );
}

#[test]
fn the_cached_flow_is_still_found_after_another_connection_changed_the_table() {
    let (mut p, server, l, s1, f2) = flow_with_a_captured_segment();
    p.capture_a = false;
    // A second connection: the table changes (and the record with it).
    let _c2 = p.a.tcp_connect(p.now, server, 0).expect("connect 2");
    p.exchange();
    let (s2, _) = p.b.tcp_accept(l).expect("accept 2");
    p.b.receive(p.now, &f2, &stack::RxMeta::NONE);
    assert_eq!(read_all(&mut p.b, s1), b"two");
    assert!(read_all(&mut p.b, s2).is_empty());
}
