//! Jumbo frames end to end (issue 18 item 4): a veth pair with a 9,000-byte MTU on both ends,
//! `rsstack --mtu 9000` over AF_PACKET and Linux peers. Both SYNs announce MSS 8,960 (9,000
//! less 40 bytes of IPv4 and TCP headers), rsstack's data segments fill 9,014-byte frames,
//! and large transfers arrive byte-exact both ways: `curl` fetches 20 MB from `serve http`,
//! and `rsstack get` fetches 20 MB from `python3 -m http.server`. Root only.

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, Offloads, PEER_V4, Topology, curl, need_tools, serial};
use testnet::{Result, TempDir, check, require_root, run_ok, sha256_file};

const JUMBO_MTU: &str = "9000";
/// MSS for a 9,000-byte IPv4 MTU: 9,000 − 20 (IPv4) − 20 (TCP).
const JUMBO_MSS: u32 = 8960;
/// Ethernet frame of a full jumbo segment: 14 + 9,000.
const JUMBO_FRAME_BYTES: u32 = 9014;
const BYTES: u64 = 20 << 20;

/// The topology with both veth ends at a 9,000-byte MTU.
fn jumbo_topology() -> Result<Topology> {
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    let limit = Duration::from_secs(10);
    for (ns, dev) in [(&topo.peer, "veth0"), (topo.dut(), "veth1")] {
        let out = ns.run("ip", &["link", "set", "dev", dev, "mtu", JUMBO_MTU], limit)?;
        check(out.status.success(), || {
            format!("ip link set {dev} mtu {JUMBO_MTU}: {}", out.combined())
        })?;
    }
    Ok(topo)
}

/// `tshark -r FILE -Y FILTER -T fields -e FIELD`: the values printed, one per frame.
fn tshark_field(file: &str, filter: &str, field: &str) -> Result<Vec<u32>> {
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r", file, "-Y", filter, "-T", "fields", "-e", field]);
    let out = run_ok(&mut cmd, Duration::from_secs(120))?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

#[test]
fn jumbo_frames_carry_mss_8960_and_20_mb_byte_exact_from_rsstack_to_curl() -> Result<()> {
    if !require_root("jumbo_frames_carry_mss_8960_and_20_mb_byte_exact_from_rsstack_to_curl") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["curl", "tshark"])?;
    let topo = jumbo_topology()?;
    let site = TempDir::new("jumbosite")?;
    let file = site.join("20m.bin");
    testnet::write_random_file(&file, BYTES, 0x9000)?;
    let work = TempDir::new("jumbo")?;
    let pcap = work.join("jumbo.pcap");
    let pcap_arg = pcap.to_string_lossy().into_owned();
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&[
        "serve",
        "http",
        "--dir",
        &dir,
        "--port",
        "80",
        "--mtu",
        JUMBO_MTU,
        "--capture",
        &pcap_arg,
        // The capture records what rsstack hands the kernel: with TSO those are frames of up
        // to 64 KiB for the kernel to cut (interop_nic_offload covers that); this test is
        // about MTU-sized frames, so rsstack builds them itself.
        "--nic-offload",
        "none",
    ])?;
    let out = work.join("20m.bin");
    let (code, _) = curl(
        &topo,
        &format!("http://{DUT_V4}/20m.bin"),
        &out,
        Duration::from_secs(120),
    )?;
    check(code == 200, || format!("GET /20m.bin: status {code}"))?;
    check(sha256_file(&file)? == sha256_file(&out)?, || {
        "20m.bin: sha256 differs".to_string()
    })?;
    let summary = server.stop()?;
    // Both SYNs announce the jumbo MSS.
    let mss = tshark_field(&pcap_arg, "tcp.flags.syn == 1", "tcp.options.mss_val")?;
    eprintln!("jumbo: MSS options in the SYNs {mss:?}");
    check(
        mss.len() >= 2 && mss.iter().all(|&m| m == JUMBO_MSS),
        || format!("SYN MSS options {mss:?}, want {JUMBO_MSS} each\n{summary}"),
    )?;
    // rsstack's data segments fill jumbo frames.
    let lens = tshark_field(
        &pcap_arg,
        &format!("ip.src == {DUT_V4} && tcp.len > 0"),
        "frame.len",
    )?;
    let full = lens.iter().filter(|&&l| l == JUMBO_FRAME_BYTES).count();
    let largest = lens.iter().copied().max().unwrap_or(0);
    eprintln!(
        "jumbo: {} data frames from rsstack, {full} of {JUMBO_FRAME_BYTES} bytes, largest {largest}",
        lens.len()
    );
    check(largest == JUMBO_FRAME_BYTES, || {
        format!("largest frame from rsstack {largest} bytes, want {JUMBO_FRAME_BYTES}")
    })?;
    check(full as u64 * 8_000 > BYTES / 2, || {
        format!("only {full} full jumbo frames for {BYTES} bytes")
    })
}

#[test]
fn jumbo_frames_carry_20_mb_byte_exact_from_a_linux_server_to_rsstack_get() -> Result<()> {
    if !require_root("jumbo_frames_carry_20_mb_byte_exact_from_a_linux_server_to_rsstack_get") {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["python3", "tshark"])?;
    let topo = jumbo_topology()?;
    let site = TempDir::new("jumbopy")?;
    let file = site.join("20m.bin");
    testnet::write_random_file(&file, BYTES, 0x9001)?;
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
    let work = TempDir::new("jumboget")?;
    let out = work.join("20m.bin");
    let out_arg = out.to_string_lossy().into_owned();
    let pcap = work.join("get.pcap");
    let pcap_arg = pcap.to_string_lossy().into_owned();
    topo.run_rsstack(
        &[
            "get",
            &format!("http://{PEER_V4}:8080/20m.bin"),
            "--output",
            &out_arg,
            "--timeout",
            "120",
            "--mtu",
            JUMBO_MTU,
            "--capture",
            &pcap_arg,
        ],
        Duration::from_secs(180),
    )?;
    check(sha256_file(&file)? == sha256_file(&out)?, || {
        "20m.bin from python3: sha256 differs".to_string()
    })?;
    let mss = tshark_field(&pcap_arg, "tcp.flags.syn == 1", "tcp.options.mss_val")?;
    eprintln!("jumbo get: MSS options in the SYNs {mss:?}");
    check(
        mss.len() >= 2 && mss.iter().all(|&m| m == JUMBO_MSS),
        || format!("SYN MSS options {mss:?}, want {JUMBO_MSS} each"),
    )
}
