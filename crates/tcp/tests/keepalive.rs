//! Keepalive (RFC 9293 §3.8.4): an idle connection probes its peer and times out when the
//! probes go unanswered, answered probes keep it open, and a half-closed connection probes in
//! FIN-WAIT-2 too, so one whose peer vanished (its RST lost) ends instead of waiting for ever.

mod harness;

use harness::{Dir, MS, Pair, Verdict, pattern};
use tcp::{CloseReason, Config, Event, State};
use wire::tcp::TcpFlags;

#[test]
fn keepalive_probes_an_idle_peer_and_times_out() {
    let ka = tcp::KeepaliveConfig {
        idle_ns: 10_000 * MS,
        interval_ns: 1_000 * MS,
        probes_max: 3,
    };
    let c = Config {
        keepalive: Some(ka),
        ..Config {
            timestamps: false,
            ..Config::default()
        }
    };
    let mut p = Pair::established(
        c,
        Config {
            timestamps: false,
            ..Config::default()
        },
        5 * MS,
    );
    let start = p.now;
    // The peer vanished.
    p.filter = Box::new(|c, _| {
        if c.dir == Dir::AtoB {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.run_until(|p| p.a.state() == State::Closed, 60_000 * MS);
    assert_eq!(p.a.close_reason(), Some(CloseReason::TimedOut));
    assert_eq!(p.a.counters().keepalive_probes_sent, 3);
    // Probes 10 s after the last segment from B, then every second; give up a second after
    // the third.
    let probes: Vec<u64> = p
        .sent(Dir::AtoB)
        .filter(|e| !e.2.has(TcpFlags::RST))
        .map(|e| e.0)
        .collect();
    assert_eq!(probes.len(), 3);
    assert!(probes[0] - start <= 10_000 * MS && probes[0] - start >= 9_990 * MS);
    assert_eq!(probes[1] - probes[0], 1_000 * MS);
    assert_eq!(probes[2] - probes[1], 1_000 * MS);
    assert_eq!(p.now - probes[2], 1_000 * MS);
    assert!(p.a_events.contains(&Event::TimedOut));
}

#[test]
fn answered_keepalives_keep_an_idle_connection_open() {
    let ka = tcp::KeepaliveConfig {
        idle_ns: 10_000 * MS,
        interval_ns: 1_000 * MS,
        probes_max: 3,
    };
    let c = Config {
        keepalive: Some(ka),
        ..Config::default()
    };
    let mut p = Pair::established(c, Config::default(), 5 * MS);
    p.run_for(65_000 * MS);
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(
        p.a.counters().keepalive_probes_sent,
        6,
        "one probe per idle period"
    );
    assert_eq!(
        p.b.counters().rx_drop_out_of_window,
        6,
        "each probe is an old segment B answers"
    );
}

/// The probe count lies out of the receiver's hot lines, behind a hint an acceptable segment
/// tests (`held::PROBED` in `out.held`): unanswered probes are counted, and the answer to them
/// clears the count, with the TCB's invariants (hint and count agreeing among them) holding
/// at each step.
#[test]
fn an_answered_probe_clears_the_unanswered_probe_count() {
    let ka = tcp::KeepaliveConfig {
        idle_ns: 10_000 * MS,
        interval_ns: 1_000 * MS,
        probes_max: 5,
    };
    let c = Config {
        keepalive: Some(ka),
        ..Config::default()
    };
    let mut p = Pair::established(c, Config::default(), 5 * MS);
    // B hears nothing for a while: two probes go unanswered.
    p.filter = Box::new(|c, _| {
        if c.dir == Dir::AtoB {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.run_until(|p| p.a.counters().keepalive_probes_sent == 2, 20_000 * MS);
    assert_eq!(p.a.tcp_info(p.now).probes, 2);
    assert_eq!(p.a.invariant_violation(), None);
    // The next probe reaches B, whose answer clears the count.
    p.filter = Box::new(|_, _| Verdict::Pass);
    p.run_until(|p| p.a.counters().keepalive_probes_sent == 3, 20_000 * MS);
    p.run_for(100 * MS);
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(
        p.a.tcp_info(p.now).probes,
        0,
        "the answer cleared the count"
    );
    assert_eq!(p.a.invariant_violation(), None);
}

#[test]
fn keepalive_probes_in_fin_wait_2_and_ends_a_half_closed_connection_whose_peer_vanished() {
    // Seed 1011357 of the simulator's `many` workload (17.8 % loss) in miniature. A (the
    // client) sends its request; B answers and closes, then A closes: B is in CLOSING, A's
    // FIN is acknowledged and A sits in FIN-WAIT-2, still reading. Every segment of B's that
    // carries data, a FIN or a RST is lost (in the seed: the first segment, all seven
    // retransmissions, the ARP exchange of an eighth, and the RST), so B gives up at its user
    // timeout (RFC 9293 §3.8.3) and A is left half-open with nothing outstanding. Only
    // keepalive (§3.8.4) can find that out; A used to stop probing once it left ESTABLISHED
    // and waited for ever. Linux probes in FIN-WAIT-2 too (`tcp_keepalive_timer` skips only
    // CLOSE and SYN-SENT).
    let ka = tcp::KeepaliveConfig {
        idle_ns: 10_000 * MS,
        interval_ns: 1_000 * MS,
        probes_max: 3,
    };
    let a_cfg = Config {
        keepalive: Some(ka),
        ..Config::default()
    };
    let b_cfg = Config {
        user_timeout_ns: Some(30_000 * MS),
        ..Config::default()
    };
    let mut p = Pair::established(a_cfg, b_cfg, 5 * MS);
    p.filter = Box::new(|c, s| {
        if c.dir == Dir::BtoA && (s.is_data() || s.has(TcpFlags::FIN) || s.has(TcpFlags::RST)) {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let request = pattern(2440);
    p.a_to_send = request.clone();
    p.run_until(|p| p.b_read.len() == request.len(), 1_000 * MS);
    p.b_to_send = pattern(2440);
    p.run_until(|p| p.b_to_send.is_empty(), 1_000 * MS);
    p.b.shutdown_write().unwrap();
    p.run_for(10 * MS);
    assert_eq!(p.b.state(), State::FinWait1);
    p.a.shutdown_write().unwrap();
    p.run_until(|p| p.a.state() == State::FinWait2, 1_000 * MS);
    assert_eq!(
        p.b.state(),
        State::Closing,
        "B holds unacknowledged data and its FIN"
    );
    assert!(p.a_read.is_empty());

    // While B lives, it answers A's probes (old segments, acknowledged) and A stays.
    p.run_until(|p| p.b.state() == State::Closed, 60_000 * MS);
    assert_eq!(p.b.close_reason(), Some(CloseReason::TimedOut));
    assert_eq!(p.a.state(), State::FinWait2);
    assert!(p.a.counters().keepalive_probes_sent >= 1);
    let answered = p.a.counters().keepalive_probes_sent;

    // B is gone and its RST was lost: A's probes go unanswered and A gives up.
    p.run_for(60_000 * MS);
    assert_eq!(p.a.state(), State::Closed, "A left in FIN-WAIT-2 for ever");
    assert_eq!(p.a.close_reason(), Some(CloseReason::TimedOut));
    assert_eq!(p.a.counters().keepalive_probes_sent, answered + 3);
    assert!(p.a_events.contains(&Event::TimedOut));
}
