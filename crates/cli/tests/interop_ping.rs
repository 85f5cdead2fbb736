//! Linux `ping` and `ping -6` get echo replies from `rsstack serve` over TAP, AF_PACKET (its
//! default ring, and TPACKET_V3 blocks) and AF_XDP, and over AF_PACKET with 1 % random loss on
//! the Linux side. Root only; each test creates and removes its own namespaces (see `common`).

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, DUT_V6, Offloads, Topology, need_tools, serial};
use testnet::tools::ping_counts;
use testnet::{Result, check, require_root};

const PING_LIMIT: Duration = Duration::from_secs(30);

/// Pings rsstack `count` times over IPv4 and IPv6, one every `interval` seconds; returns the
/// replies (v4, v6).
fn ping_both(topo: &Topology, count: u32, interval: &str) -> Result<(u64, u64)> {
    let count = count.to_string();
    let mut replies = [0; 2];
    for (i, (flag, addr)) in [("-4", DUT_V4), ("-6", DUT_V6)].into_iter().enumerate() {
        let out = topo.peer.run(
            "ping",
            &[flag, "-c", &count, "-i", interval, "-W", "2", addr],
            PING_LIMIT,
        )?;
        let (sent, got) = ping_counts(&out.stdout)
            .map_err(|e| testnet::Error::Check(format!("{e}\n{}", out.combined())))?;
        check(sent.to_string() == count, || out.combined())?;
        replies[i] = got;
    }
    Ok((replies[0], replies[1]))
}

fn every_ping_answered(backend: Backend) -> Result<()> {
    let _serial = serial();
    need_tools(&["ping"])?;
    let topo = Topology::new(backend, Offloads::Default)?;
    let server = topo.serve(&["serve", "echo", "--port", "7"])?;
    let (v4, v6) = ping_both(&topo, 3, "0.1")?;
    check((v4, v6) == (3, 3), || {
        format!("{backend:?}: replies v4 {v4}/3, v6 {v6}/3")
    })?;
    let summary = server.stop()?;
    let words = backend.listening_words();
    check(
        summary
            .lines()
            .any(|l| l.contains("listening") && l.contains(&words)),
        || format!("the listening line does not name {words:?}:\n{summary}"),
    )?;
    let c = common::counters(&summary);
    // Six echo requests in and six replies out at least (plus ARP/ND).
    let (rx, tx) = (c.get("rx_frames"), c.get("tx_frames"));
    check(
        rx.is_some_and(|&n| n >= 6.0) && tx.is_some_and(|&n| n >= 6.0),
        || format!("the summary counts rx_frames {rx:?}, tx_frames {tx:?}:\n{summary}"),
    )?;
    // Ten pings a second cannot overrun a ring: the kernel's drop counter is read and zero.
    let kernel_drops = c.get("drop_rx_kernel");
    check(kernel_drops == Some(&0.0), || {
        format!("the summary reports drop_rx_kernel {kernel_drops:?}:\n{summary}")
    })
}

#[test]
fn linux_ping_v4_and_v6_get_replies_over_tap() -> Result<()> {
    if !require_root("linux_ping_v4_and_v6_get_replies_over_tap") {
        return Ok(());
    }
    every_ping_answered(Backend::Tap)
}

#[test]
fn linux_ping_v4_and_v6_get_replies_over_af_packet() -> Result<()> {
    if !require_root("linux_ping_v4_and_v6_get_replies_over_af_packet") {
        return Ok(());
    }
    every_ping_answered(Backend::AfPacket)
}

#[test]
fn linux_ping_v4_and_v6_get_replies_over_af_packet_tpacket_v3() -> Result<()> {
    if !require_root("linux_ping_v4_and_v6_get_replies_over_af_packet_tpacket_v3") {
        return Ok(());
    }
    every_ping_answered(Backend::AfPacketV3)
}

#[test]
fn linux_ping_v4_and_v6_get_replies_over_af_xdp() -> Result<()> {
    if !require_root("linux_ping_v4_and_v6_get_replies_over_af_xdp") {
        return Ok(());
    }
    every_ping_answered(Backend::AfXdp)
}

#[test]
fn linux_ping_gets_replies_over_af_packet_with_one_percent_loss() -> Result<()> {
    if !require_root("linux_ping_gets_replies_over_af_packet_with_one_percent_loss") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["ping", "iptables", "ip6tables"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    topo.peer.add_random_loss(0.01)?;
    let server = topo.serve(&["serve", "echo", "--port", "7"])?;
    // Each echo crosses the loss rules twice (≈2 % lost). 500 pings a family put ≈2,000
    // packets through the rules, so that none is dropped has probability 0.99^2000 ≈ 2e-9: a
    // run that lost nothing is a broken rule, not luck. Losing more than 30 of 500 (mean 10)
    // has probability below 1e-6. (20 pings, as before, lost nothing in ≈45 % of runs.)
    const PINGS: u32 = 500;
    let (v4, v6) = ping_both(&topo, PINGS, "0.01")?;
    let min = u64::from(PINGS) - 30;
    check(v4 >= min && v6 >= min, || {
        format!("replies v4 {v4}/{PINGS}, v6 {v6}/{PINGS} under 1 % loss")
    })?;
    topo.peer.expect_random_loss_dropped()?;
    let counts = topo.peer.random_loss_counts()?;
    let missing = 2 * u64::from(PINGS) - v4 - v6;
    // The rules saw the pings (each request on OUTPUT, each reply that came back on INPUT),
    // and every missing reply is one they dropped: rsstack itself lost none.
    check(counts.seen >= 2 * u64::from(PINGS) + v4 + v6, || {
        format!(
            "the loss rules saw only {} packets:\n{}",
            counts.seen, counts.listing
        )
    })?;
    check(missing <= counts.dropped, || {
        format!(
            "{missing} replies missing but the loss rules dropped only {}:\n{}",
            counts.dropped, counts.listing
        )
    })?;
    server.stop().map(drop)
}
