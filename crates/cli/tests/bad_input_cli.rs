//! Bad input through the real binary (issue 18, item 6): every case ends at once with exit
//! status 2 and one sentence on stderr that names the limit — no abort, no hang, no
//! backtrace, no Debug value.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the rsstack binary runs")
}

/// Runs `args`, expects exit 2 within a few seconds and one stderr line containing every
/// string of `names`; returns that line.
fn refused(args: &[&str], names: &[&str]) -> String {
    let started = Instant::now();
    let out = rsstack(args);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "rsstack {args:?}: expected exit 2, stderr: {stderr}"
    );
    assert!(
        took < Duration::from_secs(10),
        "rsstack {args:?} took {took:?} to refuse"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "rsstack {args:?}: one line expected: {stderr}"
    );
    let line = lines[0];
    assert!(line.starts_with("rsstack: "), "{line}");
    for name in names {
        assert!(
            line.contains(name),
            "rsstack {args:?}: {line:?} lacks {name:?}"
        );
    }
    for debug in [
        "panicked",
        "backtrace",
        "Truncated(",
        "(\"",
        " { ",
        "Error {",
    ] {
        assert!(
            !line.contains(debug),
            "rsstack {args:?}: {line:?} looks like a panic or a Debug value"
        );
    }
    line.to_string()
}

/// A live command's I/O options on a TAP device, never opened: the bad input is refused first.
const TAP: [&str; 4] = ["--tap", "rsstk-bad0", "--ip", "10.0.0.2/24"];

fn with(base: &[&str], extra: &[&str]) -> Vec<String> {
    base.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn refused_owned(args: &[String], names: &[&str]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, names)
}

#[test]
fn demo_object_bytes_beyond_the_file_set_bound_are_refused_up_front() {
    refused(
        &["demo", "--object-bytes", "99999999999"],
        &["--object-bytes", "4294967296"],
    );
}

#[test]
fn rss_spread_flows_are_bounded() {
    refused(
        &["rss", "spread", "--flows", "100000000000"],
        &["--flows", "1000000000"],
    );
    refused(&["rss", "spread", "--flows", "0"], &["--flows", "1..="]);
}

#[test]
fn rss_queues_beyond_the_table_are_refused() {
    for cmd in ["spread", "reta", "hash"] {
        let mut args = vec!["rss", cmd, "--queues", "1000"];
        if cmd == "hash" {
            args.extend(["--src", "1.2.3.4", "--dst", "5.6.7.8"]);
        }
        refused(&args, &["--queues 1000", "--reta-size 128", "at most 128"]);
    }
    refused(&["rss", "spread", "--queues", "5000"], &["1..=2048"]);
}

#[test]
fn shards_name_the_nic_queue_limit() {
    refused_owned(
        &with(&["serve", "echo", "--shards", "100000"], &TAP),
        &["--shards", "1..=128"],
    );
    refused(&["demo", "--shards", "100000"], &["--shards", "1..=128"]);
    refused(&["demo", "--shards", "0"], &["--shards", "1..=128"]);
    refused(
        &["demo", "--client-shards", "129"],
        &["--client-shards", "1..=128"],
    );
}

#[test]
fn a_malformed_rss_key_is_refused() {
    for key in [
        "6d5a",
        "zz5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa",
    ] {
        refused(&["demo", "--rss-key", key], &["--rss-key", "RSS key"]);
        let args = with(&["serve", "echo", "--rss-key", key], &TAP);
        refused_owned(&args, &["--rss-key", "RSS key"]);
    }
}

#[test]
fn mtu_names_its_range() {
    for mtu in ["100000", "100", "9001"] {
        let args = with(&["serve", "echo", "--mtu", mtu], &TAP);
        refused_owned(&args, &["--mtu", "576..=9000"]);
    }
}

#[test]
fn queues_beyond_shards_say_so() {
    refused(
        &["demo", "--shards", "2", "--queues", "3"],
        &["--queues 3", "--shards 2"],
    );
    let args = with(&["serve", "echo", "--shards", "2", "--queues", "3"], &TAP);
    refused_owned(&args, &["--queues 3", "--shards 2"]);
}

#[test]
fn counts_ports_and_durations_name_their_limits() {
    refused(
        &["demo", "--connections", "70000"],
        &["--connections", "1..=60000"],
    );
    refused(&["demo", "--duration", "1e9"], &["--duration", "86400"]);
    refused(&["demo", "--rate-gbps", "0"], &["--rate-gbps", "10000"]);
    refused_owned(
        &with(
            &["ttcp", "send", "--to", "10.0.0.1:5001", "--conns", "70000"],
            &TAP,
        ),
        &["--conns", "1..=60000"],
    );
    refused_owned(
        &with(
            &[
                "ttcp",
                "send",
                "--to",
                "10.0.0.1:5001",
                "--bytes",
                "16000000000G",
                "--conns",
                "2",
            ],
            &TAP,
        ),
        &["--bytes", "--conns", "18446744073709551615"],
    );
    refused_owned(
        &with(&["ttcp", "recv", "--port", "0"], &TAP),
        &["--port", "1..=65535"],
    );
    refused_owned(
        &with(&["ttcp", "recv", "--conns", "0"], &TAP),
        &["--conns", "1.."],
    );
    refused_owned(
        &with(&["serve", "echo", "--port", "0"], &TAP),
        &["--port", "1..=65535"],
    );
    refused_owned(
        &with(&["serve", "echo", "--duration", "0"], &TAP),
        &["--duration", "31536000"],
    );
    refused(
        &["sim", "soak", "--seeds", "100000000000"],
        &["--seeds", "1..=100000"],
    );
    refused(
        &["sim", "soak", "--threads", "100000000"],
        &["--threads", "0..=1024"],
    );
    refused(
        &["tune", "lo", "--moderation", "99999999999"],
        &["--moderation", "4294967295"],
    );
}

#[test]
fn an_empty_pcap_is_refused_with_a_sentence() {
    let path = std::env::temp_dir().join(format!("rsstack-bad-{}.pcap", std::process::id()));
    std::fs::write(&path, b"").expect("an empty file");
    let p = path.display().to_string();
    let line = refused(
        &[
            "serve",
            "echo",
            "--pcap-in",
            &p,
            "--ip",
            "10.0.0.2/24",
            "--duration",
            "1",
        ],
        &["--pcap-in", &p, "ends inside a file header"],
    );
    let _ = std::fs::remove_file(&path);
    assert!(!line.contains("Truncated"), "{line}");
    refused(
        &[
            "serve",
            "echo",
            "--pcap-in",
            "/nonexistent/x.pcap",
            "--ip",
            "10.0.0.2/24",
        ],
        &["--pcap-in", "cannot open"],
    );
}

#[test]
fn a_missing_interface_is_an_environment_error() {
    if !testnet::require_root("a_missing_interface_is_an_environment_error") {
        return;
    }
    for io in ["af_packet", "af_xdp"] {
        refused(
            &[
                "serve",
                "echo",
                "--iface",
                "rsstk-none0",
                "--io",
                io,
                "--ip",
                "10.0.0.2/24",
                "--duration",
                "1",
            ],
            &["rsstk-none0"],
        );
    }
}

#[test]
fn forward_refuses_bad_ports_addresses_and_routes() {
    let two = [
        "forward",
        "--port",
        "p0",
        "--ip",
        "10.0.1.1/24",
        "--port",
        "p1",
        "--ip",
        "10.0.2.1/24",
    ];
    refused(
        &["forward", "--port", "p0", "--ip", "10.0.1.1/33"],
        &["'10.0.1.1/33'", "ADDR/LEN"],
    );
    refused(
        &["forward", "--port", "p0", "--ip", "nope"],
        &["'nope'", "ADDR/LEN"],
    );
    refused(
        &["forward", "--ip", "10.0.1.1/24", "--port", "p0"],
        &["--ip", "before the first --port"],
    );
    refused(
        &[
            "forward",
            "--port",
            "p0",
            "--ip",
            "10.0.1.1/24",
            "--port",
            "p1",
        ],
        &["--port p1", "no --ip"],
    );
    refused(
        &[
            "forward",
            "--port",
            "p0",
            "--ip",
            "10.0.1.1/24",
            "--port",
            "p0",
            "--ip",
            "10.0.2.1/24",
        ],
        &["--port p0", "twice"],
    );
    refused_owned(
        &with(&two, &["--route", "10.9.0.0/16,10.5.0.1"]),
        &[
            "10.9.0.0/16",
            "10.5.0.1",
            "gateway not on a connected prefix",
        ],
    );
    refused_owned(
        &with(&two, &["--route", "10.9.0.0/16"]),
        &["PREFIX,NEXTHOP"],
    );
    refused_owned(
        &with(&two, &["--route", "10.9.0.0/16,fd00::1"]),
        &["different families"],
    );
    refused_owned(&with(&two, &["--burst", "65"]), &["--burst", "1..=64"]);
    refused_owned(&with(&two, &["--shards", "0"]), &["--shards", "1..=128"]);
    refused_owned(&with(&two, &["--duration=nan"]), &["--duration"]);
    refused(
        &[
            "forward",
            "--io",
            "mem",
            "--port",
            "p0",
            "--ip",
            "10.0.1.1/24",
        ],
        &["--io mem", "two --port"],
    );
}

#[test]
fn nic_offload_settings_name_what_is_allowed_on_every_live_command() {
    let allowed = "tso=on|off,csum=on|off,gro=on|off";
    for cmd in [
        &["serve", "echo"][..],
        &["ttcp", "recv"][..],
        &["ttcp", "send", "--to", "10.0.0.1:5001"][..],
        &["get", "http://10.0.0.1/"][..],
    ] {
        for bad in ["tso=maybe", "lro=on", "tso", "tso=on,tso=off", ""] {
            let mut args = with(cmd, &["--nic-offload", bad]);
            args.extend(TAP.iter().map(|s| s.to_string()));
            refused_owned(&args, &["--nic-offload", allowed, "all", "none"]);
        }
    }
}

#[test]
fn http_timeouts_name_their_range_and_apply_to_http_only() {
    refused_owned(
        &with(&["serve", "http", "--send-timeout", "99999999999"], &TAP),
        &["--send-timeout", "0..=31536000"],
    );
    refused_owned(
        &with(&["serve", "echo", "--keepalive-timeout", "5"], &TAP),
        &["--keepalive-timeout", "serve http"],
    );
    refused_owned(
        &with(&["serve", "http", "--header-timeout", "soon"], &TAP),
        &["--header-timeout"],
    );
}

#[test]
fn overload_options_name_their_range() {
    for bad in ["16,12,8", "8,12", "0,1,2", "x,y,z"] {
        refused_owned(
            &with(&["serve", "http", "--tcp-mem-mib", bad], &TAP),
            &[
                "--tcp-mem-mib",
                "LOW,PRESSURE,HIGH",
                "LOW <= PRESSURE <= HIGH",
            ],
        );
    }
    refused_owned(
        &with(&["ttcp", "recv", "--tcp-source-share-pct", "0"], &TAP),
        &["--tcp-source-share-pct", "1..=100"],
    );
    refused_owned(
        &with(&["serve", "echo", "--tcp-source-share-pct", "300"], &TAP),
        &["--tcp-source-share-pct"],
    );
}
