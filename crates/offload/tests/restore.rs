//! Restore on every event of seed 002 §3.3: engine resource exhaustion, a route change or
//! link failure (the host asks everything back), TIME_WAIT (in `commands.rs`:
//! `ctrl_shutdown_then_peer_fin_returns_time_wait_to_the_host`), and engine failure without
//! notice.

mod common;

use common::Net;
use offload::{EngineConfig, HostConfig, OffloadError, Policy};
use shard::handoff::Limits;
use stack::SocketError;

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13) ^ salt).collect()
}

#[test]
fn engine_short_of_buffer_memory_restores_and_no_byte_is_lost() {
    let limits = Limits {
        buffer_bytes_max: 20_000,
        ..Limits::default()
    };
    let mut n = Net::with_engine_limits(limits);
    let (c, h) = n.connect();
    n.offload(h);
    // The application does not read: the engine's connection fills past its memory.
    let data = pattern(60_000, 1);
    let mut off = 0;
    for _ in 0..200 {
        if let Ok(k) = n.client.tcp_send(c, &data[off..]) {
            off += k;
        }
        n.advance(1_000_000);
        if !n.host.tcp_offloaded(h) {
            break;
        }
    }
    assert_eq!(n.engine.counters().restores_exhaustion, 1);
    assert_eq!(n.off.counters().restored_exhaustion, 1);
    assert!(!n.host.tcp_offloaded(h), "back on the host");
    let mut got = Vec::new();
    for _ in 0..200 {
        if off < data.len() {
            if let Ok(k) = n.client.tcp_send(c, &data[off..]) {
                off += k;
            }
        }
        n.advance(1_000_000);
        got.extend(Net::read_all(&mut n.host, h));
    }
    assert_eq!(got, data);
}

#[test]
fn route_change_restores_every_offloaded_connection() {
    let mut n = Net::new(EngineConfig::default(), HostConfig::default());
    let conns: Vec<_> = (0..4).map(|_| n.connect()).collect();
    for &(_, h) in &conns {
        n.offload(h);
    }
    assert_eq!(n.engine.connections(), 4);
    for (i, &(c, _)) in conns.iter().enumerate() {
        n.client.tcp_send(c, &pattern(1000, i as u8)).expect("send");
    }
    n.advance(1_000_000);
    // The route to the engine changed / its link went down.
    assert_eq!(n.off.restore_all(), 4);
    n.advance(2_000_000);
    assert_eq!(n.engine.connections(), 0);
    assert_eq!(n.off.counters().restored_requested, 4);
    assert!(n.filters.is_empty());
    for (i, &(c, h)) in conns.iter().enumerate() {
        assert!(!n.host.tcp_offloaded(h));
        n.client.tcp_send(c, b"!").expect("send");
        n.advance(1_000_000);
        let mut want = pattern(1000, i as u8);
        want.push(b'!');
        assert_eq!(Net::read_all(&mut n.host, h), want);
    }
}

#[test]
fn engine_failure_resets_exactly_its_connections_and_counts_them() {
    let mut n = Net::new(
        EngineConfig {
            advertise_period_ns: 1_000_000,
            ..EngineConfig::default()
        },
        HostConfig {
            engine_timeout_ns: 20_000_000,
            ..HostConfig::default()
        },
    );
    let (c1, lost) = n.connect();
    let (c2, kept) = n.connect();
    n.offload(lost);
    n.advance(10_000_000);
    // The engine dies without a word: its heartbeat stops.
    n.engine_dead = true;
    n.advance(50_000_000);
    assert!(n.off.engine_failed());
    assert_eq!(n.off.counters().engine_failures, 1);
    assert_eq!(n.off.counters().connections_lost, 1);
    assert_eq!(n.host.counters().tcp_bypass_lost, 1);
    let mut buf = [0u8; 8];
    assert_eq!(n.host.tcp_recv(lost, &mut buf), Err(SocketError::Reset));
    assert!(n.filters.is_empty());
    // The peer's next segment reaches the host, which resets it: a clean end both ways.
    let _ = n.client.tcp_send(c1, b"x");
    n.advance(2_000_000_000);
    assert_eq!(n.client.tcp_recv(c1, &mut buf), Err(SocketError::Reset));
    // Nothing else is affected; no new handoff goes to a failed engine.
    n.client.tcp_send(c2, b"fine").expect("send");
    n.advance(1_000_000);
    assert_eq!(Net::read_all(&mut n.host, kept), b"fine");
    assert_eq!(
        n.off.offload(n.now, &mut n.host, kept),
        Err(OffloadError::EngineFailed)
    );
    n.host.close(n.now, lost).expect("close");
}

#[test]
fn policy_all_offloads_every_established_connection_within_the_advertisement() {
    let limits = Limits {
        connections_max: 3,
        ..Limits::default()
    };
    let mut n = Net::new(
        EngineConfig {
            limits,
            ..EngineConfig::default()
        },
        HostConfig {
            limits,
            policy: Policy::All,
            ..HostConfig::default()
        },
    );
    let conns: Vec<_> = (0..5).map(|_| n.connect()).collect();
    n.advance(10_000_000);
    assert_eq!(n.engine.connections(), 3);
    let offloaded = conns
        .iter()
        .filter(|&&(_, h)| n.host.tcp_offloaded(h))
        .count();
    assert_eq!(offloaded, 3);
    let p = n.off.policy_counters();
    assert!(p.offloaded == 3 && p.kept_no_resource > 0, "{p:?}");
}

#[test]
fn policy_adaptive_restores_the_least_active_near_the_limit() {
    let limits = Limits {
        connections_max: 32,
        ..Limits::default()
    };
    let mut n = Net::new(
        EngineConfig {
            limits,
            ..EngineConfig::default()
        },
        HostConfig {
            limits,
            policy: Policy::Adaptive,
            ..HostConfig::default()
        },
    );
    let conns: Vec<_> = (0..31).map(|_| n.connect()).collect();
    n.advance(10_000_000);
    // 32 slots, reserve 2: it offloads 30 and keeps one on the host.
    assert_eq!(n.engine.connections(), 30);
    let p = *n.off.policy_counters();
    assert_eq!(p.offloaded, 30);
    assert!(p.kept_reserve > 0);
    // Running low (the engine advertises fewer slots once the host's last connection is
    // also handed off by hand): the least active go back.
    let spare = conns
        .iter()
        .find(|&&(_, h)| !n.host.tcp_offloaded(h))
        .expect("one kept")
        .1;
    n.off.offload(n.now, &mut n.host, spare).expect("sent");
    n.advance(10_000_000);
    assert!(n.off.policy_counters().decided_restore > 0);
    assert!(n.off.counters().restored_requested > 0);
    assert!(n.engine.connections() < 31);
}

#[test]
fn policy_first_n_offloads_n_connections_then_stops() {
    let mut n = Net::new(
        EngineConfig::default(),
        HostConfig {
            policy: Policy::First(2),
            ..HostConfig::default()
        },
    );
    let _conns: Vec<_> = (0..4).map(|_| n.connect()).collect();
    n.advance(10_000_000);
    assert_eq!(n.engine.connections(), 2);
    assert!(n.off.policy_counters().kept_quota_reached > 0);
}

/// Between the host's `Restore` and the engine's answer the application keeps using its
/// socket and frames keep reaching the host: nothing is sent to the engine for a connection
/// it is returning (no command refused), the writes, reads and options are reconciled by the
/// restore, and the frames are processed once the connection is back.
#[test]
fn operations_and_frames_while_a_restore_is_on_its_way_are_reconciled_not_refused() {
    let mut n = Net::new(EngineConfig::default(), HostConfig::default());
    let (c, h) = n.connect();
    n.offload(h);
    n.client.tcp_send(c, &pattern(3000, 7)).expect("send");
    // Long enough for every delayed ACK: the straggler below is not held by Nagle.
    n.advance(500_000_000);
    // Asked back: the Restore waits in the layer's queue, not delivered yet.
    assert!(n.off.restore(h));
    assert!(
        !n.off.restore(h),
        "a second request while the first is on its way"
    );
    let early = Net::read_all(&mut n.host, h);
    n.host
        .tcp_send(h, b"written-while-returning")
        .expect("write");
    n.host
        .set_option(h, stack::SocketOption::NoDelay(true))
        .expect("option");
    // A frame of the connection reaches the host (the filter still points at the engine,
    // so put it through the host as a straggler would come).
    n.client.tcp_send(c, &pattern(500, 9)).expect("send");
    n.client.handle_timeout(n.now);
    let straggler = n.client.poll_transmit(n.now).expect("a data segment");
    n.host.receive(n.now, &straggler, &stack::RxMeta::NONE);
    n.off.poll(n.now, &mut n.host);
    assert!(n.off.counters().ops_reconciled_at_restore >= 2);
    assert_eq!(n.off.counters().frames_held_restoring, 1);
    n.advance(2_000_000);
    assert!(!n.host.tcp_offloaded(h), "back on the host");
    assert_eq!(n.off.counters().host_cmds_refused, 0);
    assert_eq!(n.off.counters().engine_cmds_refused, 0);
    assert_eq!(n.engine.counters().host_cmds_refused, 0);
    assert_eq!(n.off.conversation().counters().refused.not_live, 0);
    assert_eq!(n.off.counters().frames_reprocessed, 1);
    let mut got = early;
    got.extend(Net::read_all(&mut n.host, h));
    let mut want = pattern(3000, 7);
    want.extend(pattern(500, 9));
    assert_eq!(got, want, "every byte once, in order");
    assert_eq!(Net::read_all(&mut n.client, c), b"written-while-returning");
    // NoDelay, set while the connection was returning, holds on the host: a second small
    // write leaves before the first is acknowledged (Nagle would hold it).
    n.host.tcp_send(h, b"a").expect("write");
    n.settle();
    n.host.tcp_send(h, b"b").expect("write");
    n.settle();
    assert_eq!(Net::read_all(&mut n.client, c), b"ab");
}

#[test]
fn a_first_handoff_long_after_the_engine_last_spoke_is_not_taken_for_its_failure() {
    let mut n = Net::new(EngineConfig::default(), HostConfig::default());
    let (c, h) = n.connect();
    // With nothing offloaded the engine has nothing to say and is not run (a driver runs it
    // on input and at its deadlines, and it has neither): a second of silence.
    n.engine_dead = true;
    n.advance(1_000_000_000);
    n.engine_dead = false;
    n.offload(h);
    assert!(!n.off.engine_failed());
    assert_eq!(n.off.counters().engine_failures, 0);
    n.client.tcp_send(c, b"on the engine").expect("send");
    n.advance(2_000_000);
    assert_eq!(Net::read_all(&mut n.host, h), b"on the engine");
    assert!(n.engine_frames > 0);
}
