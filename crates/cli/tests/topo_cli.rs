//! `rsstack topo` through the real binary on recorded machines (unpacked per test): the
//! interface's locality and the plan's placement as issue 15's Done-when lines state them, the
//! JSON form, and exit status 2 on bad arguments.

#[path = "../../topo/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

use common::Unpacked;

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const UNKNOWN_NIC_NODE: &str = "40intel64-2g2n4c+pcilocality.tar.bz2";

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

fn stdout_of(args: &[&str]) -> String {
    let out = rsstack(args);
    assert!(
        out.status.success(),
        "rsstack {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs with bad arguments: exit status 2, one line on stderr, nothing on stdout.
fn usage_error(args: &[&str]) -> String {
    let out = rsstack(args);
    assert_eq!(out.status.code(), Some(2), "rsstack {args:?}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// `(cpu, node)` of each `queue N: IRQ … -> CPU c (node n), shard s` line.
fn queue_placements(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter(|l| l.trim_start().starts_with("queue "))
        .map(|l| {
            let (_, rest) = l.split_once("-> CPU ").expect("queue line");
            let (cpu, rest) = rest.split_once(" (node ").expect("node");
            let (node, _) = rest.split_once(')').expect(")");
            (cpu.parse().expect("cpu"), node.to_string())
        })
        .collect()
}

#[test]
fn two_node_eth0_is_on_node_0_cpus_0_to_7_and_closest_places_every_queue_there() {
    let m = Unpacked::new(TWO_NODE);
    let root = m.root.to_str().unwrap();
    let text = stdout_of(&["topo", "--sysfs-root", root, "--iface", "eth0"]);
    assert!(
        text.contains("interface eth0: node 0, local CPUs 0-7"),
        "{text}"
    );
    assert!(
        text.contains("plan: closest, 8 shard(s), 8 queue(s), NIC node 0"),
        "{text}"
    );
    let queues = queue_placements(&text);
    assert_eq!(queues.len(), 8, "{text}");
    for (cpu, node) in &queues {
        assert!(*cpu < 8 && node == "0", "{text}");
    }
    assert!(text.contains("distances:"), "{text}");
    assert!(
        text.contains("cache L3: 20480 KiB ×2, shared by 0-7 8-15"),
        "{text}"
    );
}

#[test]
fn unknown_nic_node_is_named_and_the_fallback_is_said() {
    let m = Unpacked::new(UNKNOWN_NIC_NODE);
    let root = m.root.to_str().unwrap();
    let text = stdout_of(&["topo", "--sysfs-root", root, "--iface", "eth0"]);
    assert!(
        text.contains("interface eth0: node unknown (numa_node -1)"),
        "{text}"
    );
    assert!(text.contains("NIC node unknown"), "{text}");
    assert!(
        text.contains("falling back to all nodes (0,1,2,3)"),
        "{text}"
    );
}

#[test]
fn json_plan_names_node_0_for_every_queue() {
    let m = Unpacked::new(TWO_NODE);
    let root = m.root.to_str().unwrap();
    let text = stdout_of(&[
        "topo",
        "--sysfs-root",
        root,
        "--iface",
        "eth0",
        "--policy",
        "numa",
        "--shards",
        "4",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("one JSON object");
    assert_eq!(v["interface"]["numa_node"], 0);
    assert_eq!(v["plan"]["policy"], "numa");
    let cpus: Vec<u64> = v["plan"]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![0, 8, 1, 9]);
    assert_eq!(v["machine"]["distances"][0][1], 21);
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let m = Unpacked::new(TWO_NODE);
    let root = m.root.to_str().unwrap();
    let err = usage_error(&["topo", "--sysfs-root", root, "--policy", "nearest"]);
    assert!(err.contains("unknown policy"), "{err}");
    let err = usage_error(&["topo", "--sysfs-root", root, "--shards", "0"]);
    assert!(err.contains("--shards"), "{err}");
    let err = usage_error(&["topo", "--sysfs-root", root, "--shards", "17"]);
    assert!(err.contains("needs 17 CPUs"), "{err}");
    let err = usage_error(&["topo", "--sysfs-root", root, "--iface", "eth9"]);
    assert!(
        err.contains("sys/class/net/eth9: no such network interface"),
        "{err}"
    );
    let err = usage_error(&["topo", "--sysfs-root", "/nonexistent-topo-root"]);
    assert!(err.contains("/nonexistent-topo-root"), "{err}");
    let err = usage_error(&[
        "topo",
        "--sysfs-root",
        m.root.join("proc").to_str().unwrap(),
    ]);
    assert!(err.contains("not a sysfs root"), "{err}");
}

#[test]
fn this_machine_prints_its_topology() {
    if !std::path::Path::new("/sys/devices/system/cpu").is_dir() {
        return;
    }
    let text = stdout_of(&["topo"]);
    assert!(text.starts_with("machine: /"), "{text}");
    assert!(text.contains("plan: closest"), "{text}");
}
