//! `rsstack tune` through the real binary: the script it prints for a recorded machine, usage
//! errors, and — root only, in a throwaway network namespace on a 2-queue veth — a dry run, an
//! `--apply` that applies what veth supports and reports the rest as unsupported, and a
//! `--revert` that leaves every observable setting as it was (issue 15's Done-when).

#[path = "../../topo/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::Unpacked;
use testnet::{Netns, Result, TempDir, check, have_program, require_root};

const TWO_NODE: &str = "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2";
const BIN: &str = env!("CARGO_BIN_EXE_rsstack");
/// Every rsstack run inside the namespace is bounded by this.
const LIMIT: Duration = Duration::from_secs(60);

fn rsstack(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the rsstack binary runs")
}

#[test]
fn recorded_two_node_machine_gets_a_script_pinning_queue_irqs_to_node_0() {
    let m = Unpacked::new(TWO_NODE);
    let root = m.root.to_str().unwrap();
    let out = rsstack(&["tune", "eth0", "--sysfs-root", root, "--policy", "closest"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"));
    for line in [
        "ethtool -L eth0 combined 8",
        "ethtool -X eth0 weight 1 1 1 1 1 1 1 1",
        "ethtool -C eth0 adaptive-rx on adaptive-tx on",
        "ethtool -K eth0 gro on",
        "systemctl stop irqbalance",
        "echo 7 > /proc/irq/108/smp_affinity_list",
        "echo 0 > /sys/class/net/eth0/queues/rx-7/rps_cpus",
    ] {
        assert!(
            script.lines().any(|l| l == line),
            "no {line:?} in:\n{script}"
        );
    }
    // A shell accepts it.
    let check = Command::new("sh")
        .arg("-n")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    assert!(check.success());
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["tune"][..],
        &["tune", "lo", "--queues", "0"],
        &["tune", "lo", "--moderation", "fast"],
        &["tune", "lo", "--policy", "nearest"],
        &["tune", "no-such-if0"],
        &["tune", "lo", "--apply", "--revert", "x.json"],
        &["tune", "lo", "--sysfs-root", "/nonexistent"],
        &["tune", "--revert", "/nonexistent/revert.json"],
    ] {
        let out = rsstack(args);
        assert_eq!(out.status.code(), Some(2), "rsstack {args:?}");
        assert!(out.stdout.is_empty(), "rsstack {args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "rsstack {args:?}: {err}");
    }
}

/// What the test compares before and after: each queue's RPS and XPS masks, the GRO state and
/// the channel counts of `dev` in `ns`.
fn observable(ns: &Netns, dev: &str) -> Result<Vec<String>> {
    let mut seen = Vec::new();
    let queues = ns.run_ok("ls", &[&format!("/sys/class/net/{dev}/queues")])?;
    for q in queues.stdout.split_whitespace() {
        let file = if q.starts_with("rx-") {
            "rps_cpus"
        } else {
            "xps_cpus"
        };
        let v = ns.run_ok("cat", &[&format!("/sys/class/net/{dev}/queues/{q}/{file}")])?;
        seen.push(format!("{q} {file} {}", v.stdout.trim()));
    }
    let k = ns.run_ok("ethtool", &["-k", dev])?;
    seen.extend(
        k.stdout
            .lines()
            .filter(|l| l.starts_with("generic-receive-offload") || l.starts_with("large-receive"))
            .map(str::to_string),
    );
    let l = ns.run_ok("ethtool", &["-l", dev])?;
    let current = l
        .stdout
        .split("Current hardware settings:")
        .nth(1)
        .unwrap_or("");
    seen.push(format!(
        "channels {}",
        current.split_whitespace().collect::<Vec<_>>().join(" ")
    ));
    Ok(seen)
}

fn apply_then_revert_on_veth() -> Result<()> {
    check(have_program("ethtool") && have_program("ip"), || {
        "ethtool and ip are needed: run scripts/test.sh's system packages step".into()
    })?;
    let ns = Netns::create("tune")?;
    ns.run_ok(
        "ip",
        &[
            "link",
            "add",
            "va",
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
            "type",
            "veth",
            "peer",
            "name",
            "vb",
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
        ],
    )?;
    // One channel in use of two, so that `--queues 2` changes the channel count.
    ns.run_ok("ethtool", &["-L", "va", "rx", "1", "tx", "1"])?;
    let before = observable(&ns, "va")?;

    let dry = ns.run(
        BIN,
        &["tune", "va", "--policy", "closest", "--queues", "2"],
        LIMIT,
    )?;
    check(dry.status.success(), || dry.combined())?;
    check(dry.stdout.starts_with("#!/bin/sh\n"), || dry.combined())?;
    check(
        dry.stdout.lines().any(|l| l == "ethtool -L va rx 2 tx 2"),
        || format!("no veth-style channels line:\n{}", dry.stdout),
    )?;
    let syntax = testnet::run(Command::new("sh").args(["-n", "-c", &dry.stdout]), LIMIT)?;
    check(syntax.status.success(), || syntax.combined())?;
    check(observable(&ns, "va")? == before, || {
        "a dry run changed the device".into()
    })?;
    // More queues than the device has channels: a usage error.
    let too_many = ns.run(BIN, &["tune", "va", "--queues", "3"], LIMIT)?;
    check(too_many.status.code() == Some(2), || too_many.combined())?;
    check(too_many.stderr.contains("at most 2 channel(s)"), || {
        too_many.combined()
    })?;

    let dir = TempDir::new("tune")?;
    let save = dir.join("va.revert.json");
    let save = save.to_str().unwrap();
    let applied = ns.run(
        BIN,
        &[
            "tune", "va", "--policy", "closest", "--queues", "2", "--apply", "--save", save,
        ],
        LIMIT,
    )?;
    check(applied.status.success(), || applied.combined())?;
    let report = &applied.stdout;
    let outcome = |name: &str| {
        report
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .and_then(|l| l.split_whitespace().nth(2))
            .unwrap_or("missing")
            .to_string()
    };
    for (step, want) in [
        ("channels", "applied"),
        ("reta", "unsupported"),
        ("moderation", "unsupported"),
        ("gro", "applied"),
    ] {
        check(outcome(step) == want, || {
            format!("{step}: want {want}:\n{report}")
        })?;
    }
    check(report.contains("0 failed"), || report.clone())?;
    let tuned = observable(&ns, "va")?;
    check(tuned != before, || {
        format!("--apply changed nothing:\n{report}")
    })?;
    check(
        tuned
            .iter()
            .any(|l| l.starts_with("generic-receive-offload: on")),
        || format!("GRO not on after --apply: {tuned:?}"),
    )?;
    check(tuned.iter().any(|l| l.starts_with("rx-1 ")), || {
        format!("no second queue after --apply: {tuned:?}")
    })?;

    // A second --apply would overwrite the saved settings: refused.
    let again = ns.run(BIN, &["tune", "va", "--apply", "--save", save], LIMIT)?;
    check(again.status.code() == Some(2), || again.combined())?;

    let reverted = ns.run(BIN, &["tune", "--revert", save], LIMIT)?;
    check(reverted.status.success(), || reverted.combined())?;
    let after = observable(&ns, "va")?;
    check(after == before, || {
        format!(
            "--revert left the device changed:\nbefore {before:?}\nafter  {after:?}\n{}\n{}",
            report, reverted.stdout
        )
    })
}

#[test]
fn apply_then_revert_on_veth_leaves_the_device_as_it_was() {
    if !require_root("apply_then_revert_on_veth_leaves_the_device_as_it_was") {
        return;
    }
    if let Err(e) = apply_then_revert_on_veth() {
        panic!("{e}");
    }
}

#[test]
fn apply_without_root_is_refused_and_changes_nothing() {
    if !require_root("apply_without_root_is_refused_and_changes_nothing") {
        return;
    }
    assert!(have_program("setpriv"), "setpriv (util-linux) is needed");
    let dir = TempDir::new("tune-nonroot").unwrap();
    let save = dir.join("lo.revert.json");
    let out = testnet::run(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(["tune", "lo", "--apply", "--save", save.to_str().unwrap()]),
        LIMIT,
    )
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", out.combined());
    assert!(out.stderr.contains("needs root"), "{}", out.combined());
    assert!(out.stdout.is_empty());
    assert!(!save.exists(), "nothing saved, nothing applied");
}
