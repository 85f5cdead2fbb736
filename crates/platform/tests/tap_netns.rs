//! The TAP backend against the real Linux kernel: a multi-queue TAP moved into a network
//! namespace this test creates, the kernel ARPs for an address behind it, we answer through the
//! TAP and receive the UDP datagram the kernel had queued. Needs root (CI runs as root); the
//! namespace and the interface are removed when the test ends, pass or fail.

mod common;

use std::time::{Duration, Instant};

use common::{Addrs, Netns, require_root};
use platform::tap::{TapDevice, wait_readable};

const KERNEL_IP: [u8; 4] = [10, 231, 0, 1];
const OUR_IP: [u8; 4] = [10, 231, 0, 2];
const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];

/// Reads frames from any queue until `want` accepts one or the deadline passes.
fn wait_for_frame(
    tap: &TapDevice,
    timeout: Duration,
    want: impl Fn(&[u8]) -> bool,
) -> Option<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 2048];
    while Instant::now() < deadline {
        let fds: Vec<_> = tap.queues().iter().map(std::os::fd::AsFd::as_fd).collect();
        let ready = wait_readable(&fds, 100).expect("poll");
        for i in ready {
            while let Ok(n) = tap.queues()[i].recv(&mut buf) {
                if want(&buf[..n]) {
                    return Some(buf[..n].to_vec());
                }
            }
        }
    }
    None
}

const ADDRS: Addrs = Addrs {
    kernel_ip: KERNEL_IP,
    our_ip: OUR_IP,
    our_mac: OUR_MAC,
};

#[test]
fn multi_queue_tap_exchanges_frames_with_the_kernel_in_a_namespace() {
    if !require_root("multi_queue_tap_exchanges_frames_with_the_kernel_in_a_namespace") {
        return;
    }
    let ns = Netns::create("tap");
    let tap =
        TapDevice::open(&format!("rsst{}", std::process::id() % 100_000), 2).expect("open TAP");
    assert_eq!(tap.queues().len(), 2);
    let name = tap.name().to_string();
    common::run("ip", &["link", "set", &name, "netns", ns.name()]);
    ns.exec("sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
    ns.exec("ip", &["addr", "add", "10.231.0.1/24", "dev", &name]);
    ns.exec("ip", &["link", "set", &name, "up"]);

    // The kernel must resolve 10.231.0.2 before it can send the datagram: it ARPs through us.
    ns.exec("bash", &["-c", "echo rsstack > /dev/udp/10.231.0.2/9"]);
    let request = wait_for_frame(&tap, Duration::from_secs(5), |f| {
        ADDRS.is_arp_request_for_us(f)
    })
    .expect("the kernel's ARP request for 10.231.0.2 arrives on a TAP queue");
    assert_eq!(&request[28..32], &KERNEL_IP, "sender protocol address");

    let reply = ADDRS.arp_reply(&request[6..12]);
    assert_eq!(
        tap.queues()[1].send(&reply).expect("write ARP reply"),
        reply.len()
    );

    // Resolved, the kernel sends the queued UDP datagram to our MAC.
    let datagram = wait_for_frame(&tap, Duration::from_secs(5), |f| ADDRS.is_datagram_to_us(f))
        .expect("the queued UDP datagram follows the ARP reply");
    assert_eq!(&datagram[30..34], &OUR_IP);
    assert_eq!(&datagram[36..38], &9u16.to_be_bytes(), "destination port");
    assert!(datagram.ends_with(b"rsstack\n"), "payload intact");
}
