//! `--placement` through the real binary: bad policy names and impossible combinations are
//! one-line usage errors (exit 2) on `demo`, `serve` and `ttcp`, never a panic.

use std::process::{Command, Output};

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("rsstack runs")
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let out = rsstack(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?} printed: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn an_unknown_policy_name_is_a_one_line_usage_error_on_every_command() {
    let pcap = ["--pcap-in", "/nonexistent.pcap", "--ip", "10.0.0.1/24"];
    let serve: Vec<&str> = ["serve", "echo", "--placement", "fastest"]
        .into_iter()
        .chain(pcap)
        .collect();
    let recv: Vec<&str> = ["ttcp", "recv", "--placement", "fastest"]
        .into_iter()
        .chain(pcap)
        .collect();
    for args in [vec!["demo", "--placement", "fastest"], serve, recv] {
        assert_usage_error(&args, "unknown policy \"fastest\"");
    }
}

#[test]
fn placement_conflicts_with_explicit_pinning() {
    assert_usage_error(&["demo", "--placement", "cache", "--no-pin"], "--no-pin");
    assert_usage_error(
        &[
            "serve",
            "echo",
            "--placement",
            "cache",
            "--cores",
            "0",
            "--pcap-in",
            "/x.pcap",
            "--ip",
            "10.0.0.1/24",
        ],
        "--cores",
    );
}

#[test]
fn an_unsatisfiable_spread_is_a_usage_error_naming_the_limit() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = cpus.to_string();
    assert_usage_error(
        &[
            "demo",
            "--duration",
            "1",
            "--shards",
            &shards,
            "--placement",
            "spread",
        ],
        "--placement spread",
    );
}
