//! Bulk TCP both ways between rsstack and Linux over AF_PACKET:
//!
//! - Linux `iperf` (iperf2) client → `rsstack serve discard`;
//! - `rsstack ttcp send` → a Linux `socat` sink writing a file: every byte arrives, in the
//!   ttcp pattern;
//! - `rsstack get` fetching 10 MB from a Linux HTTP server (`python3 -m http.server`),
//!   SHA-256 checked;
//! - Linux `nc` sending 16 MB into `rsstack ttcp recv`, which reports every byte;
//!
//! each with the peer's offloads as veth sets them (TSO, GSO, checksum offload on), again with
//! 1 % random loss on the Linux side, and again with the offloads off. Root only.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Backend, DUT_V4, Offloads, PEER_V4, Topology, need_tools, serial};
use testnet::tools::{IperfReport, numbers};
use testnet::{Error, Result, TempDir, check, require_root, sha256_file};

const TTCP_BYTES: u64 = 16 << 20;
const GET_BYTES: u64 = 10 << 20;
/// What the Linux peer sends in a loss run where rsstack receives. The loss rules see the
/// sender's skbs before segmentation (~64 KB each, TCP builds them whatever the device
/// offers) and rsstack's ACKs, one per two GRO-merged segments: about 24 packets a MB. At
/// 1 % loss, 10 MB (~240 packets) pass without a single drop in one run of ten; 128 MB make
/// ~3,000 packets, so every run loses some.
const LOSS_RUN_BYTES: u64 = 128 << 20;

/// Waits until something listens on TCP `port` in the peer namespace.
fn wait_listening(topo: &Topology, port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let filter = format!("sport = :{port}");
    loop {
        let out = topo
            .peer
            .run("ss", &["-Hltn", &filter], Duration::from_secs(10))?;
        if !out.stdout.trim().is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Check(format!("nothing listens on port {port}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `iperf -c rsstack -p 5001 -t 5` into `rsstack serve discard`. Returns iperf's report and
/// the average size in bytes of the frames rsstack received (its summary's
/// `rx_bytes / rx_frames`).
fn iperf_into_discard(topo: &Topology) -> Result<(IperfReport, f64)> {
    let server = topo.serve(&["serve", "discard", "--port", "5001"])?;
    let stdout = topo.peer_run(
        "iperf",
        &["-c", DUT_V4, "-p", "5001", "-t", "5", "-y", "C"],
        Duration::from_secs(60),
    )?;
    let r = IperfReport::parse_csv(&stdout)?;
    eprintln!(
        "iperf → rsstack discard: {} bytes, {:.1} Mbit/s",
        r.bytes,
        r.bits_per_sec / 1e6
    );
    check(r.bytes > 1 << 20, || {
        format!("iperf moved too little:\n{stdout}")
    })?;
    let text = server.stop()?;
    let summary = numbers(&text);
    let avg_rx_frame_bytes = match (summary.get("rx_bytes"), summary.get("rx_frames")) {
        (Some(&b), Some(&f)) if f > 0.0 => b / f,
        _ => {
            return Err(Error::Check(format!(
                "the summary lacks rx_bytes or rx_frames:\n{text}"
            )));
        }
    };
    eprintln!("  average frame received by rsstack: {avg_rx_frame_bytes:.0} bytes");
    Ok((r, avg_rx_frame_bytes))
}

/// The largest frame a peer without TSO/GSO sends on a 1500-byte MTU.
const MAX_UNSEGMENTED_FRAME_BYTES: f64 = 1514.0;

/// `rsstack ttcp send --counters` into `socat -u TCP-LISTEN:5001 OPEN:file`: the file holds
/// exactly the bytes sent, each `offset % 251` (the ttcp pattern). Returns the report and
/// counters rsstack printed.
fn ttcp_into_socat(topo: &Topology) -> Result<BTreeMap<String, f64>> {
    let dir = TempDir::new("ttcp")?;
    let sink = dir.join("sink.bin");
    let sink_arg = format!("OPEN:{},creat,trunc", sink.display());
    let socat = topo
        .peer
        .spawn("socat", &["-u", "TCP-LISTEN:5001,reuseaddr", &sink_arg])?;
    wait_listening(topo, 5001)?;
    let to = format!("{PEER_V4}:5001");
    let bytes = TTCP_BYTES.to_string();
    let out = topo.run_rsstack(
        &[
            "ttcp",
            "send",
            "--to",
            &to,
            "--bytes",
            &bytes,
            "--conns",
            "1",
            "--counters",
        ],
        Duration::from_secs(120),
    )?;
    let sink_out = socat.wait(Duration::from_secs(30))?;
    check(sink_out.status.success(), || {
        format!("socat: {}", sink_out.combined())
    })?;
    let report = numbers(&out.stdout);
    eprintln!(
        "rsstack ttcp send → socat: {:?} Mbit/s",
        report.get("throughput_Mbps")
    );
    for key in [
        "bytes",
        "seconds",
        "throughput_KBps",
        "throughput_Mbps",
        "avg_frame_bytes",
        "packets_sent",
        "packets_received",
        "packets_per_interrupt",
        "interrupts_per_sec",
        "cycles_per_byte",
        "retransmitted_segments",
        "fast_retransmits",
        "rto_expirations",
        "tcp.retransmitted_segments",
        "stack.tx_frames",
    ] {
        check(report.contains_key(key), || {
            format!("ttcp report lacks {key}:\n{}", out.stdout)
        })?;
    }
    check(report["bytes"] == TTCP_BYTES as f64, || {
        format!("ttcp reports {} bytes, sent {TTCP_BYTES}", report["bytes"])
    })?;
    let data = std::fs::read(&sink).map_err(|source| Error::Io {
        what: format!("read {}", sink.display()),
        source,
    })?;
    check(data.len() as u64 == TTCP_BYTES, || {
        format!("the sink got {} bytes, sent {TTCP_BYTES}", data.len())
    })?;
    let bad = data
        .iter()
        .enumerate()
        .position(|(i, &b)| b != (i as u64 % 251) as u8);
    check(bad.is_none(), || {
        format!("the sink's byte {bad:?} breaks the ttcp pattern")
    })?;
    Ok(report)
}

/// `rsstack get` of `bytes` from `python3 -m http.server` in the peer namespace.
fn get_from_python(topo: &Topology, bytes: u64) -> Result<()> {
    let site = TempDir::new("pysite")?;
    let file = site.join("10m.bin");
    testnet::write_random_file(&file, bytes, 0xf11e)?;
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
    let got = TempDir::new("get")?;
    let out = got.join("10m.bin");
    let url = format!("http://{PEER_V4}:8080/10m.bin");
    let out_arg = out.to_string_lossy().into_owned();
    let started = Instant::now();
    topo.run_rsstack(
        &["get", &url, "--output", &out_arg, "--timeout", "90"],
        Duration::from_secs(120),
    )?;
    eprintln!(
        "rsstack get {} MB from python3: {:.2} s",
        bytes >> 20,
        started.elapsed().as_secs_f64()
    );
    let (want, have) = (sha256_file(&file)?, sha256_file(&out)?);
    check(want == have, || format!("sha256 {have}, want {want}"))
}

/// Linux `nc -N` sends `bytes` (the ttcp pattern) into `rsstack ttcp recv`, which exits by
/// itself after the connection ends and reports every byte.
fn nc_into_ttcp_recv(topo: &Topology, bytes: u64) -> Result<()> {
    let dir = TempDir::new("ttcpr")?;
    let file = dir.join("pattern.bin");
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &data).map_err(|source| Error::Io {
        what: format!("write {}", file.display()),
        source,
    })?;
    let mut recv = topo.spawn_rsstack(&["ttcp", "recv", "--port", "5001", "--conns", "1"])?;
    recv.wait_for_line("listening", common::READY_LIMIT)?;
    let script = format!("nc -N -w 30 {DUT_V4} 5001 < {}", file.display());
    topo.peer_run("sh", &["-c", &script], Duration::from_secs(60))?;
    let out = recv.wait(Duration::from_secs(30))?;
    check(out.status.success(), || {
        format!(
            "ttcp recv ended with {}:\n{}",
            out.status_text(),
            out.combined()
        )
    })?;
    let report = numbers(&out.stdout);
    eprintln!(
        "nc → rsstack ttcp recv: {:?} Mbit/s",
        report.get("throughput_Mbps")
    );
    check(report.get("bytes") == Some(&(bytes as f64)), || {
        format!(
            "ttcp recv reports {:?} bytes, sent {bytes}:\n{}",
            report.get("bytes"),
            out.stdout
        )
    })
}

fn setup(offloads: Offloads, loss: bool) -> Result<Topology> {
    need_tools(&[
        "iperf", "socat", "nc", "python3", "iptables", "ss", "ethtool",
    ])?;
    let topo = Topology::new(Backend::AfPacket, offloads)?;
    if loss {
        topo.peer.add_random_loss(0.01)?;
    }
    Ok(topo)
}

/// The peer's offloads as veth sets them (TSO, GSO, checksum offload on).
#[test]
fn iperf_client_into_rsstack_discard_completes() -> Result<()> {
    if !require_root("iperf_client_into_rsstack_discard_completes") {
        return Ok(());
    }
    let _serial = serial();
    let (_, avg) = iperf_into_discard(&setup(Offloads::Default, false)?)?;
    // With TSO/GSO on, the peer's veth hands over TCP segments far larger than the MTU; that
    // the average frame rsstack took exceeds 1514 bytes shows they were received, not lost.
    check(avg > MAX_UNSEGMENTED_FRAME_BYTES, || {
        format!("average received frame {avg:.0} bytes: no TSO/GSO super-frame was taken")
    })
}

#[test]
fn iperf_client_into_rsstack_discard_completes_with_one_percent_loss() -> Result<()> {
    if !require_root("iperf_client_into_rsstack_discard_completes_with_one_percent_loss") {
        return Ok(());
    }
    let _serial = serial();
    let topo = setup(Offloads::Default, true)?;
    iperf_into_discard(&topo)?;
    topo.peer.expect_random_loss_dropped()
}

#[test]
fn ttcp_send_delivers_every_byte_to_a_socat_sink() -> Result<()> {
    if !require_root("ttcp_send_delivers_every_byte_to_a_socat_sink") {
        return Ok(());
    }
    let _serial = serial();
    ttcp_into_socat(&setup(Offloads::Default, false)?).map(drop)
}

#[test]
fn ttcp_send_delivers_every_byte_to_a_socat_sink_with_one_percent_loss() -> Result<()> {
    if !require_root("ttcp_send_delivers_every_byte_to_a_socat_sink_with_one_percent_loss") {
        return Ok(());
    }
    let _serial = serial();
    let topo = setup(Offloads::Default, true)?;
    let report = ttcp_into_socat(&topo)?;
    topo.peer.expect_random_loss_dropped()?;
    // Its frames crossed the loss rules: data lost on the way in was sent again, and the
    // report says so. (A run whose only losses were the peer's ACKs, or our bare ACKs, owes
    // no retransmission: cumulative ACKs cover a lost one.)
    let resent = report["retransmitted_segments"];
    let data_lost = topo.peer.random_loss_counts()?.dropped_data_in;
    check(data_lost == 0 || resent > 0.0, || {
        format!("{data_lost} data packets lost and no retransmission reported: {report:?}")
    })?;
    check(report["tcp.retransmitted_segments"] == resent, || {
        format!("the report and the counters disagree: {report:?}")
    })
}

#[test]
fn rsstack_get_fetches_10m_intact_from_a_linux_http_server() -> Result<()> {
    if !require_root("rsstack_get_fetches_10m_intact_from_a_linux_http_server") {
        return Ok(());
    }
    let _serial = serial();
    get_from_python(&setup(Offloads::Default, false)?, GET_BYTES)
}

#[test]
fn rsstack_get_fetches_128m_intact_with_one_percent_loss() -> Result<()> {
    if !require_root("rsstack_get_fetches_128m_intact_with_one_percent_loss") {
        return Ok(());
    }
    let _serial = serial();
    let topo = setup(Offloads::Default, true)?;
    get_from_python(&topo, LOSS_RUN_BYTES)?;
    topo.peer.expect_random_loss_dropped()
}

#[test]
fn linux_peer_with_offloads_off_works_both_ways() -> Result<()> {
    if !require_root("linux_peer_with_offloads_off_works_both_ways") {
        return Ok(());
    }
    let _serial = serial();
    let topo = setup(Offloads::Off, false)?;
    let (_, avg) = iperf_into_discard(&topo)?;
    check(avg <= MAX_UNSEGMENTED_FRAME_BYTES, || {
        format!("average received frame {avg:.0} bytes with TSO/GSO off")
    })?;
    ttcp_into_socat(&topo)?;
    nc_into_ttcp_recv(&topo, TTCP_BYTES)?;
    get_from_python(&topo, GET_BYTES)
}

#[test]
fn nc_into_rsstack_ttcp_recv_reports_every_byte() -> Result<()> {
    if !require_root("nc_into_rsstack_ttcp_recv_reports_every_byte") {
        return Ok(());
    }
    let _serial = serial();
    nc_into_ttcp_recv(&setup(Offloads::Default, false)?, TTCP_BYTES)
}

#[test]
fn nc_into_rsstack_ttcp_recv_reports_every_byte_with_one_percent_loss() -> Result<()> {
    if !require_root("nc_into_rsstack_ttcp_recv_reports_every_byte_with_one_percent_loss") {
        return Ok(());
    }
    let _serial = serial();
    let topo = setup(Offloads::Default, true)?;
    nc_into_ttcp_recv(&topo, LOSS_RUN_BYTES)?;
    topo.peer.expect_random_loss_dropped()
}
