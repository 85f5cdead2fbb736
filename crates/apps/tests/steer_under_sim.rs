//! Flow steering in the simulator: wildcard rules (`ethtool -N`: `queue N`, `drop`) and ATR,
//! both where the NIC model steers (a queue per shard) and where the shard cores' software
//! RETA runs (one queue for two shards, as on live ports), under the demo's HTTP workload.

mod common;

use core::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use common::{CLIENT_IP, SERVER_IP, config, gigabit};
use rss::{FlowRule, RuleSet};
use sim::net::{ShardedHost, ShardedHostConfig};
use sim::{PortId, World};

const HTTP_PORT: u16 = 80;
const CONNECTIONS: usize = 16;
const SHARDS: u16 = 2;
const RUN_NS: u64 = 200_000_000;

fn rules(list: &[&str]) -> RuleSet {
    RuleSet::new(
        list.iter()
            .map(|s| s.parse::<FlowRule>().expect("rule"))
            .collect(),
    )
    .expect("bounded")
}

fn host(mac_last: u8, ip: core::net::Ipv4Addr, queues: u16) -> ShardedHostConfig {
    let mut stack = config(mac_last, ip);
    stack.limits.neighbor_pending_packets_max = 1024;
    ShardedHostConfig::new(stack)
        .with_shards(SHARDS)
        .with_queues(queues)
}

struct Outcome {
    /// Per server shard: connections accepted.
    accepted: Vec<u64>,
    /// Per client shard: responses 200.
    responses: Vec<u64>,
    /// Rule hits on the server: the steering NIC's plus the shards' software steering.
    server_rule_hits: Vec<u64>,
    /// Frames the server's rules dropped (NIC front plus shards).
    server_rule_drops: u64,
    /// ATR entries the client's shards recorded (software steering).
    client_atr_learned: u64,
}

fn run(server: ShardedHostConfig, client: ShardedHostConfig) -> Outcome {
    let files = Arc::new(FileSet::demo(1024));
    let mut world = World::new(3);
    let server = ShardedHost::new(server, |_| HttpServer::new(HTTP_PORT, files.clone()))
        .expect("server host");
    let client = ShardedHost::new(client, |_| {
        HttpLoadClient::new(LoadConfig {
            server: SocketAddr::new(IpAddr::V4(SERVER_IP), HTTP_PORT),
            connections: CONNECTIONS / usize::from(SHARDS),
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
    let mut hits = s.steering().rule_hits().to_vec();
    let mut drops = s.front_counters().rule_drops;
    for sh in s.shards() {
        if let Some(st) = sh.sw_steer() {
            hits.resize(hits.len().max(st.rule_hits().len()), 0);
            for (h, n) in hits.iter_mut().zip(st.rule_hits()) {
                *h += n;
            }
            drops += st.counters().rule_drops;
        }
    }
    Outcome {
        accepted: s.apps().map(|a| a.stats().connections_accepted).collect(),
        responses: c.apps().map(|a| a.stats().responses_ok).collect(),
        server_rule_hits: hits,
        server_rule_drops: drops,
        client_atr_learned: c
            .shards()
            .iter()
            .filter_map(|sh| sh.sw_steer().map(|st| st.counters().atr_learned))
            .sum(),
    }
}

fn steers_every_port_80_connection_to_shard_1(server_queues: u16) {
    let mut server = host(1, SERVER_IP, server_queues);
    server.rules = rules(&["proto tcp dst-port 80 queue 1"]);
    let o = run(server, host(2, CLIENT_IP, SHARDS));
    assert_eq!(
        o.accepted,
        vec![0, CONNECTIONS as u64],
        "every connection on shard 1"
    );
    assert!(o.responses.iter().all(|&n| n > 100), "{:?}", o.responses);
    assert_eq!(o.server_rule_hits.len(), 1);
    assert!(o.server_rule_hits[0] > 1000, "{:?}", o.server_rule_hits);
}

#[test]
fn a_queue_rule_in_the_nic_model_sends_every_connection_to_its_shard() {
    steers_every_port_80_connection_to_shard_1(SHARDS);
}

#[test]
fn a_queue_rule_where_the_software_reta_runs_sends_every_connection_to_its_shard() {
    steers_every_port_80_connection_to_shard_1(1);
}

#[test]
fn a_drop_rule_drops_every_syn_in_the_model_and_in_the_shard_cores() {
    for queues in [SHARDS, 1] {
        let mut server = host(1, SERVER_IP, queues);
        server.rules = rules(&["proto tcp dst-port 80 drop"]);
        let o = run(server, host(2, CLIENT_IP, SHARDS));
        assert_eq!(o.accepted, vec![0, 0], "queues {queues}");
        assert_eq!(o.responses, vec![0, 0]);
        assert!(o.server_rule_drops >= CONNECTIONS as u64, "queues {queues}");
        assert_eq!(o.server_rule_hits, vec![o.server_rule_drops]);
    }
}

/// A client host whose rule sends every reply from port 80 to shard 1: shard 0's own
/// connections are lost without ATR (their SYN-ACKs reach a shard that does not know them)
/// and come home with it.
fn client_with_a_rule_against_its_replies(queues: u16, atr: bool) -> Outcome {
    let mut client = host(2, CLIENT_IP, queues);
    client.rules = rules(&["proto tcp src-port 80 queue 1"]);
    client.atr = atr;
    run(host(1, SERVER_IP, SHARDS), client)
}

#[test]
fn atr_brings_the_replies_of_a_shards_connections_home_over_a_rule() {
    for queues in [SHARDS, 1] {
        let without = client_with_a_rule_against_its_replies(queues, false);
        assert_eq!(
            without.responses[0], 0,
            "queues {queues}: shard 0's replies went to shard 1"
        );
        assert!(without.responses[1] > 100);
        let with = client_with_a_rule_against_its_replies(queues, true);
        assert!(
            with.responses.iter().all(|&n| n > 100),
            "queues {queues}: {:?}",
            with.responses
        );
        if queues == 1 {
            // Each shard records its own opens and the other's.
            assert!(with.client_atr_learned >= 2 * CONNECTIONS as u64);
        }
    }
}
