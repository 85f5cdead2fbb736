//! End-to-end checks of `rsstack rss …` through the real binary: the published verification
//! vectors, the output format other tools read, and exit status 2 on bad input.

use std::process::{Command, Output};

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

/// The `name: value` line for `name`, if present.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(": ")))
}

/// Microsoft's "Verifying the RSS Hash Calculation" vectors (default key):
/// (source, destination, address-only hash, 4-tuple hash).
const VECTORS: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "66.9.149.187",
        2794,
        "161.142.100.80",
        1766,
        0x323e_8fc2,
        0x51cc_c178,
    ),
    (
        "199.92.111.2",
        14230,
        "65.69.140.83",
        4739,
        0xd718_262a,
        0xc626_b0ea,
    ),
    (
        "24.19.198.95",
        12898,
        "12.22.207.184",
        38024,
        0xd2d0_a5de,
        0x5c2b_394a,
    ),
    (
        "38.27.205.30",
        48228,
        "209.142.163.6",
        2217,
        0x8298_9176,
        0xafc7_327f,
    ),
    (
        "153.39.163.191",
        44251,
        "202.188.127.2",
        1303,
        0x5d18_09c5,
        0x10e8_28a2,
    ),
    (
        "3ffe:2501:200:1fff::7",
        2794,
        "3ffe:2501:200:3::1",
        1766,
        0x2cc1_8cd5,
        0x4020_7d3d,
    ),
    (
        "3ffe:501:8::260:97ff:fe40:efab",
        14230,
        "ff02::1",
        4739,
        0x0f0c_461c,
        0xdde5_1bbf,
    ),
    (
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        44251,
        "fe80::200:f8ff:fe21:67cf",
        38024,
        0x4b61_e985,
        0x02d1_feef,
    ),
];

fn with_port(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

#[test]
fn hash_prints_every_published_verification_value() {
    for &(src, sport, dst, dport, addr_hash, tuple_hash) in VECTORS {
        let out = stdout_of(&["rss", "hash", "--src", src, "--dst", dst]);
        assert_eq!(
            field(&out, "hash"),
            Some(format!("0x{addr_hash:08x}").as_str()),
            "{src} -> {dst}"
        );
        let (s, d) = (with_port(src, sport), with_port(dst, dport));
        let out = stdout_of(&["rss", "hash", "--src", &s, "--dst", &d]);
        assert_eq!(
            field(&out, "hash"),
            Some(format!("0x{tuple_hash:08x}").as_str()),
            "{s} -> {d}"
        );
    }
}

#[test]
fn hash_reports_reta_index_as_low_bits_and_the_queue_round_robin() {
    let out = stdout_of(&[
        "rss",
        "hash",
        "--src",
        "66.9.149.187:2794",
        "--dst",
        "161.142.100.80:1766",
        "--reta-size",
        "128",
        "--queues",
        "4",
    ]);
    // 0x51ccc178 & 127 = 0x78 = 120; entry 120 of an `equal 4` table is queue 120 % 4 = 0.
    assert_eq!(field(&out, "reta_index"), Some("120"));
    assert_eq!(field(&out, "queue"), Some("0"));
}

#[test]
fn symmetric_hash_is_the_same_in_both_directions() {
    for how in ["key", "xor"] {
        let a = stdout_of(&[
            "rss",
            "hash",
            "--src",
            "10.0.0.1:1234",
            "--dst",
            "10.0.0.2:80",
            "--symmetric",
            how,
        ]);
        let b = stdout_of(&[
            "rss",
            "hash",
            "--src",
            "10.0.0.2:80",
            "--dst",
            "10.0.0.1:1234",
            "--symmetric",
            how,
        ]);
        assert_eq!(field(&a, "hash"), field(&b, "hash"), "--symmetric {how}");
    }
}

#[test]
fn spread_reports_counts_that_add_up_and_a_small_imbalance() {
    let out = stdout_of(&[
        "rss", "spread", "--flows", "100000", "--queues", "8", "--seed", "7",
    ]);
    let total: u64 = out
        .lines()
        .filter(|l| l.starts_with("queue "))
        .map(|l| {
            let count = l
                .split(": ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .expect("count");
            count.parse::<u64>().expect("number")
        })
        .sum();
    assert_eq!(total, 100_000);
    let imbalance: f64 = field(&out, "imbalance_max_over_mean")
        .expect("imbalance line")
        .parse()
        .expect("float");
    assert!((1.0..=1.05).contains(&imbalance), "imbalance {imbalance}");
}

#[test]
fn reta_prints_ethtool_layout() {
    let out = stdout_of(&["rss", "reta", "--queues", "4", "--reta-size", "16"]);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("RX flow hash indirection table for rsstack with 4 RX ring(s):")
    );
    assert_eq!(
        lines.next(),
        Some("    0:      0     1     2     3     0     1     2     3")
    );
    assert_eq!(
        lines.next(),
        Some("    8:      0     1     2     3     0     1     2     3")
    );
    assert!(out.contains("RSS hash key:\n6d:5a:56:da:"));
}

#[test]
fn reta_weights_leave_zero_weight_queues_empty() {
    let out = stdout_of(&["rss", "reta", "--weights", "6", "0", "8", "1"]);
    let entries: Vec<u32> = out
        .lines()
        .skip(1)
        .take_while(|l| l.contains(": ") && !l.starts_with("RSS"))
        .flat_map(|l| {
            l.split(": ")
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .map(|q| q.parse::<u32>().expect("queue"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(entries.len(), 128);
    assert!(!entries.contains(&1), "queue 1 has weight 0");
    let share = |q| entries.iter().filter(|&&e| e == q).count();
    // 128 entries in proportion 6:8:1 → about 51, 68, 9.
    assert!((50..=52).contains(&share(0)), "{}", share(0));
    assert!((67..=69).contains(&share(2)), "{}", share(2));
    assert!((8..=10).contains(&share(3)), "{}", share(3));
}

#[test]
fn bad_input_prints_one_line_and_exits_2() {
    let cases: &[&[&str]] = &[
        &["rss", "hash", "--src", "1.2.3", "--dst", "1.2.3.4"],
        &[
            "rss",
            "hash",
            "--src",
            "1.2.3.4:1",
            "--dst",
            "1.2.3.4:2",
            "--key",
            "abcd",
        ],
        &[
            "rss",
            "hash",
            "--src",
            "1.2.3.4:1",
            "--dst",
            "1.2.3.4:2",
            "--queues",
            "0",
        ],
        &[
            "rss",
            "hash",
            "--src",
            "1.2.3.4:1",
            "--dst",
            "1.2.3.4:2",
            "--reta-size",
            "100",
        ],
        &["rss", "hash", "--src", "1.2.3.4:1", "--dst", "1.2.3.4"],
        &["rss", "hash", "--src", "1.2.3.4", "--dst", "::1"],
        &["rss", "spread", "--queues", "0"],
        &["rss", "reta", "--weights", "0", "0"],
        &["rss", "frobnicate"],
        &[
            "rss",
            "hash",
            "--src",
            "1.2.3.4:1",
            "--dst",
            "1.2.3.4:2",
            "--symmetric",
            "xor",
            "--key",
            &"6d5a".repeat(20),
        ],
    ];
    for args in cases {
        let out = rsstack(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?} printed: {err}");
        assert!(err.starts_with("rsstack: "), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
