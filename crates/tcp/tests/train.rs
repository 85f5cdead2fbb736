//! Trains (`Connection::poll_transmit_train`): a run of full segments decided and accounted
//! once. The twin tests drain every side both ways at every flush (the harness's
//! `train_segments_max`): a clone through `poll_transmit` alone, the side itself through trains
//! first; the segments and the whole connection afterwards must be equal.

mod harness;

use harness::FaultRng as Rng;
use harness::{Knobs, MS, Pair, Verdict, finished, pattern};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tcp::{Config, Connection};
use wire::tcp::TcpFlags;

#[derive(Debug, Clone, Copy)]
struct TwinCase {
    seed: u64,
    knobs: Knobs,
    rack: bool,
    restart_after_idle: bool,
    loss_per_mille: u64,
    delay_ms: u64,
    train_max: u16,
    chunk_bytes: usize,
}

/// Both streams of `k` arrive intact and the close completes, every drain of both sides
/// checked against its single-segment twin (the harness panics on a difference).
fn twin_run(k: TwinCase) -> Result<u64, TestCaseError> {
    let c = Config {
        rack: k.rack,
        restart_after_idle: k.restart_after_idle,
        ..k.knobs.config()
    };
    let (loss, delay_ms) = (k.loss_per_mille, k.delay_ms);
    let mut p = Pair::established(c, c, delay_ms * MS);
    p.train_segments_max = k.train_max;
    let mut rng = Rng(k.seed | 1);
    p.filter = Box::new(move |_, _| {
        if rng.chance(loss) {
            Verdict::Drop
        } else if rng.chance(20) {
            Verdict::DelayExtra(rng.next() % (3 * delay_ms * MS))
        } else {
            Verdict::Pass
        }
    });
    p.a_auto_read = true;
    p.b_auto_read = true;
    let a = pattern(90_000);
    let b: Vec<u8> = pattern(30_000).into_iter().rev().collect();
    // The application writes in chunks, some time apart: partial sends, idle gaps, ACKs
    // arriving between drains.
    let mut gap_rng = Rng(k.seed.rotate_left(17) | 1);
    for (ca, cb) in a
        .chunks(k.chunk_bytes)
        .zip(b.chunks(k.chunk_bytes).chain(std::iter::repeat(&[][..])))
    {
        p.a_to_send.extend_from_slice(ca);
        p.b_to_send.extend_from_slice(cb);
        p.run_for(gap_rng.next() % (4 * delay_ms.max(1) * MS));
    }
    p.run_until(
        |p| p.b_read.len() >= a.len() && p.a_read.len() >= b.len(),
        3_000_000 * MS,
    );
    prop_assert!(p.b_read == a);
    prop_assert!(p.a_read == b);
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(|p| finished(&p.a) && finished(&p.b), 3_000_000 * MS);
    prop_assert!(p.a.invariant_violation().is_none() && p.b.invariant_violation().is_none());
    Ok(p.train_segments_sent)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random connections and workloads (MSS, buffers and so windows, timestamps, SACK,
    /// window scaling, congestion control, Nagle, RACK, restart after idle, loss, delay,
    /// write sizes, train lengths): every drain through trains emits the segments
    /// `poll_transmit` alone emits and leaves the same connection.
    #[test]
    fn trains_match_single_segments_on_random_connections(
        seed in any::<u64>(),
        mss in 200u16..1460,
        buf in 4_000u32..200_000,
        sack in any::<bool>(),
        ts in any::<bool>(),
        ws in any::<bool>(),
        cubic in any::<bool>(),
        nodelay in any::<bool>(),
        rack in any::<bool>(),
        restart_after_idle in any::<bool>(),
        loss_per_mille in prop_oneof![Just(0u64), 0u64..60],
        delay_ms in 1u64..20,
        train_max in 2u16..64,
        chunk_bytes in prop_oneof![Just(90_000usize), 100usize..20_000],
    ) {
        twin_run(TwinCase {
            seed,
            knobs: Knobs { mss, buf, sack, ts, ws, cubic, nodelay },
            rack,
            restart_after_idle,
            loss_per_mille,
            delay_ms,
            train_max,
            chunk_bytes,
        })?;
    }
}

/// The twin run is not vacuous: a loss-free bulk transfer sends most of its segments in trains.
#[test]
fn a_loss_free_bulk_transfer_goes_out_in_trains() {
    let k = TwinCase {
        seed: 7,
        knobs: Knobs {
            mss: 1460,
            buf: 64 * 1024,
            sack: true,
            ts: true,
            ws: true,
            cubic: false,
            nodelay: false,
        },
        rack: true,
        restart_after_idle: true,
        loss_per_mille: 0,
        delay_ms: 5,
        train_max: 44,
        chunk_bytes: 90_000,
    };
    let in_trains = twin_run(k).unwrap();
    // 120 kB over both directions at 1,448 bytes a segment: ~83 data segments.
    assert!(in_trains >= 40, "only {in_trains} segments went in trains");
}

/// An established pair with nothing in flight, A's peer offering `b_recv_bytes`.
fn pair(mss: u16, b_recv_bytes: u32, nodelay: bool) -> Pair {
    let a = Config {
        mss_bytes: mss,
        nodelay,
        initial_window_segments: 40,
        ..Config::default()
    };
    let b = Config {
        mss_bytes: mss,
        recv_buffer_bytes: b_recv_bytes,
        window_scale: false,
        ..Config::default()
    };
    Pair::established(a, b, 2 * MS)
}

/// Drains `c` through `poll_transmit` alone; the segments' (seq, len, flags).
fn drain(c: &mut Connection, now: u64) -> Vec<(u32, usize, u8)> {
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::new();
    while let Some(r) = c.poll_transmit(now, &mut buf) {
        out.push((r.seq_number.0, r.payload.len(), r.flags.0));
    }
    out
}

#[test]
fn a_train_stops_where_the_peers_window_closes() {
    let mss = 1000u16;
    let mut p = pair(mss, 4 * 988 + 500, false);
    let eff = usize::from(p.a.eff_mss());
    p.a.send(&pattern(20 * eff)).unwrap();
    let mut twin = p.a.clone();
    let t = p.a.poll_transmit_train(p.now, 64, 65536).expect("a train");
    // The peer's window holds four full segments and a part of a fifth.
    assert_eq!(usize::from(t.segments), (4 * 988 + 500) / eff);
    assert_eq!(usize::from(t.seg_bytes), eff);
    assert!(!t.psh_last);
    // Nothing more now: the window's remainder is a short segment SWS avoidance holds.
    assert_eq!(drain(&mut p.a, p.now), vec![]);
    let singles = drain(&mut twin, p.now);
    assert_eq!(singles.len(), usize::from(t.segments));
    assert_eq!(format!("{twin:?}"), format!("{:?}", p.a));
}

#[test]
fn a_train_is_no_longer_than_the_room_the_caller_has() {
    let mut p = pair(1460, 256 * 1024, false);
    let eff = usize::from(p.a.eff_mss());
    p.a.send(&pattern(12 * eff)).unwrap();
    let t = p.a.poll_transmit_train(p.now, 3, 65536).expect("a train");
    assert_eq!(t.segments, 3);
    let u =
        p.a.poll_transmit_train(p.now, 64, 65536)
            .expect("the next train");
    assert_eq!(u.segments, 9);
    assert_eq!(u.header.seq_number, t.segment(2).seq_number + eff as u32);
    // The last one empties the buffer: PSH, as `poll_transmit` sets it.
    assert!(u.psh_last && u.segment(8).flags.contains(TcpFlags::PSH));
    assert!(!u.segment(7).flags.contains(TcpFlags::PSH));
    // No train when fewer than two segments fit the caller's queue, or a segment's options
    // and payload (the send MSS, 1,460: 12 bytes of timestamps and 1,448 of data) its frame.
    assert_eq!(eff, 1448);
    p.a.send(&pattern(4 * eff)).unwrap();
    assert!(p.a.poll_transmit_train(p.now, 1, 65536).is_none());
    assert!(p.a.poll_transmit_train(p.now, 64, 1459).is_none());
    assert_eq!(
        p.a.poll_transmit_train(p.now, 64, 1460).map(|t| t.segments),
        Some(4)
    );
}

#[test]
fn a_short_tail_after_a_train_waits_for_nagle() {
    for nodelay in [false, true] {
        let mut p = pair(1460, 256 * 1024, nodelay);
        let eff = usize::from(p.a.eff_mss());
        p.a.send(&pattern(3 * eff + 100)).unwrap();
        let t = p.a.poll_transmit_train(p.now, 64, 65536).expect("a train");
        assert_eq!(t.segments, 3);
        assert!(!t.psh_last);
        let rest = drain(&mut p.a, p.now);
        if nodelay {
            // Nagle off: the tail leaves at once, pushed.
            assert_eq!(rest.len(), 1);
            assert_eq!(rest[0].1, 100);
            assert_ne!(rest[0].2 & TcpFlags::PSH.0, 0);
        } else {
            // Full segments in flight: the 100-byte tail waits for their ACK.
            assert_eq!(rest, vec![]);
        }
    }
}

#[test]
fn a_fin_queued_after_the_data_leaves_the_last_segment_to_poll_transmit() {
    let mut p = pair(1460, 256 * 1024, false);
    let eff = usize::from(p.a.eff_mss());
    p.a.send(&pattern(3 * eff)).unwrap();
    p.a.shutdown_write().unwrap();
    let t = p.a.poll_transmit_train(p.now, 64, 65536).expect("a train");
    // The third segment empties the buffer and so carries the FIN: not in the train.
    assert_eq!(t.segments, 2);
    assert!(!t.psh_last);
    let rest = drain(&mut p.a, p.now);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1, eff);
    assert_ne!(rest[0].2 & TcpFlags::FIN.0, 0);
    assert_ne!(rest[0].2 & TcpFlags::PSH.0, 0);
}
