//! Linux HTTP clients against `rsstack serve http --dir` over AF_PACKET: `curl` fetches files
//! of 1 KB to 100 MB intact (SHA-256), gets a 404 for a missing file and `text/html` for
//! `index.html`; over IPv6 too (the listener serves every address of the host); `wrk -c 100 -d 10s -t 2` sees no socket error and no non-2xx answer. Each
//! again with 1 % random loss on the Linux side. These use the default ring; curl also fetches
//! 1 KB to 10 MB over the other one (`--af-packet-ring v3`). Root only.

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, DUT_V6, Offloads, Topology, curl, need_tools, serial, write_site};
use testnet::tools::WrkReport;
use testnet::{Result, TempDir, check, require_root, sha256_file};

/// Per-file curl limit: 100 MB at 10 MB/s is 10 s; loss recovery may take several times that.
const CURL_LIMIT: Duration = Duration::from_secs(120);

fn curl_files(loss: bool) -> Result<()> {
    let _serial = serial();
    need_tools(&["curl", "iptables"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    if loss {
        topo.peer.add_random_loss(0.01)?;
    }
    let site = TempDir::new("site")?;
    let files = write_site(site.path(), u64::MAX)?;
    let dir = site.path().to_string_lossy().into_owned();
    let mut server = topo.serve(&["serve", "http", "--dir", &dir, "--port", "80"])?;
    let got = TempDir::new("got")?;
    for (name, path) in &files {
        let out = got.join(name);
        let (code, _) = curl(&topo, &format!("http://{DUT_V4}/{name}"), &out, CURL_LIMIT)?;
        check(code == 200, || format!("GET /{name}: status {code}"))?;
        let (want, have) = (sha256_file(path)?, sha256_file(&out)?);
        check(want == have, || {
            format!("/{name}: sha256 {have}, want {want}")
        })?;
        server.still_running()?;
    }
    let out = got.join("missing");
    let (code, _) = curl(
        &topo,
        &format!("http://{DUT_V4}/no-such-file"),
        &out,
        CURL_LIMIT,
    )?;
    check(code == 404, || {
        format!("GET /no-such-file: status {code}, want 404")
    })?;
    let (code, ctype) = curl(
        &topo,
        &format!("http://{DUT_V4}/index.html"),
        &out,
        CURL_LIMIT,
    )?;
    check(code == 200 && ctype.starts_with("text/html"), || {
        format!("GET /index.html: status {code}, Content-Type {ctype:?}")
    })?;
    if loss {
        topo.peer.expect_random_loss_dropped()?;
    }
    server.stop().map(drop)
}

fn wrk_run(loss: bool) -> Result<()> {
    let _serial = serial();
    need_tools(&["wrk", "iptables"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    if loss {
        topo.peer.add_random_loss(0.01)?;
    }
    let site = TempDir::new("site")?;
    write_site(site.path(), 1 << 10)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&["serve", "http", "--dir", &dir, "--port", "80"])?;
    let url = format!("http://{DUT_V4}/1k.bin");
    // Under loss a lost SYN costs Linux a 1 s retransmission timeout, a second loss 3 s: wrk's
    // default 2 s request timeout would count that as an error of the network, not of
    // rsstack, so the loss run allows 10 s.
    let mut args = vec!["-c", "100", "-d", "10s", "-t", "2"];
    if loss {
        args.extend(["--timeout", "10s"]);
    }
    args.push(&url);
    let stdout = topo.peer_run("wrk", &args, Duration::from_secs(60))?;
    let r = WrkReport::parse(&stdout)?;
    eprintln!(
        "wrk (loss {loss}): {} requests, {:.0}/s",
        r.requests, r.requests_per_sec
    );
    check(r.requests > 100, || format!("too few requests:\n{stdout}"))?;
    check(r.socket_errors() == 0, || {
        format!("socket errors:\n{stdout}")
    })?;
    check(r.non_2xx_3xx == 0, || format!("non-2xx answers:\n{stdout}"))?;
    if loss {
        topo.peer.expect_random_loss_dropped()?;
    }
    server.stop().map(drop)
}

#[test]
fn curl_fetches_1k_to_100m_intact_with_404_and_content_type() -> Result<()> {
    if !require_root("curl_fetches_1k_to_100m_intact_with_404_and_content_type") {
        return Ok(());
    }
    curl_files(false)
}

#[test]
fn curl_fetches_1k_to_100m_intact_with_one_percent_loss() -> Result<()> {
    if !require_root("curl_fetches_1k_to_100m_intact_with_one_percent_loss") {
        return Ok(());
    }
    curl_files(true)
}

#[test]
fn wrk_100_connections_for_10s_see_no_socket_error_and_no_non_2xx() -> Result<()> {
    if !require_root("wrk_100_connections_for_10s_see_no_socket_error_and_no_non_2xx") {
        return Ok(());
    }
    wrk_run(false)
}

#[test]
fn wrk_100_connections_see_no_socket_error_with_one_percent_loss() -> Result<()> {
    if !require_root("wrk_100_connections_see_no_socket_error_with_one_percent_loss") {
        return Ok(());
    }
    wrk_run(true)
}

/// Serves the site's files up to `max_bytes` over `backend` and has curl fetch each from
/// `host` (an IPv4 address, or an IPv6 one in brackets): status 200 and the same SHA-256.
/// Returns what rsstack printed by the time it stopped.
fn serve_and_fetch_intact(backend: Backend, max_bytes: u64, host: &str) -> Result<String> {
    let _serial = serial();
    need_tools(&["curl"])?;
    let topo = Topology::new(backend, Offloads::Default)?;
    let site = TempDir::new("site")?;
    let files = write_site(site.path(), max_bytes)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&["serve", "http", "--dir", &dir, "--port", "80"])?;
    let got = TempDir::new("got")?;
    for (name, path) in &files {
        let out = got.join(name);
        let url = format!("http://{host}/{name}");
        let (code, _) = curl(&topo, &url, &out, CURL_LIMIT)?;
        check(code == 200, || format!("GET {url}: status {code}"))?;
        check(sha256_file(path)? == sha256_file(&out)?, || {
            format!("GET {url}: sha256 differs")
        })?;
    }
    server.stop()
}

#[test]
fn curl_over_ipv6_fetches_1m_intact() -> Result<()> {
    if !require_root("curl_over_ipv6_fetches_1m_intact") {
        return Ok(());
    }
    serve_and_fetch_intact(Backend::AfPacket, 1 << 20, &format!("[{DUT_V6}]")).map(drop)
}

/// The AF_PACKET ring that is not the default (TPACKET_V3 blocks) serves too: 1 KB to 10 MB
/// intact, and the `listening` line names the ring.
#[test]
fn curl_over_af_packet_tpacket_v3_fetches_1k_to_10m_intact() -> Result<()> {
    if !require_root("curl_over_af_packet_tpacket_v3_fetches_1k_to_10m_intact") {
        return Ok(());
    }
    let summary = serve_and_fetch_intact(Backend::AfPacketV3, 10 << 20, DUT_V4)?;
    check(
        summary.contains("(af_packet veth1 tpacket_v3, 1 shards"),
        || format!("rsstack did not run TPACKET_V3:\n{summary}"),
    )
}

/// Two shards behind AF_PACKET's fanout group: connections land on either shard (frames a
/// shard does not own are forwarded to the owner), and both serve.
#[test]
fn two_shards_over_af_packet_fanout_serve_curl_and_wrk() -> Result<()> {
    if !require_root("two_shards_over_af_packet_fanout_serve_curl_and_wrk") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["curl", "wrk"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let site = TempDir::new("site")?;
    let files = write_site(site.path(), 10 << 20)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&[
        "serve", "http", "--dir", &dir, "--port", "80", "--shards", "2",
    ])?;
    let got = TempDir::new("got")?;
    for (name, path) in &files {
        let out = got.join(name);
        let (code, _) = curl(&topo, &format!("http://{DUT_V4}/{name}"), &out, CURL_LIMIT)?;
        check(code == 200, || format!("GET /{name}: status {code}"))?;
        check(sha256_file(path)? == sha256_file(&out)?, || {
            format!("/{name}: sha256 differs")
        })?;
    }
    let url = format!("http://{DUT_V4}/1k.bin");
    let stdout = topo.peer_run(
        "wrk",
        &["-c", "100", "-d", "3s", "-t", "2", &url],
        Duration::from_secs(60),
    )?;
    let r = WrkReport::parse(&stdout)?;
    eprintln!(
        "wrk, 2 shards: {} requests, {:.0}/s",
        r.requests, r.requests_per_sec
    );
    check(
        r.requests > 100 && r.socket_errors() == 0 && r.non_2xx_3xx == 0,
        || format!("wrk against 2 shards:\n{stdout}"),
    )?;
    let summary = server.stop()?;
    let shards_line = summary
        .lines()
        .find(|l| l.contains("listening"))
        .unwrap_or("");
    check(shards_line.contains("2 shards"), || {
        format!("rsstack did not run 2 shards:\n{summary}")
    })
}

/// Two shards behind AF_PACKET's fanout group with live rebalancing at any imbalance: buckets
/// move between the shards' software RETAs every 20 ms while wrk keeps 100 connections busy
/// and curl fetches a 10 MB file; every connection's bytes arrive intact and nothing fails.
#[test]
fn two_shards_over_af_packet_rebalancing_live_lose_no_request_and_no_byte() -> Result<()> {
    if !require_root("two_shards_over_af_packet_rebalancing_live_lose_no_request_and_no_byte") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["curl", "wrk"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let site = TempDir::new("site")?;
    let files = write_site(site.path(), 10 << 20)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&[
        "serve",
        "http",
        "--dir",
        &dir,
        "--port",
        "80",
        "--shards",
        "2",
        "--rebalance",
        "--period-ms",
        "20",
        "--imbalance-threshold",
        "1.0",
    ])?;
    let url = format!("http://{DUT_V4}/1k.bin");
    let stdout = topo.peer_run(
        "wrk",
        &["-c", "100", "-d", "3s", "-t", "2", &url],
        Duration::from_secs(60),
    )?;
    let r = WrkReport::parse(&stdout)?;
    check(
        r.requests > 100 && r.socket_errors() == 0 && r.non_2xx_3xx == 0,
        || format!("wrk against 2 rebalancing shards:\n{stdout}"),
    )?;
    let got = TempDir::new("got")?;
    for (name, path) in &files {
        let out = got.join(name);
        let (code, _) = curl(&topo, &format!("http://{DUT_V4}/{name}"), &out, CURL_LIMIT)?;
        check(code == 200, || format!("GET /{name}: status {code}"))?;
        check(sha256_file(path)? == sha256_file(&out)?, || {
            format!("/{name}: sha256 differs")
        })?;
    }
    let summary = server.stop()?;
    let value = |key: &str| -> u64 {
        summary
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")?.trim().parse().ok())
            .unwrap_or(0)
    };
    eprintln!(
        "wrk, 2 rebalancing shards: {} requests; {} bucket moves, {} connections migrated",
        r.requests,
        value("rebalance_bucket_moves"),
        value("rebalance_connections_migrated")
    );
    check(value("rebalance_periods") > 0, || {
        format!("the rebalancer never ran:\n{summary}")
    })?;
    check(value("rebalance_bucket_moves") > 0, || {
        format!("no bucket moved at threshold 1.0:\n{summary}")
    })?;
    check(value("rebalance_import_failed") == 0, || {
        format!("an import failed:\n{summary}")
    })
}
