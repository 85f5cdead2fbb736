//! `--nic-offload` on a TAP port against the Linux kernel of a namespace (issue 18 item 1):
//!
//! - a bulk `rsstack ttcp send` into a Linux `socat` sink, once with every offload on and once
//!   with none: both byte-exact (the ttcp pattern, every byte), and with offloads on rsstack
//!   hands the kernel at least 90 % fewer frames (its own `tx_frames` counter), most of them
//!   TSO frames the kernel segments; the same with the Linux side's offloads switched off
//!   (`ethtool -K tap0 tso off gso off tx off rx off`);
//! - `tshark` reads the capture of an offloaded run (64 KiB frames, partial checksums)
//!   without a malformed packet or an error;
//! - Linux `nc` into `rsstack ttcp recv` with GRO on: the kernel's coalesced frames are taken
//!   whole and every byte is reported; the checksums the kernel vouched for are not verified
//!   again.
//!
//! - the on/off comparison again over AF_PACKET (`PACKET_VNET_HDR`) on a veth.
//!
//! Root only.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Backend, DUT_V4, Offloads, PEER_V4, Topology, need_tools, serial};
use testnet::tools::numbers;
use testnet::{Error, Result, TempDir, check, require_root, run_ok};

/// Bytes of each bulk send: 32 MiB, ~23,000 segments of 1,448 bytes.
const BULK_BYTES: u64 = 32 << 20;

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

/// `rsstack ttcp send --nic-offload OFFLOAD --counters [EXTRA]` into `socat -u TCP-LISTEN`:
/// checks the sink holds exactly the ttcp pattern, returns rsstack's report and counters.
fn bulk_send(topo: &Topology, offload: &str, extra: &[&str]) -> Result<BTreeMap<String, f64>> {
    let dir = TempDir::new("nicoff")?;
    let sink = dir.join("sink.bin");
    let sink_arg = format!("OPEN:{},creat,trunc", sink.display());
    let socat = topo
        .peer
        .spawn("socat", &["-u", "TCP-LISTEN:5001,reuseaddr", &sink_arg])?;
    wait_listening(topo, 5001)?;
    let to = format!("{PEER_V4}:5001");
    let bytes = BULK_BYTES.to_string();
    let mut args = vec![
        "ttcp",
        "send",
        "--to",
        &to,
        "--bytes",
        &bytes,
        "--nic-offload",
        offload,
        "--counters",
    ];
    args.extend_from_slice(extra);
    let out = topo.run_rsstack(&args, Duration::from_secs(120))?;
    let sink_out = socat.wait(Duration::from_secs(30))?;
    check(sink_out.status.success(), || {
        format!("socat: {}", sink_out.combined())
    })?;
    let report = numbers(&out.stdout);
    for key in [
        "bytes",
        "tx_frames",
        "tx_tso_frames",
        "tx_tso_segments",
        "tx_csum_offloaded",
        "rx_csum_valid",
        "rx_gro_frames",
        "drop_tx_offload_malformed",
    ] {
        check(report.contains_key(key), || {
            format!("the report lacks {key}:\n{}", out.stdout)
        })?;
    }
    eprintln!(
        "ttcp send --nic-offload {offload}: {} frames to the kernel ({} TSO carrying {} segments), {:?} Mbit/s",
        report["tx_frames"],
        report["tx_tso_frames"],
        report["tx_tso_segments"],
        report.get("throughput_Mbps")
    );
    check(report["bytes"] == BULK_BYTES as f64, || {
        format!("ttcp reports {} bytes, sent {BULK_BYTES}", report["bytes"])
    })?;
    check(report["drop_tx_offload_malformed"] == 0.0, || {
        "frames dropped for malformed offload requests".to_string()
    })?;
    let data = std::fs::read(&sink).map_err(|source| Error::Io {
        what: format!("read {}", sink.display()),
        source,
    })?;
    check(data.len() as u64 == BULK_BYTES, || {
        format!("the sink got {} bytes, sent {BULK_BYTES}", data.len())
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

/// Offloads on against off, both byte-exact: at least 90 % fewer frames handed to the kernel
/// with them on, most bytes in TSO frames; none at all with them off.
fn on_versus_off(backend: Backend, peer_offloads: Offloads) -> Result<()> {
    let _serial = serial();
    need_tools(&["socat", "ss", "ethtool"])?;
    let topo = Topology::new(backend, peer_offloads)?;
    let on = bulk_send(&topo, "all", &[])?;
    let off = bulk_send(&topo, "none", &[])?;
    check(
        off["tx_tso_frames"] == 0.0 && off["tx_csum_offloaded"] == 0.0,
        || format!("offloads off, yet {} TSO frames", off["tx_tso_frames"]),
    )?;
    // Without TSO every data segment is its own frame: at least one per 1,448 bytes.
    check(off["tx_frames"] >= (BULK_BYTES / 1448) as f64, || {
        format!("offloads off: only {} frames", off["tx_frames"])
    })?;
    check(on["tx_frames"] <= off["tx_frames"] * 0.10, || {
        format!(
            "offloads on: {} frames to the kernel, off: {} (want ≥ 90 % fewer)",
            on["tx_frames"], off["tx_frames"]
        )
    })?;
    check(on["tx_tso_frames"] > 0.0, || "no TSO frame".to_string())?;
    // The TSO frames carry nearly all the data: their segments are at least 90 % of what
    // the bulk needs.
    check(
        on["tx_tso_segments"] >= 0.9 * (BULK_BYTES / 1448) as f64,
        || {
            format!(
                "TSO frames carry only {} segments of {}",
                on["tx_tso_segments"],
                BULK_BYTES / 1448
            )
        },
    )?;
    check(on["rx_csum_valid"] > 0.0, || {
        "no received frame was taken as checksum-valid".to_string()
    })
}

#[test]
fn ttcp_send_over_tap_with_offloads_hands_the_kernel_90_percent_fewer_frames_byte_exact()
-> Result<()> {
    if !require_root(
        "ttcp_send_over_tap_with_offloads_hands_the_kernel_90_percent_fewer_frames_byte_exact",
    ) {
        return Ok(());
    }
    on_versus_off(Backend::Tap, Offloads::Default)
}

#[test]
fn ttcp_send_offloads_work_when_the_linux_side_has_its_offloads_off() -> Result<()> {
    if !require_root("ttcp_send_offloads_work_when_the_linux_side_has_its_offloads_off") {
        return Ok(());
    }
    on_versus_off(Backend::Tap, Offloads::Off)
}

#[test]
fn ttcp_send_over_af_packet_with_offloads_hands_the_kernel_90_percent_fewer_frames() -> Result<()> {
    if !require_root(
        "ttcp_send_over_af_packet_with_offloads_hands_the_kernel_90_percent_fewer_frames",
    ) {
        return Ok(());
    }
    on_versus_off(Backend::AfPacket, Offloads::Default)
}

#[test]
fn capture_of_an_offloaded_send_opens_in_tshark_without_malformed_packets() -> Result<()> {
    if !require_root("capture_of_an_offloaded_send_opens_in_tshark_without_malformed_packets") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["socat", "ss", "tshark"])?;
    let topo = Topology::new(Backend::Tap, Offloads::Default)?;
    let work = TempDir::new("nicoffcap")?;
    let pcap = work.join("run.pcap");
    let pcap_arg = pcap.to_string_lossy().into_owned();
    let report = bulk_send(&topo, "all", &["--capture", &pcap_arg])?;
    check(report["tx_tso_frames"] > 0.0, || {
        "the captured run sent no TSO frame".to_string()
    })?;
    let tshark = |args: &[&str]| -> Result<Vec<String>> {
        let mut cmd = std::process::Command::new("tshark");
        cmd.args(["-n", "-r", &pcap_arg]).args(args);
        let out = run_ok(&mut cmd, Duration::from_secs(120))?;
        Ok(out
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect())
    };
    let big = tshark(&["-Y", &format!("ip.src == {DUT_V4} && frame.len > 1514")])?;
    check(!big.is_empty(), || {
        "the capture holds no frame beyond the MTU".to_string()
    })?;
    let malformed = tshark(&["-Y", "_ws.malformed || _ws.expert.severity == error"])?;
    check(malformed.is_empty(), || {
        format!(
            "malformed packets in the capture:\n{}",
            malformed.join("\n")
        )
    })
}

#[test]
fn nc_into_ttcp_recv_with_gro_takes_coalesced_frames_and_every_byte() -> Result<()> {
    if !require_root("nc_into_ttcp_recv_with_gro_takes_coalesced_frames_and_every_byte") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["nc"])?;
    let topo = Topology::new(Backend::Tap, Offloads::Default)?;
    let dir = TempDir::new("nicoffrx")?;
    let file = dir.join("pattern.bin");
    let bytes: u64 = 16 << 20;
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &data).map_err(|source| Error::Io {
        what: format!("write {}", file.display()),
        source,
    })?;
    for (offload, gro) in [("all", true), ("gro=off", false)] {
        let mut recv = topo.spawn_rsstack(&[
            "ttcp",
            "recv",
            "--port",
            "5001",
            "--conns",
            "1",
            "--nic-offload",
            offload,
            "--counters",
        ])?;
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
        let r = numbers(&out.stdout);
        eprintln!(
            "nc → ttcp recv --nic-offload {offload}: {:?} frames, {:?} GRO, {:?} checksum-valid",
            r.get("rx_frames"),
            r.get("rx_gro_frames"),
            r.get("rx_csum_valid")
        );
        check(r.get("bytes") == Some(&(bytes as f64)), || {
            format!(
                "{offload}: ttcp recv reports {:?} bytes, sent {bytes}",
                r.get("bytes")
            )
        })?;
        let gro_frames = r.get("rx_gro_frames").copied().unwrap_or(-1.0);
        if gro {
            check(gro_frames > 0.0, || {
                format!("{offload}: no GRO frame received")
            })?;
            check(r.get("rx_csum_valid").is_some_and(|&n| n > 0.0), || {
                format!("{offload}: no frame taken as checksum-valid")
            })?;
        } else {
            check(gro_frames == 0.0, || {
                format!("{offload}: {gro_frames} GRO frames with GRO off")
            })?;
            check(
                r.get("drop_rx_truncated") == Some(&0.0)
                    && r.get("rx_frames")
                        .is_some_and(|&n| n >= (bytes / 1448) as f64),
                || format!("{offload}: frames not MTU-sized or cut: {r:?}"),
            )?;
        }
    }
    Ok(())
}
