//! AF_XDP against the real kernel: a veth pair whose far end lives in a namespace this test
//! creates (with the kernel's IPv4 stack on it) and whose near end, in the root namespace with
//! IPv6 off, carries our XDP redirect program and one AF_XDP socket per queue (copy mode — veth
//! has no zero-copy). The kernel ARPs for an address behind us, we answer through the socket,
//! and its UDP datagrams come back to us — with the program in generic and in native mode, on
//! one and on two queues (one thread per queue socket). Further: pings in bursts larger than
//! the transmit budget (frames must come back through COMPLETION), drops the kernel counts in
//! `XDP_STATISTICS` when RX is full or FILL empty, the `XDP_PASS` fallback for a queue with no
//! socket, zero-copy refusal and the copy fallback, the link's exclusivity and detach on drop,
//! and the verifier's log for a rejected program. Needs root (CI runs as root); each test
//! stops by itself within seconds, and the program is detached and the namespace and both veth
//! ends are removed at the end, pass or fail.

mod common;

use std::time::{Duration, Instant};

use common::{Addrs, Netns, Veth, require_root, run};
use platform::af_packet::{AfPacketConfig, AfPacketSocket};
use platform::af_xdp::{XdpBindMode, XdpConfig, XdpPort, XdpSocket};
use platform::bpf::{Insn, XdpAttachMode, XdpLink, XdpProgram};
use platform::tap::wait_readable;

const KERNEL_IP: [u8; 4] = [10, 233, 0, 1];
const OUR_IP: [u8; 4] = [10, 233, 0, 2];
const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x02, 0x02];
const ADDRS: Addrs = Addrs {
    kernel_ip: KERNEL_IP,
    our_ip: OUR_IP,
    our_mac: OUR_MAC,
};

fn veth(tag: &str, queues: u32) -> Veth {
    Veth::create(tag, queues, "10.233.0.1/24")
}

fn small_config(bind_mode: XdpBindMode) -> XdpConfig {
    XdpConfig {
        frame_count: 128,
        rx_frames: 64,
        rx_ring_entries: 64,
        tx_ring_entries: 64,
        fill_ring_entries: 64,
        completion_ring_entries: 64,
        bind_mode,
        ..XdpConfig::default()
    }
}

fn is_arp_request_for_us(f: &[u8]) -> bool {
    ADDRS.is_arp_request_for_us(f)
}

fn is_datagram_to_us(f: &[u8]) -> bool {
    ADDRS.is_datagram_to_us(f)
}

fn is_echo_reply_to_us(f: &[u8]) -> bool {
    f.len() >= 42
        && f[0..6] == OUR_MAC
        && f[12..14] == [0x08, 0x00]
        && f[23] == 1
        && f[30..34] == OUR_IP
        && f[34] == 0
}

/// Polls every socket until `done` says stop or the deadline passes; returns the kept frames
/// per socket. Also takes back completed transmit frames.
fn collect(
    socks: &mut [XdpSocket],
    timeout: Duration,
    keep: impl Fn(&[u8]) -> bool,
    done: impl Fn(&[Vec<Vec<u8>>]) -> bool,
) -> Vec<Vec<Vec<u8>>> {
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); socks.len()];
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && !done(&got) {
        {
            let fds: Vec<_> = socks.iter().map(std::os::fd::AsFd::as_fd).collect();
            wait_readable(&fds, 20).expect("poll");
        }
        for (i, s) in socks.iter_mut().enumerate() {
            s.recv_batch(64, |frame| {
                if keep(frame) {
                    got[i].push(frame.to_vec());
                }
            });
            s.poll_tx().expect("poll_tx");
        }
    }
    got
}

fn arp_reply(kernel_mac: &[u8]) -> Vec<u8> {
    ADDRS.arp_reply(kernel_mac)
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMP echo request from us to the kernel with sequence number `seq`.
fn echo_request(kernel_mac: &[u8], seq: u16) -> Vec<u8> {
    let payload = b"rsstack-af-xdp";
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(payload);
    let c = checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&seq.to_be_bytes());
    ip.extend_from_slice(&[0x40, 0, 64, 1, 0, 0]);
    ip.extend_from_slice(&OUR_IP);
    ip.extend_from_slice(&KERNEL_IP);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::with_capacity(14 + ip.len() + icmp.len());
    f.extend_from_slice(kernel_mac);
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

/// ARP, then one queued datagram: returns the kernel's MAC.
fn resolve_through(port: &mut XdpPort, ns: &Netns) -> Vec<u8> {
    ns.exec("bash", &["-c", "echo first > /dev/udp/10.233.0.2/9"]);
    let got = collect(
        port.sockets_mut(),
        Duration::from_secs(5),
        is_arp_request_for_us,
        |g| g.iter().any(|s| !s.is_empty()),
    );
    let request = got
        .into_iter()
        .flatten()
        .next()
        .expect("the kernel's ARP request reaches an AF_XDP socket");
    let kernel_mac = request[6..12].to_vec();
    port.sockets_mut()[0]
        .send(&arp_reply(&kernel_mac))
        .expect("send ARP reply");
    let first = collect(
        port.sockets_mut(),
        Duration::from_secs(5),
        is_datagram_to_us,
        |g| g.iter().map(Vec::len).sum::<usize>() >= 1,
    );
    let first: Vec<_> = first.into_iter().flatten().collect();
    assert_eq!(
        first.len(),
        1,
        "the datagram queued behind ARP arrives once"
    );
    assert_eq!(&first[0][42..], b"first\n");
    kernel_mac
}

/// The interface's `ip link` line (shows the attached XDP program, if any).
fn link_show(dev: &str) -> String {
    run("ip", &["-d", "link", "show", "dev", dev])
}

/// `ip -d link show` once no XDP program is listed on `dev`, or after 3 s. The kernel releases
/// a BPF link when its last file descriptor closes, but the release is deferred: on a loaded
/// machine `ip` listed the program for a moment after the port was dropped.
fn link_show_after_detach(dev: &str) -> String {
    let by = Instant::now() + Duration::from_secs(3);
    loop {
        let shown = link_show(dev);
        let attached = shown.contains("prog/xdp") || shown.contains("rsstack_xsk");
        if !attached || Instant::now() >= by {
            return shown;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_clean(sock: &XdpSocket) {
    let c = sock.counters();
    assert_eq!(
        (
            c.rx_invalid_desc,
            c.completion_invalid_addr,
            c.ring_index_invalid
        ),
        (0, 0, 0),
        "{c:?}"
    );
    let k = sock.kernel_stats().expect("XDP_STATISTICS");
    assert_eq!(
        (
            k.rx_dropped,
            k.rx_invalid_descs,
            k.tx_invalid_descs,
            k.rx_ring_full
        ),
        (0, 0, 0, 0),
        "{k:?}"
    );
    let (user, fill, tx) = sock.frame_states();
    assert_eq!(user + fill + tx, 128, "every frame has one owner");
}

/// The ARP-then-UDP exchange through one socket on a one-queue veth, the program attached in
/// `attach` mode; checks `ip link` reports the mode. Without `need_wakeup` every send kicks.
fn arp_then_udp(tag: &str, attach: XdpAttachMode, link_word: &str, need_wakeup: bool) {
    let v = veth(tag, 1);
    let config = XdpConfig {
        need_wakeup,
        ..small_config(XdpBindMode::Copy)
    };
    let mut port = XdpPort::open(&v.near, 1, &config, attach)
        .unwrap_or_else(|e| panic!("open AF_XDP port in {attach:?} mode: {e}"));
    let shown = link_show(&v.near);
    assert!(
        shown.contains(link_word) && shown.contains("rsstack_xsk"),
        "{attach:?} attachment shows as {link_word}: {shown}"
    );
    resolve_through(&mut port, &v.ns);
    let neigh = v.ns.exec("ip", &["neigh", "show", "10.233.0.2"]);
    assert!(
        neigh.contains("02:00:00:00:02:02"),
        "the kernel learnt our MAC from the reply we sent: {neigh}"
    );
    let s = &mut port.sockets_mut()[0];
    assert!(!s.is_zero_copy(), "copy mode was asked for");
    // The ARP reply's frame comes back through COMPLETION.
    let deadline = Instant::now() + Duration::from_secs(2);
    while s.tx_in_flight() > 0 && Instant::now() < deadline {
        s.poll_tx().expect("poll_tx");
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = s.counters();
    assert_eq!((c.tx_frames, c.tx_completed), (1, 1), "{c:?}");
    assert_eq!(
        c.rx_frames, 2,
        "the ARP request and the datagram, nothing else: {c:?}"
    );
    assert_clean(s);
    eprintln!("{attach:?}: {c:?}; kernel {:?}", s.kernel_stats());
}

#[test]
fn generic_xdp_socket_answers_arp_and_receives_the_queued_datagram() {
    if !require_root("generic_xdp_socket_answers_arp_and_receives_the_queued_datagram") {
        return;
    }
    arp_then_udp("g", XdpAttachMode::Skb, "xdpgeneric", true);
}

#[test]
fn native_xdp_on_veth_answers_arp_and_receives_the_queued_datagram() {
    if !require_root("native_xdp_on_veth_answers_arp_and_receives_the_queued_datagram") {
        return;
    }
    // veth has native XDP (the receiving end runs it from its NAPI poll); no program on the
    // peer is needed for frames the peer's kernel sends.
    arp_then_udp("n", XdpAttachMode::Driver, "prog/xdp", false);
}

#[test]
fn ping_bursts_beyond_the_transmit_budget_recycle_frames_through_completion() {
    if !require_root("ping_bursts_beyond_the_transmit_budget_recycle_frames_through_completion") {
        return;
    }
    const BURST: u16 = 96; // more than the 64 transmit frames and the kernel's 32 per kick
    const BURSTS: u16 = 6;
    let v = veth("p", 1);
    let mut port = XdpPort::open(
        &v.near,
        1,
        // TX ring bigger than the 64-frame budget, so the budget is what stops a burst.
        &XdpConfig {
            tx_ring_entries: 128,
            ..small_config(XdpBindMode::Copy)
        },
        XdpAttachMode::Skb,
    )
    .expect("open AF_XDP port");
    let kernel_mac = resolve_through(&mut port, &v.ns);
    let s = &mut port.sockets_mut()[0];
    assert_eq!(s.tx_frames_available(), 64);
    let mut replies = vec![0u32; usize::from(BURST * BURSTS)];
    let drain = |s: &mut XdpSocket, replies: &mut [u32]| {
        s.recv_batch(64, |f| {
            if is_echo_reply_to_us(f) {
                let seq = usize::from(u16::from_be_bytes([f[40], f[41]]));
                if let Some(r) = replies.get_mut(seq) {
                    *r += 1;
                }
            }
        });
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut first_queued = None;
    for burst in 0..BURSTS {
        let frames: Vec<Vec<u8>> = (burst * BURST..(burst + 1) * BURST)
            .map(|seq| echo_request(&kernel_mac, seq))
            .collect();
        let mut next = 0;
        while next < frames.len() {
            let queued = s.send_batch(&frames[next..]).expect("send_batch");
            first_queued.get_or_insert(queued);
            next += queued;
            drain(s, &mut replies);
            s.poll_tx().expect("poll_tx");
            assert!(Instant::now() < deadline, "transmit frames never came back");
        }
        // Wait for this burst's replies before the next, so RX (64 slots) cannot overflow.
        let burst_seqs = usize::from(burst * BURST)..usize::from((burst + 1) * BURST);
        while replies[burst_seqs.clone()].contains(&0) && Instant::now() < deadline {
            let _ = wait_readable(&[std::os::fd::AsFd::as_fd(&*s)], 20).expect("poll");
            drain(s, &mut replies);
            s.poll_tx().expect("poll_tx");
        }
    }
    while s.tx_in_flight() > 0 && Instant::now() < deadline {
        s.poll_tx().expect("poll_tx");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        first_queued,
        Some(64),
        "the first burst stops at the transmit budget"
    );
    let missing: Vec<usize> = (0..replies.len()).filter(|&i| replies[i] != 1).collect();
    assert!(
        missing.is_empty(),
        "each ping answered exactly once; not: {missing:?}"
    );
    let c = s.counters();
    // The ARP reply plus the pings.
    assert_eq!(c.tx_frames, 1 + u64::from(BURST * BURSTS), "{c:?}");
    assert_eq!(c.tx_completed, c.tx_frames, "{c:?}");
    assert!(c.tx_drop_no_frame > 0 && c.tx_drop_ring_full == 0, "{c:?}");
    assert_eq!(
        s.frame_states(),
        (64, 64, 0),
        "transmit frames all free again, receive frames all lent to FILL"
    );
    assert_clean(s);
    eprintln!("ping bursts: {c:?}; kernel {:?}", s.kernel_stats());
}

/// 64 flows from the namespace (each bash redirection is a new socket, so a new source port
/// and a new transmit queue hash on the far end) to a two-queue veth with one AF_XDP socket
/// per queue; returns the datagrams per socket after checking each arrived exactly once.
fn spread_over_two_queues(tag: &str, attach: XdpAttachMode) -> Vec<usize> {
    const DATAGRAMS: usize = 64;
    let v = veth(tag, 2);
    let mut port = XdpPort::open(&v.near, 2, &small_config(XdpBindMode::Copy), attach)
        .unwrap_or_else(|e| panic!("open two-queue port in {attach:?} mode: {e}"));
    resolve_through(&mut port, &v.ns);
    v.ns.exec(
        "bash",
        &[
            "-c",
            &format!(
                "for i in $(seq 1 {DATAGRAMS}); do echo \"n$i\" > /dev/udp/10.233.0.2/9; done"
            ),
        ],
    );
    let got = collect(
        port.sockets_mut(),
        Duration::from_secs(5),
        is_datagram_to_us,
        |g| g.iter().map(Vec::len).sum::<usize>() >= DATAGRAMS,
    );
    let mut payloads: Vec<String> = got
        .iter()
        .flatten()
        .map(|f| String::from_utf8_lossy(&f[42..]).trim().to_string())
        .collect();
    payloads.sort_by_key(|p| p.trim_start_matches('n').parse::<u32>().unwrap_or(0));
    let expected: Vec<String> = (1..=DATAGRAMS).map(|i| format!("n{i}")).collect();
    assert_eq!(
        payloads, expected,
        "every datagram exactly once across the sockets"
    );
    for s in port.sockets() {
        assert_clean(s);
    }
    let spread = got.iter().map(Vec::len).collect();
    eprintln!("{attach:?} on two queues: {spread:?}");
    spread
}

#[test]
fn native_xdp_steers_each_veth_queue_to_its_own_socket() {
    if !require_root("native_xdp_steers_each_veth_queue_to_its_own_socket") {
        return;
    }
    // Native XDP on veth reports the peer's transmit queue as the receive queue.
    let spread = spread_over_two_queues("q", XdpAttachMode::Driver);
    assert!(
        spread.iter().all(|&n| n > 0),
        "both queues carry flows: {spread:?}"
    );
}

#[test]
fn generic_xdp_on_veth_delivers_every_flow_once() {
    if !require_root("generic_xdp_on_veth_delivers_every_flow_once") {
        return;
    }
    // Observed on Linux 6.18: generic XDP on veth sees every frame as queue 0 (the forwarded
    // skb carries no recorded receive queue), so socket 1 stays idle. Only delivery is
    // asserted; the spread is printed.
    spread_over_two_queues("r", XdpAttachMode::Skb);
}

#[test]
fn unmapped_queue_falls_back_to_the_kernel_stack() {
    if !require_root("unmapped_queue_falls_back_to_the_kernel_stack") {
        return;
    }
    const DATAGRAMS: usize = 64;
    let v = veth("f", 2);
    let mut port = XdpPort::open(
        &v.near,
        2,
        &small_config(XdpBindMode::Copy),
        XdpAttachMode::Driver,
    )
    .expect("open two-queue port");
    resolve_through(&mut port, &v.ns);
    port.unmap_queue(1).expect("empty XSKMAP slot 1");
    // Frames that XDP passes reach the kernel's taps: an AF_PACKET socket sees them.
    let mut tap = AfPacketSocket::open(
        &v.near,
        &AfPacketConfig {
            block_size_bytes: 1 << 16,
            block_count: 4,
            ..AfPacketConfig::default()
        },
    )
    .expect("AF_PACKET socket");
    v.ns.exec(
        "bash",
        &[
            "-c",
            &format!(
                "for i in $(seq 1 {DATAGRAMS}); do echo \"n$i\" > /dev/udp/10.233.0.2/9; done"
            ),
        ],
    );
    let mut via_xdp = 0;
    let mut via_stack = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while via_xdp + via_stack < DATAGRAMS && Instant::now() < deadline {
        {
            let s = &port.sockets()[0];
            let fds = [std::os::fd::AsFd::as_fd(s), std::os::fd::AsFd::as_fd(&tap)];
            wait_readable(&fds, 20).expect("poll");
        }
        port.sockets_mut()[0].recv_batch(64, |f| via_xdp += usize::from(is_datagram_to_us(f)));
        tap.recv_batch(64, |f, _| via_stack += usize::from(is_datagram_to_us(f)));
    }
    assert_eq!(
        port.sockets_mut()[1].recv_batch(64, |_| ()),
        0,
        "queue 1 unmapped"
    );
    assert_eq!(
        via_xdp + via_stack,
        DATAGRAMS,
        "xdp {via_xdp}, stack {via_stack}"
    );
    assert!(
        via_xdp > 0 && via_stack > 0,
        "queue 0 redirected, queue 1 passed: xdp {via_xdp}, stack {via_stack}"
    );
}

#[test]
fn auto_bind_takes_zero_copy_only_where_forced_zero_copy_binds() {
    if !require_root("auto_bind_takes_zero_copy_only_where_forced_zero_copy_binds") {
        return;
    }
    let v = veth("z", 1);
    // Binding needs no program; each socket is closed before the next binds the same queue
    // (the EBUSY retry in `open` covers the kernel's deferred release).
    let forced = XdpSocket::open(&v.near, 0, &small_config(XdpBindMode::ZeroCopy));
    let forced_binds = match &forced {
        Ok(s) => {
            assert!(
                s.is_zero_copy(),
                "a forced zero-copy bind reports zero-copy"
            );
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
            false
        }
    };
    eprintln!("veth, forced zero-copy: {:?}", forced.as_ref().map(|_| ()));
    drop(forced);
    let auto = XdpSocket::open(&v.near, 0, &small_config(XdpBindMode::Auto)).expect("auto bind");
    assert_eq!(auto.is_zero_copy(), forced_binds);
    drop(auto);
    let copy = XdpSocket::open(&v.near, 0, &small_config(XdpBindMode::Copy)).expect("copy bind");
    assert!(!copy.is_zero_copy());
}

#[test]
fn the_link_is_exclusive_and_detaches_with_the_port() {
    if !require_root("the_link_is_exclusive_and_detaches_with_the_port") {
        return;
    }
    let v = veth("l", 1);
    let port = XdpPort::open(
        &v.near,
        1,
        &small_config(XdpBindMode::Copy),
        XdpAttachMode::Skb,
    )
    .expect("open port");
    assert!(link_show(&v.near).contains("rsstack_xsk"));
    let other = XdpProgram::load(&[Insn::mov64_imm(0, 2), Insn::exit()], "rsstack_pass")
        .expect("load a pass-everything program");
    let err = XdpLink::attach(&other, port.ifindex(), XdpAttachMode::Skb)
        .expect_err("a second XDP link on the same interface");
    assert_eq!(err.kind(), std::io::ErrorKind::ResourceBusy, "{err}");
    drop(port);
    let shown = link_show_after_detach(&v.near);
    assert!(
        !shown.contains("prog/xdp") && !shown.contains("rsstack_xsk"),
        "dropping the port detaches the program: {shown}"
    );
    // The interface is free again: a new port attaches and binds queue 0.
    let again = XdpPort::open(
        &v.near,
        1,
        &small_config(XdpBindMode::Copy),
        XdpAttachMode::Driver,
    )
    .expect("reopen after drop");
    drop(again);
}

#[test]
fn verifier_log_comes_back_with_a_rejected_program() {
    if !require_root("verifier_log_comes_back_with_a_rejected_program") {
        return;
    }
    // `exit` with r0 never written: the verifier refuses it and says why.
    let err = XdpProgram::load(&[Insn::exit()], "rsstack_bad").expect_err("rejected");
    assert_eq!(err.os.raw_os_error(), Some(libc::EACCES), "{err}");
    assert!(
        err.verifier_log.contains("R0"),
        "log names the register: {}",
        err.verifier_log
    );
}

#[test]
fn split_port_receives_on_one_thread_per_queue() {
    if !require_root("split_port_receives_on_one_thread_per_queue") {
        return;
    }
    const DATAGRAMS: usize = 64;
    let v = veth("t", 2);
    let mut port = XdpPort::open(
        &v.near,
        2,
        &XdpConfig {
            frame_size_bytes: 4096, // page-sized frames
            ..small_config(XdpBindMode::Copy)
        },
        XdpAttachMode::Driver,
    )
    .expect("open two-queue port");
    resolve_through(&mut port, &v.ns);
    let (attachment, mut sockets) = port.into_parts();
    let total = std::sync::atomic::AtomicUsize::new(0);
    // The workers stop as soon as every datagram is in; the deadline only bounds a failure.
    // 5 s was too short on a loaded 2-core machine (the whole test suite beside it).
    let deadline = Instant::now() + Duration::from_secs(30);
    let per_queue: Vec<usize> = std::thread::scope(|scope| {
        let workers: Vec<_> = sockets
            .iter_mut()
            .map(|s| {
                let total = &total;
                scope.spawn(move || {
                    let mut mine = 0;
                    while total.load(std::sync::atomic::Ordering::Relaxed) < DATAGRAMS
                        && Instant::now() < deadline
                    {
                        let _ = wait_readable(&[std::os::fd::AsFd::as_fd(&*s)], 20);
                        s.recv_batch(64, |f| {
                            if is_datagram_to_us(f) {
                                mine += 1;
                                total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        });
                    }
                    mine
                })
            })
            .collect();
        v.ns.exec(
            "bash",
            &[
                "-c",
                &format!(
                    "for i in $(seq 1 {DATAGRAMS}); do echo \"n$i\" > /dev/udp/10.233.0.2/9; done"
                ),
            ],
        );
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    assert_eq!(per_queue.iter().sum::<usize>(), DATAGRAMS, "{per_queue:?}");
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    for (q, s) in sockets.iter().enumerate() {
        assert_eq!(s.queue_id(), q as u32);
        assert_clean(s);
    }
    // Detach first, then close the sockets: both orders are fine.
    drop(attachment);
    assert!(!link_show_after_detach(&v.near).contains("rsstack_xsk"));
}

/// Sends `n` datagrams from the namespace while nobody reads, waits (at most 2 s) until the
/// kernel has dropped `drops` of them, then returns the frames waiting in RX.
fn burst_unread(port: &mut XdpPort, ns: &Netns, n: usize, drops: u64) -> usize {
    let dropped = |p: &XdpPort| {
        let k = p.sockets()[0].kernel_stats().expect("stats");
        k.rx_ring_full + k.rx_dropped
    };
    let before = dropped(port);
    ns.exec(
        "bash",
        &[
            "-c",
            &format!("for i in $(seq 1 {n}); do echo \"b$i\" > /dev/udp/10.233.0.2/9; done"),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while dropped(port) - before < drops && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    port.sockets_mut()[0].recv_batch(1024, |f| assert!(is_datagram_to_us(f)))
}

#[test]
fn kernel_counts_frames_dropped_on_a_full_rx_ring() {
    if !require_root("kernel_counts_frames_dropped_on_a_full_rx_ring") {
        return;
    }
    let v = veth("k", 1);
    let config = XdpConfig {
        rx_ring_entries: 16, // smaller than the 64 frames lent to FILL
        ..small_config(XdpBindMode::Copy)
    };
    let mut port =
        XdpPort::open(&v.near, 1, &config, XdpAttachMode::Skb).expect("open AF_XDP port");
    resolve_through(&mut port, &v.ns);
    let before = port.sockets()[0].kernel_stats().expect("stats");
    assert_eq!(burst_unread(&mut port, &v.ns, 40, 24), 16, "RX holds 16");
    let after = port.sockets()[0].kernel_stats().expect("stats");
    assert_eq!(after.rx_ring_full - before.rx_ring_full, 24, "{after:?}");
    assert_eq!(after.rx_dropped, before.rx_dropped, "{after:?}");
    assert_eq!(port.sockets()[0].frame_states(), (64, 64, 0));
}

#[test]
fn kernel_counts_frames_dropped_on_an_empty_fill_ring() {
    if !require_root("kernel_counts_frames_dropped_on_an_empty_fill_ring") {
        return;
    }
    let v = veth("e", 1);
    let config = XdpConfig {
        rx_frames: 16, // only 16 frames to receive into
        fill_ring_entries: 16,
        ..small_config(XdpBindMode::Copy)
    };
    let mut port =
        XdpPort::open(&v.near, 1, &config, XdpAttachMode::Skb).expect("open AF_XDP port");
    resolve_through(&mut port, &v.ns);
    let before = port.sockets()[0].kernel_stats().expect("stats");
    assert_eq!(
        burst_unread(&mut port, &v.ns, 40, 24),
        16,
        "one frame per FILL entry"
    );
    let after = port.sockets()[0].kernel_stats().expect("stats");
    assert_eq!(after.rx_dropped - before.rx_dropped, 24, "{after:?}");
    assert!(
        after.rx_fill_ring_empty_descs - before.rx_fill_ring_empty_descs >= 24,
        "{after:?}"
    );
    assert_eq!(after.rx_ring_full, before.rx_ring_full, "{after:?}");
    // We saw it too: the kernel had taken every FILL entry.
    assert!(port.sockets()[0].counters().fill_ring_empty >= 1);
    assert_eq!(port.sockets()[0].frame_states(), (112, 16, 0));
}
