//! Flow steering on a live port against Linux peers (AF_PACKET over veth, two shards):
//! `--filter 'proto tcp dst-port 80 queue N'` puts every connection `wrk` and `curl` open on
//! shard N, whichever shard the kernel's fanout hands the frames to; and ATR keeps the
//! replies of `rsstack get`'s connection (opened by shard 0) on shard 0 although a rule sends
//! everything from the server's port to shard 1. Root only.

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, Offloads, PEER_V4, Topology, curl, need_tools, serial};
use testnet::tools::WrkReport;
use testnet::{Result, TempDir, check, require_root, sha256_file};

/// `key: value` of a summary, as text.
fn field<'a>(summary: &'a str, key: &str) -> &'a str {
    summary
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or("")
}

fn number(summary: &str, key: &str) -> u64 {
    field(summary, key).trim().parse().unwrap_or(0)
}

/// Per-shard figures of a `shard_*: a b` line.
fn per_shard(summary: &str, key: &str) -> Vec<u64> {
    field(summary, key)
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect()
}

fn filter_sends_linux_connections_to(shard: u16) -> Result<()> {
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let rule = format!("proto tcp dst-port 80 queue {shard}");
    let server = topo.serve(&[
        "serve",
        "http",
        "--port",
        "80",
        "--shards",
        "2",
        "--filter",
        &rule,
        "--live-view",
    ])?;
    let url = format!("http://{DUT_V4}/index.html");
    let stdout = topo.peer_run(
        "wrk",
        &["-c", "16", "-d", "2s", "-t", "2", &url],
        Duration::from_secs(60),
    )?;
    let r = WrkReport::parse(&stdout)?;
    check(
        r.requests > 100 && r.socket_errors() == 0 && r.non_2xx_3xx == 0,
        || format!("wrk with {rule:?}:\n{stdout}"),
    )?;
    let got = TempDir::new("steer")?;
    let (code, _) = curl(
        &topo,
        &url,
        &got.join("index.html"),
        Duration::from_secs(30),
    )?;
    check(code == 200, || format!("curl: status {code}"))?;
    let summary = server.stop()?;
    let conns = per_shard(&summary, "shard_connections_max");
    eprintln!(
        "{rule}: {} requests; connections per shard {conns:?}, rx packets per shard {:?}, \
         filter hits {}",
        r.requests,
        per_shard(&summary, "shard_rx_packets"),
        number(&summary, "filter_0_hits")
    );
    // The live view (stderr, once a second) shows packets per wake-up for each shard.
    check(
        summary
            .lines()
            .any(|l| l.contains("shard 1:") && l.contains("pkts/wake-up")),
        || format!("no live view line:\n{summary}"),
    )?;
    check(field(&summary, "filter_0") == rule, || {
        format!("the summary names another rule:\n{summary}")
    })?;
    check(number(&summary, "filter_0_hits") > r.requests, || {
        format!("the rule matched fewer packets than requests:\n{summary}")
    })?;
    let other = usize::from(1 - shard);
    check(
        conns.len() == 2 && conns[usize::from(shard)] > 0 && conns[other] == 0,
        || format!("connections per shard {conns:?}, all expected on shard {shard}:\n{summary}"),
    )
}

#[test]
fn a_filter_sends_every_linux_connection_to_the_chosen_shard() -> Result<()> {
    if !require_root("a_filter_sends_every_linux_connection_to_the_chosen_shard") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["wrk", "curl"])?;
    filter_sends_linux_connections_to(1)?;
    filter_sends_linux_connections_to(0)
}

#[test]
fn atr_keeps_a_get_on_its_shard_when_a_rule_sends_the_servers_port_elsewhere() -> Result<()> {
    if !require_root("atr_keeps_a_get_on_its_shard_when_a_rule_sends_the_servers_port_elsewhere") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["python3"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let site = TempDir::new("atrsite")?;
    let file = site.join("4m.bin");
    testnet::write_random_file(&file, 4 << 20, 0xa7f)?;
    let dir = site.path().to_string_lossy().into_owned();
    let mut py = topo.peer.spawn(
        "python3",
        &[
            "-u",
            "-m",
            "http.server",
            "8080",
            "--bind",
            PEER_V4,
            "--directory",
            &dir,
        ],
    )?;
    py.wait_for_line("Serving HTTP", Duration::from_secs(20))?;
    let got = TempDir::new("atrget")?;
    let out = got.join("4m.bin");
    let out_arg = out.to_string_lossy().into_owned();
    let url = format!("http://{PEER_V4}:8080/4m.bin");
    // `get` opens its connection on shard 0; the rule would hand every reply to shard 1.
    let run = topo.run_rsstack(
        &[
            "get",
            &url,
            "--output",
            &out_arg,
            "--timeout",
            "60",
            "--shards",
            "2",
            "--filter",
            "proto tcp src-port 8080 queue 1",
        ],
        Duration::from_secs(90),
    )?;
    let report = run.combined();
    let (want, have) = (sha256_file(&file)?, sha256_file(&out)?);
    check(want == have, || format!("sha256 {have}, want {want}"))?;
    eprintln!(
        "get over a rule against its replies: atr_hits {}, filter_0_hits {}",
        number(&report, "atr_hits"),
        number(&report, "filter_0_hits")
    );
    check(number(&report, "atr_learned") >= 2, || {
        format!("both shards should record the open:\n{report}")
    })?;
    // Every reply of the connection met the ATR entry before the rule: 4 MiB in frames of
    // at most 64 KiB (the peer's GSO super-frames) is at least 64 of them; the rule saw none.
    check(number(&report, "atr_hits") >= 64, || {
        format!("ATR steered too few replies:\n{report}")
    })?;
    check(number(&report, "filter_0_hits") == 0, || {
        format!("the rule took replies ATR should have:\n{report}")
    })
}
