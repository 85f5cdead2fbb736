//! Runtime-level properties on the `mem` backend: a server host of several shards serving
//! HTTP/1.1 to a client host, on real threads. Every run stops by itself (client done, or a
//! bounded duration); assertions are on counters, never on durations.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use rss::{HashInput, PortPair, Reta, RssHasher, RssKey, SymmetricMode};
use runtime::{HostConfig, PairReport, RunLimits, WireConfig, run_pair};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

type Report = PairReport<HttpServer, HttpLoadClient>;

fn host(mac_last: u8, ip: Ipv4Addr, shards: u16) -> HostConfig {
    let iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    // Microsoft's key, pinned: which shard each of these few flows lands on (the tests assert
    // that both shards take part) must not depend on the key a run draws. With a random key,
    // 16 flows from consecutive ports all hash to one of two queues whenever the four key
    // bits their port bits meet are zero: 1 run in 16.
    let mut h = HostConfig::new(iface, shards);
    h.pin_rss_key(&rss::RssKey::default());
    h
}

fn run(
    server: &HostConfig,
    client: &HostConfig,
    conns: usize,
    requests: u64,
    bytes: usize,
) -> Report {
    let files = Arc::new(FileSet::demo(bytes));
    let load = LoadConfig {
        server: SocketAddr::new(IpAddr::V4(SERVER_IP), 80),
        connections: conns,
        path: "/index.html".into(),
        requests_per_connection: Some(requests),
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    };
    run_pair(
        server,
        move |_| HttpServer::new(80, files.clone()),
        client,
        move |_| HttpLoadClient::new(load.clone()),
        WireConfig::default(),
        RunLimits {
            duration: Duration::from_secs(30),
            stop_when_client_done: true,
            monitor_every: Duration::from_millis(5),
        },
        |_| {},
    )
    .expect("run")
}

/// Every request of every connection was answered, nothing failed, nothing was dropped.
fn assert_complete(r: &Report, conns: u64, requests: u64, bytes: usize) {
    let c = |f: fn(&apps::load::LoadStats) -> u64| -> u64 {
        r.client.shards.iter().map(|s| f(s.app.stats())).sum()
    };
    assert_eq!(c(|s| s.connections_failed), 0, "no connection fails");
    assert_eq!(c(|s| s.protocol_errors), 0, "no protocol error");
    assert_eq!(
        c(|s| s.responses_ok),
        conns * requests,
        "every request answered"
    );
    assert_eq!(
        c(|s| s.body_bytes),
        conns * requests * bytes as u64,
        "every byte arrived"
    );
    assert_eq!(
        r.server.drops() + r.client.drops() + r.wire.drops(),
        0,
        "nothing dropped"
    );
    for s in &r.server.shards {
        // A segment on a shard that does not own its connection meets only the listener.
        assert_eq!(s.stack.tcp_listen_bad_segment, 0);
        assert_eq!(s.stack.tcp_rx_no_listener_rst_sent, 0);
        assert_eq!(s.app.stats().connections_foreign, 0);
    }
    for s in &r.client.shards {
        assert_eq!(s.stack.tcp_rx_no_listener_rst_sent, 0);
        assert_eq!(s.app.stats().connections_foreign, 0);
    }
}

/// The queue a NIC with `hasher` and an equal RETA over `queues` picks for a packet from
/// `src` to `dst`.
fn queue_of(hasher: &RssHasher, queues: u16, src: SocketAddr, dst: SocketAddr) -> u16 {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else {
        panic!("IPv4 only");
    };
    let input = HashInput::V4 {
        src: s,
        dst: d,
        ports: Some(PortPair {
            src: src.port(),
            dst: dst.port(),
        }),
    };
    let reta = Reta::with_equal(rss::RETA_SIZE_DEFAULT, queues).expect("reta");
    reta.queue_for_hash(hasher.hash(&input))
}

#[test]
fn every_connection_is_served_on_the_shard_rss_chose() {
    let server = host(1, SERVER_IP, 2);
    let client = host(2, CLIENT_IP, 1);
    let r = run(&server, &client, 16, 5, 512);
    assert_complete(&r, 16, 5, 512);
    let server_addr = SocketAddr::new(IpAddr::V4(SERVER_IP), 80);
    let mut accepted = 0;
    for s in &r.server.shards {
        for peer in &s.app.stats().peers {
            assert_eq!(
                queue_of(&server.hasher, 2, *peer, server_addr),
                s.info.shard,
                "{peer} accepted on shard {}",
                s.info.shard
            );
            accepted += 1;
        }
        assert_eq!(
            s.cross_shard_tx, 0,
            "no cross-shard hop with one queue per shard"
        );
    }
    assert_eq!(accepted, 16);
    // Both shards took part (16 flows over 2 queues).
    assert!(
        r.server
            .shards
            .iter()
            .all(|s| s.app.stats().connections_accepted > 0)
    );
}

#[test]
fn replies_to_client_opened_connections_return_to_the_opening_shard() {
    let server = host(1, SERVER_IP, 1);
    let client = host(2, CLIENT_IP, 2);
    let r = run(&server, &client, 6, 3, 256);
    assert_complete(&r, 12, 3, 256);
    let server_addr = SocketAddr::new(IpAddr::V4(SERVER_IP), 80);
    for s in &r.client.shards {
        assert_eq!(s.app.stats().locals.len(), 6);
        for local in &s.app.stats().locals {
            // The reply direction (server → client) hashes to the opening shard's queue.
            assert_eq!(
                queue_of(&client.hasher, 2, server_addr, *local),
                s.info.shard
            );
        }
        assert_eq!(s.cross_shard_tx, 0);
        assert!(s.rx_packets > 0);
    }
}

#[test]
fn symmetric_key_puts_both_directions_of_a_flow_on_one_shard_index() {
    let sym = RssHasher::new(&RssKey::default(), SymmetricMode::RepeatedKey);
    let mut server = host(1, SERVER_IP, 2);
    let mut client = host(2, CLIENT_IP, 2);
    server.hasher = sym.clone();
    client.hasher = sym.clone();
    let r = run(&server, &client, 4, 3, 256);
    assert_complete(&r, 8, 3, 256);
    // The client's shard i opened the flow; the server served it on shard i too.
    for c in &r.client.shards {
        for local in &c.app.stats().locals {
            let served_on = r
                .server
                .shards
                .iter()
                .find(|s| s.app.stats().peers.contains(local))
                .map(|s| s.info.shard);
            assert_eq!(served_on, Some(c.info.shard), "flow from {local}");
        }
    }
}

#[test]
fn sized_rings_lose_nothing_on_the_mem_backend() {
    // Small rings and large responses: the wire back-pressures instead of dropping.
    let mut server = host(1, SERVER_IP, 2);
    let mut client = host(2, CLIENT_IP, 1);
    for h in [&mut server, &mut client] {
        h.wire_ring_slots = 64;
        h.nic.rx_ring_slots = 64;
        h.budget_packets = 16;
    }
    let r = run(&server, &client, 8, 4, 64 * 1024);
    assert_complete(&r, 8, 4, 64 * 1024);
}

#[test]
fn fewer_queues_than_shards_forward_through_counted_cross_shard_rings() {
    let mut server = host(1, SERVER_IP, 2);
    server.queues = 1;
    let client = host(2, CLIENT_IP, 1);
    let r = run(&server, &client, 8, 3, 256);
    assert_complete(&r, 8, 3, 256);
    let sent = r.server.cross_shard_messages();
    let received: u64 = r.server.shards.iter().map(|s| s.cross_shard_rx).sum();
    assert!(sent > 0, "shard 1 gets its flows only through shard 0");
    // The run stops as soon as the client is done: the last forwarded segments (final ACKs)
    // may still sit in a ring then, never more than were sent.
    assert!(
        received > 0 && received <= sent,
        "sent {sent}, received {received}"
    );
    assert!(
        r.server
            .shards
            .iter()
            .all(|s| s.cross_shard_drop_ring_full == 0)
    );
    assert_eq!(r.server.shards.first().map(|s| s.cross_shard_rx), Some(0));
}

#[test]
fn under_rising_load_moderation_lowers_wakeups_per_packet() {
    // A fixed 100 µs interval: one closed-loop connection brings one packet per wake-up at
    // most times; 32 connections bring many packets within each interval.
    let run_with = |conns: usize| {
        let mut server = host(1, SERVER_IP, 1);
        server.nic.moderation = nic::ModerationConfig::fixed(100_000);
        let client = host(2, CLIENT_IP, 1);
        let r = run(&server, &client, conns, 20, 256);
        assert_complete(&r, conns as u64, 20, 256);
        let s = r.server.shards.first().expect("one shard");
        assert!(s.nic.wakeups > 0);
        s.nic.packets_per_wakeup()
    };
    let low = run_with(1);
    let high = run_with(32);
    eprintln!("packets per wake-up: {low:.2} (1 connection), {high:.2} (32 connections)");
    assert!(
        high > low,
        "packets per wake-up: {low:.2} at low load, {high:.2} at high load"
    );
}
