//! `rsstack demo`'s workload under the simulator: the HTTP/1.1 server and the closed-loop load
//! client, two shard cores per host behind each host's NIC model, on the virtual clock. The
//! same application code the demo runs on threads; one seed reproduces one run exactly.

mod common;

use core::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use common::{CLIENT_IP, SERVER_IP, config, gigabit};
use sim::net::{ShardedHost, ShardedHostConfig};
use sim::{PortId, World};

const HTTP_PORT: u16 = 80;
/// The demo's default: 64 connections, split over the client's shards.
const CONNECTIONS: usize = 64;
const SHARDS: u16 = 2;
/// Virtual time each run lasts.
const RUN_NS: u64 = 200_000_000;

/// What one run produced: the world's trace digest and each shard's figures.
#[derive(Debug, PartialEq)]
struct Outcome {
    digest: u64,
    /// Per server shard: connections accepted, requests served.
    server: Vec<(u64, u64)>,
    /// Per client shard: responses 200, protocol errors, connections on a foreign shard.
    client: Vec<(u64, u64, u64)>,
    server_foreign: u64,
    /// Messages the server's shards exchanged (software-RETA forwarding).
    server_msgs: u64,
}

/// A host's stack configuration as the demo's `runtime::HostConfig` has it (every SYN a client
/// shard opens at start may wait for the one ARP resolution), with ISN secrets from the seed.
fn host_config(mac_last: u8, ip: core::net::Ipv4Addr, seed: u64) -> ShardedHostConfig {
    let mut stack = config(mac_last, ip);
    stack.limits.neighbor_pending_packets_max = 1024;
    stack.secret = [seed ^ 0x5eed_0000_0000_0001, u64::from(mac_last)];
    ShardedHostConfig::new(stack).with_shards(SHARDS)
}

fn demo_under_sim(seed: u64) -> Outcome {
    demo_under_sim_with_queues(seed, SHARDS)
}

/// The demo's workload with `server_queues` hardware queues on the server (`--queues`).
fn demo_under_sim_with_queues(seed: u64, server_queues: u16) -> Outcome {
    let files = Arc::new(FileSet::demo(1024));
    let mut world = World::new(seed);
    let server_cfg = host_config(1, SERVER_IP, seed).with_queues(server_queues);
    let server = ShardedHost::new(server_cfg, |_| HttpServer::new(HTTP_PORT, files.clone()))
        .expect("server host");
    let client = ShardedHost::new(host_config(2, CLIENT_IP, seed), |info| {
        let shards = usize::from(info.shards);
        let i = usize::from(info.shard);
        HttpLoadClient::new(LoadConfig {
            server: SocketAddr::new(IpAddr::V4(SERVER_IP), HTTP_PORT),
            connections: CONNECTIONS / shards + usize::from(i < CONNECTIONS % shards),
            path: "/index.html".into(),
            requests_per_connection: None,
            elephant_ports: Vec::new(),
            elephant_body_bytes: 0,
        })
    })
    .expect("client host");
    let server = world.add_host(Box::new(server));
    let client = world.add_host(Box::new(client));
    world
        .connect((client, PortId(0)), (server, PortId(0)), gigabit())
        .expect("link");
    world.run_until(RUN_NS);
    let s = world
        .host::<ShardedHost<HttpServer>>(server)
        .expect("server host type");
    let c = world
        .host::<ShardedHost<HttpLoadClient>>(client)
        .expect("client host type");
    Outcome {
        digest: world.digest(),
        server: s
            .apps()
            .map(|a| (a.stats().connections_accepted, a.stats().requests))
            .collect(),
        client: c
            .apps()
            .map(|a| {
                let st = a.stats();
                (st.responses_ok, st.protocol_errors, st.connections_foreign)
            })
            .collect(),
        server_foreign: s.apps().map(|a| a.stats().connections_foreign).sum(),
        server_msgs: s.front_counters().msgs_delivered,
    }
}

/// Every connection was accepted, every shard of both hosts served or fetched pages, and no
/// connection was served or answered off the shard RSS gave it.
fn assert_every_shard_did_the_demos_work(a: &Outcome) {
    assert_eq!(a.server.len(), usize::from(SHARDS));
    assert_eq!(a.client.len(), usize::from(SHARDS));
    let accepted: u64 = a.server.iter().map(|s| s.0).sum();
    assert_eq!(
        accepted, CONNECTIONS as u64,
        "every client connection accepted"
    );
    for (i, &(conns, requests)) in a.server.iter().enumerate() {
        assert!(
            conns > 0 && requests > 100,
            "server shard {i} served {conns} connections, {requests} requests: {a:?}"
        );
    }
    for (i, &(ok, errors, foreign)) in a.client.iter().enumerate() {
        assert!(ok > 100, "client shard {i}: {ok} responses: {a:?}");
        assert_eq!(errors, 0, "client shard {i}: protocol errors");
        assert_eq!(
            foreign, 0,
            "client shard {i}: replies reached another shard"
        );
    }
    assert_eq!(a.server_foreign, 0, "a connection served off its RSS shard");
}

#[test]
fn demo_workload_with_two_shards_a_host_gives_the_same_trace_digest_twice() {
    let a = demo_under_sim(5);
    let b = demo_under_sim(5);
    assert_eq!(a, b, "same seed, same build: same run");
    assert_every_shard_did_the_demos_work(&a);
    assert_eq!(
        a.server_msgs, 0,
        "one queue per shard: no cross-shard message"
    );
}

#[test]
fn one_queue_for_two_shards_forwards_through_messages_and_stays_deterministic() {
    let a = demo_under_sim_with_queues(9, 1);
    assert_eq!(a, demo_under_sim_with_queues(9, 1));
    assert_every_shard_did_the_demos_work(&a);
    // Shard 1 owns about half the flows, and every one of its frames was polled by shard 0.
    let shard1_requests = a.server[1].1;
    assert!(
        a.server_msgs >= shard1_requests,
        "{} messages for {shard1_requests} requests served by shard 1",
        a.server_msgs
    );
}

#[test]
fn demo_workload_under_another_seed_runs_another_trace() {
    let a = demo_under_sim(5);
    let c = demo_under_sim(6);
    assert_ne!(a.digest, c.digest, "seeds 5 and 6 ran identical traces");
}
