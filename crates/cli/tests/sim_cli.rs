//! `rsstack sim soak` through the real binary: the summary line, exit statuses, bad input.

use std::process::Command;

fn rsstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rsstack"))
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

#[test]
fn soak_prints_a_summary_line_and_exits_0_when_every_seed_passes() {
    let out = rsstack(&["sim", "soak", "--seeds", "3", "--workload", "bulk"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.lines().any(|l| l == "seeds: 3, failures: 0"), "{text}");
    assert!(
        text.contains("workload bulk: 3 seeds, 0 failures"),
        "{text}"
    );
}

#[test]
fn soak_rejects_bad_arguments_with_one_line_and_status_2() {
    for args in [
        &["sim", "soak", "--seeds", "0"][..],
        &["sim", "soak", "--workload", "nope"][..],
        &["sim", "soak", "--seeds", "x"][..],
    ] {
        let out = rsstack(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().count(),
            1,
            "{args:?}"
        );
    }
}
