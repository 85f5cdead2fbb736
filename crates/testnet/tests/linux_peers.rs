//! The helpers against the real kernel and Linux tools, Linux talking to Linux: what the
//! rsstack interop tests rely on (namespaces, veth, loss rules, bounded children, parsers)
//! works on this machine. Root only (see `testnet::require_root`).

use std::process::Command;
use std::time::Duration;

use testnet::tools::{WrkReport, ping_counts};
use testnet::{Netns, Result, TempDir, Veth, check, frames, have_program, require_root};

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
    testnet::write_random_file(&file, 64 << 20, 11)?;
    // 1 % loss must bite for the check below to mean anything. The sender's TCP builds
    // GSO-sized skbs whatever the device offers, and OUTPUT sees them before software
    // segmentation; curl's kernel acknowledges a batch of segments at a time. So 16 MB make
    // only 700 to 1,200 packets at the rules (a run without a drop is 1 in 1,000 to 50,000);
    // 64 MB make about four times that. Offloads off keeps the frames on the veth MTU-sized.
    a.offloads_off("veth0")?;
    b.offloads_off("veth0")?;
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
    a.expect_random_loss_dropped()?;
    // The counting rule sees every packet the drop rule judges.
    let counts = a.random_loss_counts()?;
    eprintln!(
        "loss rules: {} seen, {} dropped",
        counts.seen, counts.dropped
    );
    check(counts.seen >= 1500, || {
        format!(
            "the loss rules saw only {} packets:\n{}",
            counts.seen, counts.listing
        )
    })?;
    if testnet::want_program(
        "curl_fetches_an_intact_file_from_python_under_one_percent_random_loss",
        "wrk",
    ) {
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

/// rx_packets of `dev` in `ns`.
fn rx_packets(ns: &Netns, dev: &str) -> Result<u64> {
    let out = ns.run_ok(
        "cat",
        &[&format!("/sys/class/net/{dev}/statistics/rx_packets")],
    )?;
    out.stdout
        .trim()
        .parse()
        .map_err(|_| testnet::Error::Check(format!("rx_packets: {:?}", out.stdout)))
}

#[test]
fn tcpreplay_puts_every_malformed_frame_on_the_wire() -> Result<()> {
    if !require_root("tcpreplay_puts_every_malformed_frame_on_the_wire") {
        return Ok(());
    }
    check(have_program("tcpreplay"), || {
        "tcpreplay is not installed (scripts/test.sh installs it)".into()
    })?;
    let (a, b, _veth) = pair("hreplay")?;
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        ns.sysctl("net.ipv6.conf.veth0.disable_ipv6", "1")?;
    }
    let mac = |ns: &Netns| -> Result<[u8; 6]> {
        let text = ns.mac_of("veth0")?;
        frames::parse_mac(&text).ok_or(testnet::Error::Check(text))
    };
    let target = frames::Target {
        dst_mac: mac(&b)?,
        src_mac: mac(&a)?,
        dst_ip: "10.66.0.2".parse().expect("address"),
        src_ip: "10.66.0.1".parse().expect("address"),
        dst_port: 80,
    };
    let mut all = Vec::new();
    for kind in frames::Kind::ALL {
        all.extend(kind.frames(&target, 10, 5));
    }
    let dir = TempDir::new("hreplay")?;
    let pcap = dir.join("bad.pcap");
    frames::write_pcap(&pcap, &all)?;
    let before = rx_packets(&b, "veth0")?;
    let replay = a.run_ok(
        "tcpreplay",
        &[
            "-q",
            "-i",
            "veth0",
            "--pps",
            "20000",
            &pcap.to_string_lossy(),
        ],
    )?;
    let after = rx_packets(&b, "veth0")?;
    check(after - before >= all.len() as u64, || {
        format!(
            "{} frames replayed, {} received; tcpreplay: {}",
            all.len(),
            after - before,
            replay.combined()
        )
    })
}
