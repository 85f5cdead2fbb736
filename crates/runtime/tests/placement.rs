//! Placement plans executed by the runtime: a plan for a recorded 2-node machine becomes the
//! per-shard cores and nodes a `HostConfig` pins and reports, and a plan for this machine
//! pins the shards of a real `run_pair` where it says, with `ShardInfo` carrying its nodes.

#[path = "../../topo/tests/common/mod.rs"]
mod common;

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apps::http::{FileSet, HttpServer};
use apps::load::{HttpLoadClient, LoadConfig};
use common::Unpacked;
use runtime::{HostConfig, NodeMemory, RunLimits, WireConfig, run_pair};
use stack::{InterfaceConfig, Ipv4Cidr};
use topo::{Interface, Policy, Profile, Topology};
use wire::EthernetAddress;

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn host(mac_last: u8, ip: Ipv4Addr, shards: u16) -> HostConfig {
    let iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        Ipv4Cidr::new(ip, 24),
    );
    HostConfig::new(iface, shards)
}

/// The host config a policy's plan gives on the recorded 2-node machine (NIC eth0 on node 0).
fn placed_on_two_node(profile: Profile, shards: u16) -> HostConfig {
    let m = Unpacked::new(TWO_NODE);
    let topo = Topology::discover(&m.root).expect("topology");
    let nic = Interface::discover(&m.root, "eth0").expect("eth0");
    let plan = topo::plan(
        &topo,
        Some(&nic),
        usize::from(shards),
        &Policy::new(profile),
    )
    .expect("plan");
    let mut cfg = host(1, SERVER_IP, shards);
    cfg.place(&plan, &topo).expect("place");
    cfg
}

#[test]
fn closest_on_two_nodes_pins_every_shard_to_node_0_cores_and_prefers_node_0() {
    let cfg = placed_on_two_node(Profile::Closest, 4);
    assert_eq!(cfg.cores, Some(vec![0, 1, 2, 3]));
    assert_eq!(cfg.nodes, vec![Some(0); 4]);
    assert!(cfg.node_memory, "two nodes: the policy is to be set");
}

#[test]
fn numa_on_two_nodes_alternates_nodes_and_each_shard_reports_its_cpus_node() {
    let cfg = placed_on_two_node(Profile::Numa, 4);
    assert_eq!(cfg.cores, Some(vec![0, 8, 1, 9]));
    assert_eq!(cfg.nodes, vec![Some(0), Some(1), Some(0), Some(1)]);
    assert!(cfg.node_memory);
}

#[test]
fn a_plan_for_another_shard_count_is_refused_and_changes_nothing() {
    let m = Unpacked::new(TWO_NODE);
    let topo = Topology::discover(&m.root).expect("topology");
    let plan = topo::plan(&topo, None, 2, &Policy::new(Profile::Cache)).expect("plan");
    let mut cfg = host(1, SERVER_IP, 3);
    assert!(cfg.place(&plan, &topo).is_err());
    assert_eq!(cfg.cores, None);
    assert!(cfg.nodes.is_empty());
}

#[test]
fn cache_plan_on_this_machine_pins_the_shards_of_a_run_where_it_says() {
    let topo = Topology::discover(Path::new("/")).expect("this machine's topology");
    let shards = 2u16
        .min(u16::try_from(topo.cores.len()).unwrap_or(1))
        .max(1);
    let plan = topo::plan(
        &topo,
        None,
        usize::from(shards),
        &Policy::new(Profile::Cache),
    )
    .expect("plan");
    let mut server = host(1, SERVER_IP, shards);
    server.place(&plan, &topo).expect("place");
    let client = host(2, CLIENT_IP, 1);
    let files = Arc::new(FileSet::demo(256));
    let load = LoadConfig {
        server: SocketAddr::new(IpAddr::V4(SERVER_IP), 80),
        connections: 8,
        path: "/index.html".into(),
        requests_per_connection: Some(20),
        elephant_ports: Vec::new(),
        elephant_body_bytes: 0,
    };
    let r = run_pair(
        &server,
        move |_| HttpServer::new(80, files.clone()),
        &client,
        move |_| HttpLoadClient::new(load.clone()),
        WireConfig::default(),
        RunLimits {
            duration: Duration::from_secs(30),
            stop_when_client_done: true,
            monitor_every: Duration::from_millis(5),
        },
        |_| {},
    )
    .expect("run");
    let ok: u64 = r
        .client
        .shards
        .iter()
        .map(|s| s.app.stats().responses_ok)
        .sum();
    assert_eq!(ok, 8 * 20, "every request answered");
    for (s, p) in r.server.shards.iter().zip(&plan.shards) {
        assert_eq!(s.core, Some(p.cpu), "shard {} core", p.shard);
        assert!(!s.pin_failed, "shard {} pinned", p.shard);
        let node = p.pool_node.map(|n| n as u16);
        assert_eq!(Some(s.info.numa_node), node.or(Some(0)));
        let expected = match node {
            None => NodeMemory::NotAsked,
            Some(n) if topo.nodes.len() == 1 => NodeMemory::SingleNode(n),
            Some(n) => NodeMemory::Preferred(n),
        };
        assert!(
            s.node_memory == expected || s.node_memory.failed(),
            "shard {}: {:?}",
            p.shard,
            s.node_memory
        );
    }
    // The client had no plan: unpinned, node 0, no policy asked for.
    assert_eq!(r.client.shards[0].node_memory, NodeMemory::NotAsked);
}
