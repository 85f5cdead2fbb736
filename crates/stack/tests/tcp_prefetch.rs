//! The per-connection prefetch (`Stack::set_tcp_prefetch`, `crates/stack/src/tcp_prefetch.rs`)
//! is hints only: the same traffic — requests and answers over many connections in both
//! families, partial reads, lost segments and their retransmission, timers (delayed
//! ACKs, probes, several connections due at once), a closed connection whose stale handle is
//! still used, calls on a listener's handle
//! — leaves the stacks in exactly the state, and makes them send exactly the frames and
//! report exactly the results and events, with the prefetch on as with it off.

mod common;

use common::{IP_B, IP6_B, Pair, resolve, v4, v6};
use proptest::prelude::*;
use stack::{SocketHandle, Stack};

/// Everything observable of one run, in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Trace {
    /// Every frame either side sent, tagged with its sender (`b'a'` / `b'b'`).
    frames: Vec<(u8, Vec<u8>)>,
    /// Every application call's result and every event, as text, in order.
    calls: Vec<String>,
    /// The final counters of both stacks.
    counters: Vec<String>,
    /// Segments A retransmitted (the script loses some of its segments).
    retransmitted_a: u64,
}

/// A small deterministic generator (the test must replay the same script twice).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}

/// Moves frames both ways until neither side sends, recording them; with `drop_first_a`,
/// A's first frame is lost on the wire.
fn settle(p: &mut Pair, t: &mut Trace, mut drop_first_a: bool) {
    for _ in 0..10_000 {
        let mut moved = false;
        while let Some(f) = p.a.poll_transmit(p.now) {
            moved = true;
            t.frames.push((b'a', f.clone()));
            if drop_first_a {
                drop_first_a = false;
                continue;
            }
            p.b.receive(p.now, &f, &stack::RxMeta::NONE);
        }
        while let Some(f) = p.b.poll_transmit(p.now) {
            moved = true;
            t.frames.push((b'b', f.clone()));
            p.a.receive(p.now, &f, &stack::RxMeta::NONE);
        }
        if !moved {
            return;
        }
    }
    panic!("the wire did not settle");
}

fn record_events(s: &mut Stack, side: char, t: &mut Trace) {
    while let Some(e) = s.poll_event() {
        t.calls
            .push(format!("{side} event {:?} {:?}", e.handle, e.readiness));
    }
}

/// Reads `h` with reads of `chunk` bytes until it would block; records each result.
fn read(s: &mut Stack, side: char, h: SocketHandle, chunk: usize, t: &mut Trace) -> Vec<u8> {
    let mut buf = vec![0u8; chunk.max(1)];
    let mut got = Vec::new();
    for _ in 0..64 {
        let r = s.tcp_recv(h, &mut buf);
        t.calls.push(format!("{side} recv {h:?} {r:?}"));
        match r {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    got
}

/// The script `seed` chooses, run with the prefetch `on` in both stacks.
fn run(seed: u64, steps: usize, on: bool) -> Trace {
    let mut t = Trace::default();
    let mut rng = Lcg(seed);
    let mut p = Pair::new();
    p.a.set_tcp_prefetch(on);
    p.b.set_tcp_prefetch(on);
    resolve(&mut p);
    let l4 = p.b.tcp_listen(v4(IP_B, 80), 64).expect("listen v4");
    let l6 = p.b.tcp_listen(v6(IP6_B, 80), 64).expect("listen v6");
    let clients: Vec<SocketHandle> = (0..24)
        .map(|k| {
            let server = if k % 4 == 3 {
                v6(IP6_B, 80)
            } else {
                v4(IP_B, 80)
            };
            p.a.tcp_connect(p.now, server, 0).expect("connect")
        })
        .collect();
    settle(&mut p, &mut t, false);
    record_events(&mut p.a, 'a', &mut t);
    record_events(&mut p.b, 'b', &mut t);
    let mut servers = Vec::new();
    for l in [l4, l6] {
        while let Ok((s, peer)) = p.b.tcp_accept(l) {
            servers.push((peer, s));
        }
    }
    assert_eq!(servers.len(), clients.len(), "every connection accepted");
    // The server socket of each client, by the client's local address.
    let server_of: Vec<SocketHandle> = clients
        .iter()
        .map(|&c| {
            let local = p.a.local_addr(c).expect("local");
            servers
                .iter()
                .find(|(peer, _)| *peer == local)
                .map(|&(_, s)| s)
                .expect("accepted")
        })
        .collect();
    let mut closed = None;
    for step in 0..steps {
        let k = rng.next(clients.len() as u64) as usize;
        let (c, s) = (clients[k], server_of[k]);
        match rng.next(9) {
            0..=2 => {
                let len = 1 + rng.next(3_000) as usize;
                let msg: Vec<u8> = (0..len)
                    .map(|i| (i as u64 ^ seed ^ step as u64) as u8)
                    .collect();
                let r = p.a.tcp_send(c, &msg);
                t.calls.push(format!("a send {c:?} {r:?}"));
                settle(&mut p, &mut t, rng.next(5) == 0);
            }
            3 | 4 => {
                let chunk = 1 + rng.next(2_000) as usize;
                let got = read(&mut p.b, 'b', s, chunk, &mut t);
                if !got.is_empty() {
                    let r = p.b.tcp_send(s, &got);
                    t.calls.push(format!("b send {s:?} {r:?}"));
                }
                settle(&mut p, &mut t, false);
            }
            5 => {
                let chunk = 1 + rng.next(4_000) as usize;
                let got = read(&mut p.a, 'a', c, chunk, &mut t);
                t.calls.push(format!("a got {}", got.len()));
            }
            6 => {
                p.advance(rng.next(400_000_000));
                record_events(&mut p.a, 'a', &mut t);
                record_events(&mut p.b, 'b', &mut t);
            }
            7 => {
                // Calls that find no connection: a listener's handle, a closed one's.
                let r = p.b.tcp_recv(l4, &mut [0u8; 16]);
                t.calls.push(format!("b recv listener {r:?}"));
                if let Some(old) = closed {
                    let r = p.a.tcp_send(old, b"late");
                    t.calls.push(format!("a send closed {r:?}"));
                    let r = p.a.tcp_recv(old, &mut [0u8; 16]);
                    t.calls.push(format!("a recv closed {r:?}"));
                }
            }
            _ => {
                if closed.is_none() && step > steps / 2 {
                    let r = p.a.close(p.now, c);
                    t.calls.push(format!("a close {c:?} {r:?}"));
                    closed = Some(c);
                    settle(&mut p, &mut t, false);
                }
            }
        }
        record_events(&mut p.a, 'a', &mut t);
        record_events(&mut p.b, 'b', &mut t);
    }
    p.advance(2_000_000_000);
    record_events(&mut p.a, 'a', &mut t);
    record_events(&mut p.b, 'b', &mut t);
    t.retransmitted_a = p.a.tcp_counters().retransmitted_segments;
    for s in [&p.a, &p.b] {
        t.counters.push(format!("{:?}", s.counters()));
        t.counters.push(format!("{:?}", s.tcp_counters()));
    }
    t
}

#[test]
fn traffic_with_prefetch_ends_in_the_state_it_ends_in_without() {
    for seed in [1, 7, 42] {
        let with = run(seed, 400, true);
        let without = run(seed, 400, false);
        // The script exercised what it is meant to: data both ways, lost segments
        // retransmitted.
        assert!(
            with.retransmitted_a > 0,
            "seed {seed}: nothing was retransmitted"
        );
        assert!(
            with.calls.iter().any(|c| c.starts_with("b send")),
            "seed {seed}: the server answered"
        );
        assert!(
            with.frames.len() > 200,
            "seed {seed}: {} frames",
            with.frames.len()
        );
        assert_eq!(with.calls, without.calls, "seed {seed}: calls and events");
        assert_eq!(with.frames, without.frames, "seed {seed}: frames");
        assert_eq!(with.counters, without.counters, "seed {seed}: counters");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn any_script_runs_alike_with_and_without_prefetch(seed in any::<u64>()) {
        prop_assert_eq!(run(seed, 150, true), run(seed, 150, false));
    }
}
