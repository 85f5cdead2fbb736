//! `rsstack forward` between two Linux hosts: three namespaces joined by two veth pairs,
//!
//! ```text
//!   [a] veth0 10.78.1.2 ── ra ─[r: rsstack forward]─ rb ── veth0 10.78.2.2 [b]
//!       fd00:78:1::2          10.78.1.1   10.78.2.1          fd00:78:2::2
//! ```
//!
//! The middle namespace's kernel has no address on `ra`/`rb` (IPv6 off, forwarding off), so
//! everything that crosses is rsstack's doing. Linux `ping` (v4 and v6) and a TCP transfer
//! (`nc`, checked by SHA-256) go from `a` to `b` through it; `ping` reaches the router itself;
//! `ping -t 1` gets a time exceeded back. Root only; skips cleanly otherwise (fails under
//! `RSSTACK_REQUIRE_ROOT_TESTS`). Each step is time-bounded; namespaces and links are removed
//! when the test ends, whatever happened.

mod common;

use std::time::Duration;

use common::{READY_LIMIT, STOP_GRACE, need_tools, rsstack_bin, serial};
use testnet::tools::ping_counts;
use testnet::{Netns, Result, TempDir, Veth, check, require_root, sha256_file, write_random_file};

const STEP_LIMIT: Duration = Duration::from_secs(30);
const TRANSFER_BYTES: u64 = 4 << 20;

/// The three namespaces and the two links (links dropped before namespaces).
struct Line {
    _links: [Veth; 2],
    a: Netns,
    r: Netns,
    b: Netns,
}

fn line() -> Result<Line> {
    let a = Netns::create("fwa")?;
    let r = Netns::create("fwr")?;
    let b = Netns::create("fwb")?;
    let l0 = Veth::create(&a, "veth0", &r, "ra")?;
    let l1 = Veth::create(&b, "veth0", &r, "rb")?;
    for key in ["all", "default"] {
        r.sysctl(&format!("net.ipv6.conf.{key}.disable_ipv6"), "1")?;
    }
    r.sysctl("net.ipv4.ip_forward", "0")?;
    for dev in ["ra", "rb"] {
        r.sysctl(&format!("net.ipv6.conf.{dev}.disable_ipv6"), "1")?;
        r.link_up(dev)?;
    }
    for (ns, n) in [(&a, 1), (&b, 2)] {
        ns.add_addr("veth0", &format!("10.78.{n}.2/24"))?;
        ns.add_addr("veth0", &format!("fd00:78:{n}::2/64"))?;
        // TSO/GSO would hand the router 64 KiB super-frames (the wire never carries those).
        ns.offloads_off("veth0")?;
        ns.link_up("veth0")?;
        ns.run_ok(
            "ip",
            &["route", "add", "default", "via", &format!("10.78.{n}.1")],
        )?;
        ns.run_ok(
            "ip",
            &[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("fd00:78:{n}::1"),
            ],
        )?;
    }
    Ok(Line {
        _links: [l0, l1],
        a,
        r,
        b,
    })
}

/// Pings `addr` from `ns` `count` times; returns the replies and ping's output.
fn ping(ns: &Netns, extra: &[&str], addr: &str, count: u32) -> Result<(u64, String)> {
    let count = count.to_string();
    let mut args = vec!["-c", &count, "-i", "0.2", "-W", "2"];
    args.extend_from_slice(extra);
    args.push(addr);
    let out = ns.run("ping", &args, STEP_LIMIT)?;
    let (_, got) = ping_counts(&out.stdout)
        .map_err(|e| testnet::Error::Check(format!("{e}\n{}", out.combined())))?;
    Ok((got, out.combined()))
}

fn forward_between_namespaces(io: &str) -> Result<()> {
    let _serial = serial();
    need_tools(&["ping", "nc", "ip", "ethtool"])?;
    let net = line()?;
    let mut router = net.r.spawn(
        &rsstack_bin(),
        &[
            "forward",
            "--io",
            io,
            "--port",
            "ra",
            "--ip",
            "10.78.1.1/24",
            "--ip",
            "fd00:78:1::1/64",
            "--port",
            "rb",
            "--ip",
            "10.78.2.1/24",
            "--ip",
            "fd00:78:2::1/64",
            "--duration",
            "120",
        ],
    )?;
    router.wait_for_line("forwarding between", READY_LIMIT)?;

    // The first packet towards a host the router has not resolved yet is dropped while it
    // resolves (counted drop_no_neighbour): ask for 5, accept 4.
    let (got, out) = ping(&net.a, &["-4"], "10.78.2.2", 5)?;
    check(got >= 4, || {
        format!("IPv4 ping through the router: {got}/5\n{out}")
    })?;
    let (got, out) = ping(&net.a, &["-6"], "fd00:78:2::2", 5)?;
    check(got >= 4, || {
        format!("IPv6 ping through the router: {got}/5\n{out}")
    })?;
    let (got, out) = ping(&net.a, &["-4"], "10.78.1.1", 3)?;
    check(got == 3, || {
        format!("ping of the router itself: {got}/3\n{out}")
    })?;
    let (_, out) = ping(&net.a, &["-4", "-t", "1"], "10.78.2.2", 1)?;
    check(out.contains("Time to live exceeded"), || {
        format!("ping -t 1 gets no time exceeded:\n{out}")
    })?;

    // TCP: 4 MiB from a to b, compared by SHA-256.
    let dir = TempDir::new("fwd")?;
    let (src, dst) = (dir.join("src.bin"), dir.join("dst.bin"));
    write_random_file(&src, TRANSFER_BYTES, 78)?;
    let listen = format!("nc -l 5001 > {}", dst.display());
    let receiver = net.b.spawn("sh", &["-c", &listen])?;
    std::thread::sleep(Duration::from_millis(300));
    let send = format!("nc -N -w 10 10.78.2.2 5001 < {}", src.display());
    let sent = net.a.run("sh", &["-c", &send], STEP_LIMIT)?;
    check(sent.status.success(), || {
        format!("nc sender: {}", sent.combined())
    })?;
    let received = receiver.wait(STEP_LIMIT)?;
    check(received.status.success(), || {
        format!("nc receiver: {}", received.combined())
    })?;
    let (h_src, h_dst) = (sha256_file(&src)?, sha256_file(&dst)?);
    check(h_src == h_dst, || {
        let len = std::fs::metadata(&dst).map(|m| m.len()).unwrap_or(0);
        format!("the transfer differs: {len} of {TRANSFER_BYTES} bytes arrived")
    })?;

    let out = router.stop(STOP_GRACE);
    let all = out.combined();
    check(out.status.success() && !all.contains("panicked"), || {
        format!("rsstack forward ended with {}:\n{all}", out.status_text())
    })?;
    let c = common::counters(&all);
    let get = |k: &str| c.get(k).copied().unwrap_or(-1.0);
    check(get("forwarded") > 2000.0, || {
        format!("forwarded too few:\n{all}")
    })?;
    check(get("forwarded_v6") >= 8.0, || {
        format!("IPv6 not forwarded:\n{all}")
    })?;
    check(get("echo_replies_sent") >= 3.0, || {
        format!("no echo replies:\n{all}")
    })?;
    check(get("icmp_time_exceeded_sent") >= 1.0, || {
        format!("no time exceeded:\n{all}")
    })?;
    check(get("drops_io") == 0.0, || format!("I/O drops:\n{all}"))?;
    check(
        get("drops_total") == get("drop_no_neighbour") + get("drop_ttl_exceeded"),
        || format!("unexpected drops:\n{all}"),
    )?;
    // The router's own namespace stayed out of it.
    let fwd = net.r.run_ok("sysctl", &["-n", "net.ipv4.ip_forward"])?;
    check(fwd.stdout.trim() == "0", || "the kernel forwarded".into())
}

#[test]
fn linux_hosts_ping_and_transfer_through_rsstack_forward_over_af_packet() -> Result<()> {
    if !require_root("linux_hosts_ping_and_transfer_through_rsstack_forward_over_af_packet") {
        return Ok(());
    }
    forward_between_namespaces("af_packet")
}
