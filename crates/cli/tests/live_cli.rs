//! Bad options of the live commands (`serve`, `ttcp`, `get`) are refused before any port is
//! opened: one line on stderr, exit status 2, nothing on stdout. No root needed.

use std::process::{Command, Output};

fn rsstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("run rsstack")
}

#[test]
fn bad_af_packet_ring_prints_one_line_and_exits_2() {
    let ip = ["--ip", "10.0.0.2/24"];
    let cases: &[(&[&str], &str)] = &[
        (
            &["serve", "echo", "--iface", "lo", "--af-packet-ring", "v4"],
            "invalid value 'v4'",
        ),
        (
            &[
                "serve",
                "echo",
                "--iface",
                "lo",
                "--io",
                "af_xdp",
                "--af-packet-ring",
                "v2",
            ],
            "--af-packet-ring needs --iface with --io af_packet",
        ),
        (
            &["serve", "echo", "--tap", "tap0", "--af-packet-ring", "v3"],
            "--af-packet-ring needs --iface with --io af_packet",
        ),
        (
            &[
                "ttcp",
                "recv",
                "--pcap-in",
                "/nonexistent.pcap",
                "--af-packet-ring",
                "v2",
            ],
            "--af-packet-ring needs --iface with --io af_packet",
        ),
    ];
    for (args, want) in cases {
        let all: Vec<&str> = args.iter().chain(&ip).copied().collect();
        let out = rsstack(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{all:?} printed: {err}");
        assert!(
            err.starts_with("rsstack: ") && err.contains(want),
            "{all:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{all:?}");
    }
}
