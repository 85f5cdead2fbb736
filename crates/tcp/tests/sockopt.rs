//! Options set on a live connection: user timeout and keepalive.

mod harness;

use harness::{Dir, MS, Pair, Verdict};
use tcp::{CloseReason, Config, KeepaliveConfig, State};

#[test]
fn user_timeout_set_on_a_live_connection_abandons_unacknowledged_data() {
    let mut p = Pair::established(Config::default(), Config::default(), 10 * MS);
    p.a.set_user_timeout(Some(1_000 * MS));
    p.filter = Box::new(|c, _| {
        if c.dir == Dir::AtoB {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let sent_at = p.now;
    p.a.send(b"lost forever").unwrap();
    p.run_until(|p| p.a.state() == State::Closed, 5_000 * MS);
    assert_eq!(p.a.close_reason(), Some(CloseReason::TimedOut));
    let waited = p.now - sent_at;
    assert!(
        (1_000 * MS..1_100 * MS).contains(&waited),
        "closed after {waited} ns"
    );
}

#[test]
fn keepalive_turned_on_later_probes_after_the_idle_time_and_off_stops_it() {
    let mut p = Pair::established(Config::default(), Config::default(), 10 * MS);
    let ka = KeepaliveConfig {
        idle_ns: 2_000 * MS,
        interval_ns: 1_000 * MS,
        probes_max: 3,
    };
    p.a.set_keepalive(p.now, Some(ka));
    p.run_for(1_900 * MS);
    assert_eq!(p.a.counters().keepalive_probes_sent, 0);
    p.run_for(200 * MS);
    assert_eq!(
        p.a.counters().keepalive_probes_sent,
        1,
        "one probe at 2 s idle"
    );
    assert_eq!(p.a.state(), State::Established, "the peer answered");
    p.a.set_keepalive(p.now, None);
    p.run_for(10_000 * MS);
    assert_eq!(p.a.counters().keepalive_probes_sent, 1);
}
