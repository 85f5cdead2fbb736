//! The engine's work per frame does not grow with the connections it holds, and its
//! resource advertisements follow what matters, never overstating what is free.

mod common;

use common::Net;
use offload::{EngineConfig, HostConfig};
use shard::handoff::{Limits, ResourceKind};

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13)).collect()
}

#[test]
fn a_frame_services_its_own_connection_not_every_connection_the_engine_holds() {
    let mut n = Net::new(EngineConfig::default(), HostConfig::default());
    let mut pairs = Vec::new();
    for _ in 0..64 {
        let (c, h) = n.connect();
        n.offload(h);
        pairs.push((c, h));
    }
    assert_eq!(n.engine.connections(), 64);
    let (c, h) = pairs[7];
    n.client
        .set_option(c, stack::SocketOption::NoDelay(true))
        .expect("nodelay");
    let services_before = n.engine.counters().conn_services;
    let frames_before = n.engine.counters().frames_in;
    for i in 0..10u8 {
        n.client.tcp_send(c, &[i; 100]).expect("send");
        n.settle();
    }
    assert_eq!(Net::read_all(&mut n.host, h).len(), 1000);
    n.settle();
    let services = n.engine.counters().conn_services - services_before;
    let frames = n.engine.counters().frames_in - frames_before;
    assert!(frames >= 10, "{frames} frames");
    // One visit per frame or command about the connection (a service of all 64 per frame
    // would be 640 and more).
    assert!(
        services <= 2 * frames + 4,
        "{services} connection services for {frames} frames"
    );
}

#[test]
fn bulk_data_sends_few_buffer_advertisements_and_none_overstates_free_memory() {
    let limits = Limits {
        buffer_bytes_max: 1 << 20,
        ..Limits::default()
    };
    let mut n = Net::new(
        EngineConfig {
            limits,
            ..EngineConfig::default()
        },
        HostConfig {
            limits,
            ..HostConfig::default()
        },
    );
    let (c, h) = n.connect();
    n.offload(h);
    let data = pattern(4 << 20);
    let (adverts_before, frames_before) = (
        n.engine.counters().advertisements,
        n.engine.counters().frames_in,
    );
    let start_ns = n.now;
    let (mut off, mut got) = (0, 0);
    let mut lowest_advertised = u64::MAX;
    for _ in 0..20_000 {
        if off < data.len() {
            if let Ok(k) = n.client.tcp_send(c, &data[off..]) {
                off += k;
            }
        }
        n.advance(100_000);
        // Flow control: what the host believes is free is never more than what is.
        let advertised = n
            .off
            .advertised(ResourceKind::BufferBytes)
            .expect("advertised");
        let free = limits.buffer_bytes_max - n.engine.buffer_bytes_used();
        assert!(advertised <= free, "advertised {advertised} > free {free}");
        lowest_advertised = lowest_advertised.min(advertised);
        // The application reads in bursts, so the engine's memory fills and drains.
        if n.now % 2_000_000 < 100_000 {
            got += Net::read_all(&mut n.host, h).len();
        }
        if got == data.len() {
            break;
        }
    }
    assert_eq!(got, data.len());
    // The connection's receive buffer (256 KiB) filled: the advertisements followed it down.
    assert!(
        lowest_advertised <= limits.buffer_bytes_max - (128 << 10),
        "memory use was advertised ({lowest_advertised} at the lowest)"
    );
    let adverts = n.engine.counters().advertisements - adverts_before;
    let frames = n.engine.counters().frames_in - frames_before;
    let heartbeats = 3 * ((n.now - start_ns) / EngineConfig::default().advertise_period_ns + 1);
    assert!(
        adverts <= heartbeats + frames / 10,
        "{adverts} advertisements for {frames} frames ({heartbeats} of them heartbeats at most)"
    );
    assert_eq!(n.engine.counters().restores_exhaustion, 0);
}
