//! The helpers against the real kernel and Linux tools, Linux talking to Linux: what the
//! rsstack interop tests rely on (namespaces, veth, loss rules, bounded children, parsers)
//! works on this machine. Root only (see `testnet::require_root`).

use std::process::Command;
use std::time::Duration;

use testnet::tools::{WrkReport, ping_counts};
use testnet::{Netns, Result, TempDir, Veth, check, have_program, require_root};

/// Two namespaces joined by a veth pair, 10.66.0.1 (`a`) and 10.66.0.2 (`b`).
fn pair(tag: &str) -> Result<(Netns, Netns, Veth)> {
    let a = Netns::create(tag)?;
    let b = Netns::create(tag)?;
    let veth = Veth::create(&a, "veth0", &b, "veth0")?;
    a.add_addr("veth0", "10.66.0.1/24")?;
    b.add_addr("veth0", "10.66.0.2/24")?;
    a.link_up("veth0")?;
    b.link_up("veth0")?;
    Ok((a, b, veth))
}

fn netns_exists(name: &str) -> bool {
    let out = testnet::run(
        Command::new("ip").args(["netns", "list"]),
        Duration::from_secs(10),
    )
    .expect("ip netns list");
    out.stdout
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

#[test]
fn namespaces_and_their_processes_are_gone_after_drop() -> Result<()> {
    if !require_root("namespaces_and_their_processes_are_gone_after_drop") {
        return Ok(());
    }
    let (a, b, veth) = pair("hdrop")?;
    let (name_a, name_b) = (a.name().to_owned(), b.name().to_owned());
    let out = b.run_ok("ping", &["-c", "2", "-i", "0.2", "-W", "2", "10.66.0.1"])?;
    check(ping_counts(&out.stdout)? == (2, 2), || out.stdout.clone())?;
    // A process left running in the namespace: Netns's drop kills it.
    let sleeper = a.spawn("sleep", &["60"])?;
    let pid = sleeper.id();
    std::mem::forget(sleeper);
    drop(veth);
    drop(a);
    drop(b);
    check(!netns_exists(&name_a) && !netns_exists(&name_b), || {
        "namespaces still listed".into()
    })?;
    // The forgotten child is a zombie of this process at most, never still running.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    check(state.is_empty() || state.contains(") Z "), || {
        format!("process {pid} survived: {state}")
    })
}

#[test]
fn curl_fetches_an_intact_file_from_python_under_one_percent_random_loss() -> Result<()> {
    if !require_root("curl_fetches_an_intact_file_from_python_under_one_percent_random_loss") {
        return Ok(());
    }
    for tool in ["curl", "python3", "iptables"] {
        check(have_program(tool), || {
            format!("{tool} is not installed (scripts/test.sh installs it)")
        })?;
    }
    let (a, b, _veth) = pair("hcurl")?;
    let dir = TempDir::new("hcurl")?;
    let file = dir.join("f.bin");
    testnet::write_random_file(&file, 4 << 20, 11)?;
    a.add_random_loss(0.01)?;
    let mut server = a.spawn(
        "python3",
        &[
            "-u",
            "-m",
            "http.server",
            "8080",
            "--bind",
            "10.66.0.1",
            "--directory",
            &dir.path().to_string_lossy(),
        ],
    )?;
    server.wait_for_line("Serving HTTP", Duration::from_secs(20))?;
    let got = dir.join("got.bin");
    b.run_ok(
        "curl",
        &[
            "-sS",
            "--fail",
            "--max-time",
            "60",
            "-o",
            &got.to_string_lossy(),
            "http://10.66.0.1:8080/f.bin",
        ],
    )?;
    check(
        testnet::sha256_file(&got)? == testnet::sha256_file(&file)?,
        || "sha256 differs".into(),
    )?;
    check(a.random_loss_drops()? > 0, || {
        "the loss rules dropped nothing".into()
    })?;
    if have_program("wrk") {
        let out = b.run(
            "wrk",
            &[
                "-c",
                "10",
                "-d",
                "1s",
                "-t",
                "1",
                "http://10.66.0.1:8080/missing",
            ],
            Duration::from_secs(30),
        )?;
        let r = WrkReport::parse(&out.stdout)?;
        check(r.requests > 0 && r.non_2xx_3xx == r.requests, || {
            out.stdout.clone()
        })?;
    }
    Ok(())
}
