//! `rsstack rfc2544 --io mem` end to end (no root): a short search over two frame sizes
//! through the in-process forwarder writes the table, a JSON document with every size and an
//! SVG chart, and `--compare` puts an earlier run beside it.

use std::process::Command;

fn rsstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

#[test]
fn mem_search_writes_table_json_and_svg() {
    let dir = std::env::temp_dir().join(format!("rsstack-rfc2544-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (json, svg) = (dir.join("a.json"), dir.join("b.svg"));
    let (json_s, svg_s) = (json.to_str().unwrap(), svg.to_str().unwrap());
    let base = [
        "rfc2544",
        "--io",
        "mem",
        "--sizes",
        "64,1518",
        "--trial-secs",
        "0.1",
        "--resolution-pct",
        "25",
    ];
    let mut a = base.to_vec();
    a.extend(["--label", "first", "--json", json_s]);
    let out = rsstack(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    for r in results {
        assert!(r["offered_max_fps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["zero_loss_fps"].as_f64().is_some());
    }
    let mut b = base.to_vec();
    b.extend(["--label", "second", "--compare", json_s, "--svg", svg_s]);
    let out = rsstack(&b);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("first fps") && table.contains("second fps"),
        "{table}"
    );
    let chart = std::fs::read_to_string(&svg).expect("svg");
    assert!(chart.starts_with("<svg") && chart.contains("first") && chart.contains("second"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--rate-fps`: one trial per size at that rate, no search; 2,000 frames/s through the
/// in-process forwarder lose nothing, so the table shows about that rate.
#[test]
fn fixed_rate_runs_one_trial_per_size() {
    let out = rsstack(&[
        "rfc2544",
        "--io",
        "mem",
        "--sizes",
        "64,512",
        "--trial-secs",
        "0.2",
        "--rate-fps",
        "2000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("fps offered").count(), 2, "{err}");
    assert!(!err.contains("generator max"), "no calibration: {err}");
    let table = String::from_utf8_lossy(&out.stdout);
    let rates: Vec<f64> = table
        .lines()
        .skip(1)
        .map(|l| {
            l.split('|')
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
        })
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(rates.len(), 2, "{table}");
    for r in rates {
        assert!((1800.0..=2200.0).contains(&r), "{table}");
    }
}

#[test]
fn bad_tester_input_exits_2() {
    for args in [
        vec!["rfc2544", "--io", "af_packet"],
        vec!["rfc2544", "--io", "mem", "--trial-secs", "0"],
        vec!["rfc2544", "--io", "mem", "--sizes", "63"],
        vec!["rfc2544", "--io", "mem", "--compare", "/nonexistent.json"],
        vec!["rfc2544", "--io", "mem", "--rate-fps", "0"],
        vec!["rfc2544", "--io", "mem", "--rate-fps", "NaN"],
    ] {
        let out = rsstack(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
