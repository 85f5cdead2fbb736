//! Linux's congestion-window accounting options.

use super::*;

// ---------------------------------------------------------------- Linux's cwnd accounting

/// A's cwnd in segments after B, acknowledging every second full-sized segment, has
/// acknowledged the first ten; and how many ACKs B sent for them.
fn cwnd_after_first_window(config: Config) -> (u32, u32) {
    let mut p = Pair::established(config, no_ts(), 5 * MS);
    // Segments arrive spaced out, as over a real link, so B acknowledges them as they come.
    p.link_rate_bps = Some(100_000_000);
    let mss = usize::from(p.a.eff_mss());
    p.a_to_send = pattern(10 * mss);
    p.b_auto_read = true;
    p.run_until(|p| p.b_read.len() == 10 * mss, 500 * MS);
    p.run_for(50 * MS);
    assert_eq!(
        p.a.sequence_state().0,
        p.a.sequence_state().1,
        "all acknowledged"
    );
    let acks = p
        .sent(Dir::BtoA)
        .filter(|e| !e.2.has(TcpFlags::SYN))
        .count();
    (p.a.cwnd_bytes() / mss as u32, acks as u32)
}

#[test]
fn unlimited_slow_start_doubles_cwnd_per_window_despite_delayed_acks() {
    // B acknowledges about every second segment: RFC 5681's one SMSS per ACK gives 10 + the
    // number of ACKs; Linux's count of every acknowledged segment (L unbounded), 10 + 10.
    let (rfc, acks) = cwnd_after_first_window(no_ts());
    assert!(acks < 10, "B delays ACKs: {acks}");
    assert_eq!(rfc, 10 + acks);
    let (linux, _) = cwnd_after_first_window(Config {
        slow_start_increase_limit_segments: 0,
        ..no_ts()
    });
    assert_eq!(linux, 20);
}

#[test]
fn cwnd_does_not_grow_while_the_application_limits_the_sender() {
    // Two segments per round trip against a cwnd of ten: with growth only while cwnd limits
    // the sender (RFC 7661, Linux `tcp_is_cwnd_limited`), ten such rounds leave cwnd alone;
    // without it, every ACK adds.
    let run = |config: Config| {
        let mut p = Pair::established(config, no_ts(), 5 * MS);
        let mss = usize::from(p.a.eff_mss());
        p.b_auto_read = true;
        for round in 1..=10 {
            p.a.send(&pattern(2 * mss)).unwrap();
            p.run_until(|p| p.b_read.len() == round * 2 * mss, 500 * MS);
            p.run_for(50 * MS);
        }
        p.a.cwnd_bytes() / mss as u32
    };
    let iw = 10;
    assert_eq!(
        run(Config {
            cwnd_growth_requires_limited: true,
            ..no_ts()
        }),
        iw
    );
    assert!(run(no_ts()) > iw);
}

#[test]
fn segments_sacked_before_do_not_grow_cwnd_again_when_cumulatively_acked() {
    // The first segment arrives after the next two (reordering, not loss: two duplicate ACKs
    // stay below the fast retransmit threshold). B SACKs those two at once; the cumulative
    // ACK that follows covers three segments. Counting every byte it covers (RFC 5681's N,
    // here with L unbounded) adds three; counting only bytes not SACKed before (Linux's
    // `delivered`) adds one. The duplicate ACKs add nothing either way.
    let run = |config: Config| {
        let mut p = Pair::established(config, cfg(), 5 * MS);
        p.filter = Box::new(|c, s| {
            if c.dir == Dir::AtoB && s.is_data() && c.data_index == 0 {
                // The harness's link serializes a data segment in 5.76 µs (headers of 72
                // bytes at 100 Mbit/s): 14 µs more puts it between the third and fourth.
                Verdict::DelayExtra(14_000)
            } else {
                Verdict::Pass
            }
        });
        p.link_rate_bps = Some(100_000_000);
        let mss = usize::from(p.a.eff_mss());
        p.a_to_send = pattern(10 * mss);
        p.b_auto_read = true;
        p.run_until(|p| p.b_read.len() == 10 * mss, 500 * MS);
        p.run_for(50 * MS);
        assert_eq!(p.a.counters().rto_expirations, 0);
        assert!(!p.a.in_recovery());
        (p.a.cwnd_bytes(), u32::from(p.a.eff_mss()))
    };
    let unlimited = Config {
        slow_start_increase_limit_segments: 0,
        ..cfg()
    };
    let (counted_once, mss) = run(Config {
        ack_counts_previously_sacked_bytes: false,
        ..unlimited
    });
    let (counted_again, _) = run(unlimited);
    assert_eq!(counted_again - counted_once, 2 * mss);
}
