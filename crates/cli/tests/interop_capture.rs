//! `--capture FILE` while Linux `curl` fetches from `rsstack serve http` over AF_PACKET:
//! `tshark -r FILE` opens the capture, finds the HTTP exchange in it, reports no malformed
//! packet, and every frame rsstack sent carries correct IPv4 and TCP checksums (offloads off:
//! `--nic-offload none`). Root only.

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, Offloads, Topology, curl, need_tools, serial, write_site};
use testnet::{Result, TempDir, check, require_root, run_ok};

const TSHARK_LIMIT: Duration = Duration::from_secs(120);

/// `tshark -r FILE ARGS`: the printed lines.
fn tshark(file: &str, args: &[&str]) -> Result<Vec<String>> {
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r", file]).args(args);
    let out = run_ok(&mut cmd, TSHARK_LIMIT)?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

#[test]
fn capture_of_a_curl_run_opens_in_tshark_without_malformed_packets() -> Result<()> {
    if !require_root("capture_of_a_curl_run_opens_in_tshark_without_malformed_packets") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["curl", "tshark"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let site = TempDir::new("site")?;
    write_site(site.path(), 1 << 20)?;
    let work = TempDir::new("capture")?;
    let pcap = work.join("run.pcap");
    let pcap_arg = pcap.to_string_lossy().into_owned();
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&[
        "serve",
        "http",
        "--dir",
        &dir,
        "--port",
        "80",
        "--capture",
        &pcap_arg,
        // Software checksums and MTU-sized frames: the capture shows finished wire frames.
        // (With offloads on it shows what the kernel is handed: 64 KiB TSO frames with
        // partial checksums, as tcpdump does for Linux's own sends; interop_nic_offload.rs
        // checks that capture.)
        "--nic-offload",
        "none",
    ])?;
    for name in ["index.html", "1m.bin", "no-such-file"] {
        let (code, _) = curl(
            &topo,
            &format!("http://{DUT_V4}/{name}"),
            &work.join("got"),
            Duration::from_secs(60),
        )?;
        check(code == 200 || name == "no-such-file", || {
            format!("GET /{name}: status {code}")
        })?;
    }
    server.stop()?;

    let all = tshark(&pcap_arg, &[])?;
    check(all.len() > 100, || {
        format!("the capture holds only {} frames", all.len())
    })?;
    let http = tshark(&pcap_arg, &["-Y", "http.response.code == 200"])?;
    check(http.len() >= 2, || {
        format!("tshark finds {} HTTP 200 responses, want 2", http.len())
    })?;
    let malformed = tshark(
        &pcap_arg,
        &["-Y", "_ws.malformed || _ws.expert.severity == error"],
    )?;
    check(malformed.is_empty(), || {
        format!(
            "malformed packets in the capture:\n{}",
            malformed.join("\n")
        )
    })?;
    // Frames from the Linux peer may carry partial checksums (its checksum offload); frames
    // rsstack built must be complete.
    let filter = format!(
        "ip.src == {DUT_V4} && (ip.checksum.status == \"Bad\" || tcp.checksum.status == \"Bad\")"
    );
    let bad = tshark(
        &pcap_arg,
        &[
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-Y",
            &filter,
        ],
    )?;
    check(bad.is_empty(), || {
        format!(
            "{} frames from rsstack with bad checksums, e.g.:\n{}",
            bad.len(),
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
        )
    })
}
