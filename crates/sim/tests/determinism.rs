//! Same seed ⇒ same trace; different seed ⇒ different trace; ties are ordered; timers behave.

use sim::toy::{GbnReceiver, GbnSender, Recorder, SeqSender};
use sim::{
    ChannelConfig, Corrupt, Dir, Duplicate, Host, JitterOrder, Loss, PortId, Reorder, RunError,
    TraceEvent, World, run_seeds,
};
use std::any::Any;

const P0: PortId = PortId(0);

/// A busy two-way scenario exercising every random choice the world makes.
fn chaotic_world(seed: u64) -> World {
    let mut w = World::new(seed);
    let data: Vec<u8> = (0..4_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let tx = w.add_host(Box::new(GbnSender::new(P0, data, 100, 8, 400_000)));
    let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
    let cfg = ChannelConfig::default()
        .rate_bps(100_000_000)
        .delay_ns(20_000)
        .jitter_ns(30_000, JitterOrder::Reorder);
    let link = w.connect((tx, P0), (rx, P0), cfg).expect("fresh ports");
    w.add_fault_both(link, Loss { p: 0.1 });
    w.add_fault_both(link, Duplicate { p: 0.05 });
    w.add_fault_both(
        link,
        Reorder {
            p: 0.05,
            extra_delay_ns: 50_000,
        },
    );
    w.add_fault_both(link, Corrupt { p: 0.05 });
    w
}

fn run_chaotic(seed: u64, record: bool) -> World {
    let mut w = chaotic_world(seed);
    w.set_trace_recording(record);
    if let Err(e) = w.run_until_idle(1_000_000) {
        panic!("seed {seed}: {e}");
    }
    w
}

#[test]
fn same_seed_gives_the_same_trace_and_digest() {
    let outcome = run_seeds(0..20, |seed| {
        let a = run_chaotic(seed, true);
        let b = run_chaotic(seed, true);
        if a.digest() != b.digest() || a.trace() != b.trace() || a.now_ns() != b.now_ns() {
            return Err(format!(
                "digests {:016x} vs {:016x}",
                a.digest(),
                b.digest()
            ));
        }
        if a.trace_len() < 50 {
            return Err(format!(
                "trace too short to mean anything: {}",
                a.trace_len()
            ));
        }
        Ok(())
    });
    outcome.expect("determinism");
}

#[test]
fn recording_the_trace_does_not_change_the_digest() {
    assert_eq!(
        run_chaotic(3, true).digest(),
        run_chaotic(3, false).digest()
    );
}

#[test]
fn different_seeds_give_different_digests_under_loss() {
    let digests: std::collections::BTreeSet<u64> = (0..50)
        .map(|seed| run_chaotic(seed, false).digest())
        .collect();
    assert_eq!(digests.len(), 50);
}

#[test]
fn events_at_the_same_instant_run_in_the_order_they_were_scheduled() {
    // A burst on an ideal link: all 100 frames arrive at t = 1 us, in send order.
    let mut w = World::new(1);
    let tx = w.add_host(Box::new(SeqSender::new(P0, 100, 16, 0)));
    let rx = w.add_host(Box::new(Recorder::default()));
    w.connect((tx, P0), (rx, P0), ChannelConfig::default().delay_ns(1_000))
        .expect("fresh ports");
    w.run_until_idle(10_000).expect("finite run");
    let r = w.host::<Recorder>(rx).expect("recorder");
    assert!(r.frames.iter().all(|f| f.at_ns == 1_000));
    assert_eq!(r.seqs(), (0..100).collect::<Vec<_>>());
}

#[test]
fn run_until_stops_at_the_deadline_and_resumes() {
    let mut w = World::new(1);
    let tx = w.add_host(Box::new(SeqSender::new(P0, 10, 16, 100_000)));
    let rx = w.add_host(Box::new(Recorder::default()));
    w.connect((tx, P0), (rx, P0), ChannelConfig::default().delay_ns(1_000))
        .expect("fresh ports");
    w.run_until(350_000);
    assert_eq!(w.now_ns(), 350_000);
    // Frames sent at 0, 100, 200, 300 us have arrived by 350 us.
    assert_eq!(w.host::<Recorder>(rx).map(|r| r.frames.len()), Some(4));
    w.run_until_idle(10_000).expect("finite run");
    assert_eq!(w.host::<Recorder>(rx).map(|r| r.frames.len()), Some(10));
    assert_eq!(w.now_ns(), 901_000);
}

/// A host that keeps asking to be woken at the current instant: a livelock.
struct Spinner;

impl Host for Spinner {
    fn handle_frame(&mut self, _now_ns: u64, _port: PortId, _frame: &[u8]) {}
    fn handle_timeout(&mut self, _now_ns: u64) {}
    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        None
    }
    fn poll_timeout(&self) -> Option<u64> {
        Some(0)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn event_budget_turns_a_livelock_into_an_error() {
    let mut w = World::new(1);
    w.add_host(Box::new(Spinner));
    assert_eq!(
        w.run_until_idle(1_000),
        Err(RunError::EventLimit {
            events: 1_000,
            now_ns: 0
        })
    );
}

#[test]
fn a_moved_deadline_leaves_a_stale_timer_that_does_not_fire() {
    // The GBN sender arms an RTO at its first send and moves it on each ACK; superseded timer
    // events must be skipped, so on a perfect link no timeout ever fires.
    let mut w = World::new(1);
    let data = vec![7u8; 1_000];
    let tx = w.add_host(Box::new(GbnSender::new(
        P0,
        data.clone(),
        100,
        2,
        1_000_000,
    )));
    let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
    w.connect(
        (tx, P0),
        (rx, P0),
        ChannelConfig::default().delay_ns(10_000),
    )
    .expect("fresh ports");
    w.set_trace_recording(true);
    w.run_until_idle(10_000).expect("finite run");
    assert_eq!(w.counters().timeouts, 0);
    assert!(w.counters().timers_stale > 0);
    assert!(
        !w.trace()
            .iter()
            .any(|e| matches!(e, TraceEvent::Timeout { .. }))
    );
    assert_eq!(
        w.host::<GbnReceiver>(rx).map(|r| r.delivered.clone()),
        Some(data)
    );
    assert_eq!(w.host::<GbnSender>(tx).map(|s| s.timeouts), Some(0));
}

#[test]
fn host_mut_and_wake_let_a_test_drive_a_host_from_outside() {
    let mut w = World::new(1);
    let tx = w.add_host(Box::new(SeqSender::new(P0, 0, 16, 0)));
    let rx = w.add_host(Box::new(Recorder::default()));
    let link = w
        .connect((tx, P0), (rx, P0), ChannelConfig::default())
        .expect("fresh ports");
    w.run_until_idle(100).expect("finite run");
    assert_eq!(
        w.link_counters(link, Dir::AToB).map(|c| c.offered_packets),
        Some(0)
    );
    if let Some(s) = w.host_mut::<SeqSender>(tx) {
        *s = SeqSender::new(P0, 3, 16, 0);
    }
    assert!(w.wake(tx));
    w.run_until_idle(100).expect("finite run");
    assert_eq!(w.host::<Recorder>(rx).map(|r| r.frames.len()), Some(3));
    assert!(
        w.host::<Recorder>(tx).is_none(),
        "downcast to the wrong type fails cleanly"
    );
}

#[test]
fn digest_of_the_reference_scenario_is_pinned() {
    // A change here means the model's behaviour changed (link stages, rule order, RNG use,
    // event order or trace encoding): every recorded failing seed stops reproducing. Update
    // the constant deliberately, and say why in the commit.
    assert_eq!(
        format!("{:016x}", run_chaotic(1, false).digest()),
        PINNED_REFERENCE_DIGEST
    );
}

const PINNED_REFERENCE_DIGEST: &str = "2c3517f6ec2d8c5a";

#[test]
fn run_until_checked_bounds_a_world_that_never_idles() {
    let mut w = World::new(1);
    w.add_host(Box::new(Spinner));
    let r = w.run_until_checked(1_000_000, 500, |_| Ok(()));
    assert_eq!(
        r,
        Err(RunError::EventLimit {
            events: 500,
            now_ns: 0
        })
    );

    // A healthy world stops at the deadline and reports a failing check with its time.
    let mut w = World::new(1);
    let tx = w.add_host(Box::new(SeqSender::new(P0, 10, 16, 100_000)));
    let rx = w.add_host(Box::new(Recorder::default()));
    w.connect((tx, P0), (rx, P0), ChannelConfig::default())
        .expect("fresh ports");
    let events = w
        .run_until_checked(250_000, 1_000, |_| Ok(()))
        .expect("within budget");
    assert!(events > 0);
    assert_eq!(w.now_ns(), 250_000);
    let r = w.run_until_checked(1_000_000, 1_000, |w| {
        match w.host::<Recorder>(rx).map(|r| r.frames.len()) {
            Some(n) if n >= 5 => Err(format!("{n} frames")),
            _ => Ok(()),
        }
    });
    assert_eq!(
        r,
        Err(RunError::Check {
            now_ns: 400_000,
            message: "5 frames".into()
        })
    );
}

#[test]
fn trace_events_print_readably() {
    let w = run_chaotic(2, true);
    let lines: Vec<String> = w.trace().iter().take(3).map(|e| e.to_string()).collect();
    assert!(lines.iter().all(|l| l.contains(" ns ")), "{lines:?}");
    assert!(
        w.trace()
            .iter()
            .any(|e| e.to_string().contains("drop    from host")),
        "losses show up as drops"
    );
}
