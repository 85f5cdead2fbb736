//! The TCP transmit path builds each frame in one reused buffer: buffers a driver hands back
//! with `Stack::recycle`, full of stale bytes, must yield exactly the frames fresh ones do.

mod common;
use common::*;
use core::net::SocketAddr;
use stack::RxMeta;

/// Moves frames both ways until neither side sends, logging each; with `dirty`, every frame
/// is overwritten with 0xa5 after delivery and handed back to its sender.
fn exchange(p: &mut Pair, log: &mut Vec<Vec<u8>>, dirty: bool) {
    let Pair { a, b, now, .. } = p;
    for _ in 0..10_000 {
        let mut moved = false;
        for a_sends in [true, false] {
            let (tx, rx) = if a_sends {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            while let Some(mut f) = tx.poll_transmit(*now) {
                moved = true;
                log.push(f.clone());
                rx.receive(*now, &f, &RxMeta::NONE);
                if dirty {
                    f.fill(0xa5);
                    tx.recycle(f);
                }
            }
        }
        if !moved {
            return;
        }
    }
    panic!("exchange did not settle");
}

/// A connection to `server`, 200 kB A → B and 20 kB B → A, then both close: every frame.
fn transfer(server: SocketAddr, dirty: bool) -> Vec<Vec<u8>> {
    let mut p = Pair::new();
    let mut log = Vec::new();
    let l = p.b.tcp_listen(server, 8).expect("listen");
    let c = p.a.tcp_connect(p.now, server, 0).expect("connect");
    exchange(&mut p, &mut log, dirty);
    let (s, _) = p.b.tcp_accept(l).expect("accept");
    let up: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let down: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    let (mut sent_up, mut sent_down) = (0, 0);
    let (mut got_up, mut got_down) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 4096];
    for _ in 0..20_000 {
        if let Ok(n) = p.a.tcp_send(c, &up[sent_up..]) {
            sent_up += n;
        }
        if let Ok(n) = p.b.tcp_send(s, &down[sent_down..]) {
            sent_down += n;
        }
        exchange(&mut p, &mut log, dirty);
        while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
            got_up.extend_from_slice(&buf[..n]);
        }
        while let Ok(n) = p.a.tcp_recv(c, &mut buf) {
            got_down.extend_from_slice(&buf[..n]);
        }
        if got_up.len() == up.len() && got_down.len() == down.len() {
            break;
        }
        p.now += MS;
        p.a.handle_timeout(p.now);
        p.b.handle_timeout(p.now);
    }
    assert!(got_up == up && got_down == down, "bytes differ");
    p.a.close(p.now, c).expect("close a");
    p.b.close(p.now, s).expect("close b");
    exchange(&mut p, &mut log, dirty);
    log
}

#[test]
fn recycled_dirty_buffers_yield_the_same_frames_as_fresh_ones_v4() {
    let fresh = transfer(v4(IP_B, 80), false);
    assert!(fresh.len() > 150);
    assert!(fresh == transfer(v4(IP_B, 80), true), "frames differ");
}

#[test]
fn recycled_dirty_buffers_yield_the_same_frames_as_fresh_ones_v6() {
    let fresh = transfer(v6(IP6_B, 80), false);
    assert!(fresh.len() > 150);
    assert!(fresh == transfer(v6(IP6_B, 80), true), "frames differ");
}
