//! A hostile or broken peer: arbitrary segments thrown at live connections never panic and
//! never break the TCB invariants or the memory caps.

mod harness;

use harness::{Dir, MS, Pair, Seg};
use proptest::prelude::*;
use tcp::{Config, State};
use wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpTimestamp};

#[derive(Debug, Clone)]
struct Fuzz {
    seq_off: i32,
    ack_off: i32,
    flags: u8,
    window: u16,
    payload_len: usize,
    ts: Option<(i32, u32)>,
    sack: Vec<(i32, u32)>,
    mss: Option<u16>,
    advance_ms: u16,
}

fn fuzz_seg() -> impl Strategy<Value = Fuzz> {
    (
        prop_oneof![-70_000i32..70_000, -3i32..3, any::<i32>()],
        prop_oneof![-70_000i32..70_000, -3i32..3, any::<i32>()],
        any::<u8>(),
        any::<u16>(),
        prop_oneof![Just(0usize), 1usize..1500],
        proptest::option::of((-100_000i32..100_000, any::<u32>())),
        proptest::collection::vec((-70_000i32..70_000, 0u32..5000), 0..4),
        proptest::option::of(any::<u16>()),
        0u16..500,
    )
        .prop_map(
            |(seq_off, ack_off, flags, window, payload_len, ts, sack, mss, advance_ms)| Fuzz {
                seq_off,
                ack_off,
                flags,
                window,
                payload_len,
                ts,
                sack,
                mss,
                advance_ms,
            },
        )
}

fn build(p: &Pair, to: Dir, f: &Fuzz) -> Seg {
    let rcv_conn = match to {
        Dir::AtoB => &p.b,
        Dir::BtoA => &p.a,
    };
    let (_, _, rcv_nxt) = rcv_conn.sequence_state();
    let (peer_una, _, _) = rcv_conn.sequence_state();
    let (src, dst) = (rcv_conn.remote_port(), rcv_conn.local_port());
    let mut s = harness::seg(
        src,
        dst,
        SeqNumber(rcv_nxt.0.wrapping_add(f.seq_off as u32)),
        SeqNumber(peer_una.0.wrapping_add(f.ack_off as u32)),
        TcpFlags(f.flags),
    );
    s.hdr.window_len = f.window;
    s.payload = vec![0x5a; f.payload_len];
    s.hdr.max_seg_size = f.mss;
    s.hdr.timestamp = f.ts.map(|(d, e)| TcpTimestamp {
        tsval: ((p.now / MS) as u32).wrapping_add(d as u32),
        tsecr: e,
    });
    for (i, (l, len)) in f.sack.iter().enumerate() {
        let left = SeqNumber(peer_una.0.wrapping_add(*l as u32));
        s.hdr.sack_blocks[i] = Some(SackBlock {
            left,
            right: left + *len,
        });
    }
    s
}

fn check(p: &Pair) -> Result<(), TestCaseError> {
    for (name, c) in [("A", &p.a), ("B", &p.b)] {
        if let Some(v) = c.invariant_violation() {
            return Err(TestCaseError::fail(format!(
                "{name}: {v} in {:?}",
                c.state()
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_segments_never_break_invariants(
        segs in proptest::collection::vec((any::<bool>(), fuzz_seg()), 1..40),
        sack in any::<bool>(),
        ts in any::<bool>(),
    ) {
        let c = Config {
            sack,
            timestamps: ts,
            recv_buffer_bytes: 20_000,
            ooo_segments_max: 3,
            ooo_bytes_max: 6000,
            ..Config::default()
        };
        let mut p = Pair::established(c, c, 2 * MS);
        p.a_to_send = harness::pattern(50_000);
        p.b_to_send = harness::pattern(30_000);
        p.run_for(7 * MS);
        for (to_b, f) in &segs {
            let dir = if *to_b { Dir::AtoB } else { Dir::BtoA };
            let s = build(&p, dir, f);
            p.inject(dir, s);
            p.run_for(u64::from(f.advance_ms) * MS / 10 + 1);
            check(&p)?;
        }
        // Whatever happened, run the clock out (retransmissions, user timeout): the invariants
        // still hold and nothing is left half-done — every deadline was honoured.
        p.run_for(900_000 * MS);
        check(&p)?;
        for c in [&p.a, &p.b] {
            prop_assert!(c.poll_timeout().is_none_or(|t| t > p.now));
            prop_assert!(c.state() != State::SynSent && c.state() != State::SynReceived);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The handshake states face the same hostility: random segments at SYN-SENT and
    /// SYN-RECEIVED never panic, never break invariants, and the engines still settle.
    #[test]
    fn arbitrary_segments_during_the_handshake_never_break_invariants(
        segs in proptest::collection::vec((any::<bool>(), fuzz_seg()), 1..12),
        ts in any::<bool>(),
    ) {
        let c = Config { timestamps: ts, ..Config::default() };
        let mut p = Pair::new(c, c, 2 * MS);
        for (to_b, f) in &segs {
            let dir = if *to_b { Dir::AtoB } else { Dir::BtoA };
            let s = build(&p, dir, f);
            p.inject(dir, s);
            p.run_for(u64::from(f.advance_ms) * MS / 50 + 1);
            check(&p)?;
        }
        p.run_for(900_000 * MS);
        check(&p)?;
        for c in [&p.a, &p.b] {
            prop_assert!(c.poll_timeout().is_none_or(|t| t > p.now));
        }
    }
}
