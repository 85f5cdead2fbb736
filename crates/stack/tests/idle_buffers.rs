//! Ring storage of idle connections goes back (issue 17 item 2, `stack::tcp_idle`): once a
//! connection has received nothing for a second and its rings hold nothing, the sweep on the
//! timer path releases them, and the next write allocates again; a ring that still holds
//! unread bytes keeps its storage.
mod common;

use common::*;
use stack::{SocketHandle, Stack};

fn read_all(s: &mut Stack, h: SocketHandle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.tcp_recv(h, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn established(p: &mut Pair) -> (SocketHandle, SocketHandle) {
    resolve(p);
    let server = v4(IP_B, 80);
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    p.exchange();
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    (c, s)
}

#[test]
fn an_idle_connection_with_empty_rings_gives_their_storage_back_and_allocates_again() {
    let mut p = Pair::new();
    let (c, s) = established(&mut p);
    p.a.tcp_send(c, b"request").expect("send");
    p.advance(10 * MS);
    assert_eq!(read_all(&mut p.b, s), b"request");
    p.b.tcp_send(s, b"response").expect("send");
    p.advance(10 * MS);
    assert_eq!(read_all(&mut p.a, c), b"response");
    assert!(p.a.tcp_mem_bytes() > 0 && p.b.tcp_mem_bytes() > 0);
    // Not idle long enough yet.
    p.advance(500 * MS);
    assert!(p.a.tcp_mem_bytes() > 0);
    p.advance(600 * MS);
    assert_eq!((p.a.tcp_mem_bytes(), p.b.tcp_mem_bytes()), (0, 0));
    assert!(p.a.counters().tcp_idle_buffers_released >= 1);
    assert!(p.a.counters().tcp_idle_buffer_bytes_released >= 4096);
    // The connection goes on: the next write allocates again.
    p.a.tcp_send(c, b"again").expect("send");
    p.advance(10 * MS);
    assert_eq!(read_all(&mut p.b, s), b"again");
    assert!(p.a.tcp_mem_bytes() > 0);
}

#[test]
fn unread_data_keeps_its_ring_however_long_the_connection_is_idle() {
    let mut p = Pair::new();
    let (c, s) = established(&mut p);
    p.a.tcp_send(c, b"unread").expect("send");
    p.advance(10 * MS);
    p.advance(3 * S);
    // A's send ring is acknowledged and empty: released. B's receive ring holds 6 bytes.
    assert_eq!(p.a.tcp_mem_bytes(), 0);
    assert!(p.b.tcp_mem_bytes() > 0);
    assert_eq!(read_all(&mut p.b, s), b"unread");
}
