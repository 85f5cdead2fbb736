//! The scaling harness: exchanges complete over many connections, two frames each in steady
//! state, and every connection ends in TIME-WAIT on the client after `close_all`.

use bench::scale::{ScaleOptions, ScaleWorld, scale_loop};

#[test]
fn exchanges_spread_over_connections_complete_with_two_frames_each() {
    let mut w = ScaleWorld::new(ScaleOptions::new(300)).expect("world");
    w.connect().expect("connect");
    w.warm_up().expect("warm up");
    let c = scale_loop(&mut w, 1_000).expect("loop");
    assert_eq!(c.exchanges, 1_000);
    assert_eq!(c.frames, 2_000, "{c:?}");
    let (time_wait, server_left) = w.close_all().expect("close");
    assert_eq!((time_wait, server_left), (300, 0));
}

#[test]
fn delayed_acks_fire_when_a_sweep_outlasts_them() {
    // 100 connections × 1 ms between exchanges = 100 ms a sweep > 40 ms delayed ACK.
    let mut opts = ScaleOptions::new(100);
    opts.step_ns = 1_000_000;
    let mut w = ScaleWorld::new(opts).expect("world");
    w.connect().expect("connect");
    w.warm_up().expect("warm up");
    let c = scale_loop(&mut w, 500).expect("loop");
    assert_eq!(c.exchanges, 500);
    assert!(c.timer_runs > 0 && c.frames > 1_000, "{c:?}");
}
