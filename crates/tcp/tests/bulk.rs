//! Bulk transfers over a lossy, reordering, duplicating link: every byte arrives exactly once
//! and in order, for many seeds.

mod harness;

use harness::FaultRng as Rng;
use harness::{Knobs, MS, Pair, Verdict, clean_close, finished, pattern};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tcp::{CloseReason, Config, CongestionControl, State};

fn run(seed: u64, loss_per_mille: u64, config: Config) {
    run_tso(seed, loss_per_mille, config, 1);
}

fn run_tso(seed: u64, loss_per_mille: u64, config: Config, tso_segments: u16) {
    let mut p = Pair::established(config, config, 3 * MS);
    p.tso_segments = tso_segments;
    let mut rng = Rng(seed | 1);
    p.filter = Box::new(move |_, _| {
        if rng.chance(loss_per_mille) {
            Verdict::Drop
        } else if rng.chance(20) {
            Verdict::DelayExtra(rng.next() % (4 * MS))
        } else if rng.chance(10) {
            Verdict::Duplicate
        } else {
            Verdict::Pass
        }
    });
    let a_data = pattern(120_000);
    let b_data: Vec<u8> = pattern(40_000).into_iter().rev().collect();
    p.a_to_send = a_data.clone();
    p.b_to_send = b_data.clone();
    p.run_until(
        |p| p.b_read.len() >= a_data.len() && p.a_read.len() >= b_data.len(),
        600_000 * MS,
    );
    assert!(p.b_read == a_data, "seed {seed}: A→B bytes differ");
    assert!(p.a_read == b_data, "seed {seed}: B→A bytes differ");
    // And the connection closes cleanly.
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(|p| finished(&p.a) && finished(&p.b), 600_000 * MS);
    for (who, c) in [("A", &p.a), ("B", &p.b)] {
        if let Err(e) = clean_close(who, c) {
            panic!("seed {seed}: {e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn bulk_transfer_with_random_loss_delivers_every_byte_once_in_order(seed in any::<u64>()) {
        run(seed, 30, Config::default());
    }

    #[test]
    fn tso_bulk_transfer_with_random_loss_delivers_every_byte_once_in_order(seed in any::<u64>()) {
        run_tso(seed, 20, Config::default(), 44);
    }

    #[test]
    fn bulk_transfer_without_timestamps_or_sack_survives_loss(seed in any::<u64>()) {
        run(seed, 30, Config { timestamps: false, sack: false, ..Config::default() });
    }

    #[test]
    fn cubic_bulk_transfer_with_random_loss_delivers_every_byte(seed in any::<u64>()) {
        run(seed, 30, Config { congestion_control: CongestionControl::Cubic, ..Config::default() });
    }

    #[test]
    fn small_buffers_and_heavy_loss_still_deliver(seed in any::<u64>()) {
        run(seed, 100, Config { recv_buffer_bytes: 8192, send_buffer_bytes: 8192, ooo_segments_max: 2, ..Config::default() });
    }
}

/// Regression: go-back-N after a timeout pulled SND.NXT behind the peer's RCV.NXT, and pure
/// ACKs carrying SND.NXT were then unacceptable on both sides — an endless ACK ping-pong.
#[test]
fn pure_acks_stay_acceptable_while_both_sides_retransmit() {
    run(
        10102893126306282162,
        30,
        Config {
            congestion_control: CongestionControl::Cubic,
            ..Config::default()
        },
    );
}

/// One random-configuration case: the configuration both ends use and the link's faults.
#[derive(Debug, Clone, Copy)]
struct ConfigCase {
    seed: u64,
    knobs: Knobs,
    loss_per_mille: u64,
    delay_ms: u64,
    ooo: u16,
}

/// Both streams of `k` arrive intact over its lossy, reordering, duplicating link and the
/// close completes cleanly.
///
/// The user timeout (R2, default 300 s) is off: at up to 15 % loss each way, without
/// timestamps every ACK after a go-back covers retransmitted data, so Karn's rule leaves the
/// RTO backed off at its 60 s cap, and five lost tries in a row (a lost segment or its ACK,
/// ~26 % each) reach 300 s and abort the connection, as they should. This test is about
/// delivery; the abort has its own tests.
fn random_configuration(k: ConfigCase) -> Result<(), TestCaseError> {
    let c = Config {
        user_timeout_ns: None,
        ooo_segments_max: k.ooo,
        ..k.knobs.config()
    };
    let (loss_per_mille, delay_ms) = (k.loss_per_mille, k.delay_ms);
    let mut p = Pair::established(c, c, delay_ms * MS);
    let mut rng = Rng(k.seed | 1);
    p.filter = Box::new(move |_, _| {
        if rng.chance(loss_per_mille) {
            Verdict::Drop
        } else if rng.chance(30) {
            Verdict::DelayExtra(rng.next() % (3 * delay_ms * MS))
        } else if rng.chance(20) {
            Verdict::Duplicate
        } else {
            Verdict::Pass
        }
    });
    let a = pattern(60_000);
    let b: Vec<u8> = pattern(20_000).into_iter().rev().collect();
    p.a_to_send = a.clone();
    p.b_to_send = b.clone();
    p.run_until(
        |p| p.b_read.len() >= a.len() && p.a_read.len() >= b.len(),
        3_000_000 * MS,
    );
    prop_assert!(p.b_read == a);
    prop_assert!(p.a_read == b);
    p.a.shutdown_write().unwrap();
    p.b.shutdown_write().unwrap();
    p.run_until(|p| finished(&p.a) && finished(&p.b), 3_000_000 * MS);
    prop_assert_eq!(clean_close("A", &p.a), Ok(()));
    prop_assert_eq!(clean_close("B", &p.b), Ok(()));
    prop_assert!(p.a.invariant_violation().is_none() && p.b.invariant_violation().is_none());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random configurations (MSS, buffers, options, congestion control, Nagle, OOO caps) over
    /// random loss, delay and duplication: both streams arrive intact and the close completes.
    #[test]
    fn random_configurations_deliver_both_streams_and_close(
        seed in any::<u64>(),
        mss in 300u16..1460,
        buf in 3000u32..300_000,
        sack: bool,
        ts: bool,
        ws: bool,
        cubic: bool,
        nodelay: bool,
        loss_per_mille in 0u64..150,
        delay_ms in 1u64..20,
        ooo in 0u16..6,
    ) {
        random_configuration(ConfigCase {
            seed,
            knobs: Knobs { mss, buf, sack, ts, ws, cubic, nodelay },
            loss_per_mille,
            delay_ms,
            ooo,
        })?;
    }
}

/// The case recorded in `zz_stress.proptest-regressions` by commit 4291ad7, as its shrunk
/// values: the test file that recorded it was never committed, so nothing replayed the file,
/// and proptest's persisted seed only regenerates the case under that file's own strategy.
/// Timestamps without SACK or window scaling, a small MSS and buffers, 1.2 % loss. (It passes
/// today even with 4291ad7's RTT-sample rule removed, so it pins the configuration, not that
/// rule.)
#[test]
fn recorded_random_configuration_small_mss_timestamps_without_sack() {
    random_configuration(ConfigCase {
        seed: 7572298625526230286,
        knobs: Knobs {
            mss: 322,
            buf: 4960,
            sack: false,
            ts: true,
            ws: false,
            cubic: false,
            nodelay: false,
        },
        loss_per_mille: 12,
        delay_ms: 10,
        ooo: 0,
    })
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Loss, reordering and duplication from the first SYN to the last ACK: the handshake,
    /// the transfer and the close all get through.
    #[test]
    fn whole_connection_lifetime_survives_a_lossy_link(seed in any::<u64>()) {
        let mut rng = Rng(seed | 1);
        let filter = Box::new(move |_: &harness::Ctx, _: &harness::Seg| {
            if rng.chance(100) {
                Verdict::Drop
            } else if rng.chance(50) {
                Verdict::DelayExtra(rng.next() % (10 * MS))
            } else if rng.chance(20) {
                Verdict::Duplicate
            } else {
                Verdict::Pass
            }
        });
        let c = Config::default();
        let mut p = Pair::with_filter(c, c, 4 * MS, filter);
        let a = pattern(50_000);
        p.a_to_send = a.clone();
        p.run_until(|p| p.b_read.len() >= a.len(), 3_000_000 * MS);
        prop_assert!(p.b_read == a);
        p.a.shutdown_write().unwrap();
        p.run_until(|p| p.b.state() == State::CloseWait, 3_000_000 * MS);
        p.b.shutdown_write().unwrap();
        p.run_until(|p| p.b.state() == State::Closed && finished(&p.a), 3_000_000 * MS);
        prop_assert_eq!(p.b.close_reason(), Some(CloseReason::Normal));
        prop_assert_eq!(clean_close("A", &p.a), Ok(()));
    }
}

/// With a device that segments, new data leaves as runs of whole segments (multiples of the
/// per-segment payload) up to the TSO limit and within the congestion window; only the last
/// segment of the stream may be short; the receiver gets every byte.
#[test]
fn tso_sends_whole_segment_runs_within_cwnd_and_the_tail_last() {
    use harness::Dir;
    let config = Config::default();
    let mut p = Pair::established(config, config, 3 * MS);
    p.tso_segments = 44;
    let data = pattern(300_001);
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() >= data.len(), 60_000 * MS);
    assert!(p.b_read == data, "A→B bytes differ");
    let per_seg = usize::from(p.a.segment_payload_bytes(20 + 12));
    let data_segs: Vec<usize> = p
        .sent(Dir::AtoB)
        .filter(|e| e.2.is_data())
        .map(|e| e.2.payload.len())
        .collect();
    let (last, runs) = data_segs.split_last().expect("data sent");
    assert!(*last > 0);
    for &n in runs {
        assert_eq!(
            n % per_seg,
            0,
            "a run of {n} bytes is not whole {per_seg}-byte segments"
        );
        assert!(n <= 44 * per_seg, "{n} bytes exceed 44 segments");
    }
    // The initial window (10 segments) leaves as one transmission, and later ones are larger
    // than one segment: TSO was used.
    assert_eq!(data_segs[0], 10 * per_seg);
    assert!(data_segs.iter().filter(|&&n| n > per_seg).count() * 2 > data_segs.len());
    assert!(
        data_segs.len() < data.len() / per_seg / 4,
        "{} transmissions",
        data_segs.len()
    );
}

/// A case the proptest above found (2026-11-28): 14.2 % loss without timestamps, SACK or an
/// out-of-order queue. B's RTO was at its 60 s cap (Karn: only retransmitted data was
/// acknowledged) and four of its tries were lost in a row, so the default 300 s user timeout
/// aborted it while A, its data all acknowledged, had nothing left to do.
#[test]
fn recorded_random_configuration_heavy_loss_backed_off_rto_is_not_aborted() {
    random_configuration(ConfigCase {
        seed: 5672147711500426054,
        knobs: Knobs {
            mss: 442,
            buf: 10034,
            sack: false,
            ts: false,
            ws: false,
            cubic: true,
            nodelay: true,
        },
        loss_per_mille: 142,
        delay_ms: 1,
        ooo: 0,
    })
    .unwrap();
}
