//! The receive look-ahead (`stack::RxLookahead`): it finds the connection a segment is for
//! before the segment is processed, and processing a burst with it ends in exactly the state
//! processing the same burst without it does.

mod common;

use common::{IP_B, IP6_B, Pair, resolve, v4, v6};
use proptest::prelude::*;
use stack::{FlowHint, Readiness, RxLookahead, RxMeta, SocketHandle, Stack};

/// `n` connections A → B on `server`'s port, accepted; (client, server) handles.
fn connections(
    p: &mut Pair,
    server: std::net::SocketAddr,
    n: usize,
) -> Vec<(SocketHandle, SocketHandle)> {
    let l = p.b.tcp_listen(server, 64).expect("listen");
    let cs: Vec<_> = (0..n)
        .map(|_| p.a.tcp_connect(p.now, server, 0).expect("connect"))
        .collect();
    p.exchange();
    while p.a.poll_event().is_some() {}
    while p.b.poll_event().is_some() {}
    cs.into_iter()
        .map(|c| {
            let (s, peer) = p.b.tcp_accept(l).expect("accept");
            assert_eq!(peer, p.a.local_addr(c).expect("local"));
            (c, s)
        })
        .collect()
}

/// A's frames after each client wrote a message, captured instead of delivered.
fn burst_from_a(p: &mut Pair, conns: &[(SocketHandle, SocketHandle)]) -> Vec<Vec<u8>> {
    p.capture_a = true;
    for (k, &(c, _)) in conns.iter().enumerate() {
        let msg = vec![b'a' + k as u8; 100 + k];
        assert_eq!(p.a.tcp_send(c, &msg), Ok(msg.len()));
    }
    p.exchange();
    p.capture_a = false;
    std::mem::take(&mut p.captured_a)
}

fn view(f: &Vec<u8>) -> (&[u8], &RxMeta) {
    (f.as_slice(), &RxMeta::NONE)
}

#[test]
fn lookahead_names_the_slot_of_the_connection_each_segment_is_for() {
    for server in [v4(IP_B, 80), v6(IP6_B, 80)] {
        let mut p = Pair::new();
        resolve(&mut p);
        let conns = connections(&mut p, server, 5);
        let frames = burst_from_a(&mut p, &conns);
        assert_eq!(frames.len(), conns.len(), "one segment per connection");
        for (f, &(_, s)) in frames.iter().zip(&conns) {
            let mut hint = p.b.lookahead_flow(f, &RxMeta::NONE);
            assert_ne!(hint, FlowHint::NONE, "a TCP segment has a flow");
            p.b.lookahead_slot(&mut hint);
            assert!(hint.names(s), "{server}: the hint names the server socket");
            for &(_, other) in conns.iter().filter(|&&(_, o)| o != s) {
                assert!(!hint.names(other));
            }
            p.b.lookahead_conn(&hint);
        }
    }
}

/// Everything observable of a stack after a burst: counters, and the bytes each socket holds.
fn observe(s: &mut Stack, socks: &[SocketHandle]) -> (String, String, Vec<Vec<u8>>) {
    let counters = format!("{:?}", s.counters());
    let tcp = format!("{:?}", s.tcp_counters());
    let mut buf = [0u8; 4096];
    let data = socks
        .iter()
        .map(|&h| {
            let mut out = Vec::new();
            while let Ok(n) = s.tcp_recv(h, &mut buf) {
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            out
        })
        .collect();
    (counters, tcp, data)
}

/// How a test burst is received.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// `receive`, no look-ahead.
    Plain,
    /// The look-ahead, each frame received with its own hint (`receive_hinted`).
    Hinted,
    /// The look-ahead, each frame received with the previous frame's hint: wrong keys.
    WrongHints,
}

#[test]
fn a_burst_with_lookahead_ends_in_the_state_it_ends_in_without() {
    for server in [v4(IP_B, 80), v6(IP6_B, 80)] {
        let without = burst_end_state(server, Mode::Plain);
        for mode in [Mode::Hinted, Mode::WrongHints] {
            let with = burst_end_state(server, mode);
            assert_eq!(
                with.0.2.iter().filter(|d| !d.is_empty()).count(),
                9,
                "{server} {mode:?}: every request arrived"
            );
            assert_eq!(with, without, "{server} {mode:?}");
        }
    }
}

type EndState = (
    (String, String, Vec<Vec<u8>>),
    Vec<SocketHandle>,
    Vec<Vec<u8>>,
);

/// Nine connections' requests as one burst to B, with garbage and a stray segment mixed in,
/// received as `mode` says; what B holds and sent afterwards.
fn burst_end_state(server: std::net::SocketAddr, mode: Mode) -> EndState {
    {
        let mut p = Pair::new();
        resolve(&mut p);
        let conns = connections(&mut p, server, 9);
        // Garbage and a frame for no connection mixed in: the look-ahead skips them.
        let mut frames = burst_from_a(&mut p, &conns);
        frames.insert(3, vec![0xff; 7]);
        let mut stray = frames[0].clone();
        let l3 = if server.is_ipv4() { 20 } else { 40 };
        stray[14 + l3] ^= 0x55; // another source port: no connection, a RST from B
        frames.insert(5, stray);
        let mut la = RxLookahead::default();
        if mode != Mode::Plain {
            la.start(&p.b, &frames, view);
        }
        let mut previous = FlowHint::NONE;
        for k in 0..frames.len() {
            match mode {
                Mode::Plain => p.b.receive(p.now, &frames[k], &RxMeta::NONE),
                Mode::Hinted => {
                    let hint = la.advance(&p.b, &frames[k + 1..], view);
                    p.b.receive_hinted(p.now, &frames[k], &RxMeta::NONE, &hint);
                }
                Mode::WrongHints => {
                    let hint = la.advance(&p.b, &frames[k + 1..], view);
                    p.b.receive_hinted(p.now, &frames[k], &RxMeta::NONE, &previous);
                    previous = hint;
                }
            }
        }
        let mut ready = Vec::new();
        while let Some(e) = p.b.poll_event() {
            if e.readiness.contains(Readiness::READABLE) {
                ready.push(e.handle);
            }
        }
        let socks: Vec<_> = conns.iter().map(|&(_, s)| s).collect();
        let mut sent = Vec::new();
        while let Some(f) = p.b.poll_transmit(p.now) {
            sent.push(f);
        }
        (observe(&mut p.b, &socks), ready, sent)
    }
}

#[test]
fn hints_of_two_flows_differ_and_the_same_frame_gives_the_same_hint() {
    let mut p = Pair::new();
    resolve(&mut p);
    let conns = connections(&mut p, v4(IP_B, 80), 2);
    let frames = burst_from_a(&mut p, &conns);
    let h0 = p.b.lookahead_flow(&frames[0], &RxMeta::NONE);
    let h1 = p.b.lookahead_flow(&frames[1], &RxMeta::NONE);
    assert_ne!(h0, h1, "two flows, two keys");
    assert_eq!(h0, p.b.lookahead_flow(&frames[0], &RxMeta::NONE));
}

proptest! {
    #[test]
    fn lookahead_of_arbitrary_bytes_never_panics_and_finds_no_connection(
        frame in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut p = Pair::new();
        let conns = connections(&mut p, v4(IP_B, 80), 1);
        let mut hint = p.b.lookahead_flow(&frame, &RxMeta::NONE);
        p.b.lookahead_slot(&mut hint);
        p.b.lookahead_conn(&hint);
        prop_assert!(!hint.names(conns[0].1));
        let frames = vec![frame.clone(), frame.clone(), frame];
        let mut la = RxLookahead::default();
        la.start(&p.b, &frames, view);
        for k in 0..frames.len() {
            la.advance(&p.b, &frames[k + 1..], view);
        }
    }
}
