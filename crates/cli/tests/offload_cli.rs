//! `rsstack demo --offload …` through the real binary (issue 13 item 5): the offload engine on
//! a core of its own beside the server's shard, on the `mem` wire. Not timed: the figures
//! asserted are counts, not rates.

use std::process::{Command, Output};

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

/// Runs a short offload demo (one server shard, unpinned, `secs` long) and returns its JSON
/// summary.
fn demo_json(secs: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "demo",
        "--duration",
        secs,
        "--shards",
        "1",
        "--connections",
        "16",
        "--no-pin",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = rsstack(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rsstack {args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn offload_all_hands_connections_to_the_engine_and_loses_nothing() {
    let v = demo_json("1", &["--offload", "all"]);
    let o = &v["offload"];
    assert!(o["connections_offloaded"].as_u64() > Some(0), "{o}");
    assert!(v["requests"].as_u64() > Some(0), "{v}");
    assert_eq!(v["drops"], 0, "{v}");
    assert_eq!(v["failed_connections"], 0, "{v}");
    assert_eq!(v["resets_sent"], 0, "{v}");
    assert_eq!(o["cmds_dropped"], 0, "{o}");
    assert_eq!(o["cmds_refused"], 0, "{o}");
    assert_eq!(o["filters_refused"], 0, "{o}");
    assert_eq!(o["connections_reset_by_engine_failure"], 0, "{o}");
    // Each accepted handoff's hold ended by shard 0's drain signal, none by time-out.
    assert_eq!(o["hold"]["drained"], o["connections_offloaded"], "{o}");
    assert_eq!(o["hold"]["timeouts"], 0, "{o}");
    assert_eq!(o["hold"]["dropped"], 0, "{o}");
    assert_eq!(o["engine_failed"], false, "{o}");
    // Seed Figure 8's measure is there, by kind, and the engine carried TCP packets.
    assert!(o["engine_packets"].as_u64() > Some(0), "{o}");
    assert!(o["messages_per_packet"]["send"].as_f64() > Some(0.0), "{o}");
    assert!(o["messages_per_packet"]["ack"].as_f64() > Some(0.0), "{o}");
}

#[test]
fn adaptive_offloads_while_the_engine_has_room() {
    let v = demo_json(
        "1",
        &["--offload", "adaptive", "--engine-connections", "64"],
    );
    let o = &v["offload"];
    assert_eq!(o["policy"], "adaptive");
    assert!(o["connections_offloaded"].as_u64() > Some(0), "{o}");
    assert_eq!(v["drops"], 0, "{v}");
    assert_eq!(v["failed_connections"], 0, "{v}");
}

#[test]
fn off_runs_no_engine() {
    let v = demo_json("1", &["--offload", "off"]);
    assert!(v["offload"].is_null(), "{v}");
    assert!(v["requests"].as_u64() > Some(0), "{v}");
}

#[test]
fn engine_failure_resets_exactly_its_connections_and_the_host_serves_new_ones() {
    let v = demo_json("1.5", &["--offload", "all", "--engine-fail-after", "0.5"]);
    let o = &v["offload"];
    assert_eq!(o["engine_failed"], true, "{o}");
    assert_eq!(o["engine_failures_detected"], 1, "{o}");
    let held = o["engine_connections_at_failure"]
        .as_u64()
        .expect("a count");
    assert!(held > 0, "{o}");
    assert_eq!(o["connections_reset_by_engine_failure"], held, "{o}");
    // The host took the flows back from the NIC and offloads nothing after the failure.
    assert_eq!(o["filters_removed"], o["filters_installed"], "{o}");
    assert_eq!(o["offloaded_at_end"], 0, "{o}");
    // The client saw exactly those connections fail, opened new ones, and the host served
    // them.
    assert_eq!(v["failed_connections"], held, "{v}");
    assert_eq!(v["connections_reopened"], held, "{v}");
    assert!(v["requests_after_engine_failure"].as_u64() > Some(0), "{v}");
    assert_eq!(v["drops"], 0, "{v}");
}

#[test]
fn bad_offload_values_are_usage_errors() {
    for args in [
        &["demo", "--offload", "bogus"][..],
        &["demo", "--offload", "first:x"],
        &["demo", "--offload", "all", "--engine-fail-after=-1"],
        &["demo", "--offload", "all", "--engine-fail-after", "nan"],
        &["demo", "--offload", "all", "--engine-connections", "0"],
        &["demo", "--engine-connections", "5"],
        &["demo", "--offload", "off", "--engine-fail-after", "1"],
        &["demo", "--offload", "all", "--skew"],
        &["demo", "--offload", "all", "--shards", "2", "--queues", "1"],
    ] {
        let out = rsstack(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "rsstack {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "rsstack {args:?}: {stderr}");
    }
}

#[test]
fn bad_serve_offload_options_are_usage_errors() {
    let live = ["serve", "http", "--ip", "10.77.0.2/24"];
    let cases: [&[&str]; 9] = [
        // No engine beside AF_XDP (or a pcap replay): TAP and AF_PACKET only.
        &["--iface", "lo", "--io", "af_xdp", "--offload", "all"],
        &[
            "--tap",
            "t0",
            "--offload",
            "all",
            "--shards",
            "2",
            "--rebalance",
        ],
        &["--tap", "t0", "--engine-core", "1"],
        &["--tap", "t0", "--offload-cycle-ms", "100"],
        &[
            "--tap",
            "t0",
            "--offload",
            "off",
            "--engine-timeout-ms",
            "500",
        ],
        &["--tap", "t0", "--offload", "all", "--offload-cycle-ms", "0"],
        &[
            "--tap",
            "t0",
            "--offload",
            "all",
            "--engine-timeout-ms",
            "1",
        ],
        &["--tap", "t0", "--offload", "sometimes"],
        // Apart from the shards, or not at all.
        &[
            "--tap",
            "t0",
            "--offload",
            "all",
            "--cores",
            "0,1",
            "--shards",
            "2",
            "--engine-core",
            "1",
        ],
    ];
    for extra in cases {
        let args: Vec<&str> = live.iter().chain(extra).copied().collect();
        let out = rsstack(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "rsstack {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "rsstack {args:?}: {stderr}");
    }
}
