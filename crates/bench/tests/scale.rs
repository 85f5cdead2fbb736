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

#[test]
fn ecn_option_negotiates_ecn_on_every_connection_and_exchanges_still_take_two_frames() {
    let mut opts = ScaleOptions::new(20);
    opts.ecn = true;
    let mut w = ScaleWorld::new(opts).expect("world");
    w.connect().expect("connect");
    let now = w.idle.now;
    for (stack, socks) in [
        (&w.idle.client, &w.idle.client_socks),
        (&w.idle.server, &w.idle.server_socks),
    ] {
        assert_eq!(socks.len(), 20);
        for &h in socks {
            let info = stack.tcp_info(now, h).expect("tcp_info");
            assert_ne!(info.options & tcp::tcpi_opt::ECN, 0, "ECN not negotiated");
        }
    }
    w.warm_up().expect("warm up");
    let c = scale_loop(&mut w, 200).expect("loop");
    assert_eq!((c.exchanges, c.frames), (200, 400), "{c:?}");
    let mut plain = ScaleWorld::new(ScaleOptions::new(1)).expect("world");
    plain.connect().expect("connect");
    let h = plain.idle.client_socks[0];
    let info = plain
        .idle
        .client
        .tcp_info(plain.idle.now, h)
        .expect("tcp_info");
    assert_eq!(
        info.options & tcp::tcpi_opt::ECN,
        0,
        "ECN is off by default"
    );
}
