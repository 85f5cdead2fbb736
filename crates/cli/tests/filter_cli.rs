//! `--filter RULE` through the real binary: bad rules end at once with exit status 2 and one
//! sentence naming the problem on every command that takes them; `demo` steers by them and
//! prints each rule's hits.

use std::process::{Command, Output};

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

/// A TAP host's options: the arguments are checked before any device is opened.
const TAP: [&str; 4] = ["--tap", "rsstk-flt0", "--ip", "10.0.0.2/24"];

/// `args` exit 2 with one stderr line containing each of `names`.
fn refused(args: &[&str], names: &[&str]) {
    let out = rsstack(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "rsstack {args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "rsstack {args:?}: {stderr}");
    for n in names {
        assert!(
            lines[0].contains(n),
            "rsstack {args:?}: {:?} lacks {n:?}",
            lines[0]
        );
    }
    assert!(!lines[0].contains("panicked"), "{}", lines[0]);
}

/// Each command with its minimal other arguments.
fn commands() -> Vec<Vec<&'static str>> {
    let mut serve = vec!["serve", "echo"];
    serve.extend(TAP);
    let mut recv = vec!["ttcp", "recv"];
    recv.extend(TAP);
    let mut send = vec!["ttcp", "send", "--to", "10.0.0.1:5001"];
    send.extend(TAP);
    let mut get = vec!["get", "http://10.0.0.1/"];
    get.extend(TAP);
    vec![serve, recv, send, get, vec!["demo"]]
}

#[test]
fn a_malformed_rule_is_a_usage_error_on_every_command() {
    for base in commands() {
        for (rule, names) in [
            ("proto tcp dport 80 queue 1", &["unknown word 'dport'"][..]),
            ("proto tcp dst-port 80", &["no action"][..]),
            ("proto icmp queue 0", &["tcp or udp"][..]),
            ("dst-port 65536 queue 0", &["dst-port", "0..=65535"][..]),
            ("src-ip 10.0.0.1 dst-ip ::1 drop", &["families"][..]),
            ("", &["empty"][..]),
        ] {
            let mut args = base.clone();
            args.extend(["--filter", rule]);
            let mut names = names.to_vec();
            names.push("--filter");
            refused(&args, &names);
        }
    }
}

#[test]
fn a_rule_naming_a_queue_the_host_lacks_is_a_usage_error() {
    for base in commands() {
        let mut args = base.clone();
        args.extend(["--shards", "2", "--filter", "proto tcp dst-port 80 queue 2"]);
        refused(&args, &["queue 2 does not exist", "2 queues (0..=1)"]);
    }
}

/// `key: value` from a summary.
fn value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(": ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
}

#[test]
fn demo_steers_by_its_rules_and_prints_their_hits() {
    let out = rsstack(&[
        "demo",
        "--duration",
        "0.5",
        "--shards",
        "2",
        "--connections",
        "8",
        "--filter",
        "proto udp queue 0",
        "--filter",
        "flow-type tcp4 dst-port 80 action 1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(value(&text, "filter_0"), "proto udp queue 0");
    assert_eq!(value(&text, "filter_0_hits"), "0");
    assert_eq!(
        value(&text, "filter_1"),
        "flow-type tcp4 dst-port 80 queue 1"
    );
    let hits: u64 = value(&text, "filter_1_hits").parse().expect("a count");
    assert!(hits > 100, "{text}");
    // Every packet to port 80 went to shard 1: shard 0 of the server saw none of them.
    let shard0 = text
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .expect("shard 0's line");
    assert!(shard0.contains("0.0%"), "{shard0}");
}
